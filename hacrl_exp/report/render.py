"""Markdown sections of the report from computed tables, and the HTML page (markdown-it, installed with rich)."""

from __future__ import annotations

import html
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from hacrl_exp.evaluation.markdown import markdown_table
from hacrl_exp.report.claims import hypothesis_rows, tally
from hacrl_exp.report.compare import Comparison
from hacrl_exp.report.costs import COSTS, EXTRA, not_logged
from hacrl_exp.report.layout import unique_anchors
from hacrl_exp.report.power import MAX_SEEDS
from hacrl_exp.report.stats import SYMBOL
from hacrl_exp.report.tables import BASE
from hacrl_exp.report.text import bracket, interval, num, pval, sentence, signed
from hacrl_exp.tracking import ui_hint

PAPER_REFS = {
    "capability_advantage": "paper Table 2, HACPO − Adv: the unweighted joint baseline",
    "omega": "paper Table 3, HACPO − ω: cross loss weight 1, baseline weights kept",
    "exponential_is": "paper Table 4 at α = 0: no exponential importance sampling",
    "stepwise": "paper Fig. 4, no Stepwise: static cross window [1 − δ, 1]",
    "clip": "paper Fig. 4, no Clip: the raw cross ratio",
}


def legend(significance: float) -> str:
    """What the verdict symbols mean."""
    return (
        f"Verdicts (across seeds, paired by seed; every p Holm-adjusted over all tests of its family, < {significance} "
        f"passes): {SYMBOL['beat']} A above B and {SYMBOL['fell short of']} A below B (sign-flip test); "
        f"{SYMBOL['matched']} matched: equivalent within the comparison's margin (TOST); {SYMBOL['refuted']} refuted: "
        f"the one-sided upper bound of Δ lies below the hypothesised gain; {SYMBOL['untestable (ceiling)']} untestable "
        "(ceiling): B has less room to 1 (or 0) than the tested effect + 0.02, so matched / refuted would be forced; "
        f"{SYMBOL['not established']} not established (none of these). All are exact sign-flip tests. "
        "Columns marked *these runs* test over the problems of the trained runs, "
        "holding them fixed; they do not speak to training randomness and never set a verdict."
    )


def accuracy_markdown(table: pd.DataFrame, columns: list[str]) -> str:
    """Table-1 style: one row per agent and method, 'mean [low, high]' per category and for the mean; a † marks a
    row whose interval is the t-interval across seeds (no per-problem answers) instead of the bootstrap."""
    rows = [
        [r["agent"], r["method"] + (" †" if r.get("interval") == "t" else ""), r["seeds"],
         *(interval(r[c]) for c in columns)]
        for _, r in table.iterrows()
    ]  # fmt: skip
    return markdown_table(["agent", "method", "seeds", *columns], rows)


def power_cell(c: Comparison) -> str:
    """'0.21 / 23' (power at the grid's seeds / seeds for 80%), '0.05 / > 32', or '' when not simulated."""
    if c.power != c.power:  # NaN
        return ""
    return f"{num(c.power, 2)} / {c.seeds_for_power or f'> {MAX_SEEDS}'}"


def delta_markdown(found: list[Comparison], columns: list[str], level: float) -> str:
    """One row per (agent, A vs B): Δ = A − B per category with its verdict symbol (each column its own Holm
    family), the across-seed tests on the mean (raw p, Holm-adjusted in brackets), and the per-problem tests on
    these runs."""
    pct, rows = round(100 * level), []
    index = {(c.agent, c.a, c.b, c.column): c for c in found}
    for c in (c for c in found if c.column == "mean"):
        cells = []
        for column in columns:
            one = index.get((c.agent, c.a, c.b, column))
            cells.append(f"{signed(one.seeds.mean)} {SYMBOL[one.verdict]}" if one else "")
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        tost = f"{pval(c.p_tost)} ({pval(c.p_tost_holm)}) at ±{num(c.margin.value)}" if c.margin else "no margin"
        refute = f"{pval(c.p_refute)} ({pval(c.p_refute_holm)}) at {signed(c.effect.value)}" if c.effect else "—"
        rows.append(
            [c.agent, f"{c.a} vs {c.b}", *cells, seeds, f"{pval(c.p_sign_flip)} ({pval(c.p_holm)})", tost, refute,
             " / ".join(map(str, c.counts)), power_cell(c), c.verdict, bracket(c.paired.low, c.paired.high),
             pval(c.paired.p_bootstrap), pval(c.paired.p_mcnemar)]
        )  # fmt: skip
    headers = ["agent", "A vs B", *[f"Δ {c}" for c in columns], f"{pct}% CI (seeds)", "p sign-flip (Holm)"]
    headers += ["p TOST (Holm) at margin", "p Δ ≥ δ (Holm) at δ", "seeds ahead / tied / behind", "power / 80% at"]
    headers += ["verdict", f"these runs: {pct}% CI (problems)", "these runs: p bootstrap", "these runs: p McNemar"]
    return markdown_table(headers, rows)


