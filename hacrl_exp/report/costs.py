"""What each method spent, per agent, and which of those costs a comparison held equal.

Costs are the agent runs' cumulative totals (hacrl_exp.report.load.TOTALS): generated rollouts and tokens, trained
rows, optimizer updates, forward and backward tokens, and process seconds (CPU/GPU process time, not wall-clock);
plus the job's process seconds and its wall-clock training seconds (the parent's time/step_s summed), which depends
on the machine's load and is shown for reference only. A cost no run of the selection logged is "not logged by these
runs" (runs from before the cost keys existed log only the generated rollouts and tokens).
"""

from __future__ import annotations

import math

import pandas as pd

from hacrl_exp.report.load import JOB_PROCESS_SECONDS, ReportData
from hacrl_exp.report.tables import BASE, by_agent_then_method, methods_in

COSTS = ("generated rollouts", "generated tokens", "trained rows", "updates", "forward tokens", "backward tokens",
         "process s")  # fmt: skip
"""The per-agent costs a comparison is judged on, in the order the report lists them."""
EXTRA = (JOB_PROCESS_SECONDS, "wall-clock s (job)")
JOB_SECONDS_NOTE = (
    "The job's process seconds are `time.process_time()` of the job's process from the job's start "
    "(hacrl_exp/trainer/loop.py). A multirun's joblib workers are reused: runs logged before that start was taken "
    "per job count the worker's earlier jobs too (the Table-1 grid's 3,212 s for a 79 s job), so compare the "
    "agent's process seconds, which are per call, across methods."
)
"""The note under the Costs table on reused workers' process seconds (issue 38)."""
EQUAL_WITHIN = 0.005
"""A cost is held equal when A's mean over seeds is B's within ±0.5% (the ratio rounds to 1.00)."""


def cost_table(data: ReportData, final: pd.DataFrame) -> pd.DataFrame:
    """Per (method, agent), means over seeds: COSTS and EXTRA (NaN: not logged), final accuracy, its gain over the
    step-0 accuracy, and that gain per 1000 generated rollouts."""
    totals = data.totals.pivot_table(index="run_id", columns="name", values="value")
    seconds = data.curves[data.curves["metric"] == "seconds"]
    wall = seconds[seconds["step"] == seconds.groupby("run_id")["step"].transform("max")].set_index("run_id")["value"]
    wide = data.runs[["run_id", "method", "agent", "seed"]].set_index("run_id")
    wide = wide.join(totals.reindex(columns=[*COSTS, JOB_PROCESS_SECONDS])).assign(**{EXTRA[1]: wall})
    wide = wide.reset_index()
    mean = final[final["column"] == "mean"]
    acc = mean[mean["method"] != BASE][["run_id", "value"]].rename(columns={"value": "accuracy"})
    base = mean[mean["method"] == BASE][["agent", "seed", "value"]].rename(columns={"value": "base"})
    wide = wide.merge(acc, on="run_id").merge(base, on=["agent", "seed"], how="left")
    wide["gain"] = wide["accuracy"] - wide["base"]
    rollouts = wide["generated rollouts"]
    wide["gain per 1k rollouts"] = 1000.0 * wide["gain"] / rollouts.where(rollouts > 0)
    numeric = [*COSTS, *EXTRA, "accuracy", "gain", "gain per 1k rollouts"]
    table = wide.groupby(["method", "agent"], as_index=False)[numeric].mean()
    return by_agent_then_method(table, methods_in(data))


def not_logged(cost: pd.DataFrame) -> list[str]:
    """The costs (COSTS and the job's process seconds) that no run of the selection logged."""
    return [c for c in (*COSTS, JOB_PROCESS_SECONDS) if c not in cost or cost[c].isna().all()]


def cost_ratios(cost: pd.DataFrame, agent: str, a: str, b: str) -> dict[str, float]:
    """A's cost over B's for this agent (means over seeds), for each of COSTS both logged."""
    return {n: r for n, r in cost_ratios_of(cost, agent, a, b, COSTS).items() if math.isfinite(r)}


def held_equal(ratios: dict[str, float]) -> tuple[list[str], dict[str, float]]:
    """(the costs held equal, {cost: ratio} of those that differed), in COSTS order."""
    equal = [name for name, r in ratios.items() if math.isclose(r, 1.0, abs_tol=EQUAL_WITHIN)]
    return equal, {name: r for name, r in ratios.items() if name not in equal}


RATIO_COSTS = ("trained rows", "backward tokens", "updates", "process s")
"""The costs every comparison's ratio row gives (issue 38): rows and backward tokens are what a learner trains on."""
COMPUTE_COSTS = ("process s", "backward tokens")
"""The costs that stand for compute: CPU/GPU seconds of the agent's calls, and the tokens its backward passes ran."""


def comparison_ratios(pairs: list[tuple[str, str, str]], cost: pd.DataFrame) -> pd.DataFrame:
    """(agent, comparison, one column per RATIO_COSTS: A's mean over B's, NaN when either did not log it, and
    'closest to equal': the cost of COMPUTE_COSTS whose ratio is nearest 1, |log r| smallest) for each
    (agent, A, B) in `pairs`, in order."""
    rows = []
    for agent, a, b in pairs:
        ratios = cost_ratios_of(cost, agent, a, b, RATIO_COSTS)
        compute = {n: ratios[n] for n in COMPUTE_COSTS if math.isfinite(ratios[n])}
        closest = min(compute, key=lambda n: abs(math.log(compute[n])), default="")
        rows.append([agent, f"{a} vs {b}", *(ratios[n] for n in RATIO_COSTS), closest])
    return pd.DataFrame(rows, columns=["agent", "comparison", *RATIO_COSTS, "compute closest to equal"])


def cost_ratios_of(cost: pd.DataFrame, agent: str, a: str, b: str, names) -> dict[str, float]:
    """A's mean cost over B's for this agent, for each of `names`: NaN where either is missing or B's is 0."""
    rows = cost[cost["agent"] == agent].set_index("method")
    out = dict.fromkeys(names, math.nan)
    if a in rows.index and b in rows.index:
        for name in (n for n in names if n in rows.columns):
            top, bottom = rows.at[a, name], rows.at[b, name]
            if pd.notna(top) and pd.notna(bottom) and bottom > 0:
                out[name] = float(top / bottom)
    return out
