"""math-verify in worker processes: the equivalence check behind every math reward (spec §1.1).

math-verify (`parse` + `verify`) is the authority on equivalence once an answer has been extracted and brought to
canonical form (`hacrl_exp.rewards.grader`). It runs in worker *processes* (multiprocessing 'spawn': forking a parent
that holds torch threads is unsafe), because sympy can hang or blow up on hostile text and math-verify's own timeouts
use `signal.alarm`, which only works in the main thread. The worker is the timeout: a pair not verified within
`timeout_s` gets reason 'timeout', and its worker is killed and replaced.

Reasons: 'correct', 'wrong', 'timeout', 'grader_error' (the worker raised RecursionError/MemoryError or died, e.g. by a
segfault; it is replaced).

Workers start lazily, are reused across calls, and stop on `close()`, when the pool is garbage-collected, or at
interpreter exit. As with any 'spawn' multiprocessing, a script that grades must guard its entry point with
`if __name__ == "__main__":`.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Sequence
from multiprocessing.connection import wait

log = logging.getLogger(__name__)

_READY = "ready"
_STARTUP_TIMEOUT_S = 120.0  # spawn + importing sympy/math-verify takes ~1-2 s idle; allow a loaded machine


def _worker_main(conn, memory_limit_mb: int | None) -> None:
    """Worker loop: receive (job, answer, gold), reply (job, reason, restart). `None` or a closed pipe ends it."""
    import signal

    for signum in (signal.SIGINT, signal.SIGHUP):  # Ctrl-C, a closed terminal: the parent's to handle
        signal.signal(signum, signal.SIG_IGN)
    if memory_limit_mb:
        try:
            import resource

            limit = memory_limit_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # a sympy bomb raises MemoryError, not OOM-kills
        except (ImportError, ValueError, OSError):
            pass
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "Timeout is disabled" warnings: we own the timeout
    try:
        from math_verify import parse, verify
    except ImportError as e:
        conn.send(("import_error", f"{e}. Install it with: pip install 'math-verify[antlr4_9_3]'"))
        return
    golds: OrderedDict[str, list] = OrderedDict()
    conn.send(_READY)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # parent gone
        if msg is None:
            return
        job, answer, gold = msg
        try:
            if gold not in golds:
                golds[gold] = parse("\\boxed{" + gold + "}", parsing_timeout=None, raise_on_error=True)
                if len(golds) > 4096:
                    golds.popitem(last=False)
            target = golds[gold]
            pred = parse("\\boxed{" + answer + "}", parsing_timeout=None, raise_on_error=True)
            ok = bool(pred) and bool(target) and verify(target, pred, timeout_seconds=None, raise_on_error=True)
            reply = (job, "correct" if ok else "wrong", False)
        except (RecursionError, MemoryError):
            reply = (job, "grader_error", True)  # state may be damaged: ask for a fresh worker
        except Exception:  # math-verify/sympy raising on odd input: no reward, worker still sound
            reply = (job, "grader_error", False)
        conn.send(reply)


class _Worker:
    """One grading process, its pipe, and the job it holds."""

    def __init__(self, ctx, memory_limit_mb: int | None):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(
            target=_worker_main, args=(child, memory_limit_mb), daemon=True, name="hacrl-math-grader"
        )
        self.proc.start()
        child.close()  # keep only the worker's copy, so its death reads as EOF here
        self.owner = os.getpid()
        self.ready = False
        self.job: int | None = None
        self.deadline = time.monotonic() + _STARTUP_TIMEOUT_S

    def stop(self, graceful: bool) -> None:
        """End the process (a polite `None` first when idle, else SIGKILL) and free its pipe."""
        if os.getpid() != self.owner:  # a forked copy of the owner (e.g. at its exit): not ours to stop
            return
        if graceful and self.ready and self.job is None:
            try:
                self.conn.send(None)
                self.proc.join(timeout=1.0)
            except (OSError, ValueError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()
        self.proc.close()


def _stop_all(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().stop(graceful=True)


class VerifyPool:
    """math-verify in worker processes: `verify` returns one reason per (answer, gold) pair, each bounded by
    `timeout_s`. Both sides are bare LaTeX answers (no `\\boxed{}`); they are boxed here so math-verify reads them
    whole."""

    def __init__(self, timeout_s: float = 5.0, n_workers: int = 1, *, memory_limit_mb: int | None = 4096):
        """timeout_s: seconds one pair may take; n_workers: processes; memory_limit_mb: address-space cap per worker
        (None: off)."""
        if timeout_s <= 0 or n_workers < 1:
            raise ValueError(
                f"VerifyPool needs timeout_s > 0 and n_workers >= 1; got timeout_s={timeout_s}, n_workers={n_workers}."
            )
        self.timeout_s = float(timeout_s)
        self.n_workers = int(n_workers)
        self.memory_limit_mb = memory_limit_mb
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)

    def close(self) -> None:
        """Stop every worker process. The pool stays usable: a later `verify` starts fresh workers."""
        with self._lock:
            _stop_all(self._workers)

    @property
    def worker_pids(self) -> set[int]:
        """Process ids of the live worker processes (a timed-out worker is replaced by a new one)."""
        return {w.proc.pid for w in self._workers if w.proc.pid is not None and w.proc.is_alive()}

    def start(self) -> None:
        """Start the workers now and wait until they are ready (otherwise the first `verify` does it)."""
        with self._lock:
            self._run({}, deque(), wait_ready=True)

    def verify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """Reason for each (answer, gold): 'correct', 'wrong', 'timeout' or 'grader_error'. Never raises or hangs on
        hostile text."""
        if not pairs:
            return []
        with self._lock:
            done = self._run(dict(enumerate(pairs)), deque(range(len(pairs))))
        return [done[i] for i in range(len(pairs))]

    def _replace(self, w: _Worker) -> None:
        """Kill `w` and start a fresh worker in its place (it imports while the others go on)."""
        w.stop(graceful=False)
        self._workers[self._workers.index(w)] = _Worker(self._ctx, self.memory_limit_mb)

    def _fail(self, message: str) -> None:
        """Stop all workers and raise: a worker that cannot start is an installation problem, not a bad answer."""
        _stop_all(self._workers)
        raise RuntimeError(message)

    def _run(self, jobs: dict[int, tuple[str, str]], queue: deque[int], wait_ready: bool = False) -> dict[int, str]:
        """Verify every queued job on the workers; returns job -> reason. Caller holds the lock.

        A replacement worker started after a timeout is not waited for unless `wait_ready` or jobs remain.
        """
        if os.getpid() != self._pid:  # we are a fork of the owner: its workers are not ours to use
            self._workers.clear()
            self._pid = os.getpid()
        while len(self._workers) < self.n_workers:
            self._workers.append(_Worker(self._ctx, self.memory_limit_mb))
        done: dict[int, str] = {}
        while queue or any(w.job is not None or (wait_ready and not w.ready) for w in self._workers):
            now = time.monotonic()
            for w in self._workers:
                if w.ready and w.job is None and queue:
                    job = queue.popleft()
                    try:
                        w.conn.send((job, *jobs[job]))
                    except (OSError, ValueError):  # died while idle: requeue on a fresh worker
                        queue.appendleft(job)
                        self._replace(w)
                        continue
                    w.job, w.deadline = job, now + self.timeout_s
            soonest = min(w.deadline for w in self._workers)
            for conn in wait([w.conn for w in self._workers], timeout=max(0.0, soonest - time.monotonic())):
                w = next(w for w in self._workers if w.conn is conn)
                self._receive(w, done)
            now = time.monotonic()
            for w in list(self._workers):
                if now < w.deadline:
                    continue
                if w.job is not None:
                    log.warning("math grader: answer %.80r timed out after %.1f s", jobs[w.job][0], self.timeout_s)
                    done[w.job] = "timeout"
                    self._replace(w)
                elif not w.ready:
                    self._fail(f"math grader worker did not start within {_STARTUP_TIMEOUT_S:.0f} s.")
        return done

    def _receive(self, w: _Worker, done: dict[int, str]) -> None:
        """Handle one message (or the death) of worker `w`."""
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):  # the process died: segfault, OOM kill, os._exit
            if w.job is None and not w.ready:
                self._fail(
                    f"math grader worker exited during start-up (exit code {w.proc.exitcode}; its traceback is on "
                    "stderr). 'spawn' workers re-import the main script: run from a file or `-m` module (not stdin) "
                    "whose entry point is guarded by `if __name__ == '__main__':`."
                )
            if w.job is not None:
                log.warning("math grader worker died on answer; reason grader_error")
                done[w.job] = "grader_error"
            self._replace(w)
            return
        if msg == _READY:
            w.ready, w.deadline = True, float("inf")
        elif msg[0] == "import_error":
            self._fail(f"math grader worker cannot import math_verify: {msg[1]}")
        else:
            job, reason, restart = msg
            done[job] = reason
            w.job, w.deadline = None, float("inf")
            if restart:
                self._replace(w)
