"""Where the agent workers run: in the trainer's process (`executor=local`) or as Ray actors (`executor=ray`).

Both executors call the same `AgentWorker` methods with the same arguments and return the same values, so
a run gives the same metrics either way (tests/trainer/test_ray.py). Local workers run one after another;
Ray actors run each phase in parallel, so a phase then takes as long as its slowest agent. The loop calls the
typed methods of `Executor` (`rollout`, `learn`, `evaluate`, `save`, `load`); only `call` knows how.

A sharded agent (agents.members.<name>.world_size W > 1 or fsdp.offload, hacrl_exp.agents.sharding) is W Ray actors,
one per rank, in a placement group: packed on one node (STRICT_PACK), or across nodes (PACK) with span_nodes=true or
a placement naming several nodes. Their own process group joins them (`_join_rank_groups`: rendezvous on rank 0's
socket, on 127.0.0.1 when the ranks share a node, else on rank 0's node address). `call` hides them: every rank gets
the same call, the agent's result is rank 0's; when a rank fails, the agent's other ranks are killed at once (they
would wait in a collective for it). `agents.members.<name>.placement` names a Ray custom resource that the agent's
actors ask for (PLACEMENT_SHARE each), so they land on a node that has it: one for all ranks, or a list, one per rank.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from hacrl_exp.agents.ranks import RankGroup
from hacrl_exp.config.schema import AgentConfig, Config, ExecutorConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.ray_cluster import connect, import_ray
from hacrl_exp.tasks.base import Problem, Task
from hacrl_exp.trainer.params import LearnerParams
from hacrl_exp.trainer.schedule import Schedule
from hacrl_exp.trainer.step import SharedRollouts
from hacrl_exp.trainer.worker import AgentWorker

Times = dict[str, float]
PLACEMENT_SHARE = 0.001
"""Units of an agent's placement resource each of its actors reserves: a node with 1 unit hosts up to 1000."""
PLACEMENT_TIMEOUT_S = 120.0
TURN_CALLS = frozenset({"rollout", "learn", "evaluate", "save", "load", "join"})
"""The calls that run on an agent's GPU state: under executor.placement=shared, one agent at a time, woken first."""


def sharded(agent: AgentConfig) -> bool:
    """Whether the agent is built as an FSDP2 rank group (W > 1, or CPU offload at any W)."""
    return agent.world_size > 1 or agent.fsdp.offload


def rank_placements(agent: AgentConfig) -> list[str | None]:
    """The placement resource each rank of the agent asks for: its `placement` for every rank, or its list."""
    placement = agent.placement
    return list(placement) if isinstance(placement, (list, tuple)) else [placement] * agent.world_size


def spans_nodes(agent: AgentConfig) -> bool:
    """Whether the agent's ranks may run on several nodes (a PACK placement group, else STRICT_PACK)."""
    return agent.span_nodes or len(set(rank_placements(agent))) > 1


