"""Diagnostics of a learner's cross rows after its updates (logged, never used by the loss)."""

from __future__ import annotations

import torch


def cross_row_statistics(
    ratios: torch.Tensor, in_window: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor, advantages: torch.Tensor
) -> dict[str, float]:
    """Statistics of the selected cross rows (`rows`, a (B,) bool mask of rows run through the model).

        ratio_mean / min / max   of s over the rows           weight_mean   of ρ · clip(s, L_u, 1)^α
        in_window_share          share with L_u ≤ s ≤ 1 among the rows with A ≠ 0 (0 when none)
        rows_run                 how many rows
    ratios, weights (B,) float64 (NaN on rows not run); in_window (B,) bool.
    """
    stats = {"rows_run": float(rows.sum())}
    if bool(rows.any()):
        stats |= {
            "ratio_mean": float(ratios[rows].mean()),
            "ratio_min": float(ratios[rows].min()),
            "ratio_max": float(ratios[rows].max()),
            "weight_mean": float(weights[rows].mean()),
        }
    nonzero = rows & (advantages != 0)
    stats["in_window_share"] = float(in_window[nonzero].double().mean()) if bool(nonzero.any()) else 0.0
    return stats