def hypotheses_markdown(found: list[Comparison], methods: list[str], agents: list[str], level: float) -> str:
    """One row per hypothesis and agent: the comparison, its interval, the hypothesised effect δ and the one-sided
    upper bound that refutes it, the Holm-adjusted p's, the power of the report's rule, the verdict; then a tally
    per hypothesis."""
    pct, rows = round(100 * level), []
    found_rows = hypothesis_rows(found, methods, agents)
    for h, agent, c, judged in found_rows:
        if c is None:
            rows.append([h.key, h.claim, agent, f"{h.a} vs {h.b}", "", "", "", "", "", "", judged])
            continue
        seeds = bracket(c.seeds.low, c.seeds.high) if c.seeds.n >= 2 else "n/a"
        rows.append(
            [h.key, h.claim, agent, f"{c.a} vs {c.b}", signed(c.seeds.mean), seeds,
             signed(c.effect.value) if c.effect else "none", signed(c.upper), pval(c.p_holm),
             pval(c.p_refute_holm), judged]
        )  # fmt: skip
    sig = round(100 * (1 - found[0].significance)) if found else 95
    headers = ["", "claim", "agent", "comparison", "Δ", f"{pct}% CI across seeds", "δ hypothesised"]
    headers += [f"one-sided {sig}% upper bound", "p Holm (sign-flip)", "p Holm (Δ ≥ δ)", "verdict"]
    tallies = [tally(found_rows, key) for key in dict.fromkeys(h.key for h, *_ in found_rows)]
    return markdown_table(headers, rows) + "\n\n" + " ".join(filter(None, tallies))


def margins_markdown(found: list[Comparison]) -> str:
    """Per comparison (A vs B, one row however many agents and columns): its family, the equivalence margin and
    its rationale, the hypothesised effect and its source."""
    rows, seen = [], set()
    for c in found:
        if (c.a, c.b) in seen:
            continue
        seen.add((c.a, c.b))
        margin = (f"±{num(c.margin.value, 4)}", c.margin.reason) if c.margin else ("none", "the paper reports no "
                  "number for this pair; set equivalence_margin with margin_reason for one")  # fmt: skip
        effect = (signed(c.effect.value, 4), c.effect.reason) if c.effect else ("none", "")
        rows.append([f"{c.a} vs {c.b}", c.family, *margin, *effect])
    return markdown_table(["comparison", "family", "margin", "why", "δ hypothesised", "source"], rows)


def diagnostics_markdown(table: pd.DataFrame) -> str:
    """The diagnostics table; a value no run logged is n/a."""
    columns = [c for c in table.columns if c not in ("agent", "method")]
    digits = {"cross rows / step": 1}
    rows = [[r["agent"], r["method"], *(num(r[c], digits.get(c, 3)) for c in columns)] for _, r in table.iterrows()]
    return markdown_table(["agent", "method", *columns], rows)


def cost_markdown(cost: pd.DataFrame) -> str:
    """The costs per method and agent (means over seeds), then which costs these runs did not log."""
    digits = {"process s": 1, EXTRA[0]: 1, EXTRA[1]: 1}

    def cell(row, name):
        value = row[name]
        if value != value:  # NaN
            return "not logged"
        return num(value, digits[name]) if name in digits else f"{value:.0f}"

    rows = [
        [r["agent"], r["method"], *(cell(r, n) for n in (*COSTS, *EXTRA)), num(r["accuracy"]), signed(r["gain"]),
         signed(r["gain per 1k rollouts"], 4)]
        for _, r in cost.iterrows()
    ]  # fmt: skip
    headers = ["agent", "method", *COSTS, *EXTRA, "final accuracy", "gain vs step 0", "gain per 1k rollouts"]
    missing = not_logged(cost)
    note = f"Not logged by these runs: {', '.join(missing)}." if missing else "Every cost was logged by every run."
    return markdown_table(headers, rows) + "\n\n" + note


