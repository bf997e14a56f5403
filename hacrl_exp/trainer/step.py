"""One agent's whole training step, generation to gradient (spec §1.2–§1.6, §2.1–§2.5).

The driver (`trainer/loop.py:_train`) runs the step's phases in this order, the same numbers everywhere (loop, worker,
docs/architecture.md); an agent worker (`trainer/worker.py`) calls the functions here on its own model:

1 ROLLOUT     `collect_rollouts`: G samples per prompt, on every agent
2 REWARD      `collect_rollouts`: the task's grader (the one the evaluation uses)
3 SCORE OWN   `collect_rollouts`: the agent's old log-probs before any update (§1.2), reference log-probs for KL;
              what other agents see of the rollouts is `SharedRollouts` (text, reward, old mean log-prob)
4 CAPABILITY  on the driver (loop.py): one capability update per step, ρ(j→k) before any advantage (§2.2)
5 EXCHANGE    `build_batch`: the learner's own rows whole, then each source's shared rows in declared order (C1),
              re-tokenised under the learner's own prompt (§1.3) with the source's old mean log-prob, ρ(j→k) and α
6 ADVANTAGE   `build_batch`: over the joint group with baseline weights 1/ρ (§2.1), or over its own group (GSPO, GRPO)
7 UPDATE      `update`: mini-batches in block order, update u bounding cross ratios below by L_u (§1.6, §2.4);
              `micro_batch_loss` on each micro-batch (the algorithm's objective + KL on self rows), gradients
              accumulate; gradient-norm clip and optimizer step, skipped when anything is non-finite; train/* and
              cross/* metrics (docs/metrics.md)
8 LOG         on the driver (loop.py)
9 EVAL/CKPT   on the driver (loop.py, runstate.py)

A row whose advantage is exactly 0 (a group with all-equal rewards) has J = 0 and ∂J/∂θ = 0 in every objective,
so it is not run through the model unless it carries a KL term; the loss still divides by the whole mini-batch,
so the gradient is unchanged. Ratio statistics are over the rows that were run (in the last pass, when the algorithm
makes several). What the step costs (rows, tokens, optimizer steps) is added to the worker's `CostMeter`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from hacrl_exp.agents.agent import Agent
from hacrl_exp.agents.logprobs import batched_response_logprobs, response_logprobs
from hacrl_exp.agents.ranks import ONE_RANK, RankGroup, gather, rank_rows, token_shares
from hacrl_exp.algo import (
    MiniBatch,
    PolicyRows,
    capability_aware_advantages,
    cross_row_statistics,
    group_relative_advantages,
    kl_penalty,
    masked_mean,
    minibatch_schedule,
    sequence_log_ratio,
    stepwise_lower_bound,
)
from hacrl_exp.algo.losses import RowTerms
from hacrl_exp.faults import crash_point
from hacrl_exp.rollout.base import SamplingSettings, compute_device
from hacrl_exp.tasks.base import Problem, Task
from hacrl_exp.trainer.costs import CostMeter
from hacrl_exp.trainer.params import LearnerParams

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------------------
SHUFFLE_STREAM = 606
"""Stream tag of the shuffle control's permutations (np.random.default_rng([seed, tag, …]))."""

# 1-3 ROLLOUT, REWARD, SCORE OWN


@dataclass
class SharedRollouts:
    """One agent's rollouts of this step as other agents see them: P·G rows, row r answers prompt r // G.

    The only per-step payload that crosses between agents (and between Ray actors): text, reward, and the
    source's old mean log-prob over its own |y|_j tokens (spec §1.2–§1.4; C1 stores the sum and the count).
    """

    agent: int
    prompt_index: list[int]
    texts: list[str]
    rewards: torch.Tensor
    """(rows,) float64 0/1."""
    old_mean_logp: torch.Tensor
    """(rows,) float64: mean over the source's tokens of log π_old^(j)(y_t)."""
    num_tokens: torch.Tensor
    """(rows,) long: |y|_j, the response length in the source's tokenizer."""
    categories: list[str]
    """Per row: the category of the problem it answers (the step prompt's, or a fresh prompt's: dynamic sampling),
    which the capability estimates file it under."""

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)


