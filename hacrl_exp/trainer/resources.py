"""Memory checks of a run before anything loads: a model, a step or a placement that cannot fit the machine is
refused in one line naming the key, instead of an allocation traceback or an out-of-memory kill minutes later.

One code computes the bytes: the resource planner's (`hacrl_exp.agents.memory_plan`, `python -m hacrl_exp.plan`).
`check_memory` compares the tiny agents' exact state (weights, gradients, master copy, AdamW state, reference) and the
rows a step keeps with the host's available RAM; it errs low (no allocator overhead), so it only refuses what surely
does not fit. `disjoint_problem` and `agent_memory` give trainer.placement's `check_placement` its numbers.
"""

from __future__ import annotations

import psutil

from hacrl_exp.agents.devices import agent_devices
from hacrl_exp.agents.memory_plan import (
    ALLOCATOR_SLACK,
    GIB,
    AgentMemory,
    estimate_agent,
    smallest_world,
    with_slack,
    workload,
)
from hacrl_exp.agents.model_shapes import agent_shape
from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.schema import AgentConfig, Config
from hacrl_exp.errors import ConfigError

BYTES_PER_TOKEN_ROW = 24  # a rollout token kept for the step: id (8), old and new log-prob (4 + 4), masks, text
DATA_COPIES = 3
"""The training task holds its rows about 3 times over: the parsed row (its fields), the prompt built from the problem,
and the row's other fields kept as meta; a low estimate (Python's string headers and the tokenised prompts not
counted), like the rest of the check."""


def agent_memory(config: Config, name: str, agent: AgentConfig) -> AgentMemory:
    """The planner's estimate of one agent under `config` (a tiny agent's vocabulary at its upper bound)."""
    shape = agent_shape(name, agent)
    multiplier = ALGORITHMS[config.algorithm.name].rollout_multiplier
    return estimate_agent(name, agent, shape, workload(config, agent, shape, multiplier))


def model_bytes(config: Config, name: str, agent: AgentConfig) -> int:
    """Weights + gradients + master copy + AdamW state + KL reference of a tiny model, all ranks together (the
    planner's exact parts); 0 for a pretrained one, whose weights live on its GPUs (trainer.placement checks them)."""
    if agent.model.source != "tiny":
        return 0
    return agent_memory(config, name, agent).state


def step_bytes(config: Config, agent: AgentConfig) -> int:
    """Rollout rows one agent keeps during a step (its own, and its partners' re-tokenised for it)."""
    rows = (
        config.trainer.prompts_per_step
        * config.trainer.group_size
        * ALGORITHMS[config.algorithm.name].rollout_multiplier
    )
    tokens = min(config.task.max_prompt_tokens, agent.model.max_positions) + config.rollout.max_new_tokens
    return rows * tokens * BYTES_PER_TOKEN_ROW * len(config.agents.members)


def data_files(config: Config) -> dict[str, int]:
    """{`task.<key>=<file>`: bytes} of the local JSONL files a math task will read (none for a generated task, or
    for data the hub serves: its size is not known before it downloads)."""
    if config.task.name != "math":
        return {}
    from hacrl_exp.tasks.problem_data import resolve_data_path

    found = {}
    for key in ("train_file", "eval_file"):
        name = getattr(config.task, key)
        try:
            path = resolve_data_path(name, config.task.data_dir, key="task.data_dir")
        except (FileNotFoundError, ConfigError):  # reported, with its fix, when the task is built
            continue
        found[f"task.{key}={name}"] = path.stat().st_size
    return found


