"""Re-apply the current verdict rules to a published report's per-seed differences, without its MLflow store.

    python -m hacrl_exp.report.rederive reports/paper_table1_tiny_10seeds [more folders] [--write]

A report's tables/comparisons.csv holds, per (agent, A, B, column), the per-seed paired differences d_s = A_s − B_s
(`per_seed`, written with 6 significant digits, in seed order) and the per-problem test of those runs. From them this
builds the report's own Comparison objects (compare.seed_comparison: family, margin and effect by
hacrl_exp.report.rules, sign-flip, TOST, refutation, one-sided bound), adjusts them as the report does
(compare.judged: Holm over every test of a family and column, then the simulated power of the report's rule), judges
the claims (claims.hypothesis_rows) and flags outlying seeds (seeds.outlying_seeds on the differences against GSPO).
So the verdicts are those `python -m hacrl_exp.report` gives for the same per-seed differences. The old verdicts come
from the same CSV and tables/hypotheses.csv, written by whichever code built the report; each changed verdict is
given with its reason. Nothing is re-run: only the numbers in the CSVs are read.

The per-problem columns (Δ over problems, its bootstrap, McNemar) are copied, not recomputed: they need the answers.
When the folder holds tables/per_seed_accuracy.csv (every run's final accuracy and each agent's start per seed), A's
and B's means come from it (the ceiling rule needs B's), and the outlying seeds and the runs below their own start
are flagged on those accuracies; without it, on the differences against GSPO (over_gspo) and with no ceiling rule.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from hacrl_exp.config.flags import check_number
from hacrl_exp.config.schema import SEED_MAX
from hacrl_exp.errors import ConfigError, OutputError, exit_on_bad_input
from hacrl_exp.evaluation.markdown import markdown_table
from hacrl_exp.paths import replace_atomic
from hacrl_exp.report.claims import hypothesis_rows
from hacrl_exp.report.compare import Comparison, judged, seed_comparison
from hacrl_exp.report.costs import comparison_ratios
from hacrl_exp.report.opening import differences
from hacrl_exp.report.power import DRAWS, MAX_SEEDS
from hacrl_exp.report.render import hypotheses_markdown, margins_markdown, outliers_markdown
from hacrl_exp.report.rules import DEFAULT_RULES, EDGE, Rules, room
from hacrl_exp.report.sections import mean_pairs, ratios_markdown
from hacrl_exp.report.seeds import REFERENCE, edge_finals, edge_text, outlying_seeds
from hacrl_exp.report.stats import BEAT, FELL_SHORT, MATCHED, REFUTED, UNTESTABLE, PairedTest
from hacrl_exp.report.text import bracket, num, pval, signed

NEEDED = ("agent", "a", "b", "column", "per_seed")
PROBLEMS = re.compile(r"\((\d+) problems × \d+ seeds\)")


def read_comparisons(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(tables/comparisons.csv, tables/hypotheses.csv or None) of a report folder; ConfigError naming a missing
    file or column."""
    path = folder / "tables" / "comparisons.csv"
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; give a report folder (reports/<grid>) holding tables/comparisons.csv")
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: columns {missing} missing; it must be a report's tables/comparisons.csv")
    hypotheses = folder / "tables" / "hypotheses.csv"
    return frame, pd.read_csv(hypotheses) if hypotheses.is_file() else None


def accuracies(folder: Path) -> pd.DataFrame | None:
    """tables/per_seed_accuracy.csv as long rows (agent, method, seed, value, column='mean'), None when absent."""
    path = folder / "tables" / "per_seed_accuracy.csv"
    if not path.is_file():
        return None
    wide = pd.read_csv(path)
    long = wide.melt(id_vars=["agent", "method"], var_name="seed", value_name="value").dropna(subset=["value"])
    return long.assign(seed=long["seed"].astype(int), column="mean")


def with_means(found: list[Comparison], final: pd.DataFrame | None) -> list[Comparison]:
    """Each comparison with A's and B's mean over the seeds both have (from `final`); unchanged without it."""
    if final is None:
        return found
    value = {key: part.groupby("seed")["value"].mean() for key, part in final.groupby(["agent", "method"])}
    out = []
    for c in found:
        a, b = value.get((c.agent, c.a)), value.get((c.agent, c.b))
        if a is None or b is None:
            out.append(c)
            continue
        seeds = sorted(set(a.index) & set(b.index))
        out.append(replace(c, means=(float(a.loc[seeds].mean()), float(b.loc[seeds].mean()))) if seeds else c)
    return out


