"""Test-wide settings: offline hub, quiet progress bars, and caches/stores in temporary folders."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import parallel
from tests.cli import clear_hydra

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""pytest-xdist's worker id (gw0, gw1, ...) in a worker process, else None."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns numprocesses into workers
def pytest_cmdline_main(config):
    """A plain `pytest` (testpaths, any -m or -k) runs on pytest-xdist workers: tests/parallel.py."""
    if WORKER is not None or not config.pluginmanager.hasplugin("xdist") or config.option.usepdb:
        return
    if config.option.numprocesses is None and config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        config.option.numprocesses = parallel.WORKERS


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: absent under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(tryfirst=True)  # before -m selects by mark
def pytest_collection_modifyitems(config, items):
    """The `slow` marks of tests/parallel.py; in a pytest-xdist worker, the longest tests first."""
    for item in items:
        if parallel.is_slow(item.nodeid, item.fixturenames):
            item.add_marker(pytest.mark.slow)
    if WORKER is not None:
        items.sort(key=lambda item: parallel.order(item.nodeid, item.get_closest_marker("slow") is not None))


@pytest.fixture(scope="session", autouse=True)
def _session_warm_start_cache(tmp_path_factory):
    """Warm starts share one cache per session (they are pure), set before any fixture of any scope builds an agent:
    the user's ~/.cache/hacrl_exp may hold entries that another checkout's code wrote under the same key. Under
    pytest-xdist every worker's <basetemp>/warm_start_cache links to one folder beside them, so an entry is trained
    once per session (a worker asking for an entry another one is building waits on its lock, agents/warmstart.py)."""
    cache = tmp_path_factory.getbasetemp() / "warm_start_cache"
    if WORKER is not None:
        shared = tmp_path_factory.getbasetemp().parent / "warm_start_cache"
        shared.mkdir(exist_ok=True)
        cache.symlink_to(shared, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HACRL_CACHE_DIR", str(cache))
        yield


@pytest.fixture(scope="session", autouse=True)
def _torch_threads_per_worker():
    """In a pytest-xdist worker torch computes on the worker's share of the cores, and so do the processes its tests
    start: two workers of two threads each on two cores would only contend."""
    if WORKER is None:
        yield
        return
    import torch

    threads = parallel.worker_threads()
    torch.set_num_threads(threads)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", str(threads))
        yield


@pytest.fixture(autouse=True)
def _outside_hydra():
    """Each test starts outside any Hydra job: an earlier test's in-process job (a Hydra main run in this process)
    leaves Hydra's global config set, and open_job would name this test's runs after its overrides."""
    clear_hydra()


@pytest.fixture(autouse=True)
def _isolated_stores(tmp_path_factory, monkeypatch):
    """Each test gets its own MLflow store. Once MLflow is imported, new sqlite stores in this process are copies of
    the session's template (hacrl_exp/tracking/store_template.py, in the session's $HACRL_CACHE_DIR: seconds saved
    per store), as they are in the entry points the tests start."""
    store = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    if "mlflow" in sys.modules:  # an earlier test's run set mlflow's process-wide URI, which outranks the variable
        sys.modules["mlflow"].set_tracking_uri(uri)
        from hacrl_exp.tracking import store_template

        store_template.install()


DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
"""../shared/data relative to the repository root; tests that need it skip when it is absent."""


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "math500.jsonl").is_file():
        pytest.skip(f"benchmark data not found at {DATA_DIR} (../shared/data relative to the repo root)")
    return DATA_DIR


@pytest.fixture(scope="session")
def grader():
    """One warm grader for the whole session (spawning workers costs ~1-2 s)."""
    from hacrl_exp.rewards import Grader

    with Grader(timeout_s=5.0, workers=1) as g:
        g.start()
        yield g


REPO = Path(__file__).resolve().parents[1]
IGNORED_PARTS = {".pytest_cache", "__pycache__", ".hypothesis", ".venv", ".ci-venv", ".ruff_cache"}


def checkout_files() -> set[str] | None:
    """Untracked and ignored paths of the checkout (git's view), without caches; None outside git."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    paths = {line[3:] for line in out.stdout.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not IGNORED_PARTS & set(Path(p).parts) and ".egg-info" not in p}


@pytest.fixture(scope="session", autouse=True)
def _checkout_unchanged():
    """Tests write only to temporary folders: fail the session when the checkout gained files (outputs/, mlruns/,
    mlflow.db, multirun/, ...) while it ran."""
    before = checkout_files()
    yield
    after = checkout_files()
    if before is not None and after is not None and (new := sorted(after - before)):
        pytest.fail(f"the test session wrote into the checkout {REPO}: {new[:20]}; write under tmp_path instead")
