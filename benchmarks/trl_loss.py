"""Loss equality with TRL's GRPOTrainer in GSPO mode, on identical inputs (hacpo-spec §3.4, TV-5).

TRL's side runs TRL's own code: `GRPOTrainer._compute_loss` of a real trainer (importance_sampling_level=
"sequence", loss_type="grpo", epsilon 3e-4 / epsilon_high 4e-4, beta 0) whose forward pass is replaced by the
given per-token log-probs, and its group advantage (rewards − group mean) / (nanstd + 1e-4), the four lines of
`_generate_and_score_completions` with TRL's own `nanstd`. Our side is the call sequence of the GSPO branch of
`hacrl_exp.trainer.step.update`: group_relative_advantages → masked_mean → sequence_log_ratio →
exp → sequence_policy_loss. With our advantage ε set to TRL's 1e-4 the two must agree to 1e-6 (they agree to
rounding); with verl's 1e-6 they differ by the known ε term only.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import torch

from hacrl_exp.algo import (
    TRL_ADVANTAGE_EPS,
    VERL_ADVANTAGE_EPS,
    group_relative_advantages,
    masked_mean,
    sequence_log_ratio,
    sequence_policy_loss,
)

EPS_LOW, EPS_HIGH = 3e-4, 4e-4
LOG_RATIO_CLAMP = 10.0  # ours (C1); TRL does not clamp, so inputs stay well inside it

# spec §8 TV-5 (the TRL row: loss 1.7500125887399964e-04)
TV5_REWARDS = [1.0, 0.0, 1.0, 1.0]
TV5_OLD = [[-0.5, -1.0, -0.2], [-0.3, -0.4, -0.5, -0.6, -0.7], [-0.1, -0.2], [-0.4, -0.3, -0.2, -0.1]]
TV5_CUR = [[-0.5, -0.9997, -0.2], [-0.3, -0.4, -0.5, -0.6, -0.6975], [-0.1, -0.199], [-0.4, -0.3, -0.2, -0.1016]]
TV5_TRL_LOSS = 1.7500125887399964e-04
TV5_VERL_LOSS = 1.7503590905396105e-04


@dataclass
class Case:
    """One batch: per-token log-probs (B, T) right-padded with mask, rewards (B,) in groups of G."""

    name: str
    current: torch.Tensor
    old: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor
    group: int


def padded(rows: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    values = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        values[i, : len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[i, : len(row)] = 1
    return values, mask


def tv5_case() -> Case:
    current, mask = padded(TV5_CUR)
    old, _ = padded(TV5_OLD)
    return Case("TV-5", current, old, mask, torch.tensor(TV5_REWARDS, dtype=torch.float64), 4)


def random_case(seed: int, prompts: int = 16, group: int = 8, max_len: int = 40, drift: float = 1e-3) -> Case:
    """Realistic shapes: 0/1 rewards (some groups uniform), lengths 1..max_len, current = old + noise of ±drift
    per token, so that some sequence ratios fall inside GSPO's clip band and some outside."""
    gen = torch.Generator().manual_seed(seed)
    rows = prompts * group
    lengths = torch.randint(1, max_len + 1, (rows,), generator=gen)
    mask = (torch.arange(max_len).unsqueeze(0) < lengths.unsqueeze(1)).long()
    old = -torch.rand(rows, max_len, generator=gen, dtype=torch.float64) * 3 * mask
    current = (old + (torch.rand(rows, max_len, generator=gen, dtype=torch.float64) * 2 - 1) * drift) * mask
    p_correct = torch.rand(prompts, 1, generator=gen, dtype=torch.float64).expand(prompts, group)
    rewards = (torch.rand(prompts, group, generator=gen, dtype=torch.float64) < p_correct).double().reshape(-1)
    rewards[:group] = 1.0  # one uniform group at least: its advantages are exactly 0 in both
    return Case(f"random seed {seed} ({prompts}×{group}, ≤{max_len} tokens)", current, old, mask, rewards, group)


def trl_advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """TRL 1.16 `_generate_and_score_completions`, sum_then_normalize with scale_rewards="group"."""
    from trl.trainer.utils import nanstd

    mean = torch.nanmean(rewards.view(-1, group), dim=1).repeat_interleave(group, dim=0)
    std = nanstd(rewards.view(-1, group), dim=1).repeat_interleave(group, dim=0)
    return (rewards - mean) / (std + 1e-4)


