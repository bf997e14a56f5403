"""Capability estimates of a run: the batch-level tracker (paper) and one tracker per task category.

The per-category trackers are always updated and logged; `scope="category"` (our extension) also uses
them for each prompt's baseline and loss weights, so a partner weaker overall but stronger on one
category is not mis-weighted there. A category's window advances only on steps where it appears (for every agent).
"""

from __future__ import annotations

import torch

from hacrl_exp.algo import CapabilityTracker


class CapabilityEstimates:
    def __init__(self, n_agents: int, categories: list[str], window: int, warmup_steps: int, scope: str) -> None:
        def tracker() -> CapabilityTracker:
            return CapabilityTracker(n_agents, window, warmup_steps=warmup_steps)

        self.scope, self.batch = scope, tracker()
        self.by_category = {c: tracker() for c in categories}
        self.last_category_accuracy: dict[str, list[float]] = {}

    def update(self, rewards: list[torch.Tensor], categories: list[list[str]]) -> None:
        """One update per step, before any advantage (spec §2.2).

        rewards: one (rows,) tensor per agent; categories: one list per agent, each row's problem category (the
        step's prompts give every agent the same; dynamic sampling's fresh prompts may differ by agent).
        Accuracy = share of responses with R > 0, which equals the mean reward for 0/1 rewards. A category's tracker
        advances on the steps where every agent has rows of it.
        """
        self.batch.update([float((r > 0).double().mean()) for r in rewards])
        self.last_category_accuracy = {}
        for category, tracker in self.by_category.items():
            rows = [torch.tensor([c == category for c in mine]) for mine in categories]
            if all(bool(m.any()) for m in rows):
                accuracy = [float((r[m] > 0).double().mean()) for r, m in zip(rewards, rows)]
                tracker.update(accuracy)
                self.last_category_accuracy[category] = accuracy

    def loss_weights(self, prompt_categories: list[str]) -> torch.Tensor:
        """ρ[k, j] (N, N) in batch scope, or ρ[k, p, j] (N, P, N) per prompt in category scope."""
        if self.scope == "category":
            return torch.stack([self.by_category[c].loss_weights() for c in prompt_categories], dim=1)
        return self.batch.loss_weights()

    def metrics(self, agent: int, names: list[str], sources: tuple[int, ...] | None = None) -> dict[str, float]:
        """P̂ of one agent, its batch accuracy per category, and what it receives from each other agent j:
        ω = ρ(j→k) and the baseline weight 1/ρ (keys of docs/metrics.md). `sources`, the agents it learns from,
        give cross/omega and cross/baseline_weight, the means over them."""
        rho = self.batch.loss_weights()
        metrics = {"train/p_hat": float(self.batch.p_hat()[agent])}
        for category, tracker in self.by_category.items():
            metrics[f"train/p_hat/{category}"] = float(tracker.p_hat()[agent])
            if category in self.last_category_accuracy:
                metrics[f"train/reward_mean/{category}"] = self.last_category_accuracy[category][agent]
        if sources:
            metrics["cross/omega"] = float(rho[agent, list(sources)].mean())
            metrics["cross/baseline_weight"] = float((1.0 / rho[agent, list(sources)]).mean())
        for j, source in enumerate(names):
            if j == agent:
                continue
            metrics[f"cross/from_{source}/omega"] = float(rho[agent, j])
            metrics[f"cross/from_{source}/baseline_weight"] = float(1.0 / rho[agent, j])
            if self.scope == "category":  # the ω actually used for each category's prompts
                for category, tracker in self.by_category.items():
                    metrics[f"cross/from_{source}/omega/{category}"] = float(tracker.loss_weights()[agent, j])
        return metrics

    def state_dict(self) -> dict:
        return {
            "batch": self.batch.state_dict(),
            "by_category": {c: t.state_dict() for c, t in self.by_category.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.batch.load_state_dict(state["batch"])
        for category, tracker_state in state["by_category"].items():
            self.by_category[category].load_state_dict(tracker_state)
