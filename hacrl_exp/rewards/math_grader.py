"""The math grader: binary reward of a response's last `\\boxed{}` against the gold answer (spec §1.1).

math-verify (`parse` + `verify`) is the authority on equivalence. It runs in worker *processes* (multiprocessing
'spawn': forking a parent that holds torch threads is unsafe), because sympy can hang or blow up on hostile text and
math-verify's own timeouts use `signal.alarm`, which only works in the main thread. The worker is the timeout: an
answer not verified within `timeout_s` gets reason 'timeout', and its worker is killed and replaced.

Reasons: 'correct', 'wrong', 'no_answer' (no box, or an empty / unclosed one), 'timeout', 'grader_error' (the worker
raised RecursionError/MemoryError or died, e.g. by a segfault; it is replaced).

Long responses: only the last `max_chars` characters are searched for the box (the final answer ends the response),
so a response whose last box starts before that tail counts as 'no_answer'. This bounds the text math-verify sees.

Workers start lazily, are reused across calls, and stop on `close()`, at the end of a `with` block, when the grader is
garbage-collected, or at interpreter exit. As with any 'spawn' multiprocessing, a script that grades must guard its
entry point with `if __name__ == "__main__":`.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Sequence
from multiprocessing.connection import wait

from hacrl_exp.rewards.boxed import last_boxed
from hacrl_exp.tasks.base import Grade

log = logging.getLogger(__name__)

_READY = "ready"
_STARTUP_TIMEOUT_S = 120.0  # spawn + importing sympy/math-verify takes ~1-2 s idle; allow a loaded machine
_CACHE_SIZE = 100_000  # (answer, gold) pairs whose verdict is remembered in the parent
_SPACES = re.compile(r"\s+|\$|\\[!,;:]|\\left(?![A-Za-z])|\\right(?![A-Za-z])|\^\{?\\circ\}?")
_FRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")


def normalise_answer(s: str) -> str:
    """A conservative canonical form for the string fast path; equal forms mean equal answers.

    Removes whitespace, `$`, `\\left`/`\\right`, thin spaces (`\\! \\, \\; \\:`), degrees (`^\\circ`) and trailing
    dots, and maps `\\dfrac`/`\\tfrac` to `\\frac`. Units and `\\text{}` are left alone (math-verify decides).
    """
    return _FRAC.sub(r"\\frac", _SPACES.sub("", s)).rstrip(".")


def _worker_main(conn, memory_limit_mb: int | None) -> None:
    """Worker loop: receive (job, answer, gold), reply (job, reason, restart). `None` or a closed pipe ends it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
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