def shuffled_rewards(rewards: torch.Tensor, seed: int, step: int, learner: int, source: int) -> torch.Tensor:
    """The rewards (rows,) permuted over all rows of the step: rewards[π], π a uniform permutation drawn from
    np.random.default_rng([seed, SHUFFLE_STREAM, step, learner, source]) (a pure function: a resumed run draws the
    same π). Same multiset of rewards, so the same accuracy; the link between a response and its reward is cut."""
    order = np.random.default_rng([seed, SHUFFLE_STREAM, step, learner, source]).permutation(len(rewards))
    return rewards[torch.from_numpy(order)]


def with_shuffled_rewards(shared: SharedRollouts, seed: int, step: int, learner: int) -> SharedRollouts:
    """A partner's rollouts as a shuffle-control learner sees them: texts, log-probs and lengths as sent, rewards
    permuted within the step (shuffled_rewards)."""
    return replace(shared, rewards=shuffled_rewards(shared.rewards, seed, step, learner, shared.agent))


@dataclass
class SourceRollouts:
    """One agent's own rollouts of this step, whole: P·G rows, row r answers prompt r // G."""

    agent: int
    prompt_index: list[int]
    prompt_ids: list[list[int]]
    """Per row: the prompt in this agent's tokens (chat template applied)."""
    response_ids: list[list[int]]
    texts: list[str]
    rewards: torch.Tensor
    """(rows,) float64 0/1."""
    old_token_logp: list[torch.Tensor]
    """The agent's own per-token log-probs before any update (spec §1.2)."""
    sampling: SamplingSettings
    """What generated the rows and the temperature their old log-probs were scored at; the update scores the new
    log-probs at the same one (one source for both halves of the ratio)."""
    categories: list[str]
    """Per row: the category of the problem it answers."""
    ref_token_logp: list[torch.Tensor] | None = None
    problem_prompt_ids: list[list[int]] | None = None
    """Per problem: its prompt in this agent's tokens, the prompt partners' answers are placed under."""

    @property
    def old_mean_logp(self) -> torch.Tensor:
        return torch.stack([t.mean() for t in self.old_token_logp]).double()

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)

    def shared(self) -> SharedRollouts:
        """What other agents get of these rollouts: text, reward and the old log-prob summary (no token ids)."""
        counts = torch.tensor([len(t) for t in self.old_token_logp], dtype=torch.long)
        return SharedRollouts(
            self.agent, self.prompt_index, self.texts, self.rewards, self.old_mean_logp, counts, self.categories
        )


