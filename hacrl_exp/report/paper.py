"""The effects the paper reports, as data: where the report's equivalence margins and hypothesised effects come from.

Numbers are the paper's AVG columns (mean over its 7 benchmarks, as printed) copied from the spec
(../shared/docs/hacpo-spec.md §5: P = the preprint behind arXiv 2603.02604 v1). An effect of "A vs B" is the mean
over the paper's agents of A's AVG minus B's AVG:

    Table 1 (§5.1)   the main methods, 6 agents (3 pairs × 2): e.g. HACPO − GSPO×2 = +0.0333 (the abstract's "3.3%")
    Table 2 (§5.2)   HACPO − (HACPO − Adv), 2 agents: +0.0215
    Table 3 (§5.3)   HACPO − (HACPO − ω), 2 agents: +0.0160
    Table 4 (§5.4)   α = 1 − α = 0, 4 models (metric not named; the spec infers MATH-500): +0.0205

Fig. 4 (Stepwise, Clip) has curves only, so those ablations have no paper effect. Nor has the update-matched GSPO
(the paper has no such baseline): HACPO against it is hypothesised to keep the paper's gain over GSPO, +0.0320.
"""

from __future__ import annotations

from dataclasses import dataclass

TABLE1_AVG = {  # agent -> method -> AVG (spec §5.1, as printed)
    "Qwen3-4B (with 4B-Instruct)": {"GRPO": 0.717, "GSPO": 0.684, "GSPO×2": 0.691, "Naive": 0.583, "HACPO": 0.755},
    "Qwen3-4B-Instruct": {"GRPO": 0.785, "GSPO": 0.799, "GSPO×2": 0.799, "Naive": 0.691, "HACPO": 0.813},
    "Qwen3-1.7B-Base": {"GRPO": 0.466, "GSPO": 0.467, "GSPO×2": 0.475, "Naive": 0.425, "HACPO": 0.493},
    "Qwen3-4B-Base (with 1.7B-Base)": {"GRPO": 0.579, "GSPO": 0.578, "GSPO×2": 0.575, "Naive": 0.526, "HACPO": 0.601},
    "Qwen3-4B-Base (with Llama3.2-3B)": {"GRPO": 0.579, "GSPO": 0.578, "GSPO×2": 0.575, "Naive": 0.526,
                                         "HACPO": 0.597},
    "Llama3.2-3B-Instruct": {"GRPO": 0.349, "GSPO": 0.351, "GSPO×2": 0.334, "Naive": 0.294, "HACPO": 0.39},
}  # fmt: skip
ABLATION_GAINS = {  # ablated method -> (HACPO's gain over it per agent, source)
    "HACPO −Adv": ((0.493 - 0.465, 0.601 - 0.586), "Table 2 (AVG, 1.7B-Base and 4B-Base)"),
    "HACPO −ω": ((0.493 - 0.462, 0.601 - 0.600), "Table 3 (AVG, 1.7B-Base and 4B-Base)"),
    "HACPO −ExpIS": (
        (0.664 - 0.630, 0.792 - 0.756, 0.776 - 0.772, 0.772 - 0.764),
        "Table 4 (α = 1 against α = 0, 4 models; metric not named, MATH-500 inferred)",
    ),
}
UPDATE_MATCHED = "GSPO (update-matched)"
"""The report's label of the update-matched GSPO baseline (method tag gspo_update_matched)."""


@dataclass(frozen=True)
class PaperEffect:
    """Δ = A − B as the paper reports it, and where."""

    value: float
    source: str


def paper_effect(a: str, b: str) -> PaperEffect | None:
    """The paper's mean AVG difference A − B over its agents (see the module docstring), or None when the paper
    reports no number for this pair."""
    if a == "HACPO" and b in ABLATION_GAINS:
        gains, source = ABLATION_GAINS[b]
        return PaperEffect(sum(gains) / len(gains), source)
    if a == "HACPO" and b == UPDATE_MATCHED:
        effect = paper_effect("HACPO", "GSPO")
        return PaperEffect(effect.value, "Table 1 HACPO − GSPO (AVG, 6 agents; the paper has no update-matched GSPO)")
    methods = set(next(iter(TABLE1_AVG.values())))
    if a not in methods or b not in methods:
        return None
    gains = [avg[a] - avg[b] for avg in TABLE1_AVG.values()]
    return PaperEffect(sum(gains) / len(gains), f"Table 1 {a} − {b} (AVG, mean over the paper's 6 agents)")
