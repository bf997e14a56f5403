"""The trajectory pool of one step, and each learner's batch built from it (spec §1.2–§1.6, §2.1).

An agent keeps its own rollouts whole (`SourceRollouts`: token ids, per-token log-probs); what it shares
with other agents is tokenizer-neutral (`SharedRollouts`): prompt index, source, text, reward, and the
source's old mean log-prob with its token count (spec §1.2, as C1 stores it). A learner batch is its self
block followed by one block per source in declared order (C1), each block ordered prompt-major, so
`minibatch_schedule` gives the spec's u.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from hacrl_exp.algo import (
    Algorithm,
    Mechanisms,
    capability_aware_advantages,
    group_relative_advantages,
)
from hacrl_exp.exchange import retokenize
from hacrl_exp.graph import Edge
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.scoring import batched_response_logprobs
from hacrl_exp.tasks.base import Problem, Task


@dataclass
class SourceRollouts:
    """One agent's rollouts of this step: P·G rows, row r answers prompt r // G."""

    agent: int
    prompt_index: list[int]
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    texts: list[str]
    rewards: torch.Tensor
    """(rows,) float64 0/1."""
    old_token_logp: list[torch.Tensor]
    """The source's own per-token log-probs before any update (spec §1.2)."""
    ref_token_logp: list[torch.Tensor] | None = None

    @property
    def old_mean_logp(self) -> torch.Tensor:
        return torch.stack([t.mean() for t in self.old_token_logp]).double()

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)

    def shared(self) -> SharedRollouts:
        """What other agents get of these rollouts: text, reward and the old log-prob summary (no token ids)."""
        counts = torch.tensor([len(t) for t in self.old_token_logp], dtype=torch.long)
        return SharedRollouts(self.agent, self.prompt_index, self.texts, self.rewards, self.old_mean_logp, counts)


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

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)


@dataclass
class LearnerBatch:
    """Everything one learner's updates need, rows in self-first block order."""

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

    def __len__(self) -> int:
        return len(self.response_ids)


def build_learner_batch(
    learner: int,
    edges: list[Edge],
    names: list[str],
    pool: dict[int, SourceRollouts | SharedRollouts],
    learner_prompt_ids: list[list[int]],
    learner_tokenizer,
    max_response_tokens: int,
    algorithm: Algorithm,
    mechanisms: Mechanisms,
    baseline_weight: torch.Tensor,
    loss_weight: torch.Tensor,
    adv_eps: float,
) -> LearnerBatch:
    """Assemble learner k's batch and its advantages.

    baseline_weight: (N,) or (P, N), w_{k←j} (spec §2.1); loss_weight: (N,) or (P, N), ρ(j→k).
    pool[learner] holds the learner's own whole rollouts; a source needs only its `SharedRollouts`.
    Cross rows are re-tokenised for the learner (spec §1.3) and keep the source's old mean log-prob.
    """
    own = pool[learner]
    shared = edges if algorithm.shares_rollouts else []
    blocks = [own] + [pool[names.index(e.source)] for e in shared]
    alphas = [0.0] + [mechanisms.alpha(e.alpha) for e in shared]
    n_prompts = max(own.prompt_index) + 1

    rewards = torch.cat([b.rewards.view(n_prompts, -1) for b in blocks], dim=1)  # (P, M) joint groups
    if algorithm.shares_rollouts:
        columns = torch.cat([torch.full((b.group_size,), b.agent) for b in blocks])
        weight = baseline_weight if algorithm.capability_baseline else torch.ones_like(baseline_weight)
        joint = capability_aware_advantages(rewards, columns, learner, mechanisms.baseline_weight(weight), adv_eps)
    else:
        joint = group_relative_advantages(rewards, adv_eps)

    prompt_ids, response_ids, source, advantages, alpha, row_weight = [], [], [], [], [], []
    old_tokens, ref_tokens, sizes = [], [], []
    column = 0
    for block, block_alpha in zip(blocks, alphas):
        g = block.group_size
        is_own = block.agent == learner
        prompt_ids += [
            list(block.prompt_ids[r]) if is_own else learner_prompt_ids[p] for r, p in enumerate(block.prompt_index)
        ]
        response_ids += (
            block.response_ids if is_own else retokenize(block.texts, learner_tokenizer, max_response_tokens)
        )
        advantages.append(joint[:, column : column + g].reshape(-1))
        source += [block.agent] * len(block.texts)
        alpha += [block_alpha] * len(block.texts)
        if loss_weight.dim() == 1:  # batch scope: one ρ(j→k)
            rho = loss_weight[block.agent].expand(len(block.texts))
        else:  # category scope: ρ(j→k) of each row's prompt category
            rho = loss_weight[torch.tensor(block.prompt_index), block.agent]
        row_weight.append(mechanisms.loss_weight(rho.double()))
        old_tokens += block.old_token_logp if is_own else [None] * len(block.texts)
        ref_tokens += (block.ref_token_logp or [None] * len(block.texts)) if is_own else [None] * len(block.texts)
        sizes.append(len(block.texts))
        column += g

    source_t = torch.tensor(source)
    return LearnerBatch(
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        source=source_t,
        is_self=source_t == learner,
        advantages=torch.cat(advantages).double(),
        old_mean_logp=torch.cat([b.old_mean_logp for b in blocks]),
        loss_weight=torch.cat(row_weight),
        alpha=torch.tensor(alpha, dtype=torch.float64),
        old_token_logp=old_tokens,
        ref_token_logp=ref_tokens,
        block_sizes=sizes,
    )


def collect_rollouts(
    agent,
    index: int,
    problems: list[Problem],
    group: int,
    sampling: SamplingSettings,
    task: Task,
    score_batch_size: int,
    times: dict[str, float],
) -> SourceRollouts:
    """Phases 1–3 for one agent: sample G responses per prompt, grade them, and score them with the
    agent's own training model before any update of the step (the source's old log-probs, spec §1.2);
    also the reference log-probs when the KL term is on. Adds the seconds of each phase to `times`."""
    started = time.perf_counter()
    prompt_ids = [agent.prompt_ids(p.prompt) for p in problems]
    rollouts = agent.engine.generate(prompt_ids, group, sampling)
    prompt_index = [r // group for r in range(len(rollouts))]
    graded = time.perf_counter()
    grades = task.grade(rollouts.texts, [problems[p] for p in prompt_index])
    rewards = torch.tensor([g.reward for g in grades], dtype=torch.float64)
    scored = time.perf_counter()
    args = (rollouts.prompt_ids, rollouts.response_ids, agent.pad_id, score_batch_size)
    old = batched_response_logprobs(agent.model, *args)
    ref = batched_response_logprobs(agent.reference, *args) if agent.reference is not None else None
    done = time.perf_counter()
    times["generate"] += graded - started
    times["reward"] += scored - graded
    times["score_own"] += done - scored
    return SourceRollouts(
        index, prompt_index, rollouts.prompt_ids, rollouts.response_ids, rollouts.texts, rewards, old, ref
    )