def collect_rollouts(
    agent: Agent,
    index: int,
    problems: list[Problem],
    group_size: int,
    sampling: SamplingSettings,
    task: Task,
    score_batch_size: int,
    times: dict[str, float],
    score: Callable[..., list[torch.Tensor]] | None = None,
    ranks: RankGroup = ONE_RANK,
) -> SourceRollouts:
    """Phases 1–3 for one agent: sample G = `group_size` responses per prompt, grade them, and score them with the
    agent's own training model before any update of the step (the source's old log-probs, spec §1.2); also the
    reference log-probs when the KL term is on. Adds the seconds of each phase to `times`.

    score: a function of `batched_response_logprobs`'s signature and result, used instead of it (a sharded agent's
    ranks split the chunks, agents.sharding.rank_sliced_logprobs). ranks: a sharded agent's rank, which grades its
    `rank_rows` (the rows it generates when generation is split) and gathers the others' rewards."""
    started = time.perf_counter()
    problem_prompt_ids = [agent.prompt_ids(p.prompt) for p in problems]
    # 1 ROLLOUT
    rollouts = agent.engine.generate(problem_prompt_ids, group_size, sampling)
    prompt_index = [r // group_size for r in range(len(rollouts))]
    graded = time.perf_counter()
    # 2 REWARD
    mine = rank_rows(len(rollouts), ranks)
    grades = task.grade([rollouts.texts[r] for r in mine], [problems[prompt_index[r]] for r in mine])
    rewards = torch.tensor([x for part in gather([g.reward for g in grades], ranks) for x in part], dtype=torch.float64)
    scored = time.perf_counter()
    # 3 SCORE OWN: at the sampling temperature, the one the update scores the new log-probs at
    args = (rollouts.prompt_ids, rollouts.response_ids, agent.pad_id, score_batch_size, sampling.temperature)
    score = score or batched_response_logprobs
    old = score(agent.model, *args)
    ref = score(agent.reference, *args) if agent.reference is not None else None
    done = time.perf_counter()
    times["generate"] += graded - started
    times["reward"] += scored - graded
    times["score_own"] += done - scored
    return SourceRollouts(
        agent=index,
        prompt_index=prompt_index,
        prompt_ids=rollouts.prompt_ids,
        response_ids=rollouts.response_ids,
        texts=rollouts.texts,
        rewards=rewards,
        old_token_logp=old,
        sampling=sampling,
        ref_token_logp=ref,
        problem_prompt_ids=problem_prompt_ids,
        categories=[problems[p].category for p in prompt_index],
    )


def degenerate_prompts(rewards: torch.Tensor, group_size: int) -> list[int]:
    """The prompts whose G rewards are all equal (rows prompt-major, (P·G,)): their group-relative advantage is 0 for
    every row, so they train nothing (spec §1.1; DAPO's dynamic sampling replaces them)."""
    groups = rewards.view(-1, group_size)
    return torch.nonzero(groups.amax(dim=1) == groups.amin(dim=1)).flatten().tolist()


@dataclass
class Resampled:
    """What dynamic sampling did in one step: its extra rounds, the rows they generated, and whether the cap hit."""

    rounds: int = 0
    extra_rows: list[list[int]] = field(default_factory=list)
    """The response ids of every extra row generated (for cost/generated_*), kept or not."""
    extra_prompt_ids: list[list[int]] = field(default_factory=list)
    cap_hit: bool = False
    informative_rows: int = 0


def resample_degenerate(own: SourceRollouts, draw: Callable[[list[int], int], SourceRollouts], target_rows: int,
                        max_rounds: int) -> tuple[SourceRollouts, Resampled]:  # fmt: skip
    """Dynamic sampling (DAPO-style, issue 38), batch size fixed: while the rows with a non-zero advantage (rows of
    non-degenerate prompts, degenerate_prompts) are fewer than target_rows and fewer than max_rounds extra rounds
    ran, draw a new group of G responses for every degenerate prompt (draw(prompts, round) → their rollouts,
    prompt-major; round counts from 1) and put each new group that is not degenerate in its prompt's place. Which
    prompt a new group answers is draw's choice: the same one (algorithm.dynamic_prompts=same) or a fresh problem
    (fresh, DAPO's over-sampling; `Task.extra_problems`), whose rows bring its category. Returns the rollouts
    (still P·G rows) and what it did; cap_hit when the target was not reached within max_rounds."""
    g = own.group_size
    done = Resampled()
    while True:
        stale = degenerate_prompts(own.rewards, g)
        done.informative_rows = len(own.rewards) - g * len(stale)
        if done.informative_rows >= target_rows or not stale:
            return own, done
        if done.rounds >= max_rounds:
            done.cap_hit = True
            return own, done
        done.rounds += 1
        new = draw(stale, done.rounds)
        done.extra_rows += new.response_ids
        done.extra_prompt_ids += new.prompt_ids
        useful = set(range(len(stale))) - set(degenerate_prompts(new.rewards, g))
        own = replace_groups(own, new, {stale[q]: q for q in useful}, g)


def replace_groups(own: SourceRollouts, new: SourceRollouts, where: dict[int, int], g: int) -> SourceRollouts:
    """own with prompt p's G rows replaced by new's group q, for every p → q in `where` (prompt_index kept: a fresh
    problem takes its slot, with the prompt ids, texts and categories of new's group)."""
    rows = {p * g + i: q * g + i for p, q in where.items() for i in range(g)}

    def pick(mine: list, theirs: list) -> list:
        return [theirs[rows[r]] if r in rows else x for r, x in enumerate(mine)]

    rewards = own.rewards.clone()
    for r, t in rows.items():
        rewards[r] = new.rewards[t]
    ref = None if own.ref_token_logp is None else pick(own.ref_token_logp, new.ref_token_logp)
    problem_prompts = own.problem_prompt_ids
    if problem_prompts is not None and new.problem_prompt_ids is not None:  # each slot's prompt, as its rows' are
        problem_prompts = [new.problem_prompt_ids[where[p]] if p in where else x for p, x in enumerate(problem_prompts)]
    return replace(own, prompt_ids=pick(own.prompt_ids, new.prompt_ids),
                   response_ids=pick(own.response_ids, new.response_ids), texts=pick(own.texts, new.texts),
                   rewards=rewards, old_token_logp=pick(own.old_token_logp, new.old_token_logp),
                   ref_token_logp=ref, problem_prompt_ids=problem_prompts,
                   categories=pick(own.categories, new.categories))  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# 5-6 EXCHANGE, ADVANTAGE


@dataclass
class LearnerBatch:
    """Everything one learner's updates read, rows in self-first block order, each block prompt-major."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    source: torch.Tensor
    is_self: torch.Tensor
    advantages: torch.Tensor
    old_mean_logp: torch.Tensor
    loss_weight: torch.Tensor
    alpha: torch.Tensor
    old_token_logp: list[torch.Tensor | None]
    ref_token_logp: list[torch.Tensor | None]
    block_sizes: list[int]
    temperature: float
    """The temperature the learner's own old log-probs were scored at (its rollouts' `sampling`): the new ones are
    scored at it too."""

    def __len__(self) -> int:
        return len(self.response_ids)

    @classmethod
    def own_rows(
        cls,
        prompt_ids: list[list[int]],
        response_ids: list[list[int]],
        advantages: torch.Tensor,
        old_token_logp: list[torch.Tensor],
        temperature: float = 1.0,
    ) -> LearnerBatch:
        """A batch of the learner's own rows only, in one block (what GSPO trains on): weight 1, α 0, the reference
        log-probs equal to the old ones (KL 0 at the start), old_mean_logp_i = mean_t old_token_logp_{i,t}.
        For benchmarks and tests that build a batch without rollouts."""
        rows = len(response_ids)
        return cls(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            source=torch.zeros(rows, dtype=torch.long),
            is_self=torch.ones(rows, dtype=torch.bool),
            advantages=advantages.double(),
            old_mean_logp=torch.stack([o.mean() for o in old_token_logp]),
            loss_weight=torch.ones(rows, dtype=torch.float64),
            alpha=torch.zeros(rows, dtype=torch.float64),
            old_token_logp=list(old_token_logp),
            ref_token_logp=list(old_token_logp),
            block_sizes=[rows],
            temperature=temperature,
        )

    @property
    def lengths(self) -> list[int]:
        """Tokens of each row, prompt + response (what a micro-batch pads to)."""
        return [len(p) + len(r) for p, r in zip(self.prompt_ids, self.response_ids)]

    def sequences(self, rows: torch.Tensor) -> tuple[list[list[int]], list[list[int]]]:
        """(prompt ids, response ids) of `rows`."""
        return [self.prompt_ids[r] for r in rows], [self.response_ids[r] for r in rows]

    def on_device(self, rows: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(advantages, is_self, old_mean_logp, loss_weight, alpha) of `rows`, on the model's device."""
        fields = (self.advantages, self.is_self, self.old_mean_logp, self.loss_weight, self.alpha)
        return tuple(t[rows].to(device) for t in fields)


