"""SIGINT / SIGTERM during training: the first finishes the current step, writes a checkpoint and stops cleanly
(exit 130 / 143); a second stops at once (KeyboardInterrupt), leaving the last checkpoint as it was."""

from __future__ import annotations

import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequests:
    """Context manager: while active, SIGINT and SIGTERM set `signum` instead of killing the process."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt  # the second signal: stop now; checkpoints are atomic, the last one stays valid
        self.signum = signum
        name = signal.Signals(signum).name
        print(
            f"{name}: finishing this step and writing a checkpoint; Ctrl-C again to stop at once",
            file=sys.stderr,
            flush=True,
        )

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
