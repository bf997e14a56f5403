"""The report's opening: its bottom line (four sentences per agent) and the claims block of the forest plot.

Both are computed from the tables the report writes (tables/comparisons.csv, accuracy.csv, cost.csv, as
`build.comparisons_frame`, the accuracy table's means and `costs.cost_table` give them), so a published report's
opening is rebuilt from its stored numbers (report/relayout.py) exactly as a new report's is (report/build.py).
Per agent, over the comparisons on the mean column:
1. the best method: the highest mean final held-out accuracy over seeds (Table 1's mean column; methods equal at the
   printed 3 decimals are tied), its runners-up, the step-0 start, and the methods it is established above;
2. which differences hold: every comparison whose Holm-adjusted verdict is beat, fell short of or matched; then the
   hypothesised gains that are refuted, and how many comparisons are neither;
3. at which cost: for each difference that holds, which of generated rollouts, updates and trained rows it held
   equal (`costs.held_equal`: within ±0.5%) and A's ratio of the others; when nothing holds, the comparison with the
   smallest Holm-adjusted sign-flip p, with its costs;
4. the comparison closest to equal compute: of HACPO's comparisons with a baseline that trains alone (`rules.ALONE`),
   the one whose process seconds or backward tokens ratio is nearest 1 (|log r| smallest; `compute_sentence`), with
   that ratio, the other one and its verdict (issue 38: the headline names the comparison closest to equal compute).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from hacrl_exp.report import plots
from hacrl_exp.report.costs import COMPUTE_COSTS, COSTS, comparison_ratios, cost_ratios, held_equal
from hacrl_exp.report.headline import HEADLINE_ORDER
from hacrl_exp.report.rules import ALONE, MAIN_METHODS
from hacrl_exp.report.stats import BEAT, FELL_SHORT, MATCHED, REFUTED, UNTESTABLE
from hacrl_exp.report.tables import BASE
from hacrl_exp.report.text import num, pval, signed

HOLDS = (BEAT, FELL_SHORT, MATCHED)
"""The verdicts that say a difference (or an equivalence) holds across seeds."""
KEY_COSTS = ("generated rollouts", "updates", "trained rows")
"""The costs the bottom line names (the headline and the Costs section give the rest)."""
CLAIMS_PLOT = "forest_claims.png"


def differences(text) -> tuple[float, ...]:
    """The per-seed differences of a comparisons.csv `per_seed` cell ('0.0075 -0.005 …')."""
    return tuple(float(x) for x in str(text).split())


def _value(row, name: str) -> float | None:
    """A number of a comparisons row, None when the column is absent (older reports) or empty."""
    value = row.get(name)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _join(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def mean_rows(comparisons: pd.DataFrame, agent: str) -> pd.DataFrame:
    """The agent's comparisons on the mean column, in the table's order."""
    return comparisons[(comparisons["agent"] == agent) & (comparisons["column"].astype(str) == "mean")]


def best_sentence(agent: str, accuracy: pd.DataFrame, comparisons: pd.DataFrame) -> str:
    """'opt_char: Naive ended highest, at 0.611 mean final held-out accuracy over 10 seeds (then …; step 0: 0.441);
    none of its leads is established.' Methods equal at 3 decimals tie."""
    rows = accuracy[(accuracy["agent"] == agent) & (accuracy["method"] != BASE)]
    rows = rows.assign(shown=rows["mean"].round(3)).sort_values("shown", ascending=False, kind="stable")
    top = rows["shown"].iat[0]
    best = list(rows.loc[rows["shown"] == top, "method"])
    seeds = int(rows["seeds"].iat[0]) if "seeds" in rows else None
    over = f" over {seeds} seed{'s' * (seeds != 1)}" if seeds else ""
    if len(best) == 1:
        text = f"{best[0]} ended highest, at {num(top)} mean final held-out accuracy{over}"
    else:
        text = f"{_join(best)} tied highest, at {num(top)} mean final held-out accuracy{over}"
    then = [f"{r.method} {num(r.shown)}" for r in rows[rows["shown"] < top].head(2).itertuples()]
    start = accuracy.loc[(accuracy["agent"] == agent) & (accuracy["method"] == BASE), "mean"]
    notes = ([f"then {', '.join(then)}"] if then else []) + ([f"step 0: {num(start.iat[0])}"] if len(start) else [])
    text += f" ({'; '.join(notes)})" if notes else ""
    mine = mean_rows(comparisons, agent)
    said = []
    for method in best:
        below = [r.b for r in mine.itertuples() if r.verdict == BEAT and r.a == method]
        below += [r.a for r in mine.itertuples() if r.verdict == FELL_SHORT and r.b == method]
        if below:
            said.append(f"{'it' if len(best) == 1 else method} is established above {_join(below)}")
    lead = "; ".join(said) or f"none of {'its' if len(best) == 1 else 'their'} leads is established"
    return f"{text}; {lead}."


