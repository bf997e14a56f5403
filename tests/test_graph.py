"""Agent graph presets, α per edge, frozen agents, and the stepwise index u per learner batch."""

import pytest

from hacrl_exp.algo import minibatch_schedule, stepwise_lower_bound
from hacrl_exp.graph import build_graph

NAMES = ["a", "b", "c", "d"]


def edges(graph):
    return {(e.learner, e.source) for e in graph.edges}


def test_topologies_for_any_n():
    assert edges(build_graph(NAMES, "all_to_all", {}, 1.0, {}, {})) == {(x, y) for x in NAMES for y in NAMES if x != y}
    assert edges(build_graph(NAMES, "star", {}, 1.0, {}, {})) == {
        ("a", "b"),
        ("a", "c"),
        ("a", "d"),
        ("b", "a"),
        ("c", "a"),
        ("d", "a"),
    }
    assert edges(build_graph(NAMES, "ring", {}, 1.0, {}, {})) == {("a", "d"), ("b", "a"), ("c", "b"), ("d", "c")}
    assert edges(build_graph(["solo"], "all_to_all", {}, 1.0, {}, {})) == set()
    custom = build_graph(NAMES, "custom", {}, 1.0, {}, {"a": ["c", "b"]})
    assert [e.source for e in custom.sources_of("a")] == ["b", "c"]  # declared order, not list order


def test_alpha_per_edge_and_frozen_agents():
    graph = build_graph(NAMES[:3], "all_to_all", {"c": True}, 1.0, {"a": {"b": 3.0}}, {})
    assert graph.learners == ("a", "b")
    assert {(e.learner, e.source): e.alpha for e in graph.edges} == {
        ("a", "b"): 3.0,
        ("a", "c"): 1.0,
        ("b", "a"): 1.0,
        ("b", "c"): 1.0,
    }


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(topology="mesh"), "agents.topology"),
        (dict(topology="custom", learns_from={"a": ["zz"]}), "learns_from"),
        (dict(topology="ring", alpha_from={"a": {"b": 2.0}}), "alpha_from.b"),
        (dict(topology="star", hub="zz"), "agents.hub"),
    ],
)
def test_bad_graphs_name_the_key(kwargs, match):
    args = dict(names=NAMES[:3], topology="all_to_all", frozen={}, default_alpha=1.0, alpha_from={}, learns_from={})
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        build_graph(**args)


def test_u_schedule_two_and_three_agents():
    # 2 agents, block 128 rows, 2 updates per block: u = 0, 1 self; 2, 3 cross (spec §1.6, C1)
    two = minibatch_schedule([128, 128], 64)
    assert [(m.start, m.u) for m in two] == [(0, 0), (64, 1), (128, 2), (192, 3)]
    assert [stepwise_lower_bound(m.u) for m in two][2:] == pytest.approx([0.85, 0.875])
    three = minibatch_schedule([128, 128, 128], 64)
    assert [m.u for m in three] == [0, 1, 2, 3, 4, 5]  # the second source meets tighter bounds
    restart = minibatch_schedule([128, 128, 128], 64, restart_per_source=True)
    assert [m.u for m in restart] == [0, 1, 0, 1, 0, 1]  # our extension: each source block restarts u
