"""An agent sharded over the W ranks of a torch.distributed process group with FSDP2 (`fully_shard`).

Nothing here shards by hand: `shard_agent` applies `torch.distributed.fsdp.fully_shard` to every decoder layer and
then to the root (embeddings, final norm and a tied output head form the root's unit), and rebuilds AdamW over the
sharded parameters (same lr, betas, eps, weight decay); the state-dict helpers are
`torch.distributed.checkpoint.state_dict`'s. Every function here is a collective: all ranks of the group call it, in
the same order.

Precision: on CPU (gloo) the parameters stay in their dtype and gradients are reduced in it (with `model.compute_dtype`
set, under autocast). On GPU, with `model.compute_dtype` set, FSDP's MixedPrecisionPolicy gathers parameters in that
dtype (bf16) and reduces gradients in float32, the master weights and AdamW state staying float32 (the issue's "bf16
compute, float32 master/reduce"); no autocast then. An agent built with master weights (agents.precision) takes its
float32 masters back as its parameters before it is sharded: the shards are the masters.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor
from transformers.modeling_layers import GradientCheckpointingLayer

from hacrl_exp.agents.agent import Agent
from hacrl_exp.agents.logprobs import batched_response_logprobs
from hacrl_exp.agents.precision import DTYPES, MasterWeightsAdamW, cast_parameters, enable_autocast
from hacrl_exp.agents.ranks import RankGroup, gather, rank_rows
from hacrl_exp.config.schema import AgentConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import Rollouts, SamplingSettings
from hacrl_exp.rollout.hf import HFRolloutEngine

LOOPBACK = "127.0.0.1"


def rendezvous_host(node_addresses: Sequence[str]) -> str:
    """Where rank 0 hosts its group's TCP store, from each rank's node address in rank order (as Ray reports it from
    inside the rank's actor): 127.0.0.1 when every rank is on one node (reachable from that machine only), else rank
    0's node address, the one the other nodes reach it at (docs/distributed.md, "Several machines")."""
    return LOOPBACK if len(set(node_addresses)) == 1 else node_addresses[0]


def store_socket(host: str = LOOPBACK) -> socket.socket:
    """Rank 0's rendezvous socket: bound to `host` (never every interface) on a port the OS picks, and listening.

    Rank 0 hosts its group's TCP store on this very socket (`init_rank_group`, which hands its descriptor over to
    the store), so the port cannot be taken by another process between being chosen and being used, and the store
    is reachable at `host` only (a TCPStore that binds its own port listens on every interface)."""
    if ipaddress.ip_address(host).is_unspecified:
        raise ValueError(f"the rendezvous binds one address, not {host} (every interface): pass a node's address")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen()
    return sock


def interface_of(address: str, interfaces: Mapping[str, Sequence[str]] | None = None) -> str:
    """The network interface holding `address`, from {interface: its addresses} (default this machine's, psutil's):
    'lo' for a loopback address. What gloo's pair connections bind to (GLOO_SOCKET_IFNAME)."""
    if ipaddress.ip_address(address).is_loopback:
        return "lo"
    for name, addresses in (_interfaces() if interfaces is None else interfaces).items():
        if address in addresses:
            return name
    raise ConfigError(
        f"no network interface of this node holds its Ray address {address}; set GLOO_SOCKET_IFNAME to the interface "
        "the other nodes reach it on: executor.runtime_env='{env_vars: {GLOO_SOCKET_IFNAME: <interface>}}'"
    )


def _interfaces() -> dict[str, list[str]]:
    """This machine's interfaces and their addresses (psutil: Ray ships it, so a Ray actor always has it)."""
    import psutil

    return {name: [a.address for a in addrs] for name, addrs in psutil.net_if_addrs().items()}


def init_rank_group(
    rank: int,
    world: int,
    port: int,
    device: torch.device,
    listening: socket.socket | None = None,
    host: str = LOOPBACK,
    address: str | None = None,
) -> None:
    """Join this process to its agent's process group: gloo on CPU, NCCL on GPU, rendezvous through a TCP store
    at host:port that rank 0 hosts on `listening` (its `store_socket(host)`, whose port is `port`).

    address: this rank's own node address (Ray's). Gloo's pair connections bind to the interface that holds it
    (GLOO_SOCKET_IFNAME, unless already set), or to loopback when the store is on loopback (the group on one node).
    NCCL picks its own (NCCL_SOCKET_IFNAME, docs/distributed.md)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    if "GLOO_SOCKET_IFNAME" not in os.environ:  # else gloo binds what this machine's hostname resolves to
        one_node = address is None or ipaddress.ip_address(host).is_loopback
        os.environ["GLOO_SOCKET_IFNAME"] = interface_of(host if one_node else address)
    if rank == 0 and listening is None:
        raise ValueError("rank 0 hosts the rendezvous store: pass its store_socket() as `listening`")
    # the store owns the descriptor from here and closes it: detached, the socket object no longer would
    fd = listening.detach() if rank == 0 and listening is not None else None
    store = dist.TCPStore(host, port, world, is_master=rank == 0, use_libuv=True, master_listen_fd=fd)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (OPT, GPT-2, Llama, Qwen3: its GradientCheckpointingLayers)."""
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def shard_agent(agent: Agent, cfg: AgentConfig, offload: bool = False) -> Agent:
    """Shard `agent` in place over the default process group: `fully_shard` per decoder layer, then the root
    (its reference too, when it has one); AdamW rebuilt over the sharded parameters with the same settings.

    offload: FSDP's CPUOffloadPolicy (parameters, gradients and optimizer state in host RAM, the step on the CPU).
    Returns the agent, whose model is now an FSDPModule: its forwards are collectives."""
    device = next(agent.model.parameters()).device
    mesh = dist.device_mesh.init_device_mesh(device.type, (dist.get_world_size(),))
    mixed = cfg.model.compute_dtype is not None and device.type == "cuda"
    _float32_weights(agent, cfg, autocast=cfg.model.compute_dtype is not None and not mixed)
    mp = MixedPrecisionPolicy(DTYPES[cfg.model.compute_dtype], reduce_dtype=torch.float32) if mixed else None
    policy: OffloadPolicy = CPUOffloadPolicy(pin_memory=device.type == "cuda") if offload else OffloadPolicy()
    # reshard after every forward, the root too (FSDP2 keeps the root gathered by default): a no-grad forward
    # (generation, scoring) would otherwise leave the root's plain unsharded tensors as the module's parameters
    options = {
        "mesh": mesh,
        "offload_policy": policy,
        "reshard_after_forward": True,
        **({"mp_policy": mp} if mp else {}),
    }
    for module in [agent.model] + ([agent.reference] if isinstance(agent.reference, torch.nn.Module) else []):
        for tensor in [*module.parameters(), *module.buffers()]:  # rank 0's weights everywhere (FSDP1's
            dist.broadcast(tensor.data, 0)  # sync_module_states): a warm start computed per rank may differ in bits
        for layer in decoder_layers(module):
            fully_shard(layer, **options)
        fully_shard(module, **options)
    if agent.optimizer is not None:  # the old optimizer points at the unsharded parameters fully_shard replaced
        defaults = agent.optimizer.defaults
        trainable = [p for p in agent.model.parameters() if p.requires_grad]
        settings = {key: defaults[key] for key in ("lr", "betas", "eps", "weight_decay") if key in defaults}
        agent.optimizer = torch.optim.AdamW(trainable, **settings)
    return agent


def _float32_weights(agent: Agent, cfg: AgentConfig, autocast: bool) -> None:
    """An agent built with master weights (agents.precision.MasterWeightsAdamW) gets its float32 masters back as its
    parameters (its reference and any frozen weight are cast to float32), and autocast when `autocast`; FSDP's
    MixedPrecisionPolicy, or autocast on CPU, then computes in bf16. Others are left as they are."""
    if isinstance(agent.engine, HFRolloutEngine):
        agent.engine.drop_copy()  # FSDP gathers the weights for generation (`gathered`)
    if not isinstance(agent.optimizer, MasterWeightsAdamW):
        return
    with torch.no_grad():
        for param, master in zip(agent.optimizer.model_params, agent.optimizer.release()):
            param.data = master.data
    for module in [agent.model] + ([agent.reference] if isinstance(agent.reference, torch.nn.Module) else []):
        cast_parameters(module, torch.float32)
        if autocast:
            enable_autocast(module, DTYPES[cfg.model.compute_dtype])


@contextmanager
def gathered(*models: torch.nn.Module | None) -> Iterator[None]:
    """Gather every FSDP unit of `models` on entry and keep it gathered to the end of the block, then reshard.

    For generation, scoring and evaluation (no gradients): one all-gather per unit per block instead of one per
    forward, and generation runs a forward per new token. The rank holds the full weights meanwhile (in the
    gathered dtype), as verl's FSDP workers do when they sync weights into vLLM; the values are the same gathered
    shards either way, so results do not change. Inside the block a forward is no collective, so the ranks may run
    different forwards (`RankSlicedEngine`)."""
    modules = [m for model in models if model is not None for m in model.modules() if isinstance(m, FSDPModule)]
    for module in modules:
        module.set_reshard_after_forward(False, recurse=False)
        module.unshard()
    try:
        yield
    finally:
        for module in modules:
            module.set_reshard_after_forward(True, recurse=False)
            module.reshard()


class RankSlicedEngine:
    """Data-parallel generation for a sharded hf agent (rollout.sampler=counter, rollout.hf.CounterSampler).

    Rank r of W generates the contiguous rows [r·B/W, (r+1)·B/W) of the call's B rows, each drawing with the
    uniforms of (call seed, its index in the whole call, step), left-padded to the whole call's width, then the ranks
    all-gather the responses: every rank holds what W = 1 draws, for 1/W of the generation work. Every rank draws
    the same call seed from the same stream. Greedy decoding splits the same way. Call it inside `gathered` (a
    forward there is no collective)."""

    def __init__(self, engine: HFRolloutEngine) -> None:
        if engine.sampler != "counter":
            raise ValueError(f"sampler={engine.sampler!r} draws one stream per batch; ranks split rows by counter only")
        self.engine, self.pad_id, self.stop_ids = engine, engine.pad_id, engine.stop_ids

    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        rows = [list(p) for p in prompt_ids for _ in range(n)]
        seed = self.engine.call_seed(sampling)
        ranks = RankGroup(dist.get_rank(), dist.get_world_size())
        share = rank_rows(len(rows), ranks)
        low, high = share.start, share.stop
        mine = self.engine.generate_rows(rows[low:high], sampling, seed, low, max(map(len, rows)))
        parts = gather((mine.response_ids, mine.texts, mine.finished), ranks)
        responses, texts, finished = ([x for part in parts for x in part[i]] for i in range(3))
        return Rollouts(prompt_ids=rows, response_ids=responses, texts=texts, finished=finished)


def rank_sliced_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[list[int]],
    response_ids: Sequence[list[int]],
    pad_id: int,
    batch_size: int,
    temperature: float = 1.0,
) -> list[torch.Tensor]:
    """`agents.logprobs.batched_response_logprobs` data-parallel over the ranks: rank r scores its contiguous rows
    [r·B/W, (r+1)·B/W) of the B rows (`agents.ranks.rank_rows`) in chunks of batch_size, then the ranks all-gather the
    per-row log-probs. A row's chunk holds other rows than W = 1 gives it, padded to another width, so its log-probs
    equal W = 1's to float32 rounding (dividing by whole W = 1 chunks would be exact, but leaves ranks idle whenever
    B < W·batch_size). Call it inside `gathered` (a forward there is no collective)."""
    ranks = RankGroup(dist.get_rank(), dist.get_world_size())
    rows = rank_rows(len(prompt_ids), ranks)
    low, high = rows.start, rows.stop
    mine = batched_response_logprobs(
        model, prompt_ids[low:high], response_ids[low:high], pad_id, batch_size, temperature
    )
    return [row for part in gather(mine, ranks) for row in part]