def retokenize(texts: Sequence[str], tokenizer, max_response_tokens: int) -> list[list[int]]:
    """A source's texts in the learner's tokens (spec §1.3, C1): encode(text, no special tokens)[:max] or [eos].

    The text was decoded with skip_special_tokens and its trailing EOS removed; an empty result keeps one EOS."""
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    return [ids[:max_response_tokens] or [tokenizer.eos_token_id] for ids in encoded]


def build_batch(
    own: SourceRollouts, sources: dict[int, SharedRollouts], rho: torch.Tensor, tokenizer, params: LearnerParams
) -> LearnerBatch:
    """Phases 5–6 for learner k = params.index. rho: ρ(j→k), (N,) (batch scope) or (P, N) (category scope)."""
    # 5 EXCHANGE: own rows whole, then each source's in declared order, re-tokenised under the learner's prompt
    blocks = [own] + [sources[j] for j in params.sources]
    rows: dict[str, list] = defaultdict(list)
    for block in blocks:
        n, mine = len(block.texts), block is own
        if mine:
            rows["prompt_ids"] += [list(ids) for ids in own.prompt_ids]
            rows["response_ids"] += own.response_ids
        else:
            rows["prompt_ids"] += [own.problem_prompt_ids[p] for p in block.prompt_index]
            rows["response_ids"] += retokenize(block.texts, tokenizer, own.sampling.max_new_tokens)
        rows["source"] += [block.agent] * n
        rows["alpha"] += [0.0 if mine else params.mechanisms.alpha_from[block.agent]] * n  # self rows: no IS factor
        block_rho = rho[block.agent].expand(n) if rho.dim() == 1 else rho[torch.tensor(block.prompt_index), block.agent]
        rows["loss_weight"].append(params.mechanisms.loss_weight(block_rho.double()))
        rows["old_token_logp"] += own.old_token_logp if mine else [None] * n
        rows["ref_token_logp"] += (own.ref_token_logp or [None] * n) if mine else [None] * n
    # 6 ADVANTAGE over the P prompts' joint groups of M = Σ_j G_j rewards, columns in block order
    rewards = torch.cat([b.rewards.view(max(own.prompt_index) + 1, -1) for b in blocks], dim=1)
    if params.joint_group:
        columns = torch.cat([torch.full((b.group_size,), b.agent) for b in blocks])
        weights = params.mechanisms.baseline_weight(1.0 / rho)
        joint = capability_aware_advantages(rewards, columns, params.index, weights, params.adv_eps)
    else:
        joint = group_relative_advantages(rewards, params.adv_eps)
    ends = accumulate(b.group_size for b in blocks)
    advantages = [joint[:, end - b.group_size : end].reshape(-1) for b, end in zip(blocks, ends)]
    source = torch.tensor(rows["source"])
    return LearnerBatch(
        prompt_ids=rows["prompt_ids"],
        response_ids=rows["response_ids"],
        source=source,
        is_self=source == params.index,
        advantages=torch.cat(advantages).double(),
        old_mean_logp=torch.cat([b.old_mean_logp for b in blocks]),
        loss_weight=torch.cat(rows["loss_weight"]),
        alpha=torch.tensor(rows["alpha"], dtype=torch.float64),
        old_token_logp=rows["old_token_logp"],
        ref_token_logp=rows["ref_token_logp"],
        block_sizes=[len(b.texts) for b in blocks],
        temperature=own.sampling.temperature,
    )