def per_seed_markdown(table: pd.DataFrame) -> str:
    """Final held-out accuracy per (agent, method) and seed; the base row is the step-0 start."""
    seeds = [c for c in table.columns if c not in ("agent", "method")]
    rows = [[r["agent"], r["method"], *(num(r[s]) for s in seeds)] for _, r in table.iterrows()]
    return markdown_table(["agent", "method", *(f"seed {s}" for s in seeds)], rows)


def outliers_markdown(flags: pd.DataFrame) -> str:
    """The flagged seeds, or a line saying there are none."""
    if flags.empty:
        return "No seed lies beyond 3 MADs of its method's seeds, and no run ends below its own start."
    rows = [[r.agent, r.method, r.seed, signed(r.delta), signed(r.median), num(r.mad, 4), num(r.bound, 4),
             r.direction] for r in flags.itertuples()]  # fmt: skip
    headers = ["agent", "method", "seed", "Δ vs its GSPO run (side 'below its start': final − start)", "median Δ",
               "MAD", "3 · max(MAD, 1/N)", "side"]  # fmt: skip
    return markdown_table(headers, rows)


def selection_markdown(runs: pd.DataFrame, selection: str, skipped: list[str], uri: str | None = None) -> str:
    """What the report read: the filter, per method the agents, seeds and final steps, the code versions, the
    wall-clock, what was left out, and every job with a link to its MLflow run."""
    lines = [f"Runs: MLflow {selection}."]
    rows = []
    for method, part in runs.groupby("method", sort=False):
        seeds = ", ".join(str(s) for s in sorted(part["seed"].unique()))
        steps = ", ".join(str(s) for s in sorted(part["final_step"].unique()))
        rows.append([method, ", ".join(sorted(part["agent"].unique())), seeds, steps])
    lines.append(markdown_table(["method", "agents", "seeds", "final evaluation step"], rows))
    lines.append(code_versions(runs))
    if {"job_start", "job_end"} <= set(runs.columns):
        lines.append(wall_clock(runs))
    if skipped:
        lines.append(f"Left out ({len(skipped)}): " + "; ".join(skipped[:20]) + (" …" if len(skipped) > 20 else ""))
    lines.append(jobs_markdown(runs, uri))
    return "\n\n".join(lines)


def run_link(uri: str | None, experiment_id: str, run_id: str) -> str | None:
    """The run's page in MLflow's UI when the store is an MLflow server (http/https; credentials left out, as
    hacrl_exp.tracking.ui_hint does), else None: a file or database store has no page until `mlflow ui` serves it."""
    if not uri or not uri.startswith("http"):
        return None
    server = urlsplit(uri)
    base = urlunsplit((server.scheme, server.netloc.rsplit("@", 1)[-1], server.path.rstrip("/"), "", ""))
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def jobs_markdown(runs: pd.DataFrame, uri: str | None) -> str:
    """One row per job (its parent run): name, method, seed, data and held-out seed, and its MLflow run: a link on an
    MLflow server, else the run id after the `mlflow ui` command that serves the store (a folded HTML block)."""
    jobs = runs.drop_duplicates("parent_id").sort_values(["method", "seed"])
    rows = []
    for job in jobs.itertuples():
        link = run_link(uri, job.experiment_id, job.parent_id)
        cell = f"[{job.parent_id[:8]}]({link})" if link else f"`{job.parent_id}`"
        rows.append([job.run_name, job.method, job.seed, seed_tag(job.data_seed), seed_tag(job.heldout_seed), cell])
    table = markdown_table(["job", "method", "seed", "data seed", "held-out seed", "MLflow run"], rows)
    if run_link(uri, "0", "0") or not uri:
        how = "Each job links to its MLflow run."
    else:
        first = jobs["experiment_id"].iat[0]
        how = (f"To open a job's run: {ui_hint(uri, first).removeprefix('MLflow: ')}, and from there "
               f"`#/experiments/<experiment>/runs/<run id>` (experiment {first}).")  # fmt: skip
    return f"<details><summary>{len(jobs)} jobs</summary>\n\n{how}\n\n{table}\n\n</details>"


def seed_tag(value) -> str:
    """A job's data or held-out seed tag, or 'not recorded'."""
    return "not recorded" if value is None or value != value else str(value)


