"""The paper's claims as hypotheses, each judged per agent by the across-seed comparison it rests on.

    H1   HACPO > GSPO×2, with half the rollouts
    H2   HACPO > Naive
    H3 X removing mechanism X lowers accuracy: HACPO > HACPO −X, one per ablation present
    H4   HACPO > GSPO
    H4u  HACPO > GSPO (update-matched): the gain over GSPO is not its extra optimizer updates

Every hypothesis is "A > B by δ" on the mean held-out accuracy, δ its hypothesised effect (the paper's, or the
user's: hacrl_exp.report.rules). Its verdict follows the comparison's Holm-adjusted across-seed tests:
contradicted (A fell short of B), supported (A beat B; "smaller than hypothesised" when δ is also refuted), untestable
(ceiling) (B's room to 1 is below δ + rules.EDGE: the runs cannot refute or match δ, rules.untestable), refuted (the
one-sided upper bound of Δ lies below δ), otherwise not established. All three tests are exact sign-flip tests
(hacrl_exp.report.stats: "one test family").
"""

from __future__ import annotations

from dataclasses import dataclass

from hacrl_exp.report.compare import Comparison
from hacrl_exp.report.load import MECHANISM_LABELS
from hacrl_exp.report.paper import UPDATE_MATCHED
from hacrl_exp.report.stats import BEAT, FELL_SHORT, UNTESTABLE

SUPPORTED, CONTRADICTED, REFUTED, NOT_ESTABLISHED = "supported", "contradicted", "refuted", "not established"
SMALLER = "supported, smaller than hypothesised"


@dataclass(frozen=True)
class Hypothesis:
    key: str
    claim: str
    a: str
    b: str


def hypotheses(methods: list[str]) -> list[Hypothesis]:
    """H1, H2, one H3 per ablation present (H3 alone, marked untested, when there is none), H4, and H4u when the
    update-matched GSPO is present."""
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
    if UPDATE_MATCHED in methods:
        claim = "HACPO > GSPO with as many generated rollouts and updates"
        out.append(Hypothesis("H4u", claim, "HACPO", UPDATE_MATCHED))
    return out


def judge(comparison: Comparison | None) -> str:
    """The hypothesis verdict from its comparison (module docstring); 'not tested' without one."""
    if comparison is None:
        return "not tested"
    if comparison.verdict == FELL_SHORT:
        return CONTRADICTED
    if comparison.verdict == BEAT:
        return SMALLER if comparison.refuted else SUPPORTED
    if comparison.verdict == UNTESTABLE:
        return UNTESTABLE
    return REFUTED if comparison.refuted else NOT_ESTABLISHED


def hypothesis_rows(found: list[Comparison], methods: list[str], agents: list[str]):
    """(hypothesis, agent, comparison or None, verdict) for every hypothesis and agent, on the mean column."""
    index = {(c.agent, c.a, c.b): c for c in found if c.column == "mean"}
    rows = []
    for h in hypotheses(methods):
        for agent in agents:
            c = index.get((agent, h.a, h.b))
            rows.append((h, agent, c, judge(c)))
    return rows


def tally(rows, key: str) -> str:
    """'H1: refuted for 1 of 2 agents, not established for 1' from hypothesis_rows."""
    verdicts = [judged for h, _, c, judged in rows if h.key == key and c is not None]
    if not verdicts:
        return ""
    parts = [f"{v} for {verdicts.count(v)}" for v in dict.fromkeys(verdicts)]
    return f"{key}: {parts[0]} of {len(verdicts)} agents" + "".join(f", {p}" for p in parts[1:]) + "."
