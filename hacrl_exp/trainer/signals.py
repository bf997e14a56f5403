"""SIGINT / SIGTERM / SIGHUP, handled in one place. SIGHUP (the terminal closed) is handled as SIGTERM, exit 129.

- Outside training (`exit_on_signals`: `python -m hacrl_exp.run` installs it on its first line, so it covers the
  imports, the checks and Hydra's start): a signal exits at once with 130 / 143 and one line, no traceback. No MLflow
  run exists yet; nothing is lost.
- While training (`StopRequests`): the first signal only sets a flag, which the loop reads between phases (before
  each step; between the final models it logs); the run stops after the current step and a checkpoint (exit
  130 / 143, its MLflow runs KILLED). A second signal exits at once (`os._exit`, 130 / 143) in whatever phase, even
  inside a library callback where a raised exception would be swallowed (seen: sqlalchemy's garbage-collection hooks
  during model logging). The last checkpoint stays valid (checkpoints are atomic); the child processes (grader
  workers, a private Ray) are terminated; the MLflow runs stay RUNNING until a resume closes them.
- A closed terminal: the lines of a stop cannot be written there (EIO; a closed pipe: EPIPE). `say` then points the
  process's stdout and stderr at /dev/null, so that the rest of the stop (the step, the checkpoint, closing the
  MLflow runs) is not ended by a failed write, and the exit code stays 128 + the signal.
- `held()`: a few renames that must not be cut in two (publishing a checkpoint: its folder, then `latest`). A second
  signal inside waits for the block's end, milliseconds, then exits as above. (A kill -9 there still can cut them;
  `find_checkpoint` reads such a run.)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_held = {"depth": 0, "exit": None}  # inside `held()`: how deep, and the (signum, line) of a stop that waits for its end


def say(line: str) -> None:
    """Write `line` to stderr; when that fails (a closed terminal or pipe), send stdout and stderr to /dev/null so the
    process's later writes succeed and it ends with its own exit code."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # ValueError: stderr closed
        detach_output()


def detach_output() -> None:
    """Point file descriptors 1 and 2 at /dev/null (what `nohup` would have done): the terminal is gone."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)


def exit_now(signum: int, line: str) -> None:
    """Print `line`, terminate this process's children, and exit with 128 + signum without unwinding."""
    try:
        say(line)
        import psutil

        for child in psutil.Process().children(recursive=True):
            child.terminate()
    except Exception:  # noqa: BLE001, S110 - exiting is what matters now
        pass
    os._exit(128 + signum)


@contextmanager
def held() -> Iterator[None]:
    """A block a stop-at-once waits for (a checkpoint's rename and its `latest` pointer): a second signal inside it
    exits when the block ends, not in the middle."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if _held["depth"] == 0 and _held["exit"] is not None:
            exit_now(*_held["exit"])


def exit_on_signals(line: str) -> None:
    """SIGINT / SIGTERM / SIGHUP exit at once with 130 / 143 / 129 and `line` (outside training: nothing to save)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, lambda number, frame: exit_now(number, line))


class StopRequests:
    """Context manager: while active, the first SIGINT / SIGTERM / SIGHUP sets `signum` for the loop to read; a second
    exits at once. output_dir: the run folder named in the line a second signal prints."""

    def __init__(self, output_dir: Path | None = None) -> None:
        self.signum: int | None = None
        self.output_dir = output_dir
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:  # the second signal: stop now, wherever the process is (after a `held` block)
            line = f"stopped at once; resume from the last checkpoint with trainer.resume={self.output_dir}"
            if _held["depth"]:
                _held["exit"] = (signum, line)
                return
            exit_now(signum, line)
        self.signum = signum
        name = signal.Signals(signum).name
        say(f"{name}: finishing this step and writing a checkpoint; Ctrl-C again to stop at once")

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process ended by it."""
        return 128 + (self.signum or signal.SIGINT)

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to the main thread only
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
