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
"""

from __future__ import annotations

from dataclasses import dataclass

from hacrl_exp.report.paper import UPDATE_MATCHED, paper_effect

CLAIMS, BASELINES, ABLATIONS = "claims", "baselines", "ablations"
FAMILY_TITLES = {
    CLAIMS: "HACPO against each baseline (the paper's claims)",
    BASELINES: "The baselines among themselves",
    ABLATIONS: "HACPO against HACPO with one mechanism off",
}
MAIN_METHODS = ("GSPO", UPDATE_MATCHED, "GSPO×2", "GRPO", "Naive", "HACPO")
"""Order of the main methods; in a comparison A is the later one, so HACPO is always A."""


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


def family_of(a: str, b: str) -> str:
    """CLAIMS for HACPO against a main method, ABLATIONS for HACPO against 'HACPO −X', else BASELINES."""
    if a == "HACPO" and b.startswith("HACPO "):
        return ABLATIONS
    return CLAIMS if a == "HACPO" else BASELINES


def margin_for(a: str, b: str, rules: Rules) -> Stated | None:
    """The equivalence margin of A vs B: the user's (with its reason), else half the paper's |effect|, else None."""
    if rules.margin is not None:
        return Stated(rules.margin, f"set by the user: {rules.margin_reason}")
    effect = paper_effect(a, b)
    if effect is None or effect.value == 0:
        return None
    return Stated(abs(effect.value) / 2.0, f"half the paper's {effect.value:+.4f}, {effect.source}")


def effect_for(a: str, b: str, rules: Rules) -> Stated | None:
    """The hypothesised gain of A over B for a claim (CLAIMS and ABLATIONS families): the user's (with its reason),
    else the paper's effect; None for a baseline pair or when the paper reports no number."""
    if family_of(a, b) == BASELINES:
        return None
    if rules.effect is not None:
        return Stated(rules.effect, f"set by the user: {rules.effect_reason}")
    effect = paper_effect(a, b)
    return None if effect is None else Stated(effect.value, f"the paper's, {effect.source}")
