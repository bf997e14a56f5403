"""One learner's optimizer updates over its batch (spec §1.6, §2.4, §2.5), with the diagnostics to log.

Mini-batches are taken in order (self first) and u counts the updates made so far, so cross samples
meet L_u = min(1, 1 − δ + u·δ_step). Micro-batches accumulate gradients to the mini-batch mean.

A row whose advantage is exactly 0 (a group with all-equal rewards) has J = 0 and ∂J/∂θ = 0 in every objective,
so it is not run through the model unless it carries a KL term (self rows with β > 0); the loss still divides by
the full mini-batch size, so the gradient is unchanged. Ratio diagnostics are over the rows that were run.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

import torch
from torch.nn.utils.rnn import pad_sequence

from hacrl_exp.agents.agent import Agent
from hacrl_exp.algo import (
    Algorithm,
    Mechanisms,
    grpo_token_objective,
    k3_kl,
    masked_mean,
    minibatch_schedule,
    sequence_log_ratio,
    sequence_policy_loss,
    stepwise_lower_bound,
)
from hacrl_exp.config.schema import AlgorithmConfig, TrainerConfig
from hacrl_exp.faults import crash_point
from hacrl_exp.scoring import response_logprobs
from hacrl_exp.trainer.pool import LearnerBatch

log = logging.getLogger(__name__)


def _padded(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Stack per-row token vectors to the (B, T) layout of `like` (zeros beyond each row)."""
    out = pad_sequence([r.to(like.device, like.dtype) for r in rows], batch_first=True)
    return torch.nn.functional.pad(out, (0, like.shape[1] - out.shape[1]))


