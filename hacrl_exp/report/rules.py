"""The verdict rules' inputs: which family a comparison belongs to, its equivalence margin and its hypothesised effect,
each with the reason it is what it is (printed in the report next to the number).

Families (Holm adjusts every test of a family together, per column, over agents and pairs):
    claims     HACPO against each other main method (the paper's claims H1, H2, H4 and the update-matched H4u)
    baselines  the other main methods among themselves (context: GSPO×2 vs GSPO, Naive vs GSPO, …)
    ablations  HACPO against HACPO with one mechanism off (H3)
Margin m of "matched" (TOST within ±m): by default half the effect the paper reports for that pair
(hacrl_exp.report.paper), none when the paper reports none; or the user's `equivalence_margin` with its reason.
Hypothesised effect δ of a claim "A > B" (claims and ablations): the paper's effect, or the user's
`hypothesised_effect` with its reason; "refuted" when the one-sided upper bound of Δ lies below δ.

The margin rule (issue 38): m = |δ_paper| / 2, a fixed number of accuracy points per pair, not scaled to the task.
The paper's effects are absolute accuracy differences, and scaling them to a baseline's headroom would shrink δ below
one scored problem's share (1/200) exactly where the baseline is near 1. So the rule keeps δ and m and says when they
cannot be tested instead (the ceiling rule):
    untestable (ceiling)   B's room in the direction of the largest quantity e the comparison tests (e = δ when it has
                           a hypothesised effect, else e = m) is below |e| + EDGE: room = 1 − mean_B for e > 0,
                           mean_B for e < 0, min(1 − mean_B, mean_B) for a margin alone. Below |e|, A − B cannot
                           reach δ (or +m), so "refuted" / "matched" would be forced by the bound; below |e| + EDGE,
                           A's hypothesised accuracy mean_B + δ lies in the edge band where its binomial spread
                           collapses and d − δ is skewed: the type-I simulation (docs/reports.md) shows the one-sided
                           tests reject 6.7–7.5% at α = 0.05 there (mean_B = 0.96, δ = 0.033), and ≤ 5.2% outside.
A finished run within EDGE of 0 or 1 is flagged (hacrl_exp.report.seeds.edge_finals), as an agent's start is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hacrl_exp.report.paper import UPDATE_MATCHED, paper_effect

CLAIMS, BASELINES, ABLATIONS = "claims", "baselines", "ablations"
SHUFFLED = "HACPO (partner rewards shuffled)"
DYNAMIC = "GSPO (dynamic sampling)"
"""The row-matched baseline's label (algorithm gspo_dynamic)."""
"""The partner-rows control's label (algorithm hacpo_shuffled_partner): HACPO against it holds rows and updates."""
FAMILY_TITLES = {
    CLAIMS: "HACPO against each baseline (the paper's claims)",
    BASELINES: "The baselines among themselves",
    ABLATIONS: "HACPO against HACPO with one mechanism off",
}
MAIN_METHODS = ("GSPO", UPDATE_MATCHED, DYNAMIC, "GSPO×2", "GRPO", "Naive", SHUFFLED, "HACPO")
"""Order of the main methods; in a comparison A is the later one, so HACPO is always A."""
ALONE = ("GSPO", UPDATE_MATCHED, DYNAMIC, "GSPO×2", "GRPO")
"""The main methods whose agents train alone, on their own rollouts (no partner's rows)."""


@dataclass(frozen=True)
class Stated:
    """A number the verdicts use, with the reason it is that number."""

    value: float
    reason: str


@dataclass(frozen=True)
class Rules:
    """The user's settings of the verdict rules (report config): significance and optional overrides."""

    significance: float = 0.05
    margin: float | None = None
    margin_reason: str | None = None
    effect: float | None = None
    effect_reason: str | None = None


DEFAULT_RULES = Rules()


EDGE = 0.02
"""A final accuracy within this of 0 or 1 is flagged: 4 of the grids' 200 scored problems."""


def room(mean_b: float, effect: float, two_sided: bool = False) -> float:
    """B's room for an effect e: 1 − mean_B when e > 0, mean_B when e < 0, the smaller of the two when two_sided
    (an equivalence margin ±m)."""
    if two_sided:
        return min(1.0 - mean_b, mean_b)
    return 1.0 - mean_b if effect > 0 else mean_b


def untestable(mean_b: float, effect: Stated | None, margin: Stated | None, edge: float = EDGE) -> bool:
    """True when B's room is below e + edge, e the largest quantity the comparison tests (module docstring): |δ| when
    it has a hypothesised effect δ, else its margin m (both sides); False when B's mean is unknown (NaN) or nothing
    is tested. room < e + edge, compared on the values rounded to 12 decimals (accuracies are k/N: no float excess)."""
    if not math.isfinite(mean_b):
        return False
    if effect is not None and effect.value != 0:
        return round(room(mean_b, effect.value), 12) < round(abs(effect.value) + edge, 12)
    if margin is not None:
        return round(room(mean_b, margin.value, two_sided=True), 12) < round(margin.value + edge, 12)
    return False


def family_of(a: str, b: str) -> str:
    """CLAIMS for HACPO against a main method (the partner-rows control SHUFFLED included: it is not an ablation of a
    mechanism), ABLATIONS for HACPO against 'HACPO −X', else BASELINES."""
    if a == "HACPO" and b.startswith("HACPO −"):
        return ABLATIONS
    return CLAIMS if a == "HACPO" else BASELINES


def margin_for(a: str, b: str, rules: Rules) -> Stated | None:
    """The equivalence margin of A vs B: the user's (with its reason), else half the paper's |effect|, else None."""
    if rules.margin is not None:
        return Stated(rules.margin, f"set by the user: {rules.margin_reason}")
    effect = paper_effect(a, b)
    if effect is None or effect.value == 0:
        return None
    return Stated(
        abs(effect.value) / 2.0,
        f"half the paper's {effect.value:+.4f}, {effect.source} (fixed, not scaled "
        "to the task; a baseline with less room than the effect is 'untestable (ceiling)')",
    )


def effect_for(a: str, b: str, rules: Rules) -> Stated | None:
    """The hypothesised gain of A over B for a claim (CLAIMS and ABLATIONS families): the user's (with its reason),
    else the paper's effect; None for a baseline pair or when the paper reports no number."""
    if family_of(a, b) == BASELINES:
        return None
    if rules.effect is not None:
        return Stated(rules.effect, f"set by the user: {rules.effect_reason}")
    effect = paper_effect(a, b)
    return None if effect is None else Stated(effect.value, f"the paper's, {effect.source}")