def code_versions(runs: pd.DataFrame) -> str:
    """The git commits the jobs ran from, with job counts; more than one commit, or uncommitted changes, is flagged
    (the methods may then differ in more than the method)."""
    if "commit" not in runs:
        return "Code: unknown (the runs carry no git commit)."
    jobs = runs.drop_duplicates("parent_id")
    counts = jobs.groupby("commit")["parent_id"].count().sort_values(ascending=False)
    listed = ", ".join(f"`{commit}` ({n} job{'s' * (n != 1)})" for commit, n in counts.items())
    dirty = int(jobs["dirty"].sum()) if "dirty" in jobs else 0
    flags = []
    if len(counts) > 1:
        flags.append(f"**{len(counts)} code versions**: compare methods run from one commit, or check the diff")
    if dirty:
        flags.append(f"**{dirty} job{'s' * (dirty != 1)} ran with uncommitted changes**")
    return f"Code: git commit {listed}." + (" " + "; ".join(flags) + "." if flags else "")


IDLE_GAP = pd.Timedelta(minutes=10)
"""A pause this long with no job running splits a grid's wall-clock into spans (a grid run in parts)."""


def wall_clock(runs: pd.DataFrame) -> str:
    """When the jobs ran: the spans in which some job was running (split at pauses of `IDLE_GAP` or more, so a grid
    run in parts is not read as one long run), each with its jobs and minutes, and the sum of the jobs' own wall-clock
    times (what a grid costs at one job at a time)."""
    jobs = runs.drop_duplicates("parent_id")
    times = pd.DataFrame({"start": pd.to_datetime(jobs["job_start"]), "end": pd.to_datetime(jobs["job_end"])})
    times = times.dropna().sort_values("start")
    hours = (times["end"] - times["start"]).dt.total_seconds().sum() / 3600
    spans: list[list] = []  # [first start, last end, jobs]
    for start, end in zip(times["start"], times["end"]):
        if spans and start - spans[-1][1] < IDLE_GAP:
            spans[-1][1], spans[-1][2] = max(spans[-1][1], end), spans[-1][2] + 1
        else:
            spans.append([start, end, 1])

    def span(a, b, n: int | None = None) -> str:
        jobs_in = f"{n} job{'s' * (n != 1)}, " if n is not None else ""
        return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC ({jobs_in}{(b - a).total_seconds() / 60:.0f} min)"

    if len(spans) == 1:
        where = span(*spans[0][:2])
    else:
        where = f"in {len(spans)} parts, " + ", ".join(span(*s) for s in spans)
    running = sum((b - a).total_seconds() for a, b, _ in spans) / 60
    return (
        f"Wall-clock: {len(jobs)} jobs, {where}: {running:.0f} min with a job running; the jobs' own times sum to "
        f"{hours:.2f} h."
    )


def findings_markdown(found: list[Comparison], level: float) -> str:
    """One bullet per comparison on the mean accuracy, generated from its numbers."""
    return "\n".join(f"- {sentence(c, level)}" for c in found if c.column == "mean")


def base_note() -> str:
    return f"`{BASE}` is the warm-started agent before RL (every method's step-0 evaluation at that seed)."


def alpha_markdown(best: pd.DataFrame) -> str:
    rows = [[r.study, r.learner, r.source, num(r.alpha, 3), num(r.value), r.trials] for r in best.itertuples()]
    return markdown_table(["study", "learner", "source", "best α", "objective", "trials"], rows)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.45}
table{border-collapse:collapse;margin:1em 0;font-size:0.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,td:nth-child(2){text-align:left}img{max-width:100%}code{background:#f6f6f6}"""


def to_html(markdown: str, title: str) -> str:
    """A standalone HTML page of the Markdown (tables enabled): each heading gets its GitHub id (layout.anchor), so
    the contents' links resolve; a relative link to another report's report.md opens its report.html; images stay
    relative links to plots/."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(markdown)
    opened = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
    for i, id_ in zip(opened, unique_anchors([tokens[i + 1].content for i in opened])):
        tokens[i].attrSet("id", id_)
    for token in (child for t in tokens for child in t.children or []):
        href = str(token.attrGet("href") or "") if token.type == "link_open" else ""
        if href.endswith("/report.md") and not urlsplit(href).scheme:
            token.attrSet("href", href.removesuffix(".md") + ".html")
    body = parser.renderer.render(tokens, parser.options, {})
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style></head>\n<body>\n{body}</body></html>\n"
    )