def _cell(row, name: str, default=math.nan):
    value = row.get(name, default)
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else value


def rederive(frame: pd.DataFrame, rules: Rules = DEFAULT_RULES, level: float = 0.95, power_draws: int = DRAWS,
             seed: int = 0, final: pd.DataFrame | None = None) -> list[Comparison]:  # fmt: skip
    """The report's comparisons, judged by the current rules, from the rows of a comparisons.csv (module docstring),
    with A's and B's means from `final` (accuracies()) when given. The per-problem test is copied from the row (pairs
    and problems are not in the CSV: 0)."""
    found = []
    for row in frame.to_dict("records"):
        paired = PairedTest(
            float(_cell(row, "delta")), float(_cell(row, "ci_low")), float(_cell(row, "ci_high")),
            float(_cell(row, "p_bootstrap")), int(_cell(row, "a_only_right", 0)), int(_cell(row, "b_only_right", 0)),
            float(_cell(row, "p_mcnemar")), 0, 0,
        )  # fmt: skip
        d = differences(row["per_seed"])
        found.append(seed_comparison(row["agent"], row["a"], row["b"], str(row["column"]), d, paired, rules, level))
    return judged(with_means(found, final), power_draws, seed)


def over_gspo(found: list[Comparison], seeds: list[int]) -> pd.DataFrame:
    """Final-accuracy rows (agent, method, seed, column 'mean', value) with GSPO at 0 and every other method at its
    difference from GSPO at that seed: M − GSPO from the comparison 'M vs GSPO', and for an ablation X,
    (HACPO − GSPO) − (HACPO − X). The input seeds.outlying_seeds needs (it reads only these differences)."""
    mean = {(c.agent, c.a, c.b): c.per_seed for c in found if c.column == "mean"}
    rows = []
    for agent in sorted({c.agent for c in found}):
        rows += [(agent, REFERENCE, s, 0.0) for s in seeds]
        for (who, a, b), d in mean.items():
            if who != agent:
                continue
            if b == REFERENCE:
                rows += [(agent, a, s, x) for s, x in zip(seeds, d)]
            elif a == "HACPO" and b.startswith("HACPO ") and (agent, "HACPO", REFERENCE) in mean:
                hacpo = mean[(agent, "HACPO", REFERENCE)]
                rows += [(agent, b, s, h - x) for s, h, x in zip(seeds, hacpo, d)]
    frame = pd.DataFrame(rows, columns=["agent", "method", "seed", "value"])
    return frame.assign(column="mean")


def methods_of(found: list[Comparison]) -> list[str]:
    return list(dict.fromkeys(m for c in found for m in (c.b, c.a)))


def old_p(row: dict | None, name: str) -> float:
    return float(_cell(row, name)) if row else math.nan


