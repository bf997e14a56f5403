"""`Popen` and `run`: `python -m <module> <args>` as a real child process forked from a warm zygote instead of a new
interpreter. It is `subprocess.Popen` (pid, pipes, `send_signal`, `communicate`, `wait`, the exit status, -9 for a
SIGKILL), and its child is a fork of this worker's zygote, which then runs the module as `__main__` (`runpy`, as `-m`
does) and ends with `os._exit`.

Why: a new interpreter pays ~8 s of CPU on this 2-core machine to import torch, transformers, MLflow, Hydra and the
trainer before the first line of `main`; the kill, signal and lock tests start dozens of `python -m hacrl_exp.run`.

The zygote is multiprocessing's fork server, started once per test process (a new interpreter) with PRELOAD imported
and nothing else done: no test ran in it, no thread of its own, no store or socket opened. (Forking the test process
itself was tried on 2026-12-06 and taken back: on one CI worker every forked child died with SIGSEGV, after some
earlier test of that worker; tests/README.md.)

What the child gets, as a new `python -m` would: the command's `env` (or this process's), `cwd`, stdin/stdout/stderr
on the given pipes or files (new `sys.std*` objects on fds 0-2), `sys.argv`, a new session with
`start_new_session=True`, Python's default signal handlers, torch's thread count from OMP_NUM_THREADS, and
`multiprocessing` seeing a main process. What it does not get: a new interpreter. The preloaded modules are imported
already, so an environment variable read at import time keeps the value the zygote started with (the first test's
environment: HF_HUB_OFFLINE and the like are the session's). Keep `subprocess` where that is the subject: an entry
point's `python -m` wiring, start-up (signals during the imports), import-time settings.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing import reduction

PRELOAD = [
    "hacrl_exp.run",
    "hacrl_exp.trainer.runfolder",
    "hacrl_exp.trainer.loop",
    "hacrl_exp.evaluate",
    "hacrl_exp.crash_drill",
    "mlflow.tracking",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.pyfunc",
    "sqlalchemy.dialects.sqlite",
    "peft",
    "optuna",
]
"""What the zygote imports before it forks: what a tiny `python -m hacrl_exp.run` imports (`python -X importtime`),
never Ray (its gRPC threads do not survive a fork)."""

_context = None


def context():
    """This process's fork server, its preload set once (multiprocessing starts it on the first `Process`)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def module_of(command: list[str]) -> tuple[str, list[str]]:
    """(module, args) of `[sys.executable, "-m", module, *args]`; anything else is a ValueError."""
    if len(command) < 3 or command[0] != sys.executable or command[1] != "-m":
        raise ValueError(f"tests/zygote.py runs `python -m module ...` commands only, not {command[:3]}")
    return str(command[2]), [str(a) for a in command[3:]]


class _PassFd:
    """A file descriptor sent to the child with the process object (multiprocessing's DupFd, taken while pickling)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return _received_fd, (reduction.DupFd(self.fd),)


def _received_fd(dup) -> int:
    return dup.detach()


class Popen(subprocess.Popen):
    """`subprocess.Popen([sys.executable, "-m", module, *args], ...)` whose child is forked from the zygote."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                       shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids,
                       uid, umask, start_new_session, *rest):  # fmt: skip
        module, argv = module_of(list(args))
        fds = [_PassFd(fd if fd != -1 else own) for fd, own in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2))]
        env = {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()}
        cwd = os.fsdecode(cwd) if cwd is not None else os.getcwd()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        process = context().Process(target=run_as_main, args=(module, argv, cwd, env, start_new_session, fds))
        process.start()
        self._process, self.pid, self._child_created = process, process.pid, True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # as subprocess does

    def _internal_poll(self, _deadstate=None, _waitpid=None, _WNOHANG=None, _ECHILD=None):  # noqa: N803
        if self.returncode is None:
            self.returncode = self._process.exitcode  # None while it runs
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is None:
            self._process.join(timeout)
            if self._process.exitcode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = self._process.exitcode
        return self.returncode


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


def run_as_main(module: str, argv: list[str], cwd: str, env: dict, new_session: bool, fds: list[int]) -> None:
    """In the forked child: the module as `python -m module *argv` runs it; never returns (`os._exit` with its exit
    code, after the exit functions, as the interpreter's own exit)."""
    code = 1
    try:
        if new_session:
            os.setsid()
        _redirect(fds)
        _as_a_main_process()
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        if "OMP_NUM_THREADS" in env:  # torch read the zygote's at import
            import torch

            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        code = _run_module(module, argv)
    except BaseException:  # noqa: BLE001 - the child's own failure, reported as Python would
        _report()
    finally:
        try:
            _at_exit()
        finally:
            os._exit(code)


def _redirect(fds: list[int]) -> None:
    """fds 0-2 from the pipes or files Popen made, with new `sys.std*` objects over them."""
    for fd, target in zip(fds, (0, 1, 2)):
        if fd != target:
            os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
    )


def _as_a_main_process() -> None:
    """multiprocessing sees a main process, as in a new interpreter (not the fork server's child), so the module can
    start processes of its own (a daemonic child could not) and `parent_process()` is None."""
    from multiprocessing import process

    this = process.current_process()
    this._name, this._identity, this._parent_pid, this._parent_name = "MainProcess", (), None, None
    process._parent_process = None
    process._children = set()


def _run_module(module: str, argv: list[str]) -> int:
    """`runpy` as `-m` does; the exit code a new interpreter would give."""
    import runpy

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
    except KeyboardInterrupt:  # Python ends an uncaught Ctrl-C by SIGINT itself (exit status -2)
        _report()
        _at_exit()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return 0


def _report() -> None:
    try:
        sys.excepthook(*sys.exc_info())
    except BaseException:  # noqa: BLE001, S110 - stderr itself is gone; the exit code says it
        pass


def _at_exit() -> None:
    """What the interpreter does on its way out, in its order: wait for the threads that are not daemons and run
    threading's exit hooks (joblib's worker pool shuts down there: without it, multiprocessing's exit function waits
    for those workers forever), then the exit functions, logging's flush, the standard streams' flush."""
    import atexit
    import logging
    import threading

    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        logging.shutdown()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
