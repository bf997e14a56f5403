"""The report's inference, layout and figures on hand-made runs (tests/report/synthetic.py): no training, no MLflow."""

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from hacrl_exp.config.report_schema import validate_report
from hacrl_exp.report import plots
from hacrl_exp.report.build import _write
from hacrl_exp.report.stats import BEAT, MATCHED, NOT_ESTABLISHED
from tests.report.synthetic import make_data, per_seed_differences

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic_report")
    return _write(validate_report({"bootstrap": 300}), make_data(), out, "synthetic")


def find(report, agent, a, b, column="mean"):
    (found,) = [c for c in report.comparisons if (c.agent, c.a, c.b, c.column) == (agent, a, b, column)]
    return found


def test_seeds_disagree_per_problem_significant_but_not_established(built):
    c = find(built, "strong", "HACPO", "GSPO×2")
    assert c.per_seed == pytest.approx(per_seed_differences("strong", "HACPO", "GSPO×2"))  # +0.15, +0.15, −0.05
    assert c.runs_verdict == BEAT and c.paired.p_bootstrap < 0.05 and c.paired.low > 0  # these runs: clear
    assert c.p_sign_flip == pytest.approx(4 / 8)  # across seeds: |±.15 ±.15 ±.05| ≥ .25 for 4 of 8 sign patterns
    assert not c.seeds.excludes_zero() and c.verdict == NOT_ESTABLISHED
    line = next(x for x in built.markdown.splitlines() if x.startswith("- ○ HACPO vs GSPO×2 for strong"))
    assert "not established" in line and "holds the trained runs fixed" in line
    h1 = next(x for x in built.markdown.splitlines() if x.startswith("| H1 |") and "| strong |" in x)
    assert h1.split("|")[8].strip() == "not established"


def test_caveat_when_the_seed_interval_excludes_zero_but_holm_does_not_pass(built):
    # ablation family = HACPO vs HACPO −ω for strong (d = .05, .04, .05: all positive, p = 2/8) and weak
    # (d = .01, .02, −.01: 3 of 4 patterns with ε1 = + reach |.02|, p = 6/8). Holm: 2·0.25 = 0.5; max(0.5, 0.75)
    strong, weak = find(built, "strong", "HACPO", "HACPO −ω"), find(built, "weak", "HACPO", "HACPO −ω")
    assert (strong.p_sign_flip, weak.p_sign_flip) == pytest.approx((0.25, 0.75))
    assert (strong.p_holm, weak.p_holm) == pytest.approx((0.5, 0.75))
    assert strong.seeds.excludes_zero() and strong.verdict == NOT_ESTABLISHED
    line = next(x for x in built.markdown.splitlines() if x.startswith("- ○ HACPO vs HACPO −ω for strong"))
    assert "t-interval excludes 0 (HACPO above HACPO −ω), but the Holm-adjusted sign-flip p = 0.500" in line


def test_caveat_applies_in_the_other_direction():
    from hacrl_exp.report.stats import Interval, PairedTest
    from hacrl_exp.report.tables import Comparison
    from hacrl_exp.report.text import caveats

    below = Comparison(
        "a", "HACPO", "HACPO −ω", "mean", Interval(-0.04, -0.06, -0.02, 3), PairedTest(-0.04, -0.06, -0.02, 0.001,
        1, 20, 0.001, 1200, 400), 0, 0.05, (-0.04, -0.05, -0.03), 0.25, 0.5, 0.99, 0.02,
    )  # fmt: skip
    text = " ".join(caveats(below, 0.95))
    assert "excludes 0 (HACPO below HACPO −ω)" in text and "HACPO was below HACPO −ω" in text


def test_main_family_holm_and_tost(built):
    main = [c for c in built.comparisons if c.family == "main" and c.column == "mean"]
    assert len(main) == 2 * 6  # 2 agents × every pair of GSPO, GSPO×2, Naive, HACPO
    # Holm by hand for this family: 12 raw p-values, the smallest 0.25 (all of one sign) → 12 · 0.25 ≥ 1
    assert min(c.p_sign_flip for c in main) == pytest.approx(0.25) and all(c.p_holm == 1.0 for c in main)
    # weak HACPO vs GSPO×2: d = (0, −0.01, +0.01), d̄ = 0, s = 0.01; TOST at ±0.02: t = 0.02/(0.01/√3) = 3.4641,
    # p = 1 − F_t(2)(3.4641) = 0.5 − 3.4641/(2·√14) = 0.037090 < 0.05 → matched
    c = find(built, "weak", "HACPO", "GSPO×2")
    assert c.p_tost == pytest.approx(0.5 - (0.02 * math.sqrt(3) / 0.01) / (2 * math.sqrt(14)), rel=1e-4)
    assert c.verdict == MATCHED and c.margin == 0.02
    assert c.seeds_needed is None  # d̄ = 0: "—"
    assert find(built, "strong", "HACPO", "GSPO").seeds_needed == 5  # d̄ = 0.1167, s = 0.0289: effect 4.04


