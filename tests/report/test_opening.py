"""The report's opening on hand-built tables: the bottom line's sentences follow the numbers (ties, "not established",
refuted, costs); the contents' anchors resolve to headings; a superseded report names its successor on line 1, and
laying a published report out again changes none of its numbers."""

import re
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest

from hacrl_exp.report.layout import anchor, headings, unique_anchors
from hacrl_exp.report.opening import bottom_line
from hacrl_exp.report.relayout import main as relayout_main
from hacrl_exp.report.relayout import relayout

REPO = Path(__file__).resolve().parents[2]
COLUMNS = ["agent", "a", "b", "verdict", "seed_delta_mean", "p_holm", "equivalence_margin", "hypothesised_effect"]


def comparisons(rows: list[tuple], old_rules: bool = False) -> pd.DataFrame:
    """A comparisons.csv of mean-column rows (COLUMNS), 10 seeds each; old_rules: without p_tost_holm, as reports
    from before every test of a family was Holm-adjusted."""
    frame = pd.DataFrame(rows, columns=COLUMNS).assign(column="mean", seeds=10, per_seed="0.01 0.02")
    return frame if old_rules else frame.assign(p_tost_holm=0.5)


def accuracy(means: dict[tuple[str, str], float]) -> pd.DataFrame:
    return pd.DataFrame([(a, m, 10, v) for (a, m), v in means.items()], columns=["agent", "method", "seeds", "mean"])


def cost(rows: dict[tuple[str, str], tuple]) -> pd.DataFrame:
    """(agent, method) -> (generated rollouts, updates, trained rows[, process s, backward tokens]); a cost a row
    leaves out is not logged (NaN)."""
    names = ["generated rollouts", "updates", "trained rows", "process s", "backward tokens"]
    cells = [(a, m, *v, *[None] * (len(names) - len(v))) for (a, m), v in rows.items()]
    return pd.DataFrame(cells, columns=["agent", "method", *names])


WEAK = [  # a beat, a match, a not-established claim, a baseline beat
    ("weak", "HACPO", "GSPO", "beat", 0.070, 0.037, 0.016, 0.032),
    ("weak", "HACPO", "Naive", "matched", -0.004, 0.900, 0.050, 0.101),
    ("weak", "HACPO", "GSPO×2", "not established", 0.033, 0.066, 0.017, 0.033),
    ("weak", "Naive", "GSPO", "beat", 0.074, 0.035, 0.034, None),
]
STRONG = [  # nothing holds: one refuted, two not established
    ("strong", "HACPO", "GSPO", "refuted", -0.016, 1.000, 0.016, 0.032),
    ("strong", "HACPO", "Naive", "not established", -0.037, 0.066, 0.050, 0.101),
    ("strong", "Naive", "GSPO", "not established", 0.021, 0.316, 0.034, None),
]
MEANS = {
    ("weak", "base (step 0)"): 0.279, ("weak", "GSPO"): 0.438, ("weak", "GSPO×2"): 0.475,
    ("weak", "Naive"): 0.512, ("weak", "HACPO"): 0.508,
    # GSPO and Naive print as 0.611: a tie, whatever the fourth decimal says
    ("strong", "base (step 0)"): 0.441, ("strong", "GSPO"): 0.6112, ("strong", "Naive"): 0.6108,
    ("strong", "HACPO"): 0.574,
}  # fmt: skip
COSTS = {  # weak: HACPO's compute is closest to GSPO×2's (process s 35.2 / 33.0), not GSPO's; strong: not logged
    ("weak", "GSPO"): (10240, 160, 5000, 17.0, 124_000), ("weak", "GSPO×2"): (20480, 320, 12400, 33.0, 365_000),
    ("weak", "Naive"): (10240, 320, 15700, 34.6, 755_000), ("weak", "HACPO"): (10240, 320, 15500, 35.2, 756_000),
    ("strong", "GSPO"): (10240, 160, 4600), ("strong", "Naive"): (10240, 320, 15700),
    ("strong", "HACPO"): (10240, 320, 14300),
}  # fmt: skip