# ---------------------------------------------------------------------------------------------------------------------
# 7 UPDATE


def length_bucketed(model: torch.nn.Module) -> bool:
    """Whether an update of `model` sorts its micro-batches' rows by length: on CUDA.

    A micro-batch is right-padded to its longest row (agents.logprobs), so mixed lengths waste the padding's compute.
    Sorting changes only the order of float additions of the same per-row terms (each row's loss is divided by the
    whole mini-batch), so it is on where that is free (CUDA kernels promise no summation order anyway) and off on
    CPU, where the default run's digits are kept (docs/performance.md)."""
    return compute_device(model).type == "cuda"


def micro_batches(rows: torch.Tensor, lengths: Sequence[int], size: int, bucket: bool) -> list[torch.Tensor]:
    """`rows` (indices into the batch) cut into micro-batches of at most `size`; with `bucket`, sorted by
    `lengths[row]` first (a stable sort: equal lengths keep their order). Every row appears exactly once."""
    if not len(rows):
        return []
    if bucket:
        order = sorted(range(len(rows)), key=lambda i: lengths[int(rows[i])])
        rows = rows[torch.tensor(order, dtype=torch.long)]
    return list(rows.split(size))


@dataclass(frozen=True)
class MiniBatchShape:
    """What every micro-batch loss of one mini-batch divides by: its rows and tokens, and its self rows and their
    response tokens (the KL term's denominators)."""

    rows: int
    tokens: int
    self_rows: int
    self_tokens: int

    @classmethod
    def of(cls, batch: LearnerBatch, mb: MiniBatch) -> MiniBatchShape:
        lengths = [len(batch.response_ids[r]) for r in range(mb.start, mb.stop)]
        is_self = batch.is_self[mb.start : mb.stop].tolist()
        self_tokens = sum(n for n, s in zip(lengths, is_self) if s)
        return cls(mb.stop - mb.start, sum(lengths), sum(is_self), self_tokens)