def holds_phrase(row) -> str:
    """'HACPO above GSPO (Δ +0.070)', 'HACPO below Naive (Δ -0.037)', 'HACPO within ±0.050 of Naive (Δ -0.004)'."""
    if row["verdict"] == MATCHED:
        margin = _value(row, "equivalence_margin")
        how = f"within ±{num(margin)} of" if margin is not None else "matched"
    else:
        how = "above" if row["verdict"] == BEAT else "below"
    return f"{row['a']} {how} {row['b']} (Δ {signed(row['seed_delta_mean'])})"


def family_order(row) -> int:
    """0 for a claim (HACPO against a main method), 1 for two other main methods, 2 for the rest (ablations)."""
    return 0 if row["a"] == "HACPO" and row["b"] in MAIN_METHODS else 1 if row["b"] in MAIN_METHODS else 2


def verdicts_are(comparisons: pd.DataFrame, seeds: int) -> str:
    """How the verdicts were reached: 'Holm-adjusted, across 10 seeds', or, for a report from before every test of a
    family was adjusted (no p_tost_holm column), 'across 3 seeds, under the rules this report was built with'."""
    if "p_tost_holm" in comparisons:
        return f"Holm-adjusted, across {seeds} seeds"
    return f"across {seeds} seeds, under the rules this report was built with"


def holds_sentence(agent: str, comparisons: pd.DataFrame) -> str:
    """Which of the agent's differences hold (beat, fell short of, matched; claims first), which hypothesised gains
    are refuted, and how many comparisons are neither."""
    mine = mean_rows(comparisons, agent)
    rows = sorted((r for _, r in mine.iterrows()), key=family_order)
    holds = [r for r in rows if r["verdict"] in HOLDS]
    refuted = [r for r in rows if r["verdict"] == REFUTED]
    ceiling = [r for r in rows if r["verdict"] == UNTESTABLE]
    how = verdicts_are(comparisons, int(mine["seeds"].max()) if len(mine) else 0)
    if holds:
        text = f"What holds ({len(holds)} of {len(mine)} comparisons, {how}): {'; '.join(map(holds_phrase, holds))}"
    else:
        text = f"No difference holds ({len(mine)} comparisons, {how})"
    if refuted:
        gains = [f"{r['a']} over {r['b']} by {signed(_value(r, 'hypothesised_effect'))}" for r in refuted]
        text += f"; refuted at the hypothesised size: {_join(gains)}"
    if ceiling:
        pairs = [f"{r['a']} vs {r['b']}" for r in ceiling]
        text += f"; untestable at the ceiling: {_join(pairs)}"
    rest = len(mine) - len(holds) - len(refuted) - len(ceiling)
    if rest and (holds or refuted or ceiling):  # with neither, "no difference holds" already says it
        text += f"; {rest} {'is' if rest == 1 else 'are'} not established"
    return f"{text}."


def cost_phrase(row, cost: pd.DataFrame) -> tuple[tuple[str, ...], str]:
    """(the KEY_COSTS held equal, ' (HACPO 2.00× updates, 3.07× trained rows)' for those that differed, '' when none
    did) for one comparison row; a key cost missing from the cost table is in neither."""
    ratios = {n: r for n, r in cost_ratios(cost, row["agent"], row["a"], row["b"]).items() if n in KEY_COSTS}
    equal, differed = held_equal(ratios)
    parts = [f"{num(r, 2)}× {n}" for n, r in differed.items()]
    return tuple(equal), f" ({row['a']} {', '.join(parts)})" if parts else ""


def cost_sentence(agent: str, comparisons: pd.DataFrame, cost: pd.DataFrame) -> str:
    """For each difference that holds, which key costs it held equal (grouped, most held equal first) and A's ratio
    of the others; with none holding, the comparison nearest to a difference (smallest Holm-adjusted sign-flip p)
    and its costs."""
    mine = mean_rows(comparisons, agent)
    logged = [n for n in KEY_COSTS if n in cost and cost.loc[cost["agent"] == agent, n].notna().any()]
    missing = [n for n in KEY_COSTS if n not in logged]
    of = _join(logged) + (f"; {_join(missing)} not logged by these runs" if missing else "")
    holds = sorted((r for _, r in mine.iterrows() if r["verdict"] in HOLDS), key=family_order)
    if not holds:
        open_ = mine[mine["p_holm"].notna()]
        if open_.empty:
            return "With nothing established there is no cost to weigh."
        near = open_.loc[open_["p_holm"].idxmin()]
        equal, differed = cost_phrase(near, cost)
        none = f"with none of {_join(logged)} equal" if len(logged) > 1 else f"at unequal {_join(logged)}"
        at = f"at equal {_join(list(equal))}" if equal else none
        unlogged = f"; {_join(missing)} not logged by these runs" if missing else ""
        return (
            f"With nothing established there is no cost to weigh; nearest to a difference is {near['a']} vs "
            f"{near['b']} (Δ {signed(near['seed_delta_mean'])}, Holm p {pval(near['p_holm'])}), {at}{differed}"
            f"{unlogged}."
        )
    groups: dict[tuple[str, ...], list[str]] = {}
    for row in holds:
        equal, differed = cost_phrase(row, cost)
        groups.setdefault(equal, []).append(f"{row['a']} vs {row['b']}{differed}")
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[0]))
    parts = [f"{_join(list(k)) if k else 'none'} for {_join(v)}" for k, v in ordered]
    return f"Costs held equal (of {of}): {'; '.join(parts)}."


