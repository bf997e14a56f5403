"""executor.placement at run time: `auto` resolved to disjoint or shared, and a shared placement that cannot fit
refused before any model loads (the planner's numbers, hacrl_exp.agents.memory_plan: `shared_per_gpu`).

Agents on CPUs have nothing to share: auto is disjoint there (the default run), and an asked `shared` runs the same
turn-taking driver with nothing to move. On GPUs, auto is disjoint when every agent's configured world_size and
fsdp.offload fit their own GPUs (trainer.resources.disjoint_problem), else shared when the agents' peaks, each with the
others asleep, fit one GPU; else one line with both reasons.
"""

from __future__ import annotations

from hacrl_exp.agents.memory_plan import GIB, shared_detail, shared_per_gpu, with_slack
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.trainer.resources import agent_memory, disjoint_problem, gpu_bytes, on_gpus


def check_placement(config: Config) -> None:
    """Refuse, before any model loads, a placement (executor.placement, auto resolved here) that does not fit: under
    disjoint an agent whose configured world_size / fsdp.offload on GPUs of `gpu_bytes(config)` needs more per GPU
    than they hold (less cluster.headroom_gb): the planner's peaks (`AgentMemory.peaks`, plus the allocator's slack),
    the same numbers `python -m hacrl_exp.plan` prints; under shared the awake agent's peak plus the sleeping ones'
    bytes."""
    resolve_placement(config)


def resolve_placement(config: Config) -> tuple[str, str]:
    """(disjoint | shared, why) for the run of `config`; a ConfigError when the asked placement (auto: neither)
    cannot fit its GPUs."""
    asked = config.executor.placement
    gpus = [name for name in config.agents.members if on_gpus(config, name)]
    total = gpu_bytes(config) if gpus else None
    if total is None:
        where = "the agents run on CPUs" if not gpus else "the GPUs' memory is unknown"
        return ("disjoint" if asked == "auto" else asked), f"{where}: nothing to check"
    if asked == "disjoint":
        problem = disjoint_problem(config)
        if problem:
            raise ConfigError(problem)
        return "disjoint", "executor.placement=disjoint"
    shared = shared_problem(config, total)
    if asked == "shared":
        if shared:
            raise ConfigError(f"executor.placement=shared: {shared}")
        return "shared", "executor.placement=shared"
    disjoint = disjoint_problem(config)
    if disjoint is None:
        return "disjoint", "auto: every agent fits its own GPUs"
    if shared is None:
        return "shared", f"auto: disjoint does not fit ({disjoint}); shared does"
    raise ConfigError(f"{disjoint}; nor does executor.placement=shared (auto tried both): {shared}")


def shared_problem(config: Config, total: int) -> str | None:
    """Why the agents, at their configured world_size, cannot take turns on shared GPUs of `total` bytes (per GPU:
    one awake agent's peak with the allocator's slack, plus every sleeping one's bytes), or None."""
    usable = total - int(config.cluster.headroom_gb * GIB)
    members = config.agents.members
    try:
        memories = [agent_memory(config, name, agent) for name, agent in members.items()]
    except ConfigError:  # a hub model whose config.json is not on disk yet: its size is unknown before loading
        return None
    awake = [with_slack(max(m.peaks(a.world_size, False, total))) for m, a in zip(memories, members.values())]
    asleep = [m.sleeping_bytes() for m in memories]
    worst = max(range(len(memories)), key=lambda a: shared_per_gpu(awake, asleep)[a])
    if shared_per_gpu(awake, asleep)[worst] <= usable:
        return None
    return (
        f"{shared_detail(memories, awake, asleep, worst)}, the GPUs hold {usable / GIB:.2f} GiB usable "
        f"(cluster.headroom_gb={config.cluster.headroom_gb:g} kept); python -m hacrl_exp.plan proposes a placement"
    )
