"""The MLflow UI and the reports as a researcher sees them on a first visit (tests/ui/ui_check.py in headless
Chromium at 1440×900), on a store of two tiny jobs (HACPO and GSPO on one setting) and a report built from it, or on
$HACRL_UI_STORE. It runs in CI (`.ci/run` installs Chromium); it skips with one line only where no browser can be
had: no playwright, or no Chromium binary ($HACRL_CHROMIUM, default /usr/bin/chromium)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hacrl_exp.config.presets import tiny_overrides

pytestmark = pytest.mark.ui


def chromium() -> str:
    """The Chromium binary to drive; skips the test (one line) when there is none, or no playwright to drive it."""
    pytest.importorskip("playwright", reason='no playwright: pip install -e ".[dev]"')
    binary = os.environ.get("HACRL_CHROMIUM", "/usr/bin/chromium")
    if not (Path(binary).is_file() or shutil.which(binary)):
        pytest.skip(f"no Chromium at {binary} (apt-get install chromium, or set HACRL_CHROMIUM)")
    return binary


@pytest.fixture(scope="session")
def ui_store(tmp_path_factory) -> tuple[str, Path]:
    """Two finished tiny jobs, HACPO and GSPO (2 steps, one setting, models logged as a real run logs them) in one
    sqlite store, and a folder holding the report built from them: (store URI, reports folder). Built once."""
    from hacrl_exp.config.report_schema import validate_report
    from hacrl_exp.report.build import make_report
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.validate import preflight

    if os.environ.get("HACRL_UI_STORE"):
        return os.environ["HACRL_UI_STORE"], None
    folder = tmp_path_factory.mktemp("ui_store")
    store = f"sqlite:///{folder / 'mlflow.db'}"
    for algorithm in ("hacpo", "gspo"):
        overrides = [*tiny_overrides("pair", 2), f"algorithm={algorithm}", f"tracking.uri={store}"]
        train(preflight([*overrides, "trainer.eval_every=1"]), folder / algorithm)
    report = {"name": "tiny", "output_root": str(folder / "reports"), "uri": store, "bootstrap": 200,
              "power_draws": 0, "log_to_mlflow": False}  # fmt: skip
    make_report(validate_report(report))
    return store, folder / "reports"


def test_the_ui_shows_what_the_store_holds(ui_store, tmp_path):
    binary = chromium()
    from tests.ui.ui_check import main

    store, reports = ui_store
    argv = ["--store", store, "--out", str(tmp_path / "shots"), "--chromium", binary]
    assert main(argv + (["--reports", str(reports)] if reports else [])) == 0