@dataclass
class MicroBatchLoss:
    """One micro-batch's loss (its gradient not yet taken) and what the objective applied to its rows."""

    loss: torch.Tensor
    s: torch.Tensor
    """(B,) the sequence ratios the objective read."""
    applied: RowTerms
    metrics: dict[str, tuple[float, float]]
    """The objective's train/* shares of this micro-batch, unprefixed: (count, out of)."""
    kl: float
    """The KL term before its coefficient (0 without self rows or KL)."""
    finite: bool
    """New and old log-probs, ratios and loss all finite (the log-ratio clamp would hide an inf ratio)."""


def micro_batch_loss(
    agent: Agent, batch: LearnerBatch, rows: torch.Tensor, params: LearnerParams, lower: float, shape: MiniBatchShape
) -> MicroBatchLoss:
    """Phase 7's loss on one micro-batch: the new log-probs at the rollouts' temperature, s = exp(clamp(m_k −
    m_src_old)) (§2.3), the algorithm's objective (`params.objective`, with L_u = `lower`), plus kl_coef · KL on
    self rows (§1.5). Every term is divided by the whole mini-batch (`shape`), so micro-batches sum to its loss."""
    prompt_ids, response_ids = batch.sequences(rows)
    logp, mask = response_logprobs(agent.model, prompt_ids, response_ids, agent.pad_id, batch.temperature)
    adv, is_self, old_mean, rho, alpha = batch.on_device(rows, logp.device)  # the one move to the device
    logp = logp.double()
    clamp = params.objective_params.log_ratio_clamp
    log_s = sequence_log_ratio(masked_mean(logp, mask), old_mean, -clamp, clamp)
    s = log_s.exp()
    policy_rows = PolicyRows(
        logp=logp,
        mask=mask,
        s=s,
        advantages=adv,
        is_self=is_self,
        loss_weight=rho,
        alpha=alpha,
        lower=lower,
        minibatch_rows=shape.rows,
        minibatch_tokens=shape.tokens,
        old_token_logp=_padded([batch.old_token_logp[r] for r in rows], logp) if params.token_level else None,
    )
    loss, metrics, applied = params.objective(policy_rows, params.objective_params)
    kl_value = 0.0
    if params.kl_coef > 0 and bool(is_self.any()):
        own = is_self.nonzero().squeeze(-1)
        ref = _padded([batch.ref_token_logp[int(rows[i])] for i in own], logp[own])
        kl = kl_penalty(logp[own], ref, mask[own], params.kl_aggregation, shape.self_rows, shape.self_tokens)
        loss = loss + params.kl_coef * kl
        kl_value = float(kl.detach())
    finite = all(bool(torch.isfinite(x).all()) for x in (logp[mask > 0], old_mean, log_s, loss))
    return MicroBatchLoss(loss, s, applied, metrics, kl_value, finite)


@dataclass
class AppliedRows:
    """Per batch row, what the update applied, as the objective applied it (logged = applied, never recomputed):
    the ratio s, the weight on its ratio·A and whether its gradient passed the clip. NaN / False: row not run."""

    ratio: torch.Tensor
    weight: torch.Tensor
    in_window: torch.Tensor

    @classmethod
    def none_run(cls, rows: int) -> AppliedRows:
        nan = torch.full((rows,), math.nan, dtype=torch.float64)
        return cls(nan, nan.clone(), torch.zeros(rows, dtype=torch.bool))


def rows_to_run(batch: LearnerBatch, params: LearnerParams) -> torch.Tensor:
    """(rows,) bool: the rows run through the model, all but those with A = 0 and no KL term (their gradient is 0)."""
    if not params.skip_zero_advantage:
        return torch.ones(len(batch), dtype=torch.bool)
    return (batch.advantages != 0) | (batch.is_self & (params.kl_coef > 0))