def why(c: Comparison, old: dict | None) -> str:
    """Why the verdict of comparison c differs from the old report's row (empty when it does not)."""
    before = old.get("verdict") if old else None
    if before == MATCHED == c.verdict and num(old_p(old, "equivalence_margin"), 4) != num(c.margin.value, 4):
        return (
            f"still matched, now within ±{num(c.margin.value, 4)} (half the paper's effect; old "
            f"±{num(old_p(old, 'equivalence_margin'))}), TOST Holm over {c.tests} tests {pval(c.p_tost_holm)}"
        )
    if before is None or before == c.verdict:
        return ""
    if c.verdict == UNTESTABLE:
        return ceiling_text(c)
    m, fam = c.tests, c.family
    if before == REFUTED:
        return (
            f"refutation now by the one-sided sign-flip test of d − δ: Holm {pval(c.p_refute_holm)} ≥ "
            f"{c.significance} over {m} tests (old one-sided t-test, Holm {pval(old_p(old, 'p_refute_holm'))})"
        )
    if before in (BEAT, FELL_SHORT):
        return (f"sign-flip p {pval(c.p_sign_flip)} Holm-adjusted over the {m} tests of the {fam} family (TOST and "
                f"Δ ≥ δ included) is {pval(c.p_holm)} ≥ {c.significance}; old: {pval(old_p(old, 'p_holm'))} over the "
                "difference tests only")  # fmt: skip
    if c.verdict in (BEAT, FELL_SHORT):
        was = pval(old_p(old, "p_holm"))
        return f"sign-flip Holm over the {m} tests of the {fam} family: {pval(c.p_holm)} (old {was})"
    parts = []
    if before == MATCHED:
        old_margin = num(old_p(old, "equivalence_margin"))
        if c.margin is None:
            parts.append(f"no equivalence test: the paper reports no effect for {c.a} vs {c.b} (old: ±{old_margin}, "
                         "unadjusted TOST)")  # fmt: skip
        else:
            parts.append(f"TOST within ±{num(c.margin.value, 4)} (half the paper's effect; old ±{old_margin}), "
                         f"Holm over {m} tests: {pval(c.p_tost_holm)} ≥ {c.significance} (old unadjusted "
                         f"{pval(old_p(old, 'p_tost'))})")  # fmt: skip
    if c.verdict == MATCHED:
        parts.append(f"TOST within ±{num(c.margin.value, 4)}, Holm over {m} tests: {pval(c.p_tost_holm)}")
    if c.verdict == REFUTED:
        parts.append(refuted_text(c))
    return "; ".join(parts)


def ceiling_text(c: Comparison) -> str:
    """Why a comparison is untestable (ceiling): B's mean, its room, the tested quantity and the edge."""
    tested = c.effect.value if c.effect else c.margin.value
    space = room(c.means[1], tested, c.effect is None)
    what = f"δ {signed(tested, 4)}" if c.effect else f"the margin ±{num(tested, 4)}"
    return (f"ceiling: {c.b} ends at {num(c.means[1], 4)}, room {num(space, 4)} < |{what}| + {EDGE} (rules.untestable),"
            " so refuted / matched would be forced by the bound")  # fmt: skip


def refuted_text(c: Comparison) -> str:
    return (f"refuted, a verdict the old rules lacked: one-sided {round(100 * (1 - c.significance))}% upper bound "
            f"{signed(c.upper)} < δ {signed(c.effect.value)}, Holm p {pval(c.p_refute_holm)}")  # fmt: skip


def mde_text(c: Comparison) -> str:
    """The minimum detectable effect at the comparison's seeds: '+0.052', '∞' (no grid of n seeds passes), 'n/a'."""
    if c.mde != c.mde:
        return "n/a"
    return "∞ (no grid of these seeds can pass)" if math.isinf(c.mde) else f"{num(c.mde)}"


def power_of(c: Comparison) -> str:
    if c.power != c.power:
        return "n/a"
    return f"{num(c.power, 2)} / {c.seeds_for_power or f'> {MAX_SEEDS}'}"


def seeds_text(c: Comparison) -> str:
    return " / ".join(str(k) for k in c.counts)


def old_seeds(row: dict | None) -> str:
    if not row or "seeds_needed" not in row:
        return "n/a"
    needed = _cell(row, "seeds_needed")
    return "—" if needed != needed else str(int(float(needed)))


def side_by_side(found: list[Comparison], frame: pd.DataFrame, hypotheses: pd.DataFrame | None) -> str:
    """The claims table: per hypothesis and agent, old and new p, seeds, power and verdicts, and why they differ."""
    old = {(r["agent"], r["a"], r["b"]): r for r in frame[frame["column"] == "mean"].to_dict("records")}
    old_h = {}
    if hypotheses is not None:
        old_h = dict(zip(zip(hypotheses["hypothesis"], hypotheses["agent"]), hypotheses["verdict"]))
    rows = []
    for h, agent, c, verdict in hypothesis_rows(found, methods_of(found), sorted({c.agent for c in found})):
        if c is None:
            continue
        o = old.get((agent, c.a, c.b))
        before_h, before_c = old_h.get((h.key, agent), "n/a"), (o or {}).get("verdict", "n/a")
        changed = "**" if before_h != verdict or before_c != c.verdict else ""
        reason = why(c, o) or (refuted_text(c) if c.refuted and before_h != verdict else "")
        reason = reason or (ceiling_text(c) if verdict == UNTESTABLE and before_h != verdict else "")
        rows.append(
            [h.key, agent, f"{c.a} vs {c.b}", f"{signed(c.seeds.mean)} {bracket(c.seeds.low, c.seeds.high)}",
             pval(old_p(o, "p_holm")), f"{pval(c.p_holm)} / {pval(c.p_tost_holm)} / {pval(c.p_refute_holm)} "
             f"(m={c.tests})",
             str(_cell(o or {}, "seeds_ahead", "n/a")).split(".")[0], seeds_text(c), old_seeds(o), power_of(c),
             f"{changed}{before_c} → {c.verdict}{changed}", f"{changed}{before_h} → {verdict}{changed}", reason]
        )  # fmt: skip
    headers = ["", "agent", "comparison", "Δ [95% CI]", "old p Holm", "new p Holm: sign-flip / TOST / Δ ≥ δ",
               "old ahead", "new ahead / tied / behind", "old seeds needed (t-test)", "new power / seeds for 80%",
               "comparison: old → new", "claim: old → new", "why it changed"]  # fmt: skip
    return markdown_table(headers, rows)


