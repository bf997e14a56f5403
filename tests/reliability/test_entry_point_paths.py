"""Entry points beyond run: one path and name policy (issue 40).

Each case runs an entry point's `main` on a real command line (tests/cli.py's run_cli) against real files, folders,
symlinks and fifos: one line on stderr naming the key, exit code 2, and nothing under the test's folder written,
replaced or deleted. The policy lives in hacrl_exp/paths.py (`check_name`, `check_output`, `open_no_follow`,
`private_folder`, `output_error`) and tracking/store.py (`parse_store_uri`); docs/reliability.md ("Entry points
beyond run: paths and names") lists the cases.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hacrl_exp.errors import ConfigError, OutputError
from hacrl_exp.paths import check_name, open_no_follow
from hacrl_exp.report.folder import MARKER, write_folder
from tests.cli import run_cli
from tests.e2e.tiny import tiny_overrides
from tests.reliability.filesystems import fill, tmpfs


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder` (not following symlinks): a file's bytes, a symlink's target, a folder or fifo."""
    found: dict[str, object] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                found[str(path)] = path.read_bytes()
            else:
                found[str(path)] = stat.S_IFMT(mode)
    return found


def refuses(module: str, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """`python -m module args` in `cwd`: asserts exit 2, one stderr line without a traceback, and `cwd` exactly as it
    was (nothing written, replaced or deleted); returns the line."""
    before = snapshot(cwd)
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | (env or {})
    result = run_cli(module, args, cwd=cwd, env=environment)
    err = result.stderr.strip()
    assert result.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert snapshot(cwd) == before
    return err


@pytest.fixture
def reports(tmp_path) -> Path:
    """<tmp>/reports holding a report (`other`, with its marker) and a folder of the user's (`keep`); a folder
    outside it (`victim`); a symlink to the reports folder."""
    for folder, files in {
        "reports/other": ["report.md", MARKER],
        "reports/keep": ["notes.txt"],
        "victim": ["a"],
    }.items():
        (tmp_path / folder).mkdir(parents=True)
        for name in files:
            (tmp_path / folder / name).write_text(name)
    (tmp_path / "reports_link").symlink_to(tmp_path / "reports")
    return tmp_path / "reports"


REPORT_CASES = {  # arguments -> the start of the one line
    "grid tag .": (["tags.grid=."], "ConfigError: tags.grid='.' is '.', which names a folder that exists"),
    "grid tag ../victim": (["tags.grid=../victim"], "ConfigError: tags.grid='../victim' holds a path separator"),
    "name ..": (["name=.."], "ConfigError: name='..' is '..'"),
    "name with a newline": (["name='a\nb'"], "ConfigError: name='a\\nb' holds a control character"),
    "experiment ..": (["experiments=[..]"], "ConfigError: experiments[0]='..' is '..'"),
    "a folder the report did not make": (["name=keep"], "ConfigError: name: reports/keep exists and is not a report"),
    "output_root a symlink": (["output_root=reports_link", "name=new"], "ConfigError: output_root=reports_link is a "),
    "hydra.job.name ../../x": (["hydra.job.name=../../x"], "ConfigError: hydra.job.name='../../x' holds a path sep"),
    "store URI with ?": (["name=new", "uri=sqlite:///{tmp}/p?x/mlflow.db"], "ConfigError: uri=sqlite:///{tmp}/p?x/"),
    "α studies' storage with ?": (
        ["name=new", "studies.storage=sqlite:///{tmp}/p?x/optuna.db"],
        "ConfigError: studies.storage=sqlite:///{tmp}/p?x/optuna.db: the URI has a query",
    ),
    "YAML bomb in --config-dir": (["--config-dir", "{tmp}/bomb", "name=new"], "ConfigError: {tmp}/bomb/x.yaml: "),
}


@pytest.mark.parametrize("case", REPORT_CASES)
def test_report_names_and_folders_are_checked_before_any_run_is_read(case, reports, tmp_path):
    args, line = REPORT_CASES[case]
    (tmp_path / "bomb").mkdir()
    (tmp_path / "bomb" / "x.yaml").write_text("a: &a [*a]\n")  # a recursive alias
    args = [a.format(tmp=tmp_path) for a in args]
    args += [] if any(a.startswith("output_root=") for a in args) else ["output_root=reports"]
    assert refuses("hacrl_exp.report", args, tmp_path).startswith(line.format(tmp=tmp_path))


def test_a_report_replaces_only_a_folder_it_made(tmp_path):
    """The marker: a report's own folder is replaced by the next one of that name; an older report's folder (its
    files and nothing else) too; a folder of the user's is refused, byte for byte as it was."""
    target = tmp_path / "grid"
    for text in ("first", "second"):
        write_folder(target, lambda work, text=text: (work / "report.md").write_text(text))
        assert (target / "report.md").read_text() == text and (target / MARKER).is_file()
    (target / MARKER).unlink()  # a report written before the marker existed
    write_folder(target, lambda work: (work / "report.md").write_text("third"))
    assert (target / "report.md").read_text() == "third"
    (target / MARKER).unlink()
    (target / "thesis.tex").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match="is not a report folder"):
        write_folder(target, lambda work: (work / "report.md").write_text("fourth"))
    assert snapshot(tmp_path) == before  # and no temporary folder left beside it