def test_the_bottom_line_names_the_best_method_what_holds_and_the_costs_held_equal():
    strong, weak = bottom_line(comparisons(WEAK + STRONG), accuracy(MEANS), cost(COSTS))
    assert weak == (
        "- **weak.** Naive ended highest, at 0.512 mean final held-out accuracy over 10 seeds (then HACPO 0.508, "
        "GSPO×2 0.475; step 0: 0.279); it is established above GSPO. "
        "What holds (3 of 4 comparisons, Holm-adjusted, across 10 seeds): HACPO above GSPO (Δ +0.070); HACPO "
        "within ±0.050 of Naive (Δ -0.004); Naive above GSPO (Δ +0.074); 1 is not established. "
        "Costs held equal (of generated rollouts, updates and trained rows): generated rollouts and updates for "
        "HACPO vs Naive (HACPO 0.99× trained rows); generated rollouts for HACPO vs GSPO (HACPO 3.10× trained rows, "
        "2.00× updates) and Naive vs GSPO (Naive 3.14× trained rows, 2.00× updates). "
        "Closest to equal compute, of the baselines that train alone: HACPO vs GSPO×2, at 1.07× process s (2.07× "
        "backward tokens): not established, Δ +0.033."
    )
    assert strong == (
        "- **strong.** GSPO and Naive tied highest, at 0.611 mean final held-out accuracy over 10 seeds (then HACPO "
        "0.574; step 0: 0.441); none of their leads is established. "
        "No difference holds (3 comparisons, Holm-adjusted, across 10 seeds); refuted at the hypothesised size: "
        "HACPO over GSPO by +0.032; 2 are not established. "
        "With nothing established there is no cost to weigh; nearest to a difference is HACPO vs Naive (Δ -0.037, "
        "Holm p 0.066), at equal generated rollouts and updates (HACPO 0.91× trained rows). "
        "Compute (process s and backward tokens) was not logged by these runs."
    )


def test_the_bottom_line_of_an_old_report_says_its_rules_and_the_costs_it_did_not_log():
    """A report from before the cost keys and the current rules: only generated rollouts; nothing established."""
    rows = [("a", "HACPO", "GSPO", "not established", 0.01, 1.0, 0.02, None),
            ("a", "Naive", "GSPO", "not established", 0.02, 0.5, 0.02, None)]  # fmt: skip
    spent = cost({("a", "GSPO"): (10240, None, None), ("a", "Naive"): (10240, None, None),
                  ("a", "HACPO"): (10240, None, None)})  # fmt: skip
    means = accuracy({("a", "GSPO"): 0.40, ("a", "Naive"): 0.42, ("a", "HACPO"): 0.41})
    (line,) = bottom_line(comparisons(rows, old_rules=True), means, spent)
    assert line == (
        "- **a.** Naive ended highest, at 0.420 mean final held-out accuracy over 10 seeds (then HACPO 0.410, GSPO "
        "0.400); none of its leads is established. No difference holds (2 comparisons, across 10 seeds, under the "
        "rules this report was built with). With nothing established there is no cost to weigh; nearest to a "
        "difference is Naive vs GSPO (Δ +0.020, Holm p 0.500), at equal generated rollouts; updates and trained rows "
        "not logged by these runs. Compute (process s and backward tokens) was not logged by these runs."
    )


def test_anchors_are_githubs_heading_ids():
    assert anchor("Table 1: final held-out accuracy") == "table-1-final-held-out-accuracy"
    assert anchor("The paper's claims as hypotheses") == "the-papers-claims-as-hypotheses"
    assert anchor("HACPO −Adv (paper Table 2, HACPO − Adv: x)") == "hacpo-adv-paper-table-2-hacpo--adv-x"
    assert anchor("α response") == "α-response"
    assert unique_anchors(["Costs", "Costs", "Costs"]) == ["costs", "costs-1", "costs-2"]


def contents_links(markdown: str) -> list[str]:
    section = markdown.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"\]\(#([^)]+)\)", section)