class Executor:
    """Calls a method on some or all agent workers and returns their results by agent index.

    With a `schedule` (executor.placement=shared) the agents share their GPUs and take turns: each GPU call
    (`TURN_CALLS`) runs agent by agent, wake → call → sleep, each event recorded, so no two agents are ever awake on
    one GPU; the other calls (costs, warm-start metrics) touch no GPU state and go to all at once."""

    parallel = False
    workers: list
    schedule: Schedule | None = None

    def call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        """{i: worker_i.method(*args[i])} for the workers named in args."""
        if self.schedule is None or method not in TURN_CALLS:
            return self._call(method, args)
        results = {}
        for i, a in args.items():  # in agent order, one awake at a time
            self._turn(i, "wake", method, (method,))
            results[i] = self._turn(i, "call", method, a)
            self._turn(i, "sleep", method, ())
        return results

    def _turn(self, index: int, event: str, method: str, args: tuple) -> Any:
        """One event of agent `index`'s turn (its wake, the call, its sleep), recorded once it returned."""
        started = time.perf_counter()
        result = self._call(method if event == "call" else event, {index: args})[index]
        self.schedule.record(index, event, method, time.perf_counter() - started)
        return result

    def _build_in_turn(self, index: int) -> None:
        """Shared placement: agent `index` has just been built (awake, as a build leaves it): record it, put it to
        sleep before the next agent builds on the same GPU."""
        self.schedule.record(index, "build", "build")
        self._turn(index, "sleep", "build", ())

    def _call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        raise NotImplementedError

    def call_all(self, method: str, *args: Any) -> list[Any]:
        """[worker.method(*args) for every worker], in agent order."""
        results = self.call(method, dict.fromkeys(range(len(self.workers)), args))
        return [results[i] for i in range(len(self.workers))]

    def rollout(
        self, problems: Sequence[Problem], group_size: int, step_number: int
    ) -> list[tuple[SharedRollouts, Times]]:
        """Phases 1–3 of step step_number on every agent (`AgentWorker.rollout`): its shared rollouts and phase
        seconds, in agent order."""
        return self.call_all("rollout", problems, group_size, step_number)

    def learn(
        self, sources: Mapping[int, tuple[dict[int, SharedRollouts], torch.Tensor]]
    ) -> dict[int, tuple[dict[str, float], Times]]:
        """Phases 5–7 on each learner k in `sources` (`AgentWorker.learn(shared rollouts, ρ_k)`): metrics, seconds."""
        return self.call("learn", sources)

    def take_costs(self) -> list[dict[str, float]]:
        """Every agent's costs since the last take (`AgentWorker.take_costs`, trainer/costs.py), in agent order."""
        return self.call_all("take_costs")

    def evaluate(self, problems: Sequence[Problem], max_new_tokens: int) -> list[tuple[list[dict], dict[str, float]]]:
        """Every agent's greedy records and benchmark metrics (`AgentWorker.evaluate`), in agent order."""
        return self.call_all("evaluate", problems, max_new_tokens)

    def save(self, folder: Path) -> None:
        """Each worker writes its agent's part of checkpoint `folder`."""
        self.call_all("save", folder)

    def load(self, folder: Path) -> None:
        """Each worker restores its agent from checkpoint `folder`."""
        self.call_all("load", folder)

    def add_times(self, times: dict[str, float], per_worker: list[dict[str, float]]) -> None:
        """Add the workers' phase seconds to `times`: their sum when they ran in turn, their max in parallel."""
        for phase in {p for t in per_worker for p in t}:
            values = [t.get(phase, 0.0) for t in per_worker]
            times[phase] += max(values) if self.parallel else sum(values)

    def placement(self) -> dict[str, list[str]]:
        """Per agent, the Ray node id of each of its ranks ({} when the agents run in this process)."""
        return {}

    def close(self) -> None: ...

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    """Every agent in this process, called one after another (shared: each put to sleep once built)."""

    def __init__(
        self, config: Config, learners: Mapping[int, LearnerParams], task: Task | None = None, shared: bool = False
    ) -> None:
        names = list(config.agents.members)
        self.schedule = Schedule(names) if shared else None
        self.workers = []
        for i in range(len(names)):
            self.workers.append(AgentWorker(config, i, learners.get(i), config.trainer.threads, task))
            if shared:
                self._build_in_turn(i)

    def _call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        return {i: getattr(self.workers[i], method)(*a) for i, a in args.items()}

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