def update(
    agent: Agent,
    batch: LearnerBatch,
    params: LearnerParams,
    names: list[str],
    cost: CostMeter | None = None,
    ranks: RankGroup = ONE_RANK,
) -> dict[str, float]:
    """Phase 7: every optimizer update of this learner for the step; returns its metrics and adds its costs to
    `cost` (the worker's meter). One optimizer step per mini-batch u, its loss Σ over micro-batches.

    ranks: a sharded agent's data-parallel rank. Rank r runs its `token_shares` share of each mini-batch's rows in
    micro-batches and backpropagates W·loss_r: FSDP's reduce-scatter averages the ranks' gradients, so the shard
    each rank steps holds Σ_r ∇loss_r = ∇loss, the W = 1 gradient of the whole mini-batch, and the gradient norm
    clipped is that of the full gradient. Every rank makes as many forward/backward calls as the rank with the most
    micro-batches (`idle_backward` pads the others: FSDP's collectives pair up call by call); the ranks' losses,
    shares, finiteness and applied rows are gathered before the step, so every rank steps or skips alike and the
    metrics are W = 1's."""
    cost = cost or CostMeter()
    schedule = minibatch_schedule(batch.block_sizes, params.minibatch_size, params.restart_u_per_source, params.passes)
    run_rows, applied = rows_to_run(batch, params), AppliedRows.none_run(len(batch))
    trainable = [p for group in agent.optimizer.param_groups for p in group["params"]]  # float32 masters, if any
    bucket = length_bucketed(agent.model)
    stats: dict[str, list[float]] = defaultdict(list)
    skipped = empty = 0
    for mb in schedule:
        lower = stepwise_lower_bound(mb.u, params.delta, params.mechanisms.delta_step)
        shape = MiniBatchShape.of(batch, mb)
        agent.optimizer.zero_grad(set_to_none=True)
        run = torch.arange(mb.start, mb.stop)[run_rows[mb.start : mb.stop]]
        shares = [micro_batches(rows, batch.lengths, params.micro_batch_size, bucket) for rows in token_shares(
            run, batch.lengths, ranks.world
        )]  # fmt: skip
        mine = []
        for rows in shares[ranks.rank]:
            out = micro_batch_loss(agent, batch, rows, params, lower, shape)
            (out.loss * ranks.world).backward()
            cost.trained(*batch.sequences(rows))
            mine.append(MiniBatchPart.of(rows, out))
        for _ in range(max(map(len, shares)) - len(mine)):
            idle_backward(agent, batch, run[:1])
        part = MiniBatchPart.merge([p for parts in gather(mine, ranks) for p in parts])
        part.record(applied)
        if not len(run):  # as a backward of a zero loss would: zero gradients, so Adam's moments still advance
            empty += 1
            for param in trainable:
                param.grad = torch.zeros_like(param)
        part.log(stats, kl=shape.self_rows and params.kl_coef > 0)
        if not optimizer_step(agent, trainable, part.finite, params.max_grad_norm, mb.u, cost, stats):
            skipped += 1
        cross_run = ~batch.is_self[mb.start : mb.stop] & run_rows[mb.start : mb.stop]
        if bool(cross_run.any()):
            window = applied.in_window[mb.start : mb.stop][cross_run]
            stats[f"cross/in_window_share/u{mb.u}"].append(float(window.double().mean()))
    counts = {"updates": len(schedule), "skipped_updates": skipped, "empty_updates": empty}
    return update_metrics(stats, counts, run_rows, applied, batch, params, names)


@dataclass
class MiniBatchPart:
    """What micro-batches of a mini-batch give the update: the loss and KL summed, the objective's shares (count,
    out of) summed, whether everything was finite, and per row run, the ratio, weight and clip window the objective
    applied. One micro-batch's (`of`), or every rank's micro-batches `merge`d in rank order."""

    loss: float = 0.0
    kl: float = 0.0
    finite: bool = True
    shares: dict[str, tuple[float, float]] = field(default_factory=dict)
    applied: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    """Per micro-batch: (rows, ratio s, weight, in window)."""

    @classmethod
    def of(cls, rows: torch.Tensor, out: MicroBatchLoss) -> MiniBatchPart:
        terms = (rows, out.s.detach().cpu(), out.applied.weight.cpu(), out.applied.in_window.cpu())
        return cls(float(out.loss.detach()), out.kl, out.finite, dict(out.metrics), [terms])

    @classmethod
    def merge(cls, parts: Sequence[MiniBatchPart]) -> MiniBatchPart:
        merged = cls()
        for part in parts:
            merged.loss, merged.kl, merged.finite = (
                merged.loss + part.loss,
                merged.kl + part.kl,
                merged.finite and part.finite,
            )
            for key, (count, out_of) in part.shares.items():
                total = merged.shares.get(key, (0.0, 0.0))
                merged.shares[key] = (total[0] + count, total[1] + out_of)
            merged.applied += part.applied
        return merged

    def record(self, applied: AppliedRows) -> None:
        """Write each run row's applied ratio, weight and window into the step's `applied`."""
        for rows, ratio, weight, in_window in self.applied:
            applied.ratio[rows], applied.weight[rows], applied.in_window[rows] = ratio, weight, in_window

    def log(self, stats: dict[str, list[float]], kl: bool) -> None:
        """Append this mini-batch's objective shares (count / out of, where out of > 0), its loss and, when kl, its KL
        to the update's `stats`."""
        for key, (count, out_of) in self.shares.items():
            if out_of > 0:
                stats[f"train/{key}"].append(count / out_of)
        stats["train/loss"].append(self.loss)
        if kl:
            stats["train/kl"].append(self.kl)


