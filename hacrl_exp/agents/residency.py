"""Where an agent's training state lives between its turns on a shared GPU (executor.placement=shared).

`wake` brings what a call needs to the agent's GPU; `sleep` sends everything back to host RAM and lets vLLM sleep, so
the next agent on the GPU finds it nearly empty (the planner's `sleeping_bytes` is what stays: the process's CUDA
context, NCCL's buffers, vLLM's CUDA graphs). Parameters go to pinned host memory (a plain agent) so the next wake
copies at full PCIe speed; a sharded (FSDP2) agent moves with `module.to`, as verl offloads FSDP2 models
(verl.utils.fsdp_utils.offload_fsdp2_model_to_cpu). Optimizer tensors move in place (`.data`), keeping the objects the
optimizer's state is keyed by. On a CPU device nothing moves: the calls are made and recorded all the same.
"""

from __future__ import annotations

import torch

OPTIMIZER_CALLS = frozenset({"learn", "save", "load", "join"})
"""Calls that need the gradients and AdamW state on the GPU too; the others (rollout, evaluate) only the weights."""


def move_tensor(tensor: torch.Tensor, device: torch.device, pin: bool) -> torch.Tensor:
    """`tensor` on `device` (pinned when it goes to the host and `pin`); itself when already there."""
    if tensor.device == device:
        return tensor
    moved = tensor.to(device, non_blocking=device.type == "cuda")
    return moved.pin_memory() if pin and device.type == "cpu" else moved


def move_module(module: torch.nn.Module, device: torch.device, pin: bool, sharded: bool) -> None:
    """Parameters, their gradients and buffers of `module` to `device`, the Parameter objects kept."""
    if sharded:  # FSDP2's DTensor parameters move with Module.to (what verl does); not pinned
        module.to(device)
    else:
        module._apply(lambda t: move_tensor(t, device, pin))


def move_optimizer(optimizer: torch.optim.Optimizer, device: torch.device, pin: bool) -> None:
    """The optimizer's own tensors (master weights and their gradients, AdamW moments) to `device`, in place.
    AdamW's `step` counters stay where torch put them (CPU unless fused or capturable)."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            param.data = move_tensor(param.data, device, pin)
            if param.grad is not None:
                param.grad.data = move_tensor(param.grad.data, device, pin)
            state = optimizer.state.get(param, {})
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and key != "step":
                    state[key] = move_tensor(value, device, pin)


def move_agent(agent, device: torch.device, *, optimizer: bool, pin: bool, sharded: bool) -> None:
    """The agent's model (and KL reference, and the HF engine's low-precision copy) to `device`; with `optimizer`,
    its optimizer's tensors too."""
    modules = [agent.model, agent.reference, getattr(agent.engine, "_copy", None)]
    for module in modules:
        if isinstance(module, torch.nn.Module):
            move_module(module, device, pin, sharded and module is not getattr(agent.engine, "_copy", None))
    if optimizer and agent.optimizer is not None:
        move_optimizer(agent.optimizer, device, pin)


def wake(agent, device: torch.device, call: str, sharded: bool = False) -> None:
    """Before `call` on a shared GPU: the weights (for OPTIMIZER_CALLS the gradients and AdamW state too) to
    `device`; the vLLM engine wakes itself at its next generation. On a CPU device nothing moves."""
    if device.type != "cpu":
        move_agent(agent, device, optimizer=call in OPTIMIZER_CALLS, pin=False, sharded=sharded)


def sleep(agent, device: torch.device, sharded: bool = False) -> None:
    """After a call on a shared GPU: weights to pinned host RAM, gradients and AdamW state to host RAM, the vLLM
    engine to sleep level 1, the caching allocator's free blocks back to the driver. On a CPU device nothing moves."""
    if device.type == "cpu":
        return
    move_agent(agent, torch.device("cpu"), optimizer=True, pin=True, sharded=sharded)
    if hasattr(agent.engine, "sleep"):
        agent.engine.sleep(level=1)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
