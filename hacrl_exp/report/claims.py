"""The paper's claims as hypotheses, each judged per agent by the across-seed comparison it rests on.

    H1  HACPO > GSPO×2, with half the rollouts
    H2  HACPO > Naive
    H3  removing a mechanism lowers accuracy: HACPO > HACPO −X, one per ablation present
    H4  HACPO > GSPO

Every hypothesis is "A > B" on the mean held-out accuracy. Its verdict follows the comparison's Holm-adjusted
across-seed test: supported (A beat B), contradicted (A fell short of B), otherwise not established (including a
TOST "matched", which rules out a difference larger than the margin but not the claimed direction).
"""

from __future__ import annotations

from dataclasses import dataclass

from hacrl_exp.report.load import MECHANISM_LABELS
from hacrl_exp.report.stats import BEAT, FELL_SHORT
from hacrl_exp.report.tables import Comparison

SUPPORTED, CONTRADICTED, NOT_ESTABLISHED = "supported", "contradicted", "not established"


@dataclass(frozen=True)
class Hypothesis:
    key: str
    claim: str
    a: str
    b: str


def hypotheses(methods: list[str]) -> list[Hypothesis]:
    """H1, H2, one H3 per ablation present (H3 alone, marked untested, when there is none), H4."""
    out = [
        Hypothesis("H1", "HACPO > GSPO×2 with half the rollouts", "HACPO", "GSPO×2"),
        Hypothesis("H2", "HACPO > Naive", "HACPO", "Naive"),
    ]
    ablations = [(key, f"HACPO −{short}") for key, short in MECHANISM_LABELS.items() if f"HACPO −{short}" in methods]
    for key, method in ablations:
        short = method.split("−", 1)[1]
        out.append(Hypothesis(f"H3 {short}", f"removing {short} ({key}) lowers accuracy", "HACPO", method))
    if not ablations:
        out.append(Hypothesis("H3", "removing a mechanism lowers accuracy", "HACPO", "HACPO −X"))
    out.append(Hypothesis("H4", "HACPO > GSPO", "HACPO", "GSPO"))
    return out


def judge(comparison: Comparison | None) -> str:
    """supported / contradicted / not established for a claim 'A > B' from the comparison's across-seed verdict;
    'not tested' without a comparison."""
    if comparison is None:
        return "not tested"
    return {BEAT: SUPPORTED, FELL_SHORT: CONTRADICTED}.get(comparison.verdict, NOT_ESTABLISHED)


def hypothesis_rows(found: list[Comparison], methods: list[str], agents: list[str]):
    """(hypothesis, agent, comparison or None, verdict) for every hypothesis and agent, on the mean column."""
    index = {(c.agent, c.a, c.b): c for c in found if c.column == "mean"}
    rows = []
    for h in hypotheses(methods):
        for agent in agents:
            c = index.get((agent, h.a, h.b))
            rows.append((h, agent, c, judge(c)))
    return rows