def every_comparison(found: list[Comparison], frame: pd.DataFrame) -> str:
    """Every comparison on the mean column, old verdict → new, for the ones outside the claims table too."""
    old = {(r["agent"], r["a"], r["b"]): r for r in frame[frame["column"] == "mean"].to_dict("records")}
    rows = []
    for c in (c for c in found if c.column == "mean"):
        o = old.get((c.agent, c.a, c.b))
        before = (o or {}).get("verdict", "n/a")
        mark = "**" if before != c.verdict else ""
        margin = f"±{num(c.margin.value, 4)}" if c.margin else "none"
        effect = signed(c.effect.value, 4) if c.effect else "none"
        rows.append(
            [c.agent, f"{c.a} vs {c.b}", c.family, signed(c.seeds.mean), num(c.means[1]), seeds_text(c), margin,
             effect, pval(c.p_sign_flip), pval(c.p_holm), pval(c.p_tost_holm), pval(c.p_refute_holm), signed(c.upper),
             power_of(c), mde_text(c), f"{mark}{before} → {c.verdict}{mark}", why(c, o)]
        )  # fmt: skip
    headers = ["agent", "comparison", "family", "Δ", "B's mean", "ahead / tied / behind", "margin", "δ",
               "p sign-flip", "Holm sign-flip", "Holm TOST", "Holm Δ ≥ δ", "one-sided 95% upper (sign-flip)",
               "power / seeds for 80%", "MDE (80%)", "verdict: old → new", "why it changed"]  # fmt: skip
    return markdown_table(headers, rows)


def ratios_text(folder: Path, found: list[Comparison]) -> str:
    """The cost ratios of every mean-column comparison from tables/cost.csv, or a line saying it is absent."""
    path = folder / "tables" / "cost.csv"
    if not path.is_file():
        return "Not derived: the folder has no tables/cost.csv."
    return ratios_markdown(comparison_ratios(mean_pairs(found), pd.read_csv(path)))


def heldout_problems(folder: Path) -> int | None:
    """The held-out problems of the report's evaluation, from report.md's '(N problems × S seeds)'."""
    report = folder / "report.md"
    found = PROBLEMS.search(report.read_text()) if report.is_file() else None
    return int(found.group(1)) if found else None


