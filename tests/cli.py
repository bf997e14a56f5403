"""`run_cli`: an entry point's command line run in the test's own process, as `python -m <module> <args>` would run
it, without paying the interpreter start and the imports of torch, transformers and MLflow (3-6 s a call).

It returns what `subprocess.run(..., capture_output=True, text=True)` would: the exit code (main's return value, or
SystemExit's code; an uncaught exception is exit code 1 with its traceback on stderr, as Python prints it), stdout
and stderr. The process-wide state an entry point may change is put back afterwards: os.environ, the working folder,
sys.argv, the root logger's handlers and level (Hydra's job logging), signal handlers, torch's thread count, MLflow's
tracking URI and active runs, Hydra's global state. MLflow's tracking URI starts unset, as in a new process, so the
store is $MLFLOW_TRACKING_URI of `env` (or the test's).

Tests whose subject is the process itself keep `subprocess`: signals, kills and crashes injected through the
environment, Ray and joblib workers, the UI's server, and at least one `python -m` run of each entry point that has a
command-line test (its wiring, and "no traceback" from a real interpreter).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import signal
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    """What `subprocess.run(..., capture_output=True, text=True)` returns, for the fields tests read."""

    returncode: int
    stdout: str
    stderr: str
    args: list[str]


def run_cli(
    module: str, args: Sequence[str | Path] = (), cwd: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Result:
    """`python -m module *args` in this process: `module`'s (or its package's `__main__`'s) `main(argv)`, with the
    working folder `cwd` and, when given, exactly the environment `env` (as subprocess's `env=` replaces it)."""
    argv = [str(a) for a in args]
    main = _entry(module).main
    out, err = io.StringIO(), io.StringIO()
    with _process_state(cwd, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except Exception:  # noqa: BLE001 - what the interpreter does with it: a traceback and exit code 1
            traceback.print_exc()
            code = 1
        if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, exit code 1
            print(code, file=sys.stderr)
            code = 1
    return Result(code or 0, out.getvalue(), err.getvalue(), ["python", "-m", module, *argv])


def _entry(module: str):
    """The module `python -m module` runs: the module itself, or a package's __main__."""
    found = importlib.import_module(module)
    if not hasattr(found, "main") and hasattr(found, "__path__"):
        found = importlib.import_module(f"{module}.__main__")
    return found


@contextlib.contextmanager
def _process_state(cwd: str | Path | None, env: Mapping[str, str] | None) -> Iterator[None]:
    """Run the body in `cwd` with `env` and a fresh MLflow tracking URI; restore what an entry point may change."""
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), list(sys.argv)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    threads = _torch_threads()
    uri = _mlflow_uri(None)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        _end_mlflow_runs()
        _mlflow_uri(uri)
        clear_hydra()
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:], root.level = handlers, level
        for number, handler in signals.items():
            if handler is not None and signal.getsignal(number) is not handler:
                signal.signal(number, handler)  # the main thread's: pytest (and each xdist worker) runs tests there
        if threads is not None and _torch_threads() != threads:
            sys.modules["torch"].set_num_threads(threads)
        sys.argv[:] = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _mlflow_uri(uri: str | None) -> str | None:
    """Set MLflow's process-wide tracking URI (None: unset, $MLFLOW_TRACKING_URI decides); return the one before."""
    if "mlflow" not in sys.modules:
        return None
    import mlflow.tracking._tracking_service.utils as tracking

    before, tracking._tracking_uri = tracking._tracking_uri, uri
    return before


def _end_mlflow_runs() -> None:
    mlflow = sys.modules.get("mlflow")
    while mlflow is not None and mlflow.active_run() is not None:
        mlflow.end_run("KILLED")


def clear_hydra() -> None:
    """Hydra's global state as in a new process: no initialised search path, and no job's config (a finished job
    leaves HydraConfig set, which hacrl_exp.tracking.names.hydra_overrides would read as the next job's)."""
    if "hydra" in sys.modules:
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig

        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None
