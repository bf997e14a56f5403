"""No tracked file names a path of the machine it was written on (/work/..., /root/..., /home/<user>/..., /Users/...,
C:\\Users\\...): such a path means nothing on another checkout. Name files relative to the repository (or as
../shared/...), or with ~ for a home folder."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from hacrl_exp.repo import REPO_ROOT

MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:work|root)/"  # a path, not the tail of a URL or of a relative path (…/work/, ~/work/)
    r"|(?<![\w.~-])/(?:home|Users)/[^/\s]+/"
    r"|\b[A-Za-z]:\\\\?Users\\"
)
"""An absolute path of a development machine. `https://host/work/x`, `docs/work/x` and `~/work` do not match."""

ALLOWED = {"tests/test_no_machine_paths.py": "plants machine paths to show the detector finds them"}
"""Tracked file → why it may hold such a path."""


def machine_paths(text: str) -> list[str]:
    """Each line of `text` that holds an absolute path of a development machine, cut to 120 characters."""
    return [line.strip()[:120] for line in text.splitlines() if MACHINE_PATH.search(line)]


@pytest.mark.parametrize(
    "line",
    [
        "see /work/shared/docs/spec.md",
        "python -m hacrl_exp.ui --store sqlite:////work/grid/gap/mlflow.db",
        "cache in /root/.cache/hacrl_exp",
        "data at /home/alice/data/math500.jsonl",
        'open("/Users/bob/runs")',
        "C:\\Users\\carol\\runs",
    ],
)
def test_the_detector_finds_a_planted_machine_path(line):
    assert machine_paths(f"first line\n{line}\n") == [line]


@pytest.mark.parametrize(
    "line",
    [
        "../shared/docs/hacpo-spec.md",
        "~/.cache/hacrl_exp and ~/work/x",
        "https://example.org/work/root/home/x",
        "hacrl_exp/work/notes.md",
        "sqlite:///mlflow.db",
        "/tmp/run and /data",
    ],
)
def test_the_detector_leaves_portable_paths_alone(line):
    assert machine_paths(line) == []


def test_no_tracked_file_holds_a_machine_path():
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True, timeout=60)
    found = {}
    for name in filter(None, listed.stdout.decode().split("\0")):
        path = REPO_ROOT / name
        if name in ALLOWED or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:  # a binary file (an image)
            continue
        lines = machine_paths(data.decode("utf-8", errors="replace"))
        if lines:
            found[name] = lines[:3]
    assert not found, f"absolute paths of a development machine (write them relative, or with ~): {found}"