def rederived_markdown(folder: Path, command: str, found: list[Comparison], frame: pd.DataFrame,
                       hypotheses: pd.DataFrame | None, problems: int | None, note: str = "",
                       final: pd.DataFrame | None = None) -> str:  # fmt: skip
    """The whole rederived_claims.md of one report folder; `final`: accuracies() of the folder, when it has them."""
    agents = sorted({c.agent for c in found})
    n_seeds = max((c.seeds.n for c in found), default=0)
    seeds = list(range(n_seeds))
    source = over_gspo(found, seeds) if final is None else final
    flags = outlying_seeds(source, methods_of(found), dict.fromkeys(agents, problems or 0))
    edges = "" if final is None else edge_text(edge_finals(final, methods_of(found)))
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    level = 0.95
    md = [
        f"# {folder.name}: the claims under the current verdict rules", "",
        f"Derived on {today} by `{command}` from the published per-seed differences (`tables/comparisons.csv`, "
        "column `per_seed`, 6 significant digits, seed order; position k is seed k). The runs themselves were not "
        "re-run: no accuracy, per-problem answer or cost was recomputed, only the across-seed tests. "
        "`python -m hacrl_exp.report` gives these verdicts for these per-seed differences "
        "(the functions it calls, hacrl_exp/report/rederive.py).", "",
    ]  # fmt: skip
    md += [note, ""] if note else []
    md += [
        "Old: the verdicts the report's code wrote then (its `tables/comparisons.csv` and `tables/hypotheses.csv`). "
        "New, the rules of issue 38 (docs/reports.md, \"Verdicts\"): one test family, every test an exact sign-flip "
        "test of the per-seed differences (difference: d; equivalence: d ± m, two one-sided; refutation: d − δ, "
        "one-sided), Holm over every test of a family and column; the margin m = half the paper's effect δ for that "
        "pair; \"untestable (ceiling)\" when B's room (1 − B's mean for δ > 0) is below |δ| + 0.02 (or, without δ, "
        "either room below m + 0.02), so that refuted / matched would be forced; the one-sided 95% upper bound is "
        "the sign-flip test inverted; ties at |Δ| < 1e-12; power and the minimum detectable effect (MDE: the "
        f"smallest mean Δ the rule detects with 80% power at these seeds and this SD; {DRAWS} simulated grids) of "
        "the report's own rule; outliers on exact fractions, and runs below their own start flagged. "
        "Bold: a verdict that changed.",
        "", "## The claims, old and new", "", side_by_side(found, frame, hypotheses), "",
        "## Every comparison on the mean held-out accuracy, old and new", "", every_comparison(found, frame), "",
        "## The claims table as the current report prints it", "",
        hypotheses_markdown(found, methods_of(found), agents, level), "",
        "## Margins and hypothesised effects", "", margins_markdown(found), "",
        "## Outlying seeds (collapses)", "",
        "The report's rule (hacrl_exp/report/seeds.py) on each method's per-seed difference against its GSPO run, "
        + ("from the CSV's 'M vs GSPO' differences (an ablation X: (HACPO − GSPO) − (HACPO − X))" if final is None
           else "from `tables/per_seed_accuracy.csv`, and every run that ends below its own start")
        + f"; N = {problems} held-out problems (report.md).", "",
        outliers_markdown(flags) if problems else "Not derived: report.md does not say how many held-out problems.",
        "", edges, "",
        "## Cost ratios of every comparison", "",
        "A's mean over B's (the folder's `tables/cost.csv`): what each comparison held equal, and what it did not.", "",
        ratios_text(folder, found), "",
    ]  # fmt: skip
    return "\n".join(md)


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hacrl_exp.report.rederive", description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="report folders, e.g. reports/paper_gap_tiny")
    parser.add_argument("--write", action="store_true", help="also write <folder>/<--name>")
    parser.add_argument("--name", default="rederived_claims.md", help="the file --write writes in each folder")
    parser.add_argument("--note", default="", help="a paragraph put under the header (what still holds, and why)")
    parser.add_argument("--power-draws", type=int, default=DRAWS, help=f"simulated grids per power (default {DRAWS})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the power simulation (the report's default 0)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once printed, a bad input exits 2 (SystemExit)."""
    args = arguments(sys.argv[1:] if argv is None else argv)
    command = "python -m hacrl_exp.report.rederive " + " ".join(str(f) for f in args.folders)
    command += " --note '<the paragraph below>'" * bool(args.note) + " --write" * args.write
    command += f" --name {args.name}" * (args.name != "rederived_claims.md")
    with exit_on_bad_input(ConfigError, OutputError):
        check_number("--power-draws", args.power_draws, 0, 100_000)  # as the report's config: report_schema
        check_number("--seed", args.seed, 0, SEED_MAX)
        for folder in args.folders:
            frame, hypotheses = read_comparisons(folder)
            final = accuracies(folder)
            found = rederive(frame, power_draws=args.power_draws, seed=args.seed, final=final)
            text = rederived_markdown(
                folder, command, found, frame, hypotheses, heldout_problems(folder), args.note, final
            )
            print(text)
            if args.write:
                target = folder / Path(args.name).name
                replace_atomic(target, lambda tmp, text=text: tmp.write_text(text))  # a regular file only, no symlink
                print(f"written to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
