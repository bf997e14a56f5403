"""The MLflow UI as a researcher sees it (tests/ui/ui_check.py in headless Chromium), on a store of two tiny jobs
(HACPO and GSPO) or on $HACRL_UI_STORE. Opt-in (`pytest --run-ui`, or HACRL_RUN_UI=1): it needs the `ui` extra
(playwright) and a Chromium binary ($HACRL_CHROMIUM, default /usr/bin/chromium), and takes minutes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hacrl_exp.config.presets import tiny_overrides
from tests.ui.ui_check import main

pytestmark = pytest.mark.ui


def tiny_store(folder: Path) -> str:
    """Two finished tiny jobs, HACPO and GSPO, in one sqlite store (models logged, as a real run logs them)."""
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.validate import preflight

    store = f"sqlite:///{folder / 'mlflow.db'}"
    for algorithm in ("hacpo", "gspo"):
        overrides = [*tiny_overrides("pair", 2), f"algorithm={algorithm}", f"tracking.uri={store}"]
        train(preflight([*overrides, "trainer.eval_every=1"]), folder / algorithm)
    return store


def test_the_ui_shows_what_the_store_holds(tmp_path):
    pytest.importorskip("playwright", reason='the ui extra: pip install -e ".[ui]"')
    chromium = os.environ.get("HACRL_CHROMIUM", "/usr/bin/chromium")
    if not (Path(chromium).is_file() or shutil.which(chromium)):
        pytest.skip(f"no Chromium at {chromium} (apt-get install chromium, or set HACRL_CHROMIUM)")
    store = os.environ.get("HACRL_UI_STORE") or tiny_store(tmp_path)
    assert main(["--store", store, "--out", str(tmp_path / "shots"), "--chromium", chromium]) == 0
