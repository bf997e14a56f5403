"""Will it fit? The memory each agent needs and a placement of the agents on a cluster's GPUs (docs/gpu.md).

Pure arithmetic on the config and the models' shapes (agents.model_shapes): no weights load, no GPU is touched.
Per agent, in bytes (P parameters, T trainable, b(x) bytes of dtype x; p = the training dtype, m = the master's):
  weights P·b(p); gradients T·b(p); master copy T·b(m) when p ≠ m; AdamW two moments 2·T·b(m) plus one float32
  `step` scalar per trainable tensor (torch's AdamW); reference P·b(p) when algorithm.kl_coef > 0 (none with LoRA:
  the adapters switch off). At p = bf16, m = fp32 that is 2 + 2 + 4 + 8 = 16 bytes per parameter, the mixed-
  precision Adam accounting of ZeRO (Rajbhandari et al. 2020, §3.1); at float32 on a CPU it is exactly what the
  tiny agents allocate (tests/agents/test_memory_plan.py).
  Activations of one micro-batch (b rows × s tokens), per layer, after Korthikanti et al. 2022 ("Reducing
  Activation Recomputation in Large Transformer Models", §4.1: s·b·h·(34 + 5·a·s/h) bytes for GPT in 16 bit),
  counted the same way for the layers here: no dropout masks, a fused attention kernel (SDPA / flash: no a·s²
  score matrix), SwiGLU and grouped-query attention, in elements of b(p) per token:
    llama / qwen3: 4h + 2·q + 2·kv + 4·i (+ q + kv for Qwen3's q/k norms);  opt / gpt2: 8h + 2·i
  With gradient checkpointing each layer keeps only its input (h per token) and one layer is recomputed at a time.
  Logits b·s·V·4 (float32 log-probs), often the largest term.
  vLLM: weights P·b(p) and a KV cache of 2·L·kv_heads·head_dim·2 bytes per token within
  rollout.vllm.gpu_memory_utilization of each GPU, tensor-parallel over the agent's W GPUs.
Placement: FSDP-style full sharding of weights, gradients, master and optimizer over W ranks (the working set is
not sharded: each rank runs its own micro-batches), optionally offloaded to CPU (then the GPU holds only the units
being computed); the smallest W per agent, disjoint GPUs per agent. The run builds such a placement from
agents.members.<name>.world_size and fsdp.offload (agents.sharding) and refuses, before any model loads, one whose
peaks do not fit (trainer.resources.check_placement, with these same numbers).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hacrl_exp.agents.model_shapes import ModelShape, agent_shape
from hacrl_exp.config.schema import AgentConfig, Config

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
STEP_BYTES = 4  # torch AdamW's `step`: one float32 scalar tensor per parameter tensor
GATHERED_LAYERS = 2  # FSDP holds the layer it computes and prefetches the next
VLLM_KV_BYTES = 2  # vLLM's KV cache in bf16
SUGGESTED_LORA_R = 64


@dataclass(frozen=True)
class Workload:
    """What one agent's step asks of memory: micro_batch rows of seq_len tokens per forward/backward."""

    micro_batch: int
    seq_len: int
    rollout_rows: int
    """Sequences the agent generates per step (hf: in batches of max_batch)."""
    max_batch: int
    kl: bool
    vllm: bool
    vllm_fraction: float
    vllm_sleeps: bool
    split_rows: bool = False
    """rollout.sample_stream=row: a sharded agent's ranks split the rows (agents.sharding.RankSlicedEngine)."""