def test_a_full_disk_under_a_report_is_one_line_naming_the_path(tmp_path):
    """Before anything is read: a report folder on a disk with under 1 MiB free. While writing: the file that did not
    fit, the old report left as it was."""
    with tmpfs(tmp_path / "disk", 1024) as disk:
        (disk / "reports").mkdir()
        fill(disk)
        line = refuses("hacrl_exp.report", ["output_root=disk/reports", "name=grid"], tmp_path)
        assert line.startswith("OutputError: disk full: disk/reports has ") and "a report needs about" in line
        (disk / "filler").unlink()
        write_folder(disk / "reports" / "grid", lambda work: (work / "report.md").write_text("old"))
        fill(disk, leave=64 << 10)
        with pytest.raises(OutputError) as info:
            write_folder(disk / "reports" / "grid", lambda work: (work / "plot.png").write_bytes(b"x" * (1 << 20)))
        assert str(info.value).startswith(f"disk full: writing {disk}/reports/grid failed with ")
        assert (disk / "reports" / "grid" / "report.md").read_text() == "old"
        assert [p.name for p in (disk / "reports").iterdir()] == ["grid"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"not a database", "not a readable sqlite database"), (b"", "holds no MLflow tables")],
    ids=["not sqlite", "an empty file"],
)
def test_ui_refuses_a_file_that_is_not_an_mlflow_store(content, problem, tmp_path):
    """Found by the closing hostile pass: a file that is not sqlite gave a sqlalchemy traceback; an empty one (a valid
    empty sqlite database) started a server that wrote MLflow's schema into it. Now one line, the file untouched."""
    (tmp_path / "m.db").write_bytes(content)
    line = refuses("hacrl_exp.ui", ["--store", f"sqlite:///{tmp_path}/m.db"], tmp_path)
    assert line.startswith(f"ConfigError: --store sqlite:///{tmp_path}/m.db: {problem}"), line


@pytest.mark.parametrize("how", ["--store", "MLFLOW_TRACKING_URI"])
def test_ui_refuses_a_store_uri_mlflow_reads_as_another_store(how, tmp_path):
    """`sqlite:///…/p?x/mlflow.db` is the database …/p to MLflow: ui served it, and wrote its saved views into it."""
    with sqlite3.connect(tmp_path / "p") as store:
        store.execute("CREATE TABLE runs (run_uuid TEXT)")
    (tmp_path / "p?x").mkdir()
    (tmp_path / "p?x" / "mlflow.db").write_bytes(b"")
    uri = f"sqlite:///{tmp_path}/p?x/mlflow.db"
    args, env = (["--store", uri], None) if how == "--store" else ([], {"MLFLOW_TRACKING_URI": uri})
    with socket.socket() as taken:  # a port in use: were the URI let through, the ui would stop there, not serve
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        line = refuses("hacrl_exp.ui", [*args, "--port", str(taken.getsockname()[1])], tmp_path, env)
    named = f"--store {uri}" if how == "--store" else f"MLFLOW_TRACKING_URI={uri}"
    assert line.startswith(f"ConfigError: {named}: the URI has a query") and f"MLflow would open {tmp_path}/p" in line


def test_ui_writes_its_server_log_into_a_private_folder(tmp_path):
    """The log was /tmp/hacrl_ui_mlflow_<port>.log, opened through a symlink planted there (truncating its target)."""
    import tempfile

    from mlflow.tracking import MlflowClient

    port = 1024 + os.getpid() % 20000
    planted = Path(tempfile.gettempdir()) / f"hacrl_ui_mlflow_{port}.log"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(store).search_experiments()  # a store with MLflow's tables (ui refuses a file without them)
    command = [sys.executable, "-m", "hacrl_exp.ui", "--store", store, "--port", str(port), "--reports", str(tmp_path)]
    ui = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = ""
        while not line.startswith("starting mlflow server"):
            line = ui.stderr.readline()
            assert line, "python -m hacrl_exp.ui ended before starting its server"
        log = Path(line.rsplit("log ", 1)[1].rstrip(")\n"))
        folder = os.lstat(log.parent)
        assert log.parent.name.startswith("hacrl_ui_") and stat.S_IMODE(folder.st_mode) == 0o700
        assert not os.path.islink(log) and folder.st_uid == os.getuid()
    finally:
        ui.send_signal(signal.SIGTERM)  # at once: this stop once came while the server was being started, and left it
        ui.wait(timeout=60)
        planted.unlink(missing_ok=True)
    assert victim.read_text() == "precious" and not log.parent.exists()  # a clean stop removes the log and folder
    assert servers_on(port) == []  # the mlflow server (its own session) and its workers were stopped too


