"""`Popen` and `run`: `python -m <module> <args>` as a real child process that starts from this test process's
memory instead of a new interpreter. It is `subprocess.Popen` (pid, pipes, `send_signal`, `communicate`, `wait`, the
exit status, -9 for a SIGKILL) but the child is `os.fork()` of the test process, which then runs the module as
`__main__` (`runpy`, as `-m` does) and ends with `os._exit`.

Why: a new interpreter pays ~8 s of CPU on CI's cores to import torch, transformers (which imports scikit-learn,
SciPy and `torch._dynamo`) and MLflow, and MLflow's migrations of a new sqlite store (3-10 s; the child inherits
tests/store_template.py). The signal, kill and lock tests start dozens of such processes.

What the child gets, as a new `python -m` would: the command's `env` (or this process's), `cwd`, stdin/stdout/stderr
on the given pipes or files (new `sys.std*` objects on fds 0-2, line-buffered stderr), `sys.argv`, default signal
handlers (SIGPIPE ignored, as Python does), Python's default warning filters, no root-logger handlers, MLflow's
tracking URI unset, Hydra's global state cleared, MLflow's SQLAlchemy engines opening their own connections
(`dispose(close=False)`: the parent's stay the parent's), and the garbage collector on with every inherited object
frozen (never collected in the child, so no inherited file object closes a descriptor the child reuses). Besides:
faulthandler on its own stderr, so that a crash of the child shows where.

What it does not get: a new interpreter. Modules are already imported, so an environment variable read at import
time (HF_HUB_OFFLINE, for one) keeps this process's value, and what a module caches in memory is inherited. Keep a
new interpreter (`subprocess`) where that is the subject: an entry point's `python -m` wiring, start-up, import-time
settings. Inherited file descriptors stay open in the child (closing them under live Python objects is worse).
"""

from __future__ import annotations

import gc
import io
import os
import signal
import subprocess
import sys
import traceback
import warnings

# A new interpreter's warning filters (CPython 3.11 without -W or PYTHONWARNINGS), first match wins.
DEFAULT_WARNING_FILTERS = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]


def module_of(command: list[str]) -> tuple[str, list[str]]:
    """(module, args) of `[sys.executable, "-m", module, *args]`; anything else is a ValueError."""
    if len(command) < 3 or command[0] != sys.executable or command[1] != "-m":
        raise ValueError(f"tests/forked.py runs `python -m module ...` commands only, not {command[:3]}")
    return str(command[2]), [str(a) for a in command[3:]]


class Popen(subprocess.Popen):
    """`subprocess.Popen([sys.executable, "-m", module, *args], ...)` whose child is a fork of this process."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                       shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, *rest):  # fmt: skip
        module, argv = module_of(list(args))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # nothing buffered here is written twice, by the child too
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                if rest[5]:  # start_new_session
                    os.setsid()
                _redirect(p2cread, c2pwrite, errwrite, (p2cwrite, c2pread, errread))
                code = _run_as_main(module, argv, cwd, env)
            except BaseException:  # noqa: BLE001 - the child's own failure, reported as Python would
                try:
                    traceback.print_exc()
                except BaseException:  # noqa: BLE001, S110 - stderr itself is gone; the exit code says it
                    pass
            finally:
                try:
                    _at_exit()
                finally:
                    os._exit(code)
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # as subprocess does


def run(command: list[str], *, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """`subprocess.run` with `Popen` above."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Popen(command, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def _redirect(stdin: int, stdout: int, stderr: int, parent_ends: tuple[int, ...]) -> None:
    """The child's fds 0-2 from the pipes or files Popen made (-1: this process's own), the parent's ends closed."""
    for fd in parent_ends:
        if fd != -1:
            os.close(fd)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        if fd != -1 and fd != target:
            os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {-1, 0, 1, 2}:
        os.close(fd)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
    )


def _run_as_main(module: str, argv: list[str], cwd, env) -> int:
    """The module as `python -m module *argv` runs it, in this (forked) process; returns its exit code."""
    import atexit
    import faulthandler
    import logging
    import runpy

    atexit._clear()  # this process's exit functions (temporary folders' finalizers among them) are not the child's
    _dispose_engines()  # before freezing: the inherited pools are let go here, and their connections stay open
    gc.freeze()
    gc.enable()
    faulthandler.enable(file=sys.stderr)  # the child's own stderr: a crash in it shows where (pytest's fd is not it)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.alarm(0)
    warnings.resetwarnings()
    for action, category, module_name in DEFAULT_WARNING_FILTERS:
        warnings.filterwarnings(action, category=category, module=module_name, append=True)
    warnings.showwarning = warnings._showwarning_orig
    warnings._showwarnmsg_impl = _show_warning
    root = logging.getLogger()
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    if env is not None:
        os.environ.clear()
        os.environ.update({os.fsdecode(k): os.fsdecode(v) for k, v in env.items()})
    if cwd is not None:
        os.chdir(cwd)
    _fresh_library_state()
    sys.argv = [module, *argv]
    sys.modules.pop(module, None)  # as in a new process, where the module runs as __main__ and was never imported
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _show_warning(message) -> None:
    """warnings' own output (stderr, `file:line: Category: text`), which pytest's recording replaced."""
    try:
        (message.file or sys.stderr).write(warnings._formatwarnmsg(message))
    except OSError:
        pass


def _at_exit() -> None:
    """What the interpreter does on its way out: the exit functions registered in the child (the inherited ones
    were cleared: they are the test process's), logging's flush, and the standard streams' flush."""
    import atexit
    import logging

    try:
        atexit._run_exitfuncs()
        logging.shutdown()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


ENGINE_CACHES = (
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.store.model_registry.sqlalchemy_store",
    "mlflow.store.jobs.sqlalchemy_store",
)
"""MLflow's modules whose SqlAlchemyStore keeps one engine per database for the process (`_engine_map`)."""


def _dispose_engines() -> None:
    """MLflow's cached SQLAlchemy engines forget their pooled connections without closing them (SQLAlchemy's rule
    for a forked child: `dispose(close=False)`); the child opens its own. Only these caches are walked, not
    `gc.get_objects()`: objects another thread of the parent was building at the fork are not safe to touch."""
    for name in ENGINE_CACHES:
        module = sys.modules.get(name)
        for engine in list(getattr(getattr(module, "SqlAlchemyStore", None), "_engine_map", {}).values()):
            engine.dispose(close=False)


def _fresh_library_state() -> None:
    """No crash point hit yet, MLflow's tracking URI unset, Hydra as before its first job (tests/cli.py's rules)."""
    from tests.cli import clear_hydra

    if "hacrl_exp.faults" in sys.modules:
        sys.modules["hacrl_exp.faults"]._hits.clear()  # crash points count this process's hits only
    if "mlflow" in sys.modules:
        import mlflow.tracking._tracking_service.utils as tracking

        tracking._tracking_uri = None
    clear_hydra()