def optimizer_step(agent: Agent, trainable: list[torch.Tensor], finite: bool, max_grad_norm: float, u: int,
                   cost: CostMeter, stats: dict[str, list[float]]) -> bool:  # fmt: skip
    """Clip the gradient to norm max_grad_norm, then one AdamW step when the mini-batch's log-probs, ratios and loss
    (finite) and the gradient norm are finite; else skip it (gradients dropped, a warning naming update u). Logs the
    norm of a step taken in `stats` and counts it in `cost`; returns whether it stepped."""
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm)
    if finite and torch.isfinite(grad_norm):
        agent.optimizer.step()
        cost.stepped()
        stats["train/grad_norm"].append(float(grad_norm))
        crash_point("update")  # fault-injection hook (hacrl_exp.faults): a kill between optimizer steps
        return True
    what = "gradient norm" if finite else "log-probs, ratios or loss"
    log.warning("%s: non-finite %s at update u=%d; update skipped", agent.name, what, u)
    agent.optimizer.zero_grad(set_to_none=True)
    return False


def idle_backward(agent: Agent, batch: LearnerBatch, rows: torch.Tensor) -> None:
    """A forward and backward of weight 0 on `rows`: a rank whose share of a mini-batch has fewer micro-batches than
    another rank's makes the same FSDP collectives (all-gathers in forward, reduce-scatters in backward) and adds
    zeros to its gradient."""
    logp, _ = response_logprobs(agent.model, *batch.sequences(rows), agent.pad_id, batch.temperature)
    (logp.sum() * 0.0).backward()


def update_metrics(
    stats: dict[str, list[float]],
    counts: dict[str, int],
    run_rows: torch.Tensor,
    applied: AppliedRows,
    batch: LearnerBatch,
    params: LearnerParams,
    names: list[str],
) -> dict[str, float]:
    """The update's train/* and cross/* metrics (docs/metrics.md): each stat's mean over its mini-batches (dropped
    when any is non-finite), the update counts, the share of rows run, and the cross-row statistics of what was
    applied, over every source and per source. train/empty_updates counts mini-batches whose every advantage was 0:
    nothing to learn, not a numerical failure."""
    metrics = {key: sum(v) / len(v) for key, v in stats.items() if all(map(math.isfinite, v))}
    metrics |= {f"train/{key}": float(value) for key, value in counts.items()}
    metrics["train/rows_run_share"] = float(run_rows.double().mean())
    cross = ~batch.is_self & run_rows
    terms = (applied.ratio, applied.in_window, applied.weight)
    if params.sources:
        metrics.update({f"cross/{k}": v for k, v in cross_row_statistics(*terms, cross, batch.advantages).items()})
    for source in params.sources:
        per_source = cross_row_statistics(*terms, cross & (batch.source == source), batch.advantages)
        metrics.update({f"cross/from_{names[source]}/{k}": v for k, v in per_source.items()})
    return metrics


def _padded(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Stack per-row token vectors to the (B, T) layout of `like` (zeros beyond each row)."""
    out = pad_sequence([r.to(like.device, like.dtype) for r in rows], batch_first=True)
    return torch.nn.functional.pad(out, (0, like.shape[1] - out.shape[1]))