class RayExecutor(Executor):
    """Each agent a Ray actor (a sharded one W actors) that owns its model, optimizer and rollout engine; the driver
    keeps the loop. `workers` holds each agent's rank 0, `groups` all its ranks.

    A private Ray (executor.address null) listens on 127.0.0.1 only and is shut down by `close`.
    """

    parallel = True

    def __init__(self, config: Config, learners: Mapping[int, LearnerParams], shared: bool = False) -> None:
        settings = config.executor
        self.ray = import_ray()
        self.owns_ray = connect(settings.address, settings.include_dashboard, settings.num_cpus, settings.runtime_env)
        self.workers, self.groups, self.placement_groups = [], [], []
        self.stopped: set[int] = set()  # agents whose ranks `_stop_ranks` killed
        members = config.agents.members
        self.sharded = [i for i, member in enumerate(members.values()) if sharded(member)]
        threads = settings.threads_per_agent or config.trainer.threads or max(1, int(settings.cpus_per_agent))
        self.shared_group = None  # shared placement: the one placement group whose bundle r holds every agent's rank r
        if shared:
            self.schedule, self.parallel = Schedule(list(members)), False  # the agents take turns on their GPUs
        try:
            cluster = self.ray.cluster_resources()
            total = sum(m.world_size for m in members.values())
            if shared:
                self.shared_group = self._shared_group(cluster, config)
            else:
                _check_fits(cluster, total, settings, "agents" if total == len(members) else "agent ranks")
                _check_placements(cluster, members)
            for i, member in enumerate(members.values()):
                self.groups.append(self._start(config, i, learners.get(i), member, threads))
                self.workers = [group[0] for group in self.groups]
                if shared:  # built one after another, each asleep before the next builds on the same GPUs
                    self._call("ready", {i: ()})
                    self._build_in_turn(i)
            self.call_all("ready")  # build errors (a bad model path, ...) surface here, as in the local executor
            self._join_rank_groups()
            names = list(members)
            nodes = self.ray.get([actor.node_id.remote() for group in self.groups for actor in group])
            it = iter(nodes)
            self.nodes = {names[i]: [next(it) for _ in group] for i, group in enumerate(self.groups)}
        except BaseException:
            self.close()  # and the private Ray with it
            raise

    def _start(
        self, config: Config, index: int, params: LearnerParams | None, member: AgentConfig, threads: int
    ) -> list:
        """Start agent `index`'s actors: one, or a packed rank group (formed later by `_join_rank_groups`)."""
        settings = config.executor
        resources = [{p: PLACEMENT_SHARE} if p else {} for p in rank_placements(member)]
        actor = self.ray.remote(_ActorWorker)
        options = {"num_cpus": settings.cpus_per_agent, "num_gpus": settings.gpus_per_agent}
        if self.shared_group is not None:  # rank r in bundle r, a 1/N share of its GPU: Ray gives them the same one
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["num_gpus"] = settings.gpus_per_agent / len(config.agents.members)
            ranks = [RankGroup(r, member.world_size) if sharded(member) else None for r in range(member.world_size)]
            return [
                actor.options(
                    **options,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        self.shared_group, placement_group_bundle_index=r
                    ),
                ).remote(config, index, params, threads, None, rank)
                for r, rank in enumerate(ranks)
            ]
        if not sharded(member):
            return [actor.options(**options, resources=resources[0]).remote(config, index, params, threads)]
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        devices = {"CPU": settings.cpus_per_agent, "GPU": settings.gpus_per_agent}
        bundles = [{k: v for k, v in {**devices, **extra}.items() if v} for extra in resources]
        span = spans_nodes(member)
        group = placement_group(bundles, strategy="PACK" if span else "STRICT_PACK")
        self.placement_groups.append(group)
        name = list(config.agents.members)[index]
        ready, _ = self.ray.wait([group.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            where = "on the nodes" if span else "on one node (or set span_nodes=true)"
            raise ConfigError(
                f"agents.members.{name}.world_size={member.world_size}: the Ray cluster has no room for its ranks' "
                f"{bundles} {where}; lower world_size or executor.cpus_per_agent"
            )

        world = member.world_size
        return [
            actor.options(
                **options, scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=r)
            ).remote(config, index, params, threads, None, RankGroup(r, world))
            for r in range(world)
        ]

    def _shared_group(self, cluster: dict[str, float], config: Config):
        """The shared placement's placement group, on one node: bundle r holds rank r of every agent, so
        max(world_size) bundles of {CPU: N · cpus_per_agent, GPU: gpus_per_agent}; refused in one line when the
        cluster cannot hold it."""
        from ray.util.placement_group import placement_group

        settings, members = config.executor, config.agents.members
        world = max(m.world_size for m in members.values())
        bundle = {"CPU": settings.cpus_per_agent * len(members), "GPU": settings.gpus_per_agent}
        bundle = {k: v for k, v in bundle.items() if v}
        for resource, need in bundle.items():
            if need * world > cluster.get(resource, 0.0):
                raise ConfigError(
                    f"executor.placement=shared: {world} GPU slot(s) of {bundle} need {need * world:g} {resource}s but "
                    f"the Ray cluster has {cluster.get(resource, 0.0):g}; lower executor.cpus_per_agent or world_size"
                )
        group = placement_group([bundle] * world, strategy="STRICT_PACK")
        self.placement_groups.append(group)
        ready, _ = self.ray.wait([group.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            raise ConfigError(
                f"executor.placement=shared: no node of the Ray cluster holds {world} × {bundle}; lower world_size"
            )
        return group

    def _join_rank_groups(self) -> None:
        """Form every sharded agent's process group: its ranks report their nodes' addresses from inside their
        actors, rank 0 opens the rendezvous on the host those give (`rendezvous_host`: 127.0.0.1 on one node, else
        rank 0's node address) and every rank joins there."""
        from hacrl_exp.agents.sharding import rendezvous_host

        refs = {i: [rank.node_address.remote() for rank in self.groups[i]] for i in self.sharded}
        addresses = {i: self.ray.get(r) for i, r in refs.items()}
        hosts = {i: rendezvous_host(addresses[i]) for i in self.sharded}
        ports = self.ray.get([self.groups[i][0].store_port.remote(hosts[i]) for i in self.sharded])
        self.call("join", {i: (port, hosts[i], addresses[i]) for i, port in zip(self.sharded, ports)})

    def _call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        refs = {i: [getattr(actor, method).remote(*a) for actor in self.groups[i]] for i, a in args.items()}
        agent_of = {ref: i for i, group in refs.items() for ref in group}
        pending = list(agent_of)
        try:
            while pending:  # the first failure at once
                done, pending = self.ray.wait(pending, num_returns=1)
                try:
                    self.ray.get(done)
                except Exception:
                    self._stop_ranks(agent_of[done[0]])
                    raise
            return {i: self.ray.get(group[0]) for i, group in refs.items()}  # rank 0's result
        except self.ray.exceptions.RayTaskError as exc:  # re-raise the worker's own exception (a ConfigError, ...)
            raise exc.cause from None

    def _stop_ranks(self, index: int) -> None:
        """Kill every rank of agent `index` after one failed: the others would wait in a collective for it (until
        gloo's or NCCL's timeout, minutes), and `close` would wait for them. One actor alone is left to `close`."""
        if len(self.groups[index]) > 1:
            for actor in self.groups[index]:
                self.ray.kill(actor)
            self.stopped.add(index)

    def placement(self) -> dict[str, list[str]]:
        return dict(getattr(self, "nodes", {}))

    def close(self) -> None:
        actors = [actor for group in self.groups for actor in group]
        alive = [actor for i, group in enumerate(self.groups) if i not in self.stopped for actor in group]
        try:  # let each actor stop its grader processes before it is killed
            self.ray.get([actor.close.remote() for actor in alive], timeout=30)
        except Exception:  # a dead or hung actor is killed below all the same
            pass
        for actor in actors:
            self.ray.kill(actor)
        if self.placement_groups:
            from ray.util.placement_group import remove_placement_group

            for group in self.placement_groups:
                remove_placement_group(group)
        self.workers, self.groups, self.placement_groups, self.stopped = [], [], [], set()
        if self.owns_ray:
            self.ray.shutdown()
            self.owns_ray = False


def _check_fits(cluster: dict[str, float], n_agents: int, settings: ExecutorConfig, what: str = "agents") -> None:
    """Actors that can never be placed would wait forever: say so, naming the key to lower. n_agents: actors."""
    for key, resource in (("cpus_per_agent", "CPU"), ("gpus_per_agent", "GPU")):
        per_agent = getattr(settings, key)
        if per_agent * n_agents > cluster.get(resource, 0.0):
            raise ConfigError(
                f"executor.{key}={per_agent:g} × {n_agents} {what} needs {per_agent * n_agents:g} {resource}s but the "
                f"Ray cluster has {cluster.get(resource, 0.0):g}; lower executor.{key} (fractions share a device)"
            )


def _check_placements(cluster: dict[str, float], members: Mapping[str, AgentConfig]) -> None:
    """A placement resource no node has would leave the agent's actors pending forever: say so at start."""
    for name, member in members.items():
        placements = rank_placements(member)
        for resource in dict.fromkeys(p for p in placements if p):
            if cluster.get(resource, 0.0) < PLACEMENT_SHARE * placements.count(resource):
                raise ConfigError(
                    f"agents.members.{name}.placement={member.placement!r}: no node of the Ray cluster has "
                    f"{resource!r}; start one with ray start --resources '{{\"{resource}\": 1}}' or drop the key"
                )


class _ActorWorker(AgentWorker):
    """An AgentWorker whose build error is raised by `ready()`: Ray hands a constructor's exception to the
    driver only as text, a method's as the exception itself (so a ConfigError still exits with one line)."""

    def __init__(self, *args: Any) -> None:
        self._error: Exception | None = None
        try:
            super().__init__(*args)
        except Exception as exc:
            self._error = exc

    def ready(self) -> str:
        if self._error is not None:
            raise self._error
        return super().ready()

    def close(self) -> None:
        if self._error is None:
            super().close()

    def node_id(self) -> str:
        """The Ray node this actor runs on, asked from inside it."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def node_address(self) -> str:
        """The address of the Ray node this actor runs on (the one the other nodes reach it at), asked from inside."""
        import ray

        return ray.util.get_node_ip_address()


def make_executor(config: Config, learners: Mapping[int, LearnerParams], task: Task | None = None) -> Executor:
    """The executor named by executor.backend, with one worker per agent, built, each handed its learner's params
    (`learners`, resolved once by the driver; none for a frozen agent). In-process workers share `task`. The
    placement (executor.placement, `auto` resolved by trainer.placement) decides whether they take turns."""
    from hacrl_exp.trainer.placement import resolve_placement

    shared = resolve_placement(config)[0] == "shared"
    if config.executor.backend == "ray":
        return RayExecutor(config, learners, shared)
    return LocalExecutor(config, learners, task, shared)