def update_learner(
    agent: Agent,
    batch: LearnerBatch,
    names: list[str],
    algorithm: Algorithm,
    algo_cfg: AlgorithmConfig,
    mechanisms: Mechanisms,
    trainer: TrainerConfig,
    skip_zero_advantage: bool = True,
) -> dict[str, float]:
    """Run every optimizer update of one learner for this step and return its metrics."""
    minibatch_size = trainer.prompts_per_step * trainer.group_size // trainer.minibatches_per_block
    schedule = minibatch_schedule(batch.block_sizes, minibatch_size, algo_cfg.restart_u_per_source)
    delta_step = mechanisms.delta_step(algo_cfg.delta_step)
    clamp = algo_cfg.log_ratio_clamp
    stats: dict[str, list[float]] = defaultdict(list)
    ratios = torch.full((len(batch),), math.nan, dtype=torch.float64)  # NaN: row not run (advantage 0)
    in_window = torch.zeros(len(batch), dtype=torch.bool)
    weights = torch.full((len(batch),), math.nan, dtype=torch.float64)
    needs_forward = torch.ones(len(batch), dtype=torch.bool)
    if skip_zero_advantage:
        needs_forward = (batch.advantages != 0) | (batch.is_self & (algo_cfg.kl_coef > 0))
    params = [p for p in agent.model.parameters() if p.requires_grad]

    skipped = empty = 0
    for mb in schedule:
        lower = stepwise_lower_bound(mb.u, algo_cfg.delta, delta_step)
        agent.optimizer.zero_grad(set_to_none=True)
        n_rows = mb.stop - mb.start
        n_self = int(batch.is_self[mb.start : mb.stop].sum())
        mb_tokens = sum(len(batch.response_ids[r]) for r in range(mb.start, mb.stop))
        self_tokens = sum(len(batch.response_ids[r]) for r in range(mb.start, mb.stop) if bool(batch.is_self[r]))
        mb_loss = mb_kl = 0.0
        finite = True  # NaN/inf in new or old log-probs or the loss (the clamps would hide an inf ratio)
        run = torch.arange(mb.start, mb.stop)[needs_forward[mb.start : mb.stop]]
        for rows in run.split(trainer.micro_batch_size) if len(run) else ():
            prompt_ids, response_ids = [batch.prompt_ids[r] for r in rows], [batch.response_ids[r] for r in rows]
            logp, mask = response_logprobs(agent.model, prompt_ids, response_ids, agent.pad_id)
            logp = logp.double()
            is_self, adv = batch.is_self[rows], batch.advantages[rows]
            log_s = sequence_log_ratio(masked_mean(logp, mask), batch.old_mean_logp[rows], -clamp, clamp)
            s = log_s.exp()
            if algorithm.token_level:
                old = _padded([batch.old_token_logp[r] for r in rows], logp)
                objective = grpo_token_objective(
                    (logp - old).clamp(-clamp, clamp), adv, algo_cfg.grpo_clip_low, algo_cfg.grpo_clip_high
                )
                loss = -(objective * mask).sum() / max(mb_tokens, 1)
                clipped = ((objective - (logp - old).exp() * adv.unsqueeze(-1)).abs() > 0) & mask
                stats["self/clipfrac"].append(float(clipped.sum() / mask.sum()))
            else:
                loss, objective = sequence_policy_loss(
                    s,
                    adv,
                    is_self,
                    batch.loss_weight[rows],
                    batch.alpha[rows],
                    lower,
                    hacpo_cross=algorithm.hacpo_cross,
                    clip=mechanisms.clip,
                    is_factor_on_raw_ratio=algo_cfg.is_factor_on_raw_ratio,
                    eps_low=algo_cfg.self_clip_low,
                    eps_high=algo_cfg.self_clip_high,
                )
                loss = loss * len(rows) / n_rows
                if bool(is_self.any()):
                    own_clipped = (objective - s * adv).abs() > 1e-12
                    stats["self/clipfrac"].append(float(own_clipped[is_self].double().mean()))
            if algo_cfg.kl_coef > 0 and bool(is_self.any()):
                ref = [batch.ref_token_logp[r] for r in rows]
                kl = _kl_sum(logp, mask, is_self, ref, algo_cfg.kl_aggregation)
                kl = kl / (self_tokens if algo_cfg.kl_aggregation == "token_mean" else n_self)
                loss = loss + algo_cfg.kl_coef * kl
                mb_kl += float(kl.detach())
            inputs = (logp[mask > 0], batch.old_mean_logp[rows], log_s, loss)
            finite = finite and all(bool(torch.isfinite(x).all()) for x in inputs)
            loss.backward()
            mb_loss += float(loss.detach())
            ratios[rows] = s.detach().cpu()
            in_window[rows] = ((s >= lower) & (s <= 1.0)).cpu()
            weights[rows] = (batch.loss_weight[rows] * s.detach().clamp(lower, 1.0).pow(batch.alpha[rows])).cpu()
        if not len(run):  # as a backward of a zero loss would: zero gradients, so Adam's moments still advance
            empty += 1
            for param in params:
                param.grad = torch.zeros_like(param)
        stats["loss"].append(mb_loss)
        if n_self and algo_cfg.kl_coef > 0:
            stats["kl"].append(mb_kl)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, trainer.max_grad_norm)
        if finite and torch.isfinite(grad_norm):
            agent.optimizer.step()
            stats["grad_norm"].append(float(grad_norm))
            crash_point("update")  # fault-injection hook (hacrl_exp.faults): a kill between optimizer steps
        else:
            skipped += 1
            what = "gradient norm" if finite else "log-probs, ratios or loss"
            log.warning("%s: non-finite %s at update u=%d; update skipped", agent.name, what, mb.u)
            agent.optimizer.zero_grad(set_to_none=True)
        cross_rows = ~batch.is_self[mb.start : mb.stop] & needs_forward[mb.start : mb.stop]
        if bool(cross_rows.any()):
            window = in_window[mb.start : mb.stop][cross_rows].double().mean()
            stats[f"cross/in_window_u{mb.u}"].append(float(window))

    metrics = {key: sum(v) / len(v) for key, v in stats.items() if all(map(math.isfinite, v))}
    metrics["updates"] = float(len(schedule))
    metrics["skipped_updates"] = float(skipped)
    metrics["empty_updates"] = float(empty)  # every advantage 0: nothing to learn, not a numerical failure
    metrics["rows_run"] = float(needs_forward.double().mean())
    for source in batch.source[~batch.is_self].unique().tolist():
        rows = (batch.source == source) & needs_forward
        prefix = f"cross/{names[source]}"
        nonzero = rows & (batch.advantages != 0)
        metrics[f"{prefix}/rows_run"] = float(rows.sum())
        if bool(rows.any()):
            metrics[f"{prefix}/ratio_mean"] = float(ratios[rows].mean())
            metrics[f"{prefix}/ratio_min"] = float(ratios[rows].min())
            metrics[f"{prefix}/ratio_max"] = float(ratios[rows].max())
            metrics[f"{prefix}/weight_mean"] = float(weights[rows].mean())
        metrics[f"{prefix}/in_window"] = float(in_window[nonzero].double().mean()) if bool(nonzero.any()) else 0.0
    return metrics


def _kl_sum(
    logp: torch.Tensor, mask: torch.Tensor, is_self: torch.Tensor, ref_rows: list, aggregation: str
) -> torch.Tensor:
    """Σ of the k3 KL over self rows: of token values (token_mean) or of per-row token means (C1)."""
    own = is_self.nonzero().squeeze(-1)
    ref = _padded([ref_rows[int(i)] for i in own], logp[own])
    kl = k3_kl(logp[own], ref) * mask[own]
    if aggregation == "token_mean":
        return kl.sum()
    return (kl.sum(-1) / mask[own].sum(-1).clamp_min(1)).sum()