def workload(config: Config, agent: AgentConfig, shape: ModelShape, rollout_multiplier: int = 1) -> Workload:
    """The workload of one agent under `config` (rollout_multiplier: 2 for gspo_x2's doubled G)."""
    t, r = config.trainer, config.rollout
    prompt = config.task.max_prompt_tokens
    if agent.model.source != "pretrained":  # agents.factory keeps prompt + response within the positions
        prompt = max(8, min(prompt, shape.max_positions - r.max_new_tokens))
    rows = t.prompts_per_step * t.group_size * rollout_multiplier
    rows_per_update = max(1, rows // t.minibatches_per_block)
    return Workload(
        micro_batch=min(t.micro_batch_size, rows_per_update),
        seq_len=prompt + r.max_new_tokens,
        rollout_rows=rows,
        max_batch=r.max_batch_size,
        kl=config.algorithm.kl_coef > 0,
        vllm=r.backend == "vllm",
        vllm_fraction=r.vllm.gpu_memory_utilization,
        vllm_sleeps=r.vllm.sleep_level > 0,
        split_rows=r.sample_stream == "row",
    )


def lora_params(shape: ModelShape, r: int, targets: list[str]) -> tuple[int, int]:
    """(parameters, tensors) of rank-r adapters: r·(in + out) per targeted projection (A and B) per layer."""
    names = [n for n, _, _ in shape.linears()]
    chosen = [n for n in names if "all-linear" in targets or n.split(".")[-1] in targets or n in targets]
    per_layer = sum(r * (n_in + n_out) for n, n_in, n_out in shape.linears() if n in chosen)
    return shape.layers * per_layer, shape.layers * 2 * len(chosen)


@dataclass(frozen=True)
class AgentMemory:
    """Bytes one agent needs, unsharded (W = 1); `peaks` gives a rank's GPU bytes for a placement."""

    name: str
    shape: ModelShape
    work: Workload
    param_dtype: str
    master_dtype: str
    checkpointing: bool
    lora: bool
    params: int
    trainable: int
    weights: int
    grads: int
    master: int
    optimizer: int
    reference: int
    activations: int
    activations_checkpointed: int
    logits: int
    gathered: int
    """Params (+ grads) of the units a sharded or offloaded rank gathers at once: embeddings/head + 2 layers."""
    vllm_weights: int
    kv_per_token: int
    """KV-cache bytes per token: vLLM's (bf16) with rollout=vllm, else the training dtype's (HF generate)."""

    @property
    def state(self) -> int:
        """Everything FSDP shards: weights, gradients, master copy, optimizer state and reference."""
        return self.weights + self.grads + self.master + self.optimizer + self.reference

    @property
    def working(self) -> int:
        """The unsharded working set of an update: activations (as configured) and logits."""
        return (self.activations_checkpointed if self.checkpointing else self.activations) + self.logits

    def vllm_budget(self, gpu_bytes: int) -> int:
        return int(self.work.vllm_fraction * gpu_bytes) if self.work.vllm else 0

    def kv_cache(self, world: int, gpu_bytes: int) -> int:
        """vLLM's KV cache per GPU: its share of the GPU minus its weight shard (0 when the weights do not fit)."""
        return max(0, self.vllm_budget(gpu_bytes) - self.vllm_weights // world)

    def peaks(self, world: int, offload: bool, gpu_bytes: int) -> tuple[int, int]:
        """(update, rollout) peak bytes of one of the agent's W GPUs."""
        state = 0 if offload else -(-self.state // world)
        resting = 0 if offload else state - self.grads // world  # gradients are freed after each update
        gathered = self.gathered if world > 1 or offload else 0
        budget = self.vllm_budget(gpu_bytes)
        update = state + gathered + self.working + (0 if self.work.vllm_sleeps else budget)
        if self.work.vllm:
            return update, resting + budget
        # HF generation on a sharded agent runs on the full weights, gathered for the whole rollout; every rank
        # generates every row, or its 1/W of them with the row stream
        full = self.weights if world > 1 or offload else 0
        rows = -(-self.work.rollout_rows // world) if self.work.split_rows else self.work.rollout_rows
        batch = min(rows, self.work.max_batch)
        return update, resting + full + batch * self.work.seq_len * self.kv_per_token

    def vllm_problem(self, world: int, gpu_bytes: int) -> str | None:
        """Why vLLM cannot run on W GPUs (tensor parallelism, its share too small), or None."""
        if not self.work.vllm:
            return None
        if self.shape.heads % world:
            return f"vLLM's tensor parallelism needs W to divide {self.shape.heads} heads"
        if self.kv_cache(world, gpu_bytes) < self.work.seq_len * self.kv_per_token // world:
            return "rollout.vllm.gpu_memory_utilization leaves no room for one sequence's KV cache"
        return None


def estimate_agent(
    name: str, agent: AgentConfig, shape: ModelShape, work: Workload, dtype: str | None = None
) -> AgentMemory:
    """Bytes of one agent. dtype: the training dtype p (default model.compute_dtype or model.dtype); the master
    dtype m is float32 when model.dtype is float32, else model.dtype."""
    p = dtype or agent.model.compute_dtype or agent.model.dtype
    m = "float32" if agent.model.dtype == "float32" else agent.model.dtype
    bp, bm = DTYPE_BYTES[p], DTYPE_BYTES[m]
    lora = agent.lora.r > 0 and not agent.frozen
    if agent.frozen:
        trainable = tensors = 0
    elif lora:
        trainable, tensors = lora_params(shape, agent.lora.r, list(agent.lora.target_modules))
    else:
        trainable, tensors = shape.params, shape.tensors
    if lora:  # frozen base in p, float32 adapters and their AdamW state; no master copy
        weights, grads, master, optimizer = shape.params * bp + trainable * 4, trainable * 4, 0, trainable * 8
    else:
        weights, grads = shape.params * bp, trainable * bp
        master, optimizer = (trainable * bm if p != m else 0), 2 * trainable * bm
    optimizer += tensors * STEP_BYTES
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    if shape.family == "llama":
        per_layer = 4 * h + 2 * q + 2 * kv + 4 * i + ((q + kv) if shape.qk_norm else 0)
    else:
        per_layer = 8 * h + 2 * i
    tokens = work.micro_batch * work.seq_len
    layer = tokens * per_layer * bp
    activations = layer if agent.frozen else shape.layers * layer
    unit = (shape.outer_params + GATHERED_LAYERS * shape.layer_params) * bp
    return AgentMemory(
        name=name,
        shape=shape,
        work=work,
        param_dtype=p,
        master_dtype=m,
        checkpointing=agent.model.gradient_checkpointing,
        lora=lora,
        params=shape.params,
        trainable=trainable,
        weights=weights,
        grads=grads,
        master=master,
        optimizer=optimizer,
        reference=shape.params * bp if work.kl and trainable and not lora else 0,
        activations=activations,
        activations_checkpointed=min(activations, shape.layers * tokens * h * bp + layer),
        logits=tokens * shape.vocab * 4,
        gathered=unit * (2 if trainable and not lora else 1),
        vllm_weights=shape.params * bp,
        kv_per_token=2 * shape.layers * shape.kv_dim * (VLLM_KV_BYTES if work.vllm else bp),
    )


@dataclass(frozen=True)
class Placement:
    """One agent's place: W ranks on `gpus`, offload on or off, and its peak bytes per GPU."""

    name: str
    world: int
    offload: bool
    gpus: list[int]
    update_peak: int
    rollout_peak: int
    host_bytes: int
    """CPU RAM its offloaded state needs (0 without offload)."""


@dataclass
class Plan:
    """The memory of each agent and the placement (empty when it cannot fit: then `reason` and `changes`)."""

    memories: list[AgentMemory]
    gpus: int
    gpu_bytes: int
    usable_bytes: int
    placements: list[Placement] = field(default_factory=list)
    reason: str = ""
    changes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return bool(self.placements)

    def line(self) -> str:
        """One line: the placement, or why it cannot fit and the smallest changes that would."""
        where = f"{self.gpus} × {self.gpu_bytes / GIB:.0f} GiB GPUs"
        if self.fits:
            used = sum(p.world for p in self.placements)
            return f"fits on {where}: {used} GPUs used, " + ", ".join(
                f"{p.name} W={p.world}{' offload' if p.offload else ''}" for p in self.placements
            )
        fix = "; ".join(self.changes) if self.changes else "no single change found; try LoRA and a shorter sequence"
        return f"does not fit on {where}: {self.reason}. Would fit with: {fix}"


def smallest_world(mem: AgentMemory, max_world: int, gpu_bytes: int, usable: int, offload: bool) -> int | None:
    """The smallest W ≤ max_world at which every one of the agent's GPUs holds its peaks, or None."""
    for world in range(1, max_world + 1):
        if mem.vllm_problem(world, gpu_bytes) is None and max(mem.peaks(world, offload, gpu_bytes)) <= usable:
            return world
    return None


def place(memories: list[AgentMemory], gpus: int, gpu_bytes: int, usable: int, host: int | None) -> list | str:
    """Placements on disjoint GPUs (smallest W each, offload only where it saves GPUs), or the reason it fails."""
    if gpus < len(memories):
        return f"{len(memories)} agents need at least {len(memories)} GPUs (one or more each), {gpus} given"
    spare = gpus - len(memories) + 1
    options = []
    for mem in memories:
        plain = smallest_world(mem, spare, gpu_bytes, usable, offload=False)
        off = smallest_world(mem, spare, gpu_bytes, usable, offload=True)
        if plain is None and off is None:
            need = min(max(mem.peaks(spare, True, gpu_bytes)), max(mem.peaks(spare, False, gpu_bytes)))
            return (
                f"{mem.name} needs {need / GIB:.1f} GiB per GPU even sharded over {spare} GPUs "
                f"(its working set alone is {mem.working / GIB:.1f} GiB), {usable / GIB:.1f} GiB usable"
            )
        options.append([plain, off])
    chosen = [(w[0], False) if w[0] is not None else (w[1], True) for w in options]
    order = sorted(range(len(memories)), key=lambda k: -((options[k][0] or 10**9) - (options[k][1] or 10**9)))
    for k in order:  # offload the agent whose GPUs it saves most, until they fit
        if sum(w for w, _ in chosen) <= gpus:
            break
        if options[k][1] is not None and options[k][1] < chosen[k][0]:
            chosen[k] = (options[k][1], True)
    if sum(w for w, _ in chosen) > gpus:
        needs = ", ".join(f"{m.name} W={w}" for m, (w, _) in zip(memories, chosen))
        return f"the agents need {sum(w for w, _ in chosen)} GPUs ({needs}), {gpus} given"
    placements, first = [], 0
    for mem, (world, offload) in zip(memories, chosen):
        update, rollout = mem.peaks(world, offload, gpu_bytes)
        host_bytes = mem.state if offload else 0
        placements.append(
            Placement(mem.name, world, offload, list(range(first, first + world)), update, rollout, host_bytes)
        )
        first += world
    offloaded = sum(p.host_bytes for p in placements)
    if host is not None and offloaded > host:
        return f"CPU offload needs {offloaded / GIB:.0f} GiB of host RAM, cluster.cpu_memory_gb={host / GIB:.0f}"
    return placements


def estimate(config: Config, rollout_multiplier: int = 1, vocab: dict[str, int] | None = None) -> list[AgentMemory]:
    """The memory of every agent of `config` (vocab: tokenizer lengths of tiny agents, when known)."""
    out = []
    for name, agent in config.agents.members.items():
        shape = agent_shape(name, agent, (vocab or {}).get(name))
        out.append(estimate_agent(name, agent, shape, workload(config, agent, shape, rollout_multiplier)))
    return out


def plan(config: Config, gpus: int, gpu_memory_gb: float, rollout_multiplier: int = 1) -> Plan:
    """Estimate and place every agent of `config` on `gpus` GPUs of `gpu_memory_gb` GiB; when it cannot fit, the
    reason and the smallest single changes that would (more or larger GPUs, LoRA, a smaller micro-batch, shorter
    responses), each a config override."""
    memories = estimate(config, rollout_multiplier)
    result = _place(config, memories, gpus, gpu_memory_gb)
    if not result.fits:
        result.changes = _changes(config, memories, gpus, gpu_memory_gb, rollout_multiplier)
    return result


def _place(config: Config, memories: list[AgentMemory], gpus: int, gpu_memory_gb: float) -> Plan:
    gpu_bytes = int(gpu_memory_gb * GIB)
    usable = gpu_bytes - int(config.cluster.headroom_gb * GIB)
    host = int(config.cluster.cpu_memory_gb * GIB) if config.cluster.cpu_memory_gb else None
    out = Plan(memories, gpus, gpu_bytes, usable)
    placed = place(memories, gpus, gpu_bytes, usable, host)
    if isinstance(placed, str):
        out.reason = placed
    else:
        out.placements = placed
    return out


def _fits(config: Config, gpus: int, gpu_memory_gb: float, multiplier: int) -> bool:
    return _place(config, estimate(config, multiplier), gpus, gpu_memory_gb).fits


def _changes(config: Config, memories: list[AgentMemory], gpus: int, gb: float, multiplier: int) -> list[str]:
    """Single overrides that make `config` fit, smallest first within each kind."""
    out = []
    for more in range(gpus + 1, max(8 * gpus, 64) + 1):
        if _place(config, memories, more, gb).fits:
            out.append(f"cluster.gpus={more}")
            break
    if gpus >= len(memories):
        for bigger in range(int(gb) + 1, 4097):
            if _place(config, memories, gpus, bigger).fits:
                out.append(f"cluster.gpu_memory_gb={bigger}")
                break
    trainable = [m for m in sorted(memories, key=lambda m: -m.params) if m.trainable and not m.lora]
    for k in range(1, len(trainable) + 1):
        changed = copy.deepcopy(config)
        for m in trainable[:k]:
            changed.agents.members[m.name].lora.r = SUGGESTED_LORA_R
        if _fits(changed, gpus, gb, multiplier):
            out.append(" ".join(f"agents.members.{m.name}.lora.r={SUGGESTED_LORA_R}" for m in trainable[:k]))
            break
    knobs = [("trainer", "micro_batch_size", 1), ("rollout", "max_new_tokens", 256)]
    if config.rollout.backend == "hf":  # HF generate keeps the KV cache of max_batch_size sequences
        knobs.insert(1, ("rollout", "max_batch_size", 1))
    for section, attr, floor in knobs:
        value = getattr(getattr(config, section), attr)
        while value > floor:
            value = max(floor, value // 2)
            changed = copy.deepcopy(config)
            setattr(getattr(changed, section), attr, value)
            if _fits(changed, gpus, gb, multiplier):
                out.append(f"{section}.{attr}={value}")
                break
    return out