def test_hacpo_vs_naive_and_every_main_pair_present(built):
    pairs = {(c.a, c.b) for c in built.comparisons if c.column == "mean"}
    assert {("HACPO", "Naive"), ("HACPO", "GSPO×2"), ("HACPO", "GSPO"), ("Naive", "GSPO"), ("Naive", "GSPO×2"),
            ("GSPO×2", "GSPO"), ("HACPO", "HACPO −ω")} == pairs  # fmt: skip
    assert "| strong | HACPO vs Naive |" in built.markdown


def test_hypotheses_table_has_the_four_claims(built):
    md = built.markdown
    section = md.split("## The paper's claims as hypotheses", 1)[1].split("\n## ", 1)[0]
    for key, claim in (("H1", "HACPO > GSPO×2 with half the rollouts"), ("H2", "HACPO > Naive"),
                       ("H3 ω", "removing ω (omega) lowers accuracy"), ("H4", "HACPO > GSPO")):  # fmt: skip
        rows = [x for x in section.splitlines() if x.startswith(f"| {key} | {claim}")]
        assert len(rows) == 2, key  # one per agent
    rows = (built.folder / "tables" / "hypotheses.csv").read_text().splitlines()
    assert rows[0].startswith("hypothesis,claim,agent") and len(rows) == 1 + 4 * 2


def test_headline_first_and_in_its_own_file(built):
    md = built.markdown
    assert md.startswith("# Report: synthetic\n\n## Headline\n\n| agent | comparison | Δ |")
    assert md.index("## Headline") < md.index("## The paper's claims") < md.index("## Selection")
    head = (built.folder / "headline.md").read_text()
    assert head.startswith(built.headline) and built.headline in md
    assert "| strong | HACPO vs GSPO×2 | +0.083 | [-0.204, +0.370] |" in head  # d̄ ± 4.3027 · 0.11547/√3
    assert "against GSPO×2 for strong, with 0.50× its rollouts: not established" in head
    assert "H1 (HACPO > GSPO×2 with half the rollouts) is supported for 0 of 2 agents." in head
    assert "▲ A above B" in head  # the legend travels with it


def test_accuracy_intervals_stay_in_the_unit_interval(built):
    for _, row in built.accuracy.iterrows():
        iv = row["mean"]
        assert 0.0 <= iv.low <= iv.mean <= iv.high <= 1.0, row["method"]
    hacpo = built.accuracy.set_index(["agent", "method"]).loc[("strong", "HACPO"), "mean"]
    assert hacpo.mean == pytest.approx((0.65 + 0.65 + 0.55) / 3)
    assert (
        "| strong | HACPO | 3 | " in built.markdown
        and f"{hacpo.mean:.3f} [{hacpo.low:.3f}, {hacpo.high:.3f}]" in built.markdown
    )


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """Every figure the plotting functions save, by file name (the figure is inspected instead of the PNG)."""
    figures = {}

    def keep(fig, path):
        figures[Path(path).name] = fig
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield figures
    for fig in figures.values():
        plots.plt.close(fig)


def test_a_method_has_one_colour_in_every_figure(captured, tmp_path):
    from matplotlib.colors import to_hex

    data = make_data()
    _write(validate_report({"bootstrap": 50}), data, tmp_path, "colours")
    seen = {}  # method -> colours it was drawn in, over all figures

    for name, fig in captured.items():
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    seen.setdefault(line.get_label(), set()).add((name, to_hex(line.get_color())))
            for container in ax.containers:  # bars (final accuracy) and error bars (cost)
                label = container.get_label()
                if not label or label.startswith("_"):
                    continue
                if hasattr(container, "patches"):  # BarContainer
                    colour = container.patches[0].get_facecolor()
                else:  # ErrorbarContainer: (data line, caps, bars)
                    colour = container.lines[0].get_color()
                seen.setdefault(label, set()).add((name, to_hex(colour)))
    assert {"final_accuracy.png", "curves_main_strong.png", "cost.png", "mechanisms_strong.png"} <= set(captured)
    hacpo_figures = {figure for figure, _ in seen["HACPO"]}
    assert {"final_accuracy.png", "curves_main_strong.png", "curves_ablations_strong.png", "cost.png",
            "mechanisms_strong.png", "reward_strong.png"} <= hacpo_figures  # fmt: skip
    for method, drawn in seen.items():
        assert {colour for _, colour in drawn} == {plots.colour_of(method)}, method
    assert plots.colour_of("HACPO") != plots.colour_of("GSPO×2")
    assert plots.colour_of("HACPO alpha=1") == plots.colour_of("HACPO alpha=1")  # unlisted labels: stable