def check_memory(config: Config, available: int | None = None) -> None:
    """Refuse a config whose models, step rows or data rows need more than the machine's available memory (RAM; the
    estimate is compared with RAM for GPU runs too, where it is a lower bound of the host's share); a GPU placement
    that cannot fit is trainer.placement's `check_placement`."""
    available = psutil.virtual_memory().available if available is None else available
    members = config.agents.members
    models = {name: model_bytes(config, name, agent) for name, agent in members.items()}
    steps = sum(step_bytes(config, agent) for agent in members.values())
    files = data_files(config)
    data = DATA_COPIES * sum(files.values())
    total = sum(models.values()) + steps + data
    if total > available:
        have = f"this machine has {available / GIB:.1f} GiB available"
        if data >= max(steps, *models.values()):
            key = max(files, key=files.get)
            raise ConfigError(
                f"{key}: the task's data rows take about {data / GIB:.1f} GiB once loaded ({DATA_COPIES} × "
                f"{sum(files.values()):,} bytes of JSONL) with the models and rollouts, {have}; use a smaller file"
            )
        biggest = max(models, key=models.get)
        if models[biggest] >= steps:
            key = f"agents.members.{biggest}.model.hidden_size={members[biggest].model.hidden_size}"
            raise ConfigError(
                f"{key}: the model needs about {models[biggest] / GIB:.1f} GiB with its gradients and optimizer, "
                f"{have}; lower hidden_size or num_layers"
            )
        raise ConfigError(
            f"trainer.group_size={config.trainer.group_size}: a step keeps about {steps / GIB:.1f} GiB of rollouts "
            f"(trainer.prompts_per_step × group_size rows per agent), {have}; lower trainer.group_size or "
            "trainer.prompts_per_step"
        )


def gpu_bytes(config: Config) -> int | None:
    """Memory of one GPU: cluster.gpu_memory_gb, else the smallest visible GPU's; None when neither is known
    (a driver without GPUs in front of a Ray cluster: then nothing is checked here)."""
    if config.cluster.gpu_memory_gb:
        return int(config.cluster.gpu_memory_gb * GIB)
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return None
    return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))


def on_gpus(config: Config, name: str) -> bool:
    """Whether agent `name` runs on GPUs: Ray actors with executor.gpus_per_agent > 0, or a CUDA device here."""
    if config.executor.backend == "ray":
        return config.executor.gpus_per_agent > 0
    return agent_devices(config)[name].type == "cuda"


def disjoint_problem(config: Config) -> str | None:
    """Why the agents on their own GPUs cannot fit them (trainer.placement's line under disjoint), or None: more
    ranks than cluster.gpus, or an agent whose peak per GPU exceeds a GPU's."""
    total = gpu_bytes(config)
    if total is None:
        return None
    settings, members = config.executor, config.agents.members
    ranks = sum(a.world_size for n, a in members.items() if on_gpus(config, n))
    if (
        config.cluster.gpus is not None
        and settings.backend == "ray"
        and ranks * settings.gpus_per_agent > config.cluster.gpus
    ):
        return (
            f"executor.placement=disjoint: {ranks} agent ranks × executor.gpus_per_agent={settings.gpus_per_agent:g} "
            f"need {ranks * settings.gpus_per_agent:g} GPUs of their own, cluster.gpus={config.cluster.gpus}"
        )
    usable = total - int(config.cluster.headroom_gb * GIB)
    for name, agent in config.agents.members.items():
        if not on_gpus(config, name):
            continue
        try:
            mem = agent_memory(config, name, agent)
        except ConfigError:  # a hub model whose config.json is not on disk yet: its size is unknown before loading
            continue
        world, offload = agent.world_size, agent.fsdp.offload
        peak = max(mem.peaks(world, offload, total))
        if with_slack(peak) <= usable:
            continue
        key = f"agents.members.{name}"
        fit = smallest_world(mem, 4096, total, usable, offload)
        fix = f"{key}.world_size={fit}" if fit else "LoRA or a shorter sequence"
        if not fit and not offload and smallest_world(mem, 4096, total, usable, True):
            fix = f"{key}.fsdp.offload=true"
        return (
            f"{key}.world_size={world} (fsdp.offload={str(offload).lower()}) needs {_size(with_slack(peak))} per GPU "
            f"({_size(peak)} peak + {ALLOCATOR_SLACK:.0%} allocator slack), "
            f"the GPUs hold {_size(usable)} usable (cluster.headroom_gb={config.cluster.headroom_gb:g} kept); "
            f"use {fix} (python -m hacrl_exp.plan proposes a placement)"
        )
    return None


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if abs(n) >= GIB else f"{n / 2**20:.1f} MiB"


def checkpoint_bytes(config: Config) -> int:
    """About the bytes of one checkpoint of `config`: each agent's weights and optimizer state (the planner's), the
    part that grows with the models; 0 for an agent whose size is not known before it loads (a hub model)."""
    total = 0
    for name, agent in config.agents.members.items():
        try:
            mem = agent_memory(config, name, agent)
        except ConfigError:
            continue
        total += mem.weights + mem.optimizer
    return total
