"""Hostile model outputs (hacrl_exp.rewards.hostile: megabytes of text, 10,000-deep `\\frac`, power towers, huge
factorials, deep parentheses, unbalanced braces, null bytes and unicode junk). Each is graded reward 0 within the
timeout; a worker stuck on one is killed and replaced; no process, and no memory, is left behind."""

from __future__ import annotations

import gc
import time

import psutil
import pytest

from hacrl_exp.rewards import Grader
from hacrl_exp.rewards.hostile import GOLD, HOSTILE
from hacrl_exp.tasks.base import Grade

TIMEOUT_S = 2.0
MARGIN_S = 2.0  # pipe round-trip, SIGKILL and join on a loaded 2-core machine


def grader_children() -> set[int]:
    """This process's spawned worker processes (multiprocessing's resource tracker is not one)."""
    return {p.pid for p in psutil.Process().children() if "multiprocessing.spawn" in " ".join(p.cmdline())}


@pytest.fixture(scope="module")
def grader():
    with Grader(timeout_s=TIMEOUT_S, workers=1) as g:
        g.start()
        yield g


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_output_is_graded_zero_within_the_timeout(grader, name):
    response, reasons = HOSTILE[name]
    grader.start()  # a worker replaced after an earlier timeout is ready before the clock starts
    before = grader.worker_pids  # this grader's workers only: other tests of the session may have their own
    assert before and before <= grader_children()
    started = time.monotonic()
    (grade,) = grader.grade([response], [GOLD])
    seconds = time.monotonic() - started
    assert grade.reward == 0.0 and grade.reason in reasons, grade
    assert seconds < TIMEOUT_S + MARGIN_S
    if grade.reason in ("timeout", "grader_error"):  # the stuck worker was killed and a fresh one started
        assert grader.worker_pids.isdisjoint(before) and before.isdisjoint(grader_children())
    else:
        assert grader.worker_pids == before
    assert grader.grade(["so \\boxed{42}"], [GOLD]) == [Grade(1.0)]  # and the grader still answers


def test_a_batch_of_hostile_outputs_leaks_no_process_and_no_memory():
    me = psutil.Process()
    with Grader(timeout_s=TIMEOUT_S, workers=2) as warm:
        warm.start()  # multiprocessing's resource tracker, started once per process, is not a leak
    baseline_children = {p.pid for p in me.children()}
    gc.collect()
    rss_before = me.memory_info().rss
    names = ["10 MB of prose, box at the end", "10 MB inside one box", "power tower 9^{9^{9^{9}}}", "huge factorial"]
    responses = [HOSTILE[name][0] for name in names] + ["\\boxed{42}"]
    grader = Grader(timeout_s=TIMEOUT_S, workers=2)
    grader.start()
    started = time.monotonic()
    grades = grader.grade(responses, [GOLD] * len(responses))
    seconds = time.monotonic() - started
    assert [g.reward for g in grades] == [0.0] * len(names) + [1.0]
    slow = sum(g.reason in ("timeout", "grader_error") for g in grades)
    assert seconds < slow * TIMEOUT_S + 4 * MARGIN_S  # includes starting replacement workers for later answers
    workers = grader_children() - baseline_children
    assert len(workers) == 2  # replaced, never piled up
    for pid in workers:
        assert psutil.Process(pid).memory_info().rss < 4096 * 2**20  # under the worker's address-space cap
    grader.close()
    assert {p.pid for p in me.children()} == baseline_children  # every worker gone
    del grades, responses
    gc.collect()
    assert me.memory_info().rss - rss_before < 64 * 2**20  # the 20 MB of hostile text is not kept