def full_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every entry of the sharded model's state dict, one at a time, on every rank: each
    DTensor shard is all-gathered as it is reached (`full_tensor`, a collective), so a rank holds one full weight at a
    time beyond its shards. For a tensor-parallel vLLM engine's `load_weights` (rollout.vllm), which keeps its slice;
    all ranks must consume it in the same order."""
    for name, tensor in model.state_dict().items():
        yield name, tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded state dict, gathered on rank 0 in CPU memory (other ranks get {}); a collective."""
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_full_state_dict(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Load a full (unsharded) state dict into a sharded model: each rank keeps its shard. Keys the dict lacks
    (a tied output head that save_pretrained left out) keep their values; a collective."""
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))


def save_sharded_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Write the optimizer's state with torch.distributed.checkpoint: one file per rank plus rank 0's .metadata."""
    import torch.distributed.checkpoint as dcp

    dcp.save({"optim": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=str(folder))


def load_sharded_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore the optimizer state `save_sharded_optimizer` wrote (any W: DCP reshards on load)."""
    import torch.distributed.checkpoint as dcp

    state = {"optim": get_optimizer_state_dict(model, optimizer)}
    dcp.load(state, checkpoint_id=str(folder))
    set_optimizer_state_dict(model, optimizer, state["optim"])