def servers_on(port: int, wait_s: float = 10.0) -> list[str]:
    """Command lines of the processes that still serve `--port port` after up to `wait_s` s (workers end after their
    group leader, which `hacrl_exp.ui.stop` waits for)."""
    import psutil

    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if "--port" in cmdline and str(port) in cmdline and "hacrl_exp.ui" not in cmdline:
                found.append(" ".join(cmdline))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    return [*tiny_overrides(), f"hydra.run.dir={tmp_path}/hydra", "tracking.backend=none", *extra]


def lock_symlink(run: Path) -> None:
    (run.parent / "victim").write_text("precious")
    (run / ".lock").symlink_to(run.parent / "victim")


RUN_CASES = {  # how the run folder (<tmp>/run) is made hostile -> the start of the one line
    ".lock a symlink": (lock_symlink, [], "OutputError: {tmp}/run/.lock is a symlink (to {tmp}/victim)"),
    ".lock a fifo": (lambda run: os.mkfifo(run / ".lock"), [], "OutputError: {tmp}/run/.lock is a fifo"),
    "checkpoints a symlink": (
        lambda run: (run / "checkpoints").symlink_to(run.parent / "other"),
        ["trainer.resume={tmp}/run"],
        "ConfigError: trainer.resume={tmp}/run: {tmp}/run/checkpoints is a symlink (to {tmp}/other)",
    ),
    "a step folder a symlink": (
        lambda run: ((run / "checkpoints").mkdir(), (run / "checkpoints" / "step_000002").symlink_to(run.parent)),
        ["trainer.resume={tmp}/run"],
        "ConfigError: trainer.resume={tmp}/run: {tmp}/run/checkpoints/step_000002 is a symlink",
    ),
    "the step folder given a symlink": (
        lambda run: ((run / "checkpoints").mkdir(), (run / "checkpoints" / "step_000002").symlink_to(run.parent)),
        ["trainer.resume={tmp}/run/checkpoints/step_000002"],
        "ConfigError: trainer.resume={tmp}/run/checkpoints/step_000002: {tmp}/run/checkpoints/step_000002 is a sym",
    ),
    "hydra.job.name ../../x": (lambda run: None, ["hydra.job.name=../../x"], "ConfigError: hydra.job.name='../../x'"),
    "a sweep's storage with ?": (
        lambda run: None,
        ["-m", "+hparams_search=alpha_pair_quick", "hydra.sweeper.storage=sqlite:///{tmp}/p?x/optuna.db"],
        "ConfigError: hydra.sweeper.storage=sqlite:///{tmp}/p?x/optuna.db: the URI has a query",
    ),
    "a sweep's folder a symlink": (
        lambda run: (run.parent / "link").symlink_to(run.parent / "other"),
        ["-m", "+hparams_search=alpha_pair_quick", "hydra.sweep.dir={tmp}/link"],
        "ConfigError: hydra.sweep.dir={tmp}/link is a symlink (to {tmp}/other)",
    ),
    "a sweep's output_dir a symlink": (
        lambda run: (run.parent / "link").symlink_to(run.parent / "other"),
        ["-m", "+hparams_search=alpha_pair_quick", "hydra.sweeper.output_dir={tmp}/link"],
        "ConfigError: hydra.sweeper.output_dir={tmp}/link is a symlink (to {tmp}/other)",
    ),
    "a sweep's study name ..": (
        lambda run: None,
        ["-m", "+hparams_search=alpha_pair_quick", "hydra.sweeper.study_name=.."],
        "ConfigError: hydra.sweeper.study_name='..' is '..'",
    ),
}


@pytest.mark.parametrize("case", RUN_CASES)
def test_run_folder_locks_and_checkpoints_are_never_followed(case, tmp_path):
    make, extra, line = RUN_CASES[case]
    (tmp_path / "run").mkdir()
    (tmp_path / "other").mkdir()
    make(tmp_path / "run")
    extra = [e.format(tmp=tmp_path) for e in extra]
    output = [] if any(e.startswith("trainer.resume=") for e in extra) else [f"trainer.output_dir={tmp_path}/run"]
    flags = [e for e in extra if e.startswith("-")]
    args = flags + run_args(tmp_path, *output, *(e for e in extra if not e.startswith("-")))
    assert refuses("hacrl_exp.run", args, tmp_path).startswith(line.format(tmp=tmp_path))


