"""Where each agent lives (one device per agent, spread over the visible GPUs) and how much memory it holds."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import compute_device

MIB = 1 << 20
_CUDA = re.compile(r"cuda(?::(\d+))?")


def place_agents(names: Sequence[str], requested: Sequence[str], n_gpus: int) -> dict[str, str]:
    """Device of each agent: requested 'cpu', 'mps', 'cuda' (= cuda:0) or 'cuda:N' as given; 'auto' the GPU holding
    the fewest agents so far (explicit placements counted first, lowest index on ties), or 'cpu' without a GPU.

    With every agent on 'auto', agent i goes to cuda:(i mod n_gpus): a device per agent while GPUs last.
    Raises ValueError naming the agent when a CUDA device is asked for that is not visible.
    """
    if len(names) != len(requested):
        raise ValueError(f"{len(names)} names but {len(requested)} requested devices")
    placed: dict[str, str] = {}
    load = [0] * n_gpus
    for name, want in zip(names, requested):
        match = _CUDA.fullmatch(want)
        if want in ("cpu", "mps"):
            placed[name] = want
        elif match:
            index = int(match.group(1) or 0)
            if index >= n_gpus:
                visible = f"{n_gpus} GPU(s) visible" if n_gpus else "no GPU visible"
                raise ValueError(f"{name}: device {want!r} but {visible}")
            placed[name] = f"cuda:{index}"
            load[index] += 1
        elif want != "auto":
            raise ValueError(f"{name}: device {want!r} is not auto, cpu, mps, cuda or cuda:N")
    for name, want in zip(names, requested):
        if want == "auto":
            if n_gpus == 0:
                placed[name] = "cpu"
                continue
            index = min(range(n_gpus), key=lambda i: (load[i], i))
            placed[name] = f"cuda:{index}"
            load[index] += 1
    return {name: placed[name] for name in names}


def agent_devices(config: Config, n_gpus: int | None = None) -> dict[str, torch.device]:
    """Each agent's device: agents.members.<name>.device, else trainer.device, placed by `place_agents`."""
    names = list(config.agents.members)
    requested = [m.device or config.trainer.device for m in config.agents.members.values()]
    gpus = torch.cuda.device_count() if n_gpus is None else n_gpus
    try:
        placed = place_agents(names, requested, gpus)
    except ValueError as exc:
        name = str(exc).split(":", 1)[0]
        key = f"agents.members.{name}.device" if name in names else "trainer.device"
        raise ConfigError(f"{key}: {exc}; pick a visible device or auto") from None
    return {name: torch.device(device) for name, device in placed.items()}


def _local(t: torch.Tensor) -> torch.Tensor:
    """The part of a tensor this process holds: a sharded (DTensor) parameter's local shard, else the tensor."""
    return t.to_local() if hasattr(t, "to_local") else t


def _bytes(tensors) -> int:
    return sum(_local(t).numel() * t.element_size() for t in tensors)


def _unique(tensors) -> list[torch.Tensor]:
    seen, out = set(), []
    for t in tensors:
        if _local(t).data_ptr() not in seen:
            seen.add(_local(t).data_ptr())
            out.append(t)
    return out


def resident_memory(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, reference=None) -> dict:
    """Bytes an agent keeps between steps, in MiB: weights, gradients, optimizer state, float32 master weights an
    optimizer steps in place of the model's (and their gradients, counted with the gradients), a separate reference.

    Counted from the tensors themselves (tied weights once), so they are exact on any device.
    """
    params = _unique(list(model.parameters()))
    owned = {_local(t).data_ptr() for t in params}
    # float32 masters an optimizer steps instead of the model's bf16 weights (agents.precision.MasterWeightsAdamW)
    masters = [p for group in (optimizer.param_groups if optimizer else []) for p in group["params"]]
    masters = [p for p in _unique(masters) if _local(p).data_ptr() not in owned]
    grads = [p.grad for p in params + masters if p.grad is not None]
    state = []
    if optimizer is not None:
        for entry in optimizer.state.values():
            state += [v for v in entry.values() if torch.is_tensor(v)]
    ref = [p for p in _unique(list(reference.parameters())) if _local(p).data_ptr() not in owned] if reference else []
    extra = {"memory/master_mib": _bytes(masters) / MIB} if masters else {}  # only where there are masters
    return {
        "memory/params_mib": _bytes(params) / MIB,
        "memory/trainable_params": float(sum(p.numel() for p in params if p.requires_grad)),  # global, all ranks
        "memory/grads_mib": _bytes(grads) / MIB,
        "memory/optimizer_mib": _bytes(state) / MIB,
        "memory/reference_mib": _bytes(ref) / MIB,
        **extra,
    }


def memory_metrics(agents: Sequence, reset_peak: bool = False) -> dict[str, dict[str, float]]:
    """Per agent name: `resident_memory`, and on CUDA memory/gpu_peak_mib and memory/gpu_reserved_mib of its device.

    peak_mb = torch.cuda.max_memory_allocated(device) since the process started (or its peak was last reset): the
    device's peak, which agents placed on the same GPU share. reset_peak=True resets each device read, once all are
    read, for per-interval peaks (then call it once for all the agents of a process, not once per agent).
    """
    peaks: dict[torch.device, dict[str, float]] = {}
    for agent in agents:
        device = compute_device(agent.model)
        if device.type == "cuda" and device not in peaks:
            peaks[device] = {
                "memory/gpu_peak_mib": torch.cuda.max_memory_allocated(device) / MIB,
                "memory/gpu_reserved_mib": torch.cuda.memory_reserved(device) / MIB,
            }
    if reset_peak:
        for device in peaks:
            torch.cuda.reset_peak_memory_stats(device)
    out = {}
    for agent in agents:
        device = compute_device(agent.model)
        out[agent.name] = {**resident_memory(agent.model, agent.optimizer, agent.reference), **peaks.get(device, {})}
    return out
