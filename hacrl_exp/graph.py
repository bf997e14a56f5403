"""The agent graph: which learner consumes which sources' rollouts, with α per edge.

Topologies (every one works for any N ≥ 1):
  all_to_all  every learner learns from every other agent        (the paper's pair, our three_way)
  star        the hub learns from all spokes; each spoke from the hub only
  ring        agent i learns from agent i−1 (wrapping around)
  none        nobody learns from anybody (independent baselines)
  custom      each member's own `learns_from` list
A frozen agent still generates and shares rollouts, but never learns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOPOLOGIES = ("all_to_all", "star", "ring", "none", "custom")


@dataclass(frozen=True)
class Edge:
    """learner ← source: the learner trains on the source's rollouts with exponent α."""

    learner: str
    source: str
    alpha: float


@dataclass(frozen=True)
class AgentGraph:
    names: tuple[str, ...]
    learners: tuple[str, ...]
    edges: tuple[Edge, ...]

    def sources_of(self, learner: str) -> list[Edge]:
        """Edges into `learner`, in declared agent order (the order of its cross blocks, spec §1.6)."""
        return [e for e in self.edges if e.learner == learner]


def build_graph(
    names: Sequence[str],
    topology: str,
    frozen: Mapping[str, bool],
    default_alpha: float,
    alpha_from: Mapping[str, Mapping[str, float]],
    learns_from: Mapping[str, Sequence[str] | None],
    hub: str | None = None,
) -> AgentGraph:
    """Resolve a topology into edges. Raises ValueError naming the bad key (agent name, topology, hub)."""
    names = tuple(names)
    if topology not in TOPOLOGIES:
        raise ValueError(f"agents.topology={topology!r} is unknown; choose one of {list(TOPOLOGIES)}")
    if hub is not None and hub not in names:
        raise ValueError(f"agents.hub={hub!r} is not an agent; agents are {list(names)}")
    hub = hub or names[0]
    pairs: list[tuple[str, str]] = []
    for i, learner in enumerate(names):
        if topology == "all_to_all":
            sources = [n for n in names if n != learner]
        elif topology == "star":
            sources = [n for n in names if n != hub] if learner == hub else [hub]
        elif topology == "ring":
            sources = [names[i - 1]] if len(names) > 1 else []
        elif topology == "custom":
            sources = list(learns_from.get(learner) or [])
        else:
            sources = []
        for source in sources:
            if source not in names:
                raise ValueError(
                    f"agents.members.{learner}.learns_from names {source!r}, not an agent of {list(names)}"
                )
            if source == learner:
                raise ValueError(f"agents.members.{learner}.learns_from must not name the agent itself")
        pairs.extend((learner, s) for s in names if s in sources)  # declared order
    for learner, table in alpha_from.items():
        for source in table:
            if (learner, source) not in pairs:
                raise ValueError(
                    f"agents.members.{learner}.alpha_from.{source} sets α on an edge the graph does not have; "
                    f"edges into {learner}: {[src for dst, src in pairs if dst == learner]}"
                )
    learners = tuple(n for n in names if not frozen.get(n, False))
    edges = tuple(
        Edge(learner, source, float(alpha_from.get(learner, {}).get(source, default_alpha)))
        for learner, source in pairs
        if learner in learners
    )
    for e in edges:
        if e.alpha < 0:
            raise ValueError(f"agents.members.{e.learner}.alpha_from.{e.source}={e.alpha} must be >= 0")
    return AgentGraph(names=names, learners=learners, edges=edges)


def graph_from_config(agents, default_alpha: float) -> AgentGraph:
    """The graph of an `AgentsConfig` (hacrl_exp.config.schema), with algorithm.alpha as the default α."""
    members = agents.members
    return build_graph(
        list(members),
        agents.topology,
        {n: a.frozen for n, a in members.items()},
        default_alpha,
        {n: a.alpha_from for n, a in members.items()},
        {n: a.learns_from for n, a in members.items()},
        agents.hub,
    )