EVALUATE_CASES = {
    "hydra.job.name ..": ("hydra.job.name=..", "ConfigError: hydra.job.name='..' is '..'"),
    "Hydra's folder under a file": ("hydra.run.dir=afile/x", "ConfigError: hydra.run.dir=afile/x: "),
    "Hydra's folder a symlink": ("hydra.run.dir=link", "ConfigError: hydra.run.dir=link is a symlink"),
}


@pytest.mark.parametrize("case", EVALUATE_CASES)
def test_evaluate_checks_hydra_names_and_folders(case, tmp_path):
    """Evaluate's job folder (hydra.run.dir: .hydra/ and its log) was not checked: a file on the way was a traceback
    once the checkpoints were scored; a symlink was followed."""
    override, line = EVALUATE_CASES[case]
    (tmp_path / "afile").write_text("a file")
    (tmp_path / "link").symlink_to(tmp_path / "afile")
    args = [f"checkpoints=[{tmp_path / 'run'}]", "benchmarks=[math500]", override]
    assert refuses("hacrl_exp.evaluate", args, tmp_path).startswith(line)


def test_rehearse_refuses_a_symlinked_folder(tmp_path):
    """rehearsal.output_dir through a symlink: the rehearsal wrote into the link's target."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    line = refuses("hacrl_exp.rehearse", ["experiment=paper_qwen3_4b_8b", "rehearsal.output_dir=link"], tmp_path)
    assert line.startswith("ConfigError: rehearsal.output_dir=link is a symlink (to ")


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "a/b", "a\\b", "a\nb", "x" * 256])
def test_one_name_check_for_every_name(name):
    with pytest.raises(ConfigError, match=r"^tags\.grid="):
        check_name(name, "tags.grid")


@pytest.mark.parametrize("name", ["paper_table1_tiny", "alpha.v2", "grid-1", "α_sweep"])
def test_plain_names_pass(name):
    assert check_name(name, "name") == name


def test_the_warm_start_cache_lock_is_never_followed(tmp_path):
    from hacrl_exp.agents.warmstart import _entry_lock

    (tmp_path / "victim").write_text("precious")
    (tmp_path / ".0123456789abcdef.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(OutputError, match=r"\.lock is a symlink"):
        with _entry_lock(tmp_path / ".0123456789abcdef.lock"):
            pass
    fd = open_no_follow(tmp_path / "plain.lock", os.O_RDWR | os.O_CREAT)  # a plain lock file is made and opened
    os.close(fd)
    assert (tmp_path / "victim").read_text() == "precious"


def test_a_full_warm_start_cache_is_one_line_naming_the_cache(tmp_path):
    """The warm start's save failed inside the run, whose handler named the run folder; now the cache's own file."""
    from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer
    from hacrl_exp.agents.warmstart import warm_start_cached
    from hacrl_exp.tasks.arithmetic import ALPHABET, ArithmeticTask

    task = ArithmeticTask(eval_per_tier=10)
    tokenizer = build_tokenizer("char", ALPHABET)
    build = lambda: (build_tiny_model("opt", tokenizer, hidden_size=32, num_layers=2, num_heads=4), tokenizer)  # noqa: E731
    with tmpfs(tmp_path / "cache", 256) as cache:
        fill(cache, leave=16 << 10)  # room for the lock file, not for the model's weights
        with pytest.raises(OutputError) as info:
            warm_start_cached(build, lambda: task.supervised_examples(32), cache, {"full": 1}, 1, 8, progress=False)
    line = str(info.value)
    assert line.startswith(f"disk full: writing {cache}/") and "give another trainer.cache_dir" in line, line


@pytest.mark.parametrize("planted", ["rederived_claims.md", ".rederived_claims.md.partial"])
def test_rederive_writes_through_no_symlink(planted, tmp_path):
    """`python -m hacrl_exp.report.rederive --write` wrote `.rederived_claims.md.partial` (a predictable name) with a
    plain open, through a symlink planted there, and renamed it over whatever `rederived_claims.md` was."""
    from hacrl_exp.repo import REPO_ROOT

    folder = Path(shutil.copytree(REPO_ROOT / "reports" / "paper_table1_tiny", tmp_path / "report"))
    (tmp_path / "victim").write_text("precious")
    (folder / planted).symlink_to(tmp_path / "victim")
    result = run_cli("hacrl_exp.report.rederive", [folder, "--write", "--power-draws", "0"], cwd=tmp_path)
    assert (tmp_path / "victim").read_text() == "precious" and os.path.islink(folder / planted)
    if planted == "rederived_claims.md":  # the file to replace is a symlink: one line, nothing replaced
        err = result.stderr.strip()
        assert result.returncode == 2 and len(err.splitlines()) == 1, err
        assert err == f"OutputError: {folder / planted} is a symlink; only a regular file is replaced"
    else:  # a fresh temporary name (O_EXCL) is written instead, and the claims land in the real file
        assert result.returncode == 0 and "# " in (folder / "rederived_claims.md").read_text()
