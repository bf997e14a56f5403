"""Will it fit? The memory each agent needs and a placement of the agents on a cluster's GPUs (docs/gpu.md).

Pure arithmetic on the config and the models' shapes (agents.model_shapes): no weights load, no GPU is touched.
Per agent, in bytes (P parameters, T trainable, d the weights' dtype (model.dtype), p the compute dtype
(model.compute_dtype, else d), b(x) bytes of dtype x):
  resident state, unsharded, by how the agent trains (agents.precision):
    master weights (d = float32, p = bf16): bf16 weights P·2, float32 masters T·4 and their gradients T·4, AdamW's
      two moments 2·T·4: 18 bytes per parameter;
    autocast (model.mixed_precision=autocast): float32 weights, gradients and moments, 16 bytes per parameter;
    otherwise: weights, gradients and moments in d (b(d)·4 per parameter); LoRA: a frozen base in p, float32
      adapters, their gradients and moments;
    plus torch AdamW's float32 `step` per trainable tensor, and a KL reference P·b (the weights' dtype) when
    algorithm.kl_coef > 0 (none with LoRA: the adapters switch off). A sharded agent (FSDP2) holds float32 shards
    of weights, gradients and moments (16 bytes per parameter at d = float32) over its W ranks; FSDP's
    MixedPrecisionPolicy gathers units in bf16.
  working set of an update, for one micro-batch (agents.memory_terms, each term checked on CPU): activations as
    configured (every layer's, or with gradient checkpointing each layer's input plus one layer's), the log-prob
    path's logits (chunked: a few chunks of ~256 MiB; full: 4 float32 copies of the micro-batch's logits), under
    autocast the bf16 copy of the output head its matmul keeps; then the optimizer step's temporaries (foreach
    AdamW: one float32 tensor per trainable weight; none fused, as on CUDA), whichever is larger.
  the HF rollout: the KV cache of one generation batch, or a scoring forward's logits and one layer, whichever is
    larger, on top of the resident state (gradients stay allocated between updates), and an agent whose weights
    are float32 under autocast generates from a bf16 copy (P·2) on CUDA.
  vLLM: weights P·b(p) and a KV cache of 2·L·kv_heads·head_dim·2 bytes per token within
    rollout.vllm.gpu_memory_utilization of each GPU; the weights are split over the T = rollout.tensor_parallel GPUs
    of each of a sharded agent's W / T data-parallel replicas (T = 1 at W = 1), so each GPU holds P·b(p)/T.
The peaks are of allocated bytes (torch.cuda.max_memory_allocated); the placement keeps ALLOCATOR_SLACK of each on
top for the caching allocator's rounding and fragmentation. Which predictions were checked against measurements,
and which were not: docs/gpu.md.
Placement: FSDP-style full sharding of weights, gradients, master and optimizer over W ranks (the working set is
not sharded: each rank runs its own micro-batches), optionally offloaded to CPU (then the GPU holds only the units
being computed and their buffers); the smallest W per agent, disjoint GPUs per agent. The run builds such a
placement from agents.members.<name>.world_size and fsdp.offload (agents.sharding) and refuses, before any model
loads, one whose peaks do not fit (trainer.placement.check_placement, with these same numbers).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hacrl_exp.agents.logprobs import AUTO_BYTES, CHUNKED_FAMILIES
from hacrl_exp.agents.memory_terms import adamw_temporaries, layer_activation_bytes, logits_bytes, unit_buffers
from hacrl_exp.agents.model_shapes import ModelShape, agent_shape
from hacrl_exp.config.schema import AgentConfig, Config

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
STEP_BYTES = 4  # torch AdamW's `step`: one float32 scalar tensor per parameter tensor
GATHERED_LAYERS = 2  # FSDP holds the layer it computes and prefetches the next
VLLM_KV_BYTES = 2  # vLLM's KV cache in bf16
SUGGESTED_LORA_R = 64
SLEEPING_PROCESS_BYTES = 1 * GIB
"""What a sleeping agent's process keeps on each GPU it shares (executor.placement=shared), an assumption until
scripts/gpu_check.sh measures it: its own CUDA context (~0.5 GiB on an H100 with torch's kernels loaded; the awake
agent's is in cluster.headroom_gb) and its NCCL communicators' buffers. Its weights (pinned host RAM), gradients and
AdamW state (host RAM) and its caching allocator's free blocks (torch.cuda.empty_cache) leave the GPU."""
VLLM_GRAPH_BYTES = 1 * GIB
"""vLLM's CUDA graphs of a sleeping engine (assumed; none with rollout.vllm.enforce_eager): sleep frees only what vLLM's
sleep-mode allocator holds, the weights (level 1: copied to host RAM) and the KV cache (https://docs.vllm.ai/en/latest/
features/sleep_mode/: "Level 1 sleep will offload the model weights and discard the KV cache"); the graphs, the
allocator's setup and the compiled kernels stay for a fast wake (https://blog.vllm.ai/2025/10/26/sleep-mode.html)."""
ALLOCATOR_SLACK = 0.10
"""Kept on top of a predicted peak when placing: the CUDA caching allocator rounds blocks and fragments."""


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
    vllm_graphs: bool = False
    """rollout=vllm without rollout.vllm.enforce_eager: the engine keeps CUDA graphs (also while it sleeps)."""
    """rollout=hf: a sharded agent's ranks split the rows (agents.sharding.RankSlicedEngine)."""
    response_len: int = 0
    """Response tokens per row (what the chunked log-prob path projects); 0: all of seq_len."""
    tensor_parallel: int = 1
    """rollout.tensor_parallel: GPUs per vLLM engine of a sharded agent (W = 1 runs one engine on its GPU)."""


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
        vllm_graphs=r.backend == "vllm" and not r.vllm.enforce_eager,
        split_rows=r.backend == "hf",  # a sharded hf agent draws by counter (config.validate)
        response_len=r.max_new_tokens,
        tensor_parallel=r.tensor_parallel,
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
    mode: str
    """How it trains: master, autocast, plain or lora (module docstring)."""
    param_dtype: str
    master_dtype: str
    checkpointing: bool
    lora: bool
    logprobs: str
    """The log-prob path it runs: chunked or full (agents.logprobs)."""
    params: int
    trainable: int
    weights: int
    grads: int
    master: int
    optimizer: int
    reference: int
    sharded_state: int
    """Weights, gradients, AdamW state and reference as FSDP shards them, all ranks together."""
    activations: int
    layer_activations: int
    """One layer's, what gradient checkpointing recomputes at a time."""
    activations_checkpointed: int
    """Every layer's input (what checkpointing keeps) plus one layer's."""
    logits: int
    """The log-prob path's peak in an update (agents.memory_terms.logits_bytes)."""
    scoring: int
    """A no-gradient scoring forward's peak: its logits and one layer."""
    head_copy: int
    """Under autocast: the bf16 copy of the output head its matmul keeps for the backward."""
    optimizer_temp: int
    gathered: int
    """Params (+ grads) of the 2 layers a sharded or offloaded rank computes and prefetches."""
    unit_buffers: tuple[int, int]
    """FSDP2's buffers for its largest unit (the embeddings/head), (offload off, on) (memory_terms.unit_buffers)."""
    generation_copy: int
    """The bf16 copy an unsharded agent with float32 weights generates from on CUDA (rollout.hf)."""
    vllm_weights: int
    kv_per_token: int
    """KV-cache bytes per token: vLLM's (bf16) with rollout=vllm, else the compute dtype's (HF generate)."""

    @property
    def state(self) -> int:
        """Everything an unsharded agent keeps: weights, gradients, master copy, optimizer state and reference."""
        return self.weights + self.grads + self.master + self.optimizer + self.reference

    @property
    def working(self) -> int:
        """The unsharded working set of an update: activations (as configured), logits, the head's bf16 copy.
        With checkpointing the layers' inputs stay; one layer is recomputed after the logits' backward is done."""
        logits = self.logits + self.head_copy
        if not self.checkpointing:
            return self.activations + logits
        kept = self.activations_checkpointed - self.layer_activations
        return kept + max(self.layer_activations, logits)

    def vllm_budget(self, gpu_bytes: int) -> int:
        return int(self.work.vllm_fraction * gpu_bytes) if self.work.vllm else 0

    def tensor_parallel(self, world: int) -> int:
        """GPUs per vLLM engine at W = world: rollout.tensor_parallel for a sharded agent, 1 at W = 1."""
        return self.work.tensor_parallel if world > 1 else 1

    def kv_cache(self, world: int, gpu_bytes: int) -> int:
        """vLLM's KV cache per GPU: its share of the GPU minus its weight shard (0 when the weights do not fit)."""
        return max(0, self.vllm_budget(gpu_bytes) - self.vllm_weights // self.tensor_parallel(world))

    def peaks(self, world: int, offload: bool, gpu_bytes: int, sharded: bool | None = None) -> tuple[int, int]:
        """(update, rollout) peak bytes of one of the agent's W GPUs. sharded: FSDP2 (default: W > 1 or offload;
        True at W = 1 models an FSDP2 agent on one rank, as benchmarks.gpu_fsdp runs)."""
        sharded = world > 1 or offload if sharded is None else sharded
        if sharded:
            state = 0 if offload else -(-self.sharded_state // world)
            gathered = self.gathered + self.unit_buffers[offload]
            # agents.sharding's AdamW is torch's foreach one on float32 shards; offloaded, it steps on the CPU
            step_temp = 0 if offload else -(-adamw_temporaries(self.trainable, 4, fused=False) // world)
        else:
            state, gathered, step_temp = self.state, 0, self.optimizer_temp
        copy = 0 if sharded else self.generation_copy
        budget = self.vllm_budget(gpu_bytes)
        update = state + gathered + copy + max(self.working, step_temp) + (0 if self.work.vllm_sleeps else budget)
        resting = state  # trainer.step leaves the last update's gradients allocated until the next update
        if self.work.vllm:
            return update, resting + budget
        # HF generation on a sharded agent runs on the full weights, gathered for the whole rollout; every rank
        # generates every row, or its 1/W of them with the row stream
        full = self.vllm_weights if sharded else 0
        rows = -(-self.work.rollout_rows // world) if self.work.split_rows else self.work.rollout_rows
        batch = min(rows, self.work.max_batch)
        kv = batch * self.work.seq_len * self.kv_per_token
        return update, resting + copy + full + max(kv, self.scoring)

    def sleeping_bytes(self) -> int:
        """What the agent leaves on each GPU it shares while it sleeps (executor.placement=shared): its process's
        context and communicators, and a vLLM engine's CUDA graphs (SLEEPING_PROCESS_BYTES, VLLM_GRAPH_BYTES)."""
        return SLEEPING_PROCESS_BYTES + (VLLM_GRAPH_BYTES if self.work.vllm_graphs else 0)

    def state_share(self, world: int) -> int:
        """One rank's training state (weights, gradients, master copy, AdamW state, reference): what a learn turn's
        wake brings to its GPU and its sleep takes back."""
        return -(-self.sharded_state // world) if world > 1 else self.state

    def weights_share(self, world: int) -> int:
        """One rank's weights (and reference): what a rollout or evaluation turn's wake brings, plus its vLLM weights
        (the engine's level-1 sleep parks them in host RAM)."""
        kl = 2 if self.reference else 1
        training = -(-self.params * DTYPE_BYTES[self.master_dtype] * kl // world) if world > 1 else self.weights
        return (
            training
            + (self.reference if world == 1 else 0)
            + self.vllm_weights // self.tensor_parallel(world) * (1 if self.work.vllm else 0)
        )

    def vllm_problem(self, world: int, gpu_bytes: int) -> str | None:
        """Why vLLM cannot run on W GPUs (W not data-parallel × tensor-parallel, heads not split, its share too
        small), or None."""
        if not self.work.vllm:
            return None
        tp = self.tensor_parallel(world)
        if world % tp:
            return f"W={world} is not a multiple of rollout.tensor_parallel={tp}"
        if self.shape.heads % tp:
            return f"vLLM's tensor parallelism needs rollout.tensor_parallel={tp} to divide {self.shape.heads} heads"
        if self.kv_cache(world, gpu_bytes) < self.work.seq_len * self.kv_per_token // tp:
            return "rollout.vllm.gpu_memory_utilization leaves no room for one sequence's KV cache"
        return None


def training_mode(agent: AgentConfig) -> str:
    """master, autocast, plain or lora (module docstring; agents.precision)."""
    if agent.lora.r > 0 and not agent.frozen:
        return "lora"
    if agent.model.compute_dtype is not None and agent.model.dtype == "float32":
        return agent.model.mixed_precision
    return "plain"


def logprob_path(shape: ModelShape, work: Workload, device: str) -> str:
    """The path agents.logprobs.logprob_path picks: chunked on CUDA and for micro-batches of large logits."""
    if shape.family not in CHUNKED_FAMILIES:  # the shapes' families: llama (incl. qwen2/3, mistral), opt, gpt2
        return "full"
    big = work.micro_batch * work.seq_len * shape.vocab * 4 >= AUTO_BYTES
    return "chunked" if device == "cuda" or big else "full"


@dataclass(frozen=True)
class Runtime:
    """What the code does around the model: the device (cuda or cpu), the log-prob path (None: the one
    agents.logprobs picks there), a fused AdamW (None: on CUDA, as agents.precision.make_optimizer builds it), and the
    HF engine's bf16 copy of float32 weights (None: on CUDA, as agents.agent.make_engine builds it)."""

    device: str = "cuda"
    logprobs: str | None = None
    fused_adamw: bool | None = None
    generation_copy: bool | None = None


BEFORE_ISSUE_25 = Runtime(logprobs="full", fused_adamw=False, generation_copy=False)
"""The code the issue's H200 figures were measured with (85e0f16): full logits, foreach AdamW, no bf16 copy (with
model.mixed_precision=autocast, the only mixed precision it had)."""


def estimate_agent(
    name: str,
    agent: AgentConfig,
    shape: ModelShape,
    work: Workload,
    dtype: str | None = None,
    runtime: Runtime = Runtime(),
) -> AgentMemory:
    """Bytes of one agent. dtype: the compute dtype p (default model.compute_dtype or model.dtype); runtime: what
    the code around it does (`Runtime`; default the code here on CUDA)."""
    device = runtime.device
    mode = training_mode(agent)
    p_name = dtype or agent.model.compute_dtype or agent.model.dtype
    d, p = DTYPE_BYTES[agent.model.dtype], DTYPE_BYTES[p_name]
    held = {"master": p, "autocast": 4}.get(mode, d if mode == "plain" else p)  # the dtype the model's weights hold
    if agent.frozen:
        trainable = tensors = 0
    elif mode == "lora":
        trainable, tensors = lora_params(shape, agent.lora.r, list(agent.lora.target_modules))
    else:
        trainable, tensors = shape.params, shape.tensors
    moment = 4 if mode in ("master", "autocast", "lora") else d
    if mode == "lora":  # frozen base in p, float32 adapters and their AdamW state; no master copy
        weights, grads, master = shape.params * p + trainable * 4, trainable * 4, 0
    else:
        weights, master = shape.params * held, trainable * 4 if mode == "master" else 0
        grads = trainable * (4 if mode == "master" else held)
    optimizer = 2 * trainable * moment + tensors * STEP_BYTES
    path = runtime.logprobs or logprob_path(shape, work, device)
    fused = device == "cuda" if runtime.fused_adamw is None else runtime.fused_adamw
    gen_copy = device == "cuda" if runtime.generation_copy is None else runtime.generation_copy
    tokens = work.micro_batch * work.seq_len
    response = work.micro_batch * (work.response_len or work.seq_len)
    layer = layer_activation_bytes(shape, tokens, p, held)
    activations = layer if agent.frozen else shape.layers * layer
    largest_unit = max(shape.outer_params, shape.layer_params)
    full_ft = trainable and mode != "lora"
    return AgentMemory(
        name=name,
        shape=shape,
        work=work,
        mode=mode,
        param_dtype=p_name,
        master_dtype="float32" if mode in ("master", "autocast") else agent.model.dtype,
        checkpointing=agent.model.gradient_checkpointing,
        lora=mode == "lora",
        logprobs=path,
        params=shape.params,
        trainable=trainable,
        weights=weights,
        grads=grads,
        master=master,
        optimizer=optimizer,
        reference=shape.params * held if work.kl and full_ft else 0,
        sharded_state=shape.params * d * (2 if work.kl and full_ft else 1)
        + trainable * (d + 2 * moment)
        + tensors * STEP_BYTES,
        activations=activations,
        layer_activations=layer,
        activations_checkpointed=min(activations, shape.layers * tokens * shape.hidden * held + layer),
        logits=logits_bytes(path, tokens, response, shape, p, grad=bool(trainable)),
        scoring=logits_bytes(path, tokens, response, shape, p, grad=False) + layer,
        head_copy=shape.vocab * shape.hidden * p if mode == "autocast" and trainable else 0,
        optimizer_temp=adamw_temporaries(trainable, moment, fused),
        gathered=GATHERED_LAYERS * shape.layer_params * p * (2 if full_ft else 1),
        unit_buffers=(unit_buffers(largest_unit, p, False), unit_buffers(largest_unit, p, True)),
        generation_copy=shape.params * p if mode == "autocast" and gen_copy else 0,
        vllm_weights=shape.params * p,
        kv_per_token=2 * shape.layers * shape.kv_dim * (VLLM_KV_BYTES if work.vllm else p),
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


def with_slack(peak: int) -> int:
    """A predicted allocated peak plus ALLOCATOR_SLACK: what a placement must leave room for."""
    return int(peak * (1 + ALLOCATOR_SLACK))


def smallest_world(mem: AgentMemory, max_world: int, gpu_bytes: int, usable: int, offload: bool) -> int | None:
    """The smallest W ≤ max_world at which every one of the agent's GPUs holds its peaks (and the allocator's
    slack), or None."""
    for world in range(1, max_world + 1):
        peak = max(mem.peaks(world, offload, gpu_bytes))
        if mem.vllm_problem(world, gpu_bytes) is None and with_slack(peak) <= usable:
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
        host_bytes = mem.sharded_state if offload else 0
        placements.append(
            Placement(mem.name, world, offload, list(range(first, first + world)), update, rollout, host_bytes)
        )
        first += world
    offloaded = sum(p.host_bytes for p in placements)
    if host is not None and offloaded > host:
        return f"CPU offload needs {offloaded / GIB:.0f} GiB of host RAM, cluster.cpu_memory_gb={host / GIB:.0f}"
    return placements


@dataclass(frozen=True)
class SharedPlan:
    """Every agent on the same GPUs (executor.placement=shared): rank r of each on GPU r, one agent awake at a time.

    Per GPU, while agent a is awake: a's peak (with the allocator's slack) plus what every sleeping agent leaves
    (`AgentMemory.sleeping_bytes`); `per_gpu` is the largest of those, over the agents. Empty `reason`: it fits."""

    memories: list[AgentMemory]
    gpus: int
    gpu_bytes: int
    usable_bytes: int
    world: int
    awake: list[int]
    """Each agent's update or rollout peak on one GPU at W = world, with ALLOCATOR_SLACK."""
    asleep: list[int]
    """What each leaves on that GPU while another is awake."""
    host_bytes: int
    """Host RAM the sleeping state needs, all agents and ranks together: training state, vLLM's level-1 weights."""
    moved: list[int]
    """Bytes each agent's turns move over PCIe per step and GPU: weights in and out for its rollout, its whole
    training state in and out for its learn."""
    reason: str = ""

    @property
    def fits(self) -> bool:
        return not self.reason

    @property
    def per_gpu(self) -> list[int]:
        """Bytes on one GPU while agent a is awake, for each a."""
        return shared_per_gpu(self.awake, self.asleep)

    def line(self) -> str:
        where = f"{self.gpus} × {self.gpu_bytes / GIB:.0f} GiB GPUs"
        worst = max(range(len(self.memories)), key=lambda a: self.per_gpu[a])
        detail = shared_detail(self.memories, self.awake, self.asleep, worst)
        if self.fits:
            usable = _gib(self.usable_bytes)
            return f"shared fits on {where}: every agent on all {self.world} GPU(s), {detail} ≤ {usable}"
        return f"shared does not fit on {where}: {self.reason}"


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def shared_per_gpu(awake: list[int], asleep: list[int]) -> list[int]:
    """Bytes on a shared GPU while agent a is awake, for each a: its peak plus every other agent's sleeping bytes."""
    slept = sum(asleep)
    return [peak + slept - asleep[a] for a, peak in enumerate(awake)]


def shared_detail(memories: list[AgentMemory], awake: list[int], asleep: list[int], a: int) -> str:
    """`qwen3_8b awake 70.1 GiB + qwen3_4b asleep 1.00 GiB = 71.1 GiB per GPU` for awake agent a."""
    parts = [f"{memories[a].name} awake {_gib(awake[a])}"]
    parts += [f"{m.name} asleep {_gib(asleep[b])}" for b, m in enumerate(memories) if b != a]
    return " + ".join(parts) + f" = {_gib(shared_per_gpu(awake, asleep)[a])} per GPU"


def place_shared(memories: list[AgentMemory], gpus: int, gpu_bytes: int, usable: int, host: int | None) -> SharedPlan:
    """Every agent over all `gpus` GPUs (W = gpus each: generation and updates on the whole machine), taking turns."""
    world = max(gpus, 1)
    awake = [with_slack(max(m.peaks(world, False, gpu_bytes))) for m in memories]
    asleep = [m.sleeping_bytes() for m in memories]
    kept = sum(m.sharded_state if world > 1 else m.state for m in memories)
    vllm = sum(m.vllm_weights * world // m.tensor_parallel(world) for m in memories if m.work.vllm)
    moved = [2 * (m.weights_share(world) + m.state_share(world)) for m in memories]
    out = SharedPlan(memories, gpus, gpu_bytes, usable, world, awake, asleep, kept + vllm, moved)
    problems = [f"{m.name}: {p}" for m in memories if (p := m.vllm_problem(world, gpu_bytes))]
    worst = max(range(len(memories)), key=lambda a: out.per_gpu[a])
    if gpus < 1:
        reason = "no GPU given"
    elif problems:
        reason = "; ".join(problems)
    elif out.per_gpu[worst] > usable:
        reason = f"{shared_detail(memories, awake, asleep, worst)}, {_gib(usable)} usable"
    elif host is not None and out.host_bytes > host:
        reason = f"the sleeping agents need {_gib(out.host_bytes)} of host RAM, cluster.cpu_memory_gb={host / GIB:.0f}"
    else:
        return out
    return SharedPlan(**{**out.__dict__, "reason": reason})


def plan_shared(config: Config, gpus: int, gpu_memory_gb: float, rollout_multiplier: int = 1) -> SharedPlan:
    """The shared placement of `config` on `gpus` GPUs of `gpu_memory_gb` GiB (`place_shared`)."""
    gpu_bytes = int(gpu_memory_gb * GIB)
    usable = gpu_bytes - int(config.cluster.headroom_gb * GIB)
    host = int(config.cluster.cpu_memory_gb * GIB) if config.cluster.cpu_memory_gb else None
    return place_shared(estimate(config, rollout_multiplier), gpus, gpu_bytes, usable, host)


def choose_placement(asked: str, disjoint: Plan, shared: SharedPlan) -> tuple[str | None, str]:
    """(disjoint | shared | None, why) for executor.placement `asked`: auto takes disjoint when it fits (no moves
    over PCIe, phases in parallel), else shared; None when the asked one, or for auto neither, fits."""
    if asked == "disjoint":
        return ("disjoint", "executor.placement=disjoint") if disjoint.fits else (None, disjoint.line())
    if asked == "shared":
        return ("shared", "executor.placement=shared") if shared.fits else (None, shared.line())
    if disjoint.fits:
        return "disjoint", "disjoint fits (own GPUs per agent, phases in parallel, nothing moves over PCIe)"
    if shared.fits:
        return "shared", f"disjoint does not fit ({disjoint.reason}), shared does"
    return None, f"{disjoint.line()}; {shared.line()}"


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
