"""User-facing errors: each prints as one line naming the key and the fix, and exits with code 2."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_BAD_INPUT = 2


class ConfigError(ValueError):
    """A config key, value or path is wrong. The message names the key and how to fix it."""


class OutputError(RuntimeError):
    """An output could not be written (disk full, permission denied, a read-only file system, a path that is not a
    regular file): the message names the path, the free bytes where that matters, and what to do."""


class NumericsError(RuntimeError):
    """Training produced non-finite gradients for too many consecutive steps; the run stops cleanly."""


@contextmanager
def exit_on_bad_input(*errors: type[BaseException]) -> Iterator[None]:
    """Turn the given exception types (ConfigError by default) into one stderr line and exit code 2."""
    caught = errors or (ConfigError,)
    try:
        yield
    except caught as exc:  # noqa: B030 - a tuple of exception types
        name = type(exc).__name__
        message = " ".join(str(exc).split())  # one line, whatever the exception carried
        print(f"{name}: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


class RunInterrupted(Exception):
    """SIGINT/SIGTERM stopped the run (after a checkpoint, unless stopped at once); the message says how to resume."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
