"""One learner's part of a training step, from the step's rollouts to its metrics (spec §1.2–§1.6, §2.1–§2.5).

`build_batch` (phases 1–3) and `update` (phases 4–7), read top to bottom:

1 POOL        its own rollouts, kept whole, then each source's shared ones in declared order (C1)
2 EXCHANGE    a source's text re-tokenised for the learner (§1.3), placed under the learner's own prompt, keeping
              the source's old mean log-prob (§1.2) and the edge's ρ(j→k) and α
3 ADVANTAGES  over the joint group with baseline weights 1/ρ (§2.1), or over its own group (GSPO, GRPO)
4 SCHEDULE    mini-batches in block order, once per pass; update u bounds cross ratios below by L_u (§1.6, §2.4)
5 LOSS        the algorithm's objective on each micro-batch, plus KL on self rows; gradients accumulate
6 STEP        gradient-norm clip and optimizer step, skipped when anything is non-finite
7 METRICS     train/* and cross/* of docs/metrics.md

A row whose advantage is exactly 0 (a group with all-equal rewards) has J = 0 and ∂J/∂θ = 0 in every objective,
so it is not run through the model unless it carries a KL term; the loss still divides by the whole mini-batch,
so the gradient is unchanged. Ratio statistics are over the rows that were run (in the last pass, when the algorithm
makes several). What the update costs (rows, tokens, optimizer steps) is added to the worker's `CostMeter`.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch.nn.utils.rnn import pad_sequence

from hacrl_exp.agents.agent import Agent
from hacrl_exp.agents.logprobs import response_logprobs
from hacrl_exp.algo import (
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
from hacrl_exp.faults import crash_point
from hacrl_exp.trainer.batching import length_bucketed, micro_batches
from hacrl_exp.trainer.costs import CostMeter
from hacrl_exp.trainer.params import LearnerParams
from hacrl_exp.trainer.rollouts import SharedRollouts, SourceRollouts

log = logging.getLogger(__name__)


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
    """Phases 1–3. rho: ρ(j→k) of this learner k, (N,) (batch scope) or (P, N) (category scope)."""
    # 1 POOL
    blocks = [own] + [sources[j] for j in params.sources]
    # 2 EXCHANGE
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
    # 3 ADVANTAGES over the P prompts' joint groups of M = Σ_j G_j rewards, columns in block order
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


def update(
    agent: Agent, batch: LearnerBatch, params: LearnerParams, names: list[str], cost: CostMeter | None = None
) -> dict[str, float]:
    """Phases 4–7: every optimizer update of this learner for the step; returns its metrics and adds its costs to
    `cost` (the worker's meter)."""
    cost = cost or CostMeter()
    # 4 SCHEDULE
    schedule = minibatch_schedule(batch.block_sizes, params.minibatch_size, params.restart_u_per_source, params.passes)
    run_rows = torch.ones(len(batch), dtype=torch.bool)
    if params.skip_zero_advantage:
        run_rows = (batch.advantages != 0) | (batch.is_self & (params.kl_coef > 0))
    ratios = torch.full((len(batch),), math.nan, dtype=torch.float64)  # NaN: row not run
    weights = torch.full((len(batch),), math.nan, dtype=torch.float64)
    in_window = torch.zeros(len(batch), dtype=torch.bool)
    trainable = [p for group in agent.optimizer.param_groups for p in group["params"]]  # float32 masters, if any
    clamp = params.objective_params.log_ratio_clamp
    stats: dict[str, list[float]] = defaultdict(list)
    skipped = empty = 0
    for mb in schedule:
        lower = stepwise_lower_bound(mb.u, params.delta, params.mechanisms.delta_step)
        agent.optimizer.zero_grad(set_to_none=True)
        lengths = [len(batch.response_ids[r]) for r in range(mb.start, mb.stop)]
        is_self_mb = batch.is_self[mb.start : mb.stop]
        n_self, self_tokens = int(is_self_mb.sum()), sum(n for n, s in zip(lengths, is_self_mb.tolist()) if s)
        mb_loss = mb_kl = 0.0
        finite = True  # NaN/inf in new or old log-probs or the loss (the clamps would hide an inf ratio)
        # 5 LOSS
        run = torch.arange(mb.start, mb.stop)[run_rows[mb.start : mb.stop]]
        for rows in micro_batches(run, batch.lengths, params.micro_batch_size, length_bucketed(agent.model)):
            prompt_ids, response_ids = [batch.prompt_ids[r] for r in rows], [batch.response_ids[r] for r in rows]
            logp, mask = response_logprobs(agent.model, prompt_ids, response_ids, agent.pad_id, batch.temperature)
            adv, is_self, old_mean, rho, alpha = batch.on_device(rows, logp.device)  # the one move to the device
            logp = logp.double()
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
                minibatch_rows=mb.stop - mb.start,
                minibatch_tokens=sum(lengths),
                old_token_logp=_padded([batch.old_token_logp[r] for r in rows], logp) if params.token_level else None,
            )
            loss, objective_metrics, applied = params.objective(policy_rows, params.objective_params)
            for key, value in objective_metrics.items():
                stats[f"train/{key}"].append(value)
            if params.kl_coef > 0 and bool(is_self.any()):
                own = is_self.nonzero().squeeze(-1)
                ref = _padded([batch.ref_token_logp[int(rows[i])] for i in own], logp[own])
                kl = kl_penalty(logp[own], ref, mask[own], params.kl_aggregation, n_self, self_tokens)
                loss = loss + params.kl_coef * kl
                mb_kl += float(kl.detach())
            finite = finite and all(bool(torch.isfinite(x).all()) for x in (logp[mask > 0], old_mean, log_s, loss))
            loss.backward()
            cost.trained(prompt_ids, response_ids)
            mb_loss += float(loss.detach())
            # what the objective applied, as it applied it (logged = applied: no formula is recomputed here)
            ratios[rows] = s.detach().cpu()
            in_window[rows], weights[rows] = applied.in_window.cpu(), applied.weight.cpu()
        if not len(run):  # as a backward of a zero loss would: zero gradients, so Adam's moments still advance
            empty += 1
            for param in trainable:
                param.grad = torch.zeros_like(param)
        stats["train/loss"].append(mb_loss)
        if n_self and params.kl_coef > 0:
            stats["train/kl"].append(mb_kl)
        # 6 STEP
        grad_norm = torch.nn.utils.clip_grad_norm_(trainable, params.max_grad_norm)
        if finite and torch.isfinite(grad_norm):
            agent.optimizer.step()
            cost.stepped()
            stats["train/grad_norm"].append(float(grad_norm))
            crash_point("update")  # fault-injection hook (hacrl_exp.faults): a kill between optimizer steps
        else:
            skipped += 1
            what = "gradient norm" if finite else "log-probs, ratios or loss"
            log.warning("%s: non-finite %s at update u=%d; update skipped", agent.name, what, mb.u)
            agent.optimizer.zero_grad(set_to_none=True)
        cross_run = ~is_self_mb & run_rows[mb.start : mb.stop]
        if bool(cross_run.any()):
            stats[f"cross/in_window_share/u{mb.u}"].append(
                float(in_window[mb.start : mb.stop][cross_run].double().mean())
            )

    # 7 METRICS
    metrics = {key: sum(v) / len(v) for key, v in stats.items() if all(map(math.isfinite, v))}
    metrics["train/updates"] = float(len(schedule))
    metrics["train/skipped_updates"] = float(skipped)
    metrics["train/empty_updates"] = float(empty)  # every advantage 0: nothing to learn, not a numerical failure
    metrics["train/rows_run_share"] = float(run_rows.double().mean())
    cross = ~batch.is_self & run_rows
    if params.sources:
        stats_all = cross_row_statistics(ratios, in_window, weights, cross, batch.advantages)
        metrics.update({f"cross/{k}": v for k, v in stats_all.items()})
    for source in params.sources:
        per_source = cross_row_statistics(
            ratios, in_window, weights, cross & (batch.source == source), batch.advantages
        )
        metrics.update({f"cross/from_{names[source]}/{k}": v for k, v in per_source.items()})
    return metrics


def _padded(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Stack per-row token vectors to the (B, T) layout of `like` (zeros beyond each row)."""
    out = pad_sequence([r.to(like.device, like.dtype) for r in rows], batch_first=True)
    return torch.nn.functional.pad(out, (0, like.shape[1] - out.shape[1]))