def compute_sentence(agent: str, comparisons: pd.DataFrame, cost: pd.DataFrame) -> str:
    """Of HACPO's comparisons with a baseline that trains alone (mean column), the one closest to equal compute: the
    smallest |log r| of the ratio `costs.comparison_ratios` names closest to equal (of COMPUTE_COSTS), with the other
    ratio and the verdict. '' when the agent has no such comparison; a sentence saying so when no run logged either
    cost."""
    mine = mean_rows(comparisons, agent)
    mine = mine[(mine["a"] == "HACPO") & mine["b"].isin(ALONE)].reset_index(drop=True)
    if mine.empty:
        return ""
    ratios = comparison_ratios([(agent, r["a"], r["b"]) for _, r in mine.iterrows()], cost)
    closest = ratios["compute closest to equal"].tolist()
    distance = [abs(math.log(ratios.at[i, name])) if name else math.inf for i, name in enumerate(closest)]
    if min(distance) == math.inf:
        return f"Compute ({_join(list(COMPUTE_COSTS))}) was not logged by these runs."
    i = distance.index(min(distance))
    row, name = mine.iloc[i], closest[i]
    others = [f"{num(ratios.at[i, n], 2)}× {n}" for n in COMPUTE_COSTS if n != name and math.isfinite(ratios.at[i, n])]
    rest = f" ({', '.join(others)})" if others else ""
    verdict = row["verdict"] if row["verdict"] in (*HOLDS, REFUTED, UNTESTABLE) else "not established"
    return (
        f"Closest to equal compute, of the baselines that train alone: {row['a']} vs {row['b']}, at "
        f"{num(ratios.at[i, name], 2)}× {name}{rest}: {verdict}, Δ {signed(row['seed_delta_mean'])}."
    )


def bottom_line(comparisons: pd.DataFrame, accuracy: pd.DataFrame, cost: pd.DataFrame) -> list[str]:
    """The bottom line: per agent one bullet of four sentences (module docstring), from the report's tables; a cost
    column the table lacks (an older report's) is a cost not logged."""
    cost = cost.reindex(columns=[*cost.columns, *(c for c in COSTS if c not in cost)])  # absent: not logged
    agents = sorted(set(accuracy["agent"]) & set(comparisons["agent"]))
    if not agents:
        return ["No comparison in this selection: nothing to conclude."]
    return [
        f"- **{agent}.** {best_sentence(agent, accuracy, comparisons)} {holds_sentence(agent, comparisons)} "
        f"{cost_sentence(agent, comparisons, cost)} {compute_sentence(agent, comparisons, cost)}".rstrip()
        for agent in agents
    ]


def claims_rows(comparisons: pd.DataFrame) -> list[tuple]:
    """The forest plot's rows of the claims block: HACPO against each main method on the mean column, per agent in
    the headline's order ((label, per-seed differences, verdict, margin, δ, agent), as plots.forest_plot reads)."""
    order = {m: i for i, m in enumerate(dict.fromkeys((*HEADLINE_ORDER, *MAIN_METHODS)))}
    mine = comparisons[(comparisons["column"].astype(str) == "mean") & (comparisons["a"] == "HACPO")]
    mine = mine[mine["b"].isin(MAIN_METHODS)]
    rows = sorted(mine.to_dict("records"), key=lambda r: (r["agent"], order[r["b"]]))
    return [(f"{r['a']} vs {r['b']}", differences(r["per_seed"]), r["verdict"], _value(r, "equivalence_margin"),
             _value(r, "hypothesised_effect"), r["agent"]) for r in rows]  # fmt: skip


def claims_block(comparisons: pd.DataFrame, out: Path, level: float, significance: float) -> list[str]:
    """The claims block: plots/forest_claims.png (drawn here, no taller than one screen) and what it shows."""
    rows = claims_rows(comparisons)
    if not rows:
        return ["No comparison of HACPO against a baseline in this selection."]
    what = "HACPO against each baseline, Δ across seeds"
    plots.forest_plot(rows, out / "plots" / CLAIMS_PLOT, level, significance, plots.SCREEN_HEIGHT, what)
    return [
        f"HACPO against each baseline, per agent (the claims rows of the full forest plot, section Paired "
        f"differences): the marker is the mean Δ across seeds, shaped by its verdict; thin line {round(100 * level)}%,"
        f" thick line {round(100 * (1 - 2 * significance))}% t-interval; shaded ± the margin, orange tick δ.",
        "", f"![claims: HACPO against each baseline](plots/{CLAIMS_PLOT})",
    ]  # fmt: skip