class MathGrader:
    """Grades responses by the last `\\boxed{}` against gold answers, with per-answer timeouts in worker processes."""

    def __init__(
        self,
        timeout_s: float = 5.0,
        n_workers: int = 1,
        max_chars: int = 20000,
        *,
        memory_limit_mb: int | None = 4096,
        fast_path: bool = True,
    ):
        """timeout_s: seconds one answer may take in math-verify; n_workers: grading processes;
        max_chars: only this tail of a response is searched; memory_limit_mb: address-space cap per worker (None: off);
        fast_path: accept answers whose `normalise_answer` forms are equal without asking math-verify."""
        if timeout_s <= 0 or n_workers < 1 or max_chars < 1:
            raise ValueError(
                f"MathGrader needs timeout_s > 0, n_workers >= 1, max_chars >= 1; "
                f"got timeout_s={timeout_s}, n_workers={n_workers}, max_chars={max_chars}."
            )
        self.timeout_s = float(timeout_s)
        self.n_workers = int(n_workers)
        self.max_chars = int(max_chars)
        self.memory_limit_mb = memory_limit_mb
        self.fast_path = fast_path
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._cache: OrderedDict[tuple[str, str], Grade] = OrderedDict()
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)

    def __enter__(self) -> MathGrader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker process. The grader stays usable: a later `grade` starts fresh workers."""
        with self._lock:
            _stop_all(self._workers)

    @property
    def worker_pids(self) -> set[int]:
        """Process ids of the live worker processes (a timed-out worker is replaced by a new one)."""
        return {w.proc.pid for w in self._workers if w.proc.pid is not None and w.proc.is_alive()}

    def start(self) -> None:
        """Start the workers now and wait until they are ready (otherwise the first `grade` does it)."""
        with self._lock:
            self._run({}, deque(), wait_ready=True)

    def extract(self, response: str | None) -> str | None:
        """The answer this grader reads from a response: the last box in its last `max_chars` characters."""
        if response is None:
            return None
        box = last_boxed(response[-self.max_chars :])
        return box or None

    def grade(self, responses: Sequence[str | None], answers: Sequence[str]) -> list[Grade]:
        """Reward 1.0/0.0 and reason for each response against the gold answer at the same index.

        Never raises or hangs on hostile response text; each math-verify call is bounded by `timeout_s`.
        """
        if len(responses) != len(answers):
            raise ValueError(f"grade got {len(responses)} responses but {len(answers)} answers; pass one per response.")
        grades: list[Grade | None] = [None] * len(responses)
        todo: dict[tuple[str, str], list[int]] = {}  # identical (answer, gold) pairs are verified once
        with self._lock:
            for i, (response, gold) in enumerate(zip(responses, answers, strict=True)):
                box = self.extract(response)
                if box is None:
                    grades[i] = Grade(0.0, "no_answer")
                elif self.fast_path and normalise_answer(box) == normalise_answer(gold):
                    grades[i] = Grade(1.0, "correct")
                elif (box, gold) in self._cache:
                    grades[i] = self._cache[(box, gold)]
                else:
                    todo.setdefault((box, gold), []).append(i)
            pairs = list(todo)
            verdicts = self._run(dict(enumerate(pairs)), deque(range(len(pairs)))) if pairs else {}
            for j, pair in enumerate(pairs):
                for i in todo[pair]:
                    grades[i] = verdicts[j]
                if verdicts[j].reason in ("correct", "wrong"):  # timeouts depend on load: do not remember them
                    self._cache[pair] = verdicts[j]
                    if len(self._cache) > _CACHE_SIZE:
                        self._cache.popitem(last=False)
        return grades  # type: ignore[return-value]

    def _replace(self, w: _Worker) -> None:
        """Kill `w` and start a fresh worker in its place (it imports while the others go on)."""
        w.stop(graceful=False)
        self._workers[self._workers.index(w)] = _Worker(self._ctx, self.memory_limit_mb)

    def _fail(self, message: str) -> None:
        """Stop all workers and raise: a worker that cannot start is an installation problem, not a bad answer."""
        _stop_all(self._workers)
        raise RuntimeError(message)

    def _run(self, jobs: dict[int, tuple[str, str]], queue: deque[int], wait_ready: bool = False) -> dict[int, Grade]:
        """Verify every queued job on the workers; returns job -> Grade. Caller holds the lock.

        A replacement worker started after a timeout is not waited for unless `wait_ready` or jobs remain.
        """
        if os.getpid() != self._pid:  # we are a fork of the owner: its workers are not ours to use
            self._workers.clear()
            self._pid = os.getpid()
        while len(self._workers) < self.n_workers:
            self._workers.append(_Worker(self._ctx, self.memory_limit_mb))
        done: dict[int, Grade] = {}
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
                    done[w.job] = Grade(0.0, "timeout")
                    self._replace(w)
                elif not w.ready:
                    self._fail(f"math grader worker did not start within {_STARTUP_TIMEOUT_S:.0f} s.")
        return done

    def _receive(self, w: _Worker, done: dict[int, Grade]) -> None:
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
                done[w.job] = Grade(0.0, "grader_error")
            self._replace(w)
            return
        if msg == _READY:
            w.ready, w.deadline = True, float("inf")
        elif msg[0] == "import_error":
            self._fail(f"math grader worker cannot import math_verify: {msg[1]}")
        else:
            job, reason, restart = msg
            done[job] = Grade(1.0 if reason == "correct" else 0.0, reason)
            w.job, w.deadline = None, float("inf")
            if restart:
                self._replace(w)