def our_advantages(rewards: torch.Tensor, group: int, eps: float) -> torch.Tensor:
    return group_relative_advantages(rewards.view(-1, group), eps).reshape(-1)


def our_loss(current: torch.Tensor, case: Case, advantages: torch.Tensor) -> torch.Tensor:
    """The GSPO branch of trainer.step.update for one micro-batch that is the whole mini-batch."""
    is_self = torch.ones(len(advantages), dtype=torch.bool)
    old_mean = masked_mean(case.old, case.mask)
    log_s = sequence_log_ratio(masked_mean(current, case.mask), old_mean, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    loss, _ = sequence_policy_loss(
        log_s.exp(), advantages, is_self, hacpo_cross=False, eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    return loss


class TrlLoss:
    """A real GRPOTrainer (tiny OPT, never trained) whose `_compute_loss` is fed given per-token log-probs."""

    def __init__(self) -> None:
        import transformers
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer

        transformers.utils.logging.set_verbosity_error()
        tokenizer = build_tokenizer("char", "0123456789+*=,|")
        model = build_tiny_model("opt", tokenizer, hidden_size=16, num_layers=1, num_heads=2)
        args = GRPOConfig(
            output_dir=tempfile.mkdtemp(prefix="trl_loss_"),
            importance_sampling_level="sequence",
            loss_type="grpo",
            epsilon=EPS_LOW,
            epsilon_high=EPS_HIGH,
            beta=0.0,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=4,
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
        )
        self.trainer = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            args=args,
            train_dataset=Dataset.from_list([{"prompt": "1+1="}] * 4),
            processing_class=tokenizer,
        )
        self.trainer.model.train()  # TRL's train-mode branch (metrics under "train")
        self.trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train; 1 = no accumulation

    def __call__(self, current: torch.Tensor, case: Case, advantages: torch.Tensor) -> torch.Tensor:
        rows, width = current.shape
        entropies = torch.zeros_like(current)
        self.trainer._get_per_token_logps_and_entropies = lambda *a, **k: (current, entropies, None)
        inputs = {
            "prompt_ids": torch.zeros(rows, 1, dtype=torch.long),
            "prompt_mask": torch.ones(rows, 1, dtype=torch.long),
            "completion_ids": torch.zeros(rows, width, dtype=torch.long),
            "completion_mask": case.mask,
            "advantages": advantages,
            "old_per_token_logps": case.old,
            "num_items_in_batch": case.mask.sum(),
        }
        return self.trainer._compute_loss(self.trainer.model, inputs)


def compare(case: Case, trl_loss: TrlLoss, eps: float = TRL_ADVANTAGE_EPS) -> dict:
    """Loss, per-token gradient and advantages of ours (with advantage ε = eps) against TRL's."""
    adv_trl = trl_advantages(case.rewards, case.group)
    adv_ours = our_advantages(case.rewards, case.group, eps)
    results = {}
    for side, fn, adv in (("trl", trl_loss, adv_trl), ("ours", our_loss, adv_ours)):
        current = case.current.clone().requires_grad_(True)
        loss = fn(current, case, adv)
        loss.backward()
        results[side] = (float(loss.detach()), current.grad * case.mask)
    loss_trl, grad_trl = results["trl"]
    loss_ours, grad_ours = results["ours"]
    return {
        "case": case.name,
        "adv_eps": eps,
        "loss_trl": loss_trl,
        "loss_ours": loss_ours,
        "loss_abs_diff": abs(loss_trl - loss_ours),
        "loss_rel_diff": abs(loss_trl - loss_ours) / max(abs(loss_trl), 1e-300),
        "grad_max_abs_diff": float((grad_trl - grad_ours).abs().max()),
        "adv_max_abs_diff": float((adv_trl - adv_ours).abs().max()),
    }


def equality_report() -> list[dict]:
    """Every case with TRL's ε (must agree to 1e-6) and with verl's default ε (the known difference)."""
    trl_loss = TrlLoss()
    cases = [tv5_case(), *(random_case(seed) for seed in range(3)), random_case(3, prompts=4, group=16, max_len=8)]
    return [compare(case, trl_loss, eps) for eps in (TRL_ADVANTAGE_EPS, VERL_ADVANTAGE_EPS) for case in cases]