def test_every_contents_link_resolves_to_a_heading_in_the_markdown_and_the_html(built):
    md, html = built.markdown, (built.folder / "report.html").read_text()
    links = contents_links(md)
    found = headings(md)
    ids = dict(zip(unique_anchors([text for _, text in found]), found))
    assert len(links) >= 15 and "regime" in links and "table-1-final-held-out-accuracy" in links
    for link in links:
        assert ids[link][0] in (2, 3), link  # a ## or ### heading of the page
        assert re.search(rf'<h[23] id="{re.escape(link)}">', html), link
    assert len(set(re.findall(r'<h\d id="([^"]+)"', html))) == len(found)  # the page's ids are unique


def published(tmp_path: Path, name: str) -> Path:
    """A copy of reports/<name> without its plots (the relayout draws the one it needs)."""
    source, copy = REPO / "reports" / name, tmp_path / name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.png"))
    return copy


@pytest.mark.parametrize("name", ["paper_table1_tiny_10seeds", "paper_table1_tiny"])
def test_laying_a_published_report_out_again_reproduces_it_and_keeps_its_numbers(tmp_path, name):
    """The published report.md is what relayout gives for its own files (so it is in the current layout, and a
    second relayout changes nothing), and its tables are not touched."""
    folder = published(tmp_path, name)
    tables = {p.name: p.read_bytes() for p in (folder / "tables").iterdir()}
    before = (folder / "report.md").read_text()
    assert relayout(folder) == before
    assert {p.name: p.read_bytes() for p in (folder / "tables").iterdir()} == tables
    png = (folder / "plots" / "forest_claims.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])  # the PNG's IHDR
    assert width == 990 and height <= 660  # the claims block fits one 1440×900 screen under its heading


def test_a_superseded_report_names_its_successor_on_its_first_line(tmp_path):
    old, new = published(tmp_path, "paper_gap_tiny_2125251"), tmp_path / "paper_gap_tiny"
    (old / "superseded.json").unlink(missing_ok=True)
    new.mkdir()
    (new / "report.md").write_text("# Report: paper_gap_tiny\n")
    assert relayout_main([str(old), "--superseded-by", "paper_gap_tiny", "--reason", "the 8-method grid"]) == 0
    md = (old / "report.md").read_text()
    assert md.splitlines()[0] == "# Report: paper_gap_tiny_2125251 (superseded by paper_gap_tiny)"
    assert md.splitlines()[2].startswith("> **Superseded** by [`paper_gap_tiny`](../paper_gap_tiny/report.md): the "
                                         "8-method grid. Kept as published")  # fmt: skip
    assert (old / "headline.md").read_text().startswith("> **Superseded** by [`paper_gap_tiny`]")
    assert 'href="../paper_gap_tiny/report.html"' in (old / "report.html").read_text()  # the page links the page
    assert relayout(old) == md  # superseded.json keeps it; the banner is not doubled
    assert (old / "headline.md").read_text().count("**Superseded**") == 1
    for wrong in ([str(old), "--superseded-by", "no_such_report"], [str(tmp_path / "not_a_report")]):
        with pytest.raises(SystemExit) as exit_:
            relayout_main(wrong)
        assert exit_.value.code == 2


def test_a_method_that_fell_short_is_below_and_the_best_is_established_above_it():
    rows = [("a", "HACPO", "Naive", "fell short of", -0.067, 0.04, 0.05, 0.101),
            ("a", "HACPO", "GSPO", "not established", 0.01, 0.9, 0.016, 0.032)]  # fmt: skip
    means = accuracy({("a", "GSPO"): 0.20, ("a", "Naive"): 0.23, ("a", "HACPO"): 0.165})
    spent = cost({("a", "GSPO"): (100, 10, 50), ("a", "Naive"): (100, 20, 100), ("a", "HACPO"): (100, 20, 100)})
    (line,) = bottom_line(comparisons(rows), means, spent)
    assert "Naive ended highest, at 0.230 mean final held-out accuracy over 10 seeds (then GSPO 0.200, HACPO " \
           "0.165); it is established above HACPO." in line  # fmt: skip
    assert "What holds (1 of 2 comparisons, Holm-adjusted, across 10 seeds): HACPO below Naive (Δ -0.067); 1 is " \
           "not established. Costs held equal (of generated rollouts, updates and trained rows): generated " \
           "rollouts, trained rows and updates for HACPO vs Naive." in line  # fmt: skip
