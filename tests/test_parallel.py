"""tests/parallel.py's tables name tests that exist (a renamed test would silently leave the `slow` subset or its
place in the schedule), and its rules sort and group as documented."""

import re
from pathlib import Path

import pytest

from tests import parallel

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("prefix", sorted({*parallel.SLOW, *parallel.LONGEST, *parallel.GROUPS}))
def test_each_prefix_names_a_test_file_or_folder_and_test(prefix):
    path, _, name = prefix.partition("::")
    assert (REPO / path).exists(), f"{path} does not exist: update tests/parallel.py"
    if name:
        found = re.search(rf"^def {re.escape(name)}\w*\(", (REPO / path).read_text(), re.MULTILINE)
        assert found, f"{path} has no test named {name}...: update tests/parallel.py"


@pytest.mark.parametrize("fixture, prefix", sorted(parallel.SLOW_FIXTURES.items()))
def test_each_slow_fixture_is_defined_where_its_tests_are(fixture, prefix):
    folder = REPO / prefix
    files = [folder] if folder.is_file() else [*folder.rglob("*.py"), *folder.parent.glob("conftest.py")]
    assert any(re.search(rf"^def {fixture}\(", f.read_text(), re.MULTILINE) for f in files), (fixture, prefix)


def test_the_longest_come_first_then_the_slow_and_a_group_is_one_unit():
    crash = "tests/reliability/test_crash_resume.py::test_killed_five_times_resumes_to_the_uninterrupted_metrics"
    ray = "tests/trainer/test_ray.py::test_ray_actors_match_in_process_agents"
    quick = "tests/test_graph.py::test_anything"
    assert parallel.is_slow(crash, []) and not parallel.is_slow(quick, [])
    assert parallel.is_slow("tests/evaluation/test_checkpoints.py::test_x", ["tmp_path", "tiny_run"])
    assert not parallel.is_slow("tests/reliability/test_crash_resume.py::test_y", ["store"])  # not the report's
    keys = [parallel.order(crash, True), parallel.order(ray, True), parallel.order(quick, False)]
    assert keys == sorted(keys) and parallel.order("tests/a.py::t", True) < parallel.order(quick, False)
    assert parallel.GROUPS["tests/trainer/test_fsdp.py"] == parallel.GROUPS["tests/trainer/test_ray.py"]
