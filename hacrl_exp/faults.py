"""Fault injection for the reliability tests: named crash points that SIGKILL the process on demand.

A test hook, not a feature. The code calls `crash_point("checkpoint")` at places where a real crash would hurt
most (between writing a checkpoint's files and the rename that publishes it, between MLflow batches, inside
generation, between optimizer steps). With `HACRL_CRASH_AT="<name>:<n>"` in the environment the n-th time
(1-based) this process reaches the point named <name>, it kills itself with SIGKILL: no `finally`, no atexit, no
flush, exactly like `kill -9` or the OOM killer. Without the variable each call is one dictionary lookup.

    HACRL_CRASH_AT=checkpoint:2 python -m hacrl_exp.run trainer.checkpoint_every=1   # dies writing checkpoint 2

Points: generate (hacrl_exp.rollout.hf), update (hacrl_exp.trainer.step, after an optimizer step), sleep (an agent put
to sleep under executor.placement=shared, hacrl_exp.trainer.worker),
checkpoint (hacrl_exp.trainer.checkpoint), mlflow (hacrl_exp.tracking.MlflowTracker.flush, after a batch).
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "HACRL_CRASH_AT"
_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process on the n-th hit of `name` when HACRL_CRASH_AT="<name>:<n>"; otherwise do nothing."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
