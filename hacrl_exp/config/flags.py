"""Numbers given on a command line (argparse flags) or sized by the machine, checked like config values.

A flag's value must be finite and in its documented range, in the words of a config key's range error
(`trainer.steps=0 is out of range; allowed [1, 10000000]`): one ConfigError line, exit code 2. Counts of processes and
threads are also compared with the machine: above its cores a warning (the work still runs, only slower), and far
above them (`ABSURD_PER_CORE` times) a refusal, since a few thousand threads on a few cores is a mistake that runs
hundreds of times slower without a word.
"""

from __future__ import annotations

import math
import os
import sys

from hacrl_exp.config.validate import out_of_range, range_text
from hacrl_exp.errors import ConfigError

MAX_WORKERS = 64
"""Grader worker processes at most (as the evaluation config's `workers`): each holds ~0.5 GiB."""
ABSURD_PER_CORE = 8
"""Threads beyond this many per core are refused: no machine runs them faster than one per core."""
PORTS = (1024, 65535)
"""The ports a server of ours may bind: unprivileged ones (0 would pick one at random, which no link could name)."""
_warned: set[str] = set()


def check_number(flag: str, value: float | None, low: float, high: float, *, low_open: bool = False) -> None:
    """ConfigError unless `value` (None: not given) is finite and within [low, high] ((low, high] with low_open)."""
    if value is None:
        return
    spec = (low, high, low_open, False)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{flag}={value!r} is not a finite number; allowed {range_text(spec)}")
    if out_of_range(value, spec):
        raise ConfigError(f"{flag}={value!r} is out of range; allowed {range_text(spec)}")


def cores() -> int:
    """The machine's cores as Python counts them (os.cpu_count(); 1 when unknown)."""
    return os.cpu_count() or 1


def warn_once(line: str) -> None:
    """Print `warning: <line>` to stderr, once per process (a config is validated more than once per run)."""
    if line not in _warned:
        _warned.add(line)
        print(f"warning: {line}", file=sys.stderr, flush=True)


def check_threads(key: str, value: int | None) -> None:
    """Refuse more than ABSURD_PER_CORE threads per core of this machine; warn above its cores."""
    if value is None:
        return
    have = cores()
    if value > ABSURD_PER_CORE * have:
        raise ConfigError(
            f"{key}={value} is more than {ABSURD_PER_CORE}× this machine's {have} cores; it would run far slower, "
            f"not faster. Give at most {have} (or leave it unset for torch's choice)"
        )
    if value > have:
        warn_once(f"{key}={value} is above this machine's {have} cores: threads will wait for each other")


def worker_count(flag: str, value: int, rows: int) -> int:
    """The grader processes to start: `value` checked against [1, MAX_WORKERS], warned above the machine's cores,
    and capped at the rows to grade (a worker without a row only costs its start)."""
    check_number(flag, value, 1, MAX_WORKERS)
    if value > cores():
        warn_once(f"{flag}={value} is above this machine's {cores()} cores: workers will wait for each other")
    return max(1, min(value, rows))


def check_port_number(flag: str, value: int | None) -> None:
    """ConfigError unless `value` (None: not given) is an unprivileged TCP port, PORTS."""
    check_number(flag, value, *PORTS)
