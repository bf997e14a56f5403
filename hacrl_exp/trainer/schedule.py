"""The order in which agents that share GPUs (executor.placement=shared) take their turns, as it happened.

The driver records every turn's events after each returned: `build` (the actor built its agent), `wake`, `call`
(the method it ran) and `sleep`, one JSON line each in <run>/schedule.jsonl with the loop's step:

    {"step": 3, "agent": "opt_char", "event": "wake", "call": "learn", "seconds": 0.0012}

Events before the run folder is open (the build) wait in memory. A resumed run drops the lines after its checkpoint's
step (those of the step the killed process did not finish) and goes on from there, as the metric log does.
"""

from __future__ import annotations

import json
from pathlib import Path

from hacrl_exp.trainer.checkpoint import write_text_atomic

FILE = "schedule.jsonl"
EVENTS = ("build", "wake", "call", "sleep")


class Schedule:
    """Appends a shared placement's events to its file (once `open`), each line flushed as it is written."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.step = 0
        self.path: Path | None = None
        self.pending: list[dict] = []

    def open(self, path: Path, after_step: int | None = None) -> None:
        """Write to `path` from now on: a new run's (truncated), or a resumed one's with the lines after `after_step`
        dropped; the events recorded so far follow."""
        kept = [r for r in read_schedule(path) if r["step"] <= after_step] if after_step is not None else []
        pending = [{**r, "step": after_step or 0} for r in self.pending]  # the build and load: the starting step's
        write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in kept + pending))  # a kill keeps the old file
        self.path, self.pending = path, []

    def record(self, index: int, event: str, call: str, seconds: float = 0.0) -> None:
        row = {"step": self.step, "agent": self.names[index], "event": event, "call": call, "seconds": seconds}
        if self.path is None:
            self.pending.append(row)
            return
        with self.path.open("a") as out:
            out.write(json.dumps(row) + "\n")


def read_schedule(path: Path) -> list[dict]:
    """The recorded events of `path`, in order ([] when there is none); a torn last line (a kill) is skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def schedule_problems(rows: list[dict]) -> list[str]:
    """What breaks the shared placement's rule in `rows`: every call is preceded by its agent's wake (or build) and
    followed by its sleep, and no two agents are awake at once. [] when the schedule keeps it."""
    problems, awake, previous = [], None, None  # awake: (agent, the call it woke for)
    for n, row in enumerate(rows):
        agent, event = row["agent"], row["event"]
        if previous is not None and previous["event"] == "call" and (event, agent) != ("sleep", previous["agent"]):
            problems.append(f"line {n + 1}: {previous['agent']}'s {previous['call']} is not followed by its sleep")
        previous = row
        if event in ("build", "wake"):
            if awake is not None:
                problems.append(f"line {n + 1}: {agent} {event} while {awake[0]} is awake")
            awake = (agent, row["call"])
        elif event == "call":
            if awake != (agent, row["call"]):
                problems.append(f"line {n + 1}: {agent} {row['call']} without its wake (awake: {awake})")
        elif event == "sleep":
            if awake is None or awake[0] != agent:
                problems.append(f"line {n + 1}: {agent} sleeps but {awake} is awake")
            awake = None
        else:
            problems.append(f"line {n + 1}: unknown event {event!r}")
    return problems
