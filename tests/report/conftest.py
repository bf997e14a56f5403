"""Shared fixtures of the report tests: one synthetic 3-seed report, its figures kept in memory (no PNG written), and
the 10-seed one, written in full (test_inference reads its figures, test_rederive its tables)."""

from pathlib import Path

import pytest

from hacrl_exp.config.report_schema import validate_report
from hacrl_exp.report import plots
from hacrl_exp.report.build import _write
from tests.report.synthetic import TEN_SEEDS, make_data, ten_seed_accuracy

SETTINGS = {"bootstrap": 100, "power_draws": 100}


def capture(run):
    """run() with every figure the plotting functions save kept by file name instead of written to a PNG."""
    figures = {}

    def keep(fig, path):
        figures[Path(path).name] = fig
        return path

    original, plots._save = plots._save, keep
    try:
        return run(), figures
    finally:
        plots._save = original


@pytest.fixture(scope="session")
def layout(tmp_path_factory):
    """The 3-seed synthetic report (tests/report/synthetic.py) and its figures by file name."""
    out = tmp_path_factory.mktemp("synthetic_report")
    report, figures = capture(lambda: _write(validate_report(SETTINGS), make_data(), out, "synthetic"))
    yield report, figures
    for fig in figures.values():
        plots.plt.close(fig)


@pytest.fixture(scope="session")
def built(layout):
    return layout[0]


@pytest.fixture(scope="session")
def captured(layout):
    return layout[1]


@pytest.fixture(scope="session")
def ten(tmp_path_factory):
    """The 10-seed synthetic report (tests/report/synthetic.py), where the rules reach verdicts; read-only."""
    out = tmp_path_factory.mktemp("ten_seed_report")
    return _write(validate_report(SETTINGS), make_data(ten_seed_accuracy(), TEN_SEEDS), out, "ten")