def test_figure_titles_are_distinct(captured, tmp_path):
    _write(validate_report({"bootstrap": 50}), make_data(), tmp_path, "titles")
    titles = [fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title() for fig in captured.values()]
    assert len(set(titles)) == len(titles), titles
    assert "main methods" in captured["curves_main_strong.png"]._suptitle.get_text()
    assert "HACPO and its ablations" in captured["curves_ablations_strong.png"]._suptitle.get_text()


def test_cost_plot_has_every_evaluation_and_error_bars(captured, tmp_path):
    _write(validate_report({"bootstrap": 50}), make_data(), tmp_path, "cost")
    ax = captured["cost.png"].axes[0]
    hacpo = next(c for c in ax.containers if c.get_label() == "HACPO")
    x = hacpo.lines[0].get_xdata()
    assert list(x) == [0.0, 640.0, 1280.0]  # 64 rollouts per step at steps 0, 10, 20 (not just the final point)
    assert hacpo.has_yerr


def test_mechanism_plots_skip_missing_keys_with_a_note(built, tmp_path):
    assert "- strong: in-window share of cross rows not logged by HACPO −ω" in built.markdown
    assert "![strong mechanisms](plots/mechanisms_strong.png)" in built.markdown
    data = make_data()
    data.curves = data.curves[~data.curves["metric"].str.startswith(("cross/", "train/p_hat"))]
    (tmp_path / "bare").mkdir()
    report = _write(validate_report({"bootstrap": 50}), data, tmp_path / "bare", "bare")
    assert "mechanisms_strong.png" not in report.markdown
    assert "- strong: no run logged ω; that panel is left out" in report.markdown
    assert "- strong: no run logged P̂; that panel is left out" in report.markdown


def test_equivalence_margin_is_a_config_key():
    from hacrl_exp.errors import ConfigError

    assert validate_report({}).equivalence_margin == 0.02
    assert validate_report({"equivalence_margin": 0.05}).equivalence_margin == 0.05
    with pytest.raises(ConfigError, match="equivalence_margin"):
        validate_report({"equivalence_margin": 0.0})


def test_reports_folder_ignored_but_published_reports_kept():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path):
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    assert ignored("reports/my_runs/report.md") and ignored("reports/report/plots/cost.png")
    assert not ignored("reports/paper_table1_tiny/report.md")
    assert not ignored("reports/paper_table1_tiny/plots/cost.png")


def test_signed_numbers_that_round_to_zero_have_no_minus():
    from hacrl_exp.report.text import signed

    assert signed(-1e-18) == "+0.000" and signed(-0.0004) == "+0.000"
    assert signed(-0.0006) == "-0.001" and signed(0.0416) == "+0.042" and signed(float("nan")) == "n/a"


def test_naive_cross_weight_is_the_one_its_objective_applies():
    """A Naive run that logged HACPO's would-be weight (runs before the resolution fix) reads as 1; HACPO's logged
    weight and ω pass through as the mean over steps ≥ 1, then over seeds."""
    import pandas as pd

    from hacrl_exp.report.tables import diagnostics_table

    data = make_data()
    extra = [(r.run_id, step, "cross/weight_mean", 1.25 + 0.5 * r.seed)
             for r in data.runs.itertuples() if r.method in ("Naive", "HACPO") for step in (0, 10, 20)]  # fmt: skip
    data.curves = pd.concat([data.curves, pd.DataFrame(extra, columns=data.curves.columns)], ignore_index=True)
    table = diagnostics_table(data, ["Naive", "HACPO"]).set_index(["agent", "method"])
    assert table.loc[("strong", "Naive"), "cross weight"] == 1.0
    assert table.loc[("strong", "HACPO"), "cross weight"] == pytest.approx(1.25 + 0.5)  # seeds 0, 1, 2
    omega = [1.0 + 0.01 * seed + 0.001 * 15 for seed in (0, 1, 2)]  # steps 10 and 20
    assert table.loc[("weak", "HACPO"), "ω"] == pytest.approx(sum(omega) / 3)
    assert math.isnan(table.loc[("weak", "Naive"), "cross ratio"])  # never logged
