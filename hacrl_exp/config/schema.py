"""Typed schema of every config group (conf/<group>/*.yaml mirrors these dataclasses).

Each field has a one-line docstring; numeric fields carry their allowed range in `metadata`, which
`hacrl_exp.config.validate` checks right after Hydra composes the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

SEED_MAX = 2**32 - 1
"""Seeds lie in [0, 2**32 - 1], what torch, numpy and random all accept."""


def rng(low: float | None = None, high: float | None = None, *, high_open: bool = False, low_open: bool = False):
    """Field metadata: the inclusive (or open) range a numeric value must lie in."""
    return {"range": (low, high, low_open, high_open)}


@dataclass
class ModelConfig:
    source: str = "tiny"
    """'tiny': built from a transformers config (no download); 'pretrained': a hub id or local path."""
    path: Optional[str] = None
    """Hub id or local directory of a pretrained model (source=pretrained)."""
    arch: str = "opt"
    """Tiny architecture: opt | gpt2 | llama."""
    hidden_size: int = field(default=64, metadata=rng(8, 65536))
    num_layers: int = field(default=2, metadata=rng(1, 256))
    num_heads: int = field(default=4, metadata=rng(1, 256))
    max_positions: int = field(default=128, metadata=rng(16, 1 << 20))
    dtype: str = "float32"
    """Weights' dtype: float32 | bfloat16 | float16. bfloat16 weights with AdamW lose updates below bf16's
    resolution; for full fine-tuning prefer float32 weights with compute_dtype=bfloat16 (docs/gpu.md)."""
    compute_dtype: Optional[str] = None
    """bfloat16: forward and backward run in bf16 (mixed precision: float32 master weights and AdamW state when
    dtype=float32, see mixed_precision); None: compute in the weights' dtype. Log-probs are float32 either way."""
    mixed_precision: str = "master"
    """How dtype=float32 with compute_dtype=bfloat16 trains. master: the model's weights are bf16, AdamW steps
    float32 master copies and accumulates gradients in float32 (as FSDP2's MixedPrecisionPolicy, Megatron-LM,
    ZeRO); a sharded agent keeps float32 shards and FSDP2 gathers them in bf16. autocast: float32 weights under
    torch.autocast (every forward casts them to bf16)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (less memory, ~1/3 more compute)."""
    trust_remote_code: bool = False
    """Run code shipped with a hub model. Off unless you trust the repository."""


@dataclass
class TokenizerConfig:
    kind: str = "char"
    """'char' or 'bpe' (built locally with `tokenizers`), or 'pretrained' (from model.path or tokenizer.path)."""
    vocab_size: int = field(default=96, metadata=rng(8, 1 << 20))
    """BPE vocabulary size."""
    path: Optional[str] = None
    """Tokenizer directory or hub id, when it differs from the model's."""


@dataclass
class WarmStartConfig:
    steps: int = field(default=0, metadata=rng(0, 1_000_000))
    """Supervised steps on the task before RL (tiny agents); 0 skips. Cached by config hash."""
    batch_size: int = field(default=64, metadata=rng(1, 100_000))
    lr: float = field(default=3e-3, metadata=rng(0, 1, low_open=True))
    warmup_steps: int = field(default=0, metadata=rng(0, 1_000_000))
    """Linear learning-rate warm-up steps (the GPT-2 BPE agent needs it at lr 6e-3)."""
    target_accuracy: Optional[float] = field(default=None, metadata=rng(0, 1))
    """Stop once the greedy validation accuracy (mean over categories, on the first check_per_category problems of
    each category of the validation split, task.validation_per_tier: never the scored problems) reaches this, checked
    every check_every steps; `steps` is the cap. null: run all steps."""
    check_every: int = field(default=25, metadata=rng(1, 1_000_000))
    """Warm-start steps between two checks of target_accuracy (and a check at the cap)."""
    check_per_category: int = field(default=50, metadata=rng(1, 1_000_000))
    """Validation problems per category the target_accuracy check answers (the first of the validation split)."""


@dataclass
class LoraConfig:
    r: int = field(default=0, metadata=rng(0, 65536))
    """LoRA rank; 0 trains every weight (no LoRA). With r > 0 only the adapters train (peft, `.[lora]` extra)."""
    alpha: float = field(default=32.0, metadata=rng(0, 1e6, low_open=True))
    """LoRA scale numerator: the update is (alpha / r)·B·A."""
    target_modules: List[str] = field(default_factory=lambda: ["all-linear"])
    """Module names to adapt (e.g. [q_proj, v_proj]); [all-linear] = every linear layer but the output head."""


@dataclass
class FsdpConfig:
    offload: bool = False
    """FSDP2's CPUOffloadPolicy: parameters, gradients and AdamW state in host RAM, the optimizer step on the CPU.
    Makes the agent a sharded agent (a Ray rank group, even at world_size 1)."""


@dataclass
class AgentConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    lr: float = field(default=1e-4, metadata=rng(0, 1, low_open=True))
    """AdamW learning rate of this agent's RL updates."""
    weight_decay: float = field(default=0.01, metadata=rng(0, 1))
    frozen: bool = False
    """A frozen agent shares rollouts but never learns."""
    learns_from: Optional[List[str]] = None
    """Sources of this learner, used when agents.topology=custom."""
    alpha_from: Dict[str, float] = field(default_factory=dict, metadata=rng(0, 100))
    """α per incoming edge, e.g. {other_agent: 3.0}; others use algorithm.alpha."""
    chat_template: bool = True
    """Render prompts with the tokenizer's chat template when it has one (enable_thinking=False)."""
    device: Optional[str] = None
    """auto | cpu | cuda | cuda:N for this agent; default trainer.device. auto spreads agents over the visible GPUs
    (the least-loaded first, hacrl_exp.agents.devices.place_agents), else CPU."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """Low-rank adapters for large agents: agents.members.<name>.lora.r=16 turns them on."""
    world_size: int = field(default=1, metadata=rng(1, 4096))
    """Ranks the agent spans (FSDP2 full sharding, hacrl_exp.agents.sharding): W > 1 needs executor=ray, which starts
    W actors (on one node unless placement or span_nodes say otherwise) with their own process group (gloo on CPU,
    NCCL on GPU). docs/distributed.md."""
    fsdp: FsdpConfig = field(default_factory=FsdpConfig)
    """FSDP2 settings of a sharded agent."""
    placement: Any = None
    """A Ray custom resource (e.g. node_a, from `ray start --resources '{"node_a": 1}'`): the agent's actors go to a
    node that has it; or a list of world_size of them, one per rank ([node_a, node_b]: rank 0 on node_a, rank 1 on
    node_b). Needs executor=ray."""
    span_nodes: bool = False
    """Let a sharded agent's ranks run on several nodes (a PACK placement group instead of STRICT_PACK)."""


@dataclass
class AgentsConfig:
    topology: str = "all_to_all"
    """all_to_all | star | ring | none | custom (see hacrl_exp.graph)."""
    hub: Optional[str] = None
    """Hub of the star topology (default: the first agent)."""
    members: Dict[str, AgentConfig] = field(default_factory=dict)
    """Agents by name, in declared order (which orders the cross blocks, spec §1.6)."""


@dataclass
class AlgorithmConfig:
    name: str = "hacpo"
    """hacpo | naive | gspo | gspo_x2 | gspo_update_matched | grpo | hacpo_shuffled_partner (the partner-rows control,
    issue 38) | gspo_dynamic (GSPO with dynamic sampling, issue 38) (hacrl_exp.algo.ALGORITHMS)."""
    alpha: float = field(default=1.0, metadata=rng(0, 100))
    """Exponential-IS α on every edge without its own (spec §2.3)."""
    delta: float = field(default=0.2, metadata=rng(0, 1, high_open=True))
    """Cross lower bound L_0 = 1 − δ (spec §2.4). Table 5's "δ" column is 1 − δ."""
    delta_step: float = field(default=0.025, metadata=rng(0, 1))
    """Stepwise increment of the lower bound per optimizer update."""
    restart_u_per_source: bool = False
    """Our extension for N > 2: restart u at each source block (paper: one global count)."""
    self_clip_low: float = field(default=3e-4, metadata=rng(0, 1))
    self_clip_high: float = field(default=4e-4, metadata=rng(0, 10))
    adv_eps: float = field(default=1e-6, metadata=rng(0, 1))
    """ε in (r − μ)/(σ + ε): 1e-6 as verl; 1e-4 to match TRL."""
    kl_coef: float = field(default=0.0, metadata=rng(0, 10))
    """β of the k3 KL on self samples against the initial model (code-only, 0.001 in the paper's script)."""
    kl_aggregation: str = "seq_mean_token_mean"
    """seq_mean_token_mean (C1) | token_mean (C0)."""
    is_factor_on_raw_ratio: bool = False
    """Paper-literal sg[s]^α instead of the code's sg[clip(s)]^α (same gradient, spec §9.2)."""
    log_ratio_clamp: float = field(default=10.0, metadata=rng(0, 100, low_open=True))
    """|log s| clamp (C1 clamps both sides at 10)."""
    capability_window: int = field(default=5, metadata=rng(1, 10_000))
    """K of the capability moving window (spec §2.2)."""
    capability_warmup: int = field(default=0, metadata=rng(0, 1_000_000))
    """Steps with ω forced to 1."""
    capability_scope: str = "batch"
    """batch (paper) | category (our extension: one capability per task category)."""
    grpo_clip_low: float = field(default=0.2, metadata=rng(0, 1))
    grpo_clip_high: float = field(default=0.28, metadata=rng(0, 10))
    dynamic_target_rows: int = field(default=0, metadata=rng(0, 100_000_000))
    """gspo_dynamic: rows with a non-zero advantage its batch should hold per step (degenerate groups resampled until
    then, trainer.step.resample_degenerate); 0: every row of the batch (P·G), at most P·G in any case."""
    dynamic_max_rounds: int = field(default=4, metadata=rng(0, 1000))
    """gspo_dynamic: the cap on extra generation rounds per step (each regenerates only the degenerate prompts); a step
    that ends below its target at the cap logs dynamic/cap_hit = 1."""
    dynamic_prompts: str = "same"
    """gspo_dynamic: what an extra round answers in place of a degenerate prompt: fresh (conf/algorithm/
    gspo_dynamic.yaml's, as DAPO: a new training prompt of any category, `Task.extra_problems`, so a prompt the
    agent never solves stops costing rounds) | same (the prompt again; what gspo_dynamic did before 2026-12-07:
    such a run resumes with this value). Other algorithms never read it; the default leaves their checkpoints of
    before the option resumable."""


@dataclass
class TaskConfig:
    name: str = "arithmetic"
    """arithmetic (embedded, no download) | math (JSONL or HF dataset)."""
    seed: Optional[int] = field(default=None, metadata=rng(0, SEED_MAX))
    """The data seed: the training prompts' order and draws, and the warm start's examples. null: the job's `seed`,
    so seeds vary the data (resolved at validation, `resolve_task_seeds`); a value set here wins for every seed."""
    heldout_seed: Optional[int] = field(default=None, metadata=rng(0, SEED_MAX))
    """arithmetic: draws the held-out split and problems. null: task.seed when that is set, else 0, so by default
    every seed is scored on the same held-out problems."""
    tiers: List[str] = field(default_factory=lambda: ["add3", "add4", "mul31", "mul41"])
    """arithmetic: difficulty tiers (add2 add3 add4 mul21 mul31 mul41)."""
    scratchpad: bool = True
    """arithmetic: worked column chains then the answer; false = bare answers."""
    eval_per_tier: int = field(default=100, metadata=rng(1, 1_000_000))
    validation_per_tier: int = field(default=50, metadata=rng(1, 1_000_000))
    """Problems per category of the validation split (task.validation_problems), never scored: the warm-start target
    (`warm_start.target_accuracy`) and any other stopping rule read these, the scored problems only the result. Read
    only when a stopping rule is set, so the default run is unchanged."""
    data_dir: Optional[str] = None
    """math: folder of the JSONL files; default the HACRL_DATA_DIR environment variable."""
    train_file: str = "math_train.jsonl"
    eval_file: str = "math500.jsonl"
    hf_train: Optional[str] = "DigitalLearningGmbH/MATH-lighteval"
    """math: HF dataset used when no local file is found."""
    eval_limit: Optional[int] = field(default=None, metadata=rng(1, 10_000_000))
    grader_timeout_s: float = field(default=5.0, metadata=rng(0.1, 600))
    grader_workers: int = field(default=1, metadata=rng(1, 64))
    reward: str = "math_verify"
    """math: the training reward and in-training evaluation verdict: math_verify (the one grader: answer forms, exact
    numbers, math-verify) | verl (the paper's: verl's string-normalised boxed match; docs/algorithm.md §3.3)."""
    grader_forms: str = "requested"
    """math, reward=math_verify: the grading policy. requested (an answer equal in value but not in a form its question
    asks for, `\\sqrt{117}` under "simplest radical form", is wrong) | value (the value alone decides, as math-verify
    or Minerva-style equivalence graders do; every other rule stays). docs/evaluation.md, "Grading policy"."""
    bad_rows: str = "error"
    """math: a malformed, empty, non-UTF-8 or duplicate-id data row: error (stop, naming file:line) | skip (count
    by reason, report as train/skipped_rows metrics)."""
    max_prompt_tokens: int = field(default=1024, metadata=rng(8, 1 << 20))


@dataclass
class VLLMConfig:
    gpu_memory_utilization: float = field(default=0.3, metadata=rng(0, 1, low_open=True))
    """Share of the GPU's memory each vLLM engine may take for weights and KV cache while awake."""
    sleep_level: int = field(default=2, metadata=rng(0, 2))
    """Sleep between generations so training gets the memory: 1 parks weights in CPU RAM, 2 drops them (they
    are synced from the trainer anyway), 0 never sleeps."""
    enforce_eager: bool = False
    """Skip CUDA-graph capture (faster start, slower decoding)."""
    max_model_len: Optional[int] = field(default=None, metadata=rng(16, 1 << 24))
    """Longest prompt + response; default the model's max_position_embeddings."""


@dataclass
class RolloutConfig:
    backend: str = "hf"
    """hf (transformers generate) | vllm (optional `.[gpu]` extra, CUDA only; weights synced after updates)."""
    temperature: float = field(default=1.0, metadata=rng(0, 10))
    top_p: float = field(default=1.0, metadata=rng(0, 1, low_open=True))
    max_new_tokens: int = field(default=48, metadata=rng(1, 1 << 20))
    max_batch_size: int = field(default=256, metadata=rng(1, 1 << 20))
    sampler: str = "counter"
    """How tokens are drawn. counter: row r of a call draws at step t by inverse CDF with a uniform hashed from (call
    seed, r, t), the call seed one draw from the agent's torch stream, so a row's tokens do not depend on its batch,
    chunk or rank, and a sharded hf agent splits its rows over its ranks (rollout.hf.CounterSampler; vLLM: each
    row's SamplingParams.seed from (call seed, r)) | multinomial: transformers' torch.multinomial from the agent's
    stream for the whole batch, hf only and unsharded: the sampler of the published grids' commit."""
    hf_cache: str = "dynamic"
    """hf backend's KV cache: dynamic | static (transformers compiles the decoding steps with CUDA graphs on CUDA;
    the first call of each shape pays the compilation; eager elsewhere)."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """Engine settings used when backend=vllm."""
    tensor_parallel: int = field(default=1, metadata=rng(1, 1 << 16))
    """backend=vllm: GPUs per vLLM engine of a sharded agent. Its W ranks form W / tensor_parallel data-parallel
    replicas of tensor_parallel ranks, each generating its contiguous share of the rows; must divide every sharded
    agent's world_size (an agent at W = 1 runs one engine on its GPU). docs/distributed.md."""


@dataclass
class TrainerConfig:
    steps: int = field(default=100, metadata=rng(1, 10_000_000))
    prompts_per_step: int = field(default=16, metadata=rng(1, 1_000_000))
    group_size: int = field(default=8, metadata=rng(2, 4096))
    """G: responses per prompt per agent (GSPO×2 doubles it). At most 4096, far above published settings (8–64); the
    memory check (trainer.resources) counts the prompts × G rows of a step and their tokens."""
    minibatches_per_block: int = field(default=2, metadata=rng(1, 100_000))
    """Optimizer updates per block of prompts·G rows: a learner with N blocks makes N× that many (spec §1.6)."""
    micro_batch_size: int = field(default=64, metadata=rng(1, 1_000_000))
    max_grad_norm: float = field(default=1.0, metadata=rng(0, 1e6, low_open=True))
    max_bad_steps: int = field(default=5, metadata=rng(1, 1_000_000))
    """Abort after this many consecutive steps in which a learner skipped every update (NaN/inf gradients)."""
    eval_every: int = field(default=25, metadata=rng(0, 10_000_000))
    """Greedy held-out evaluation every N steps (and at start and end); 0 = only at start and end."""
    eval_limit: Optional[int] = field(default=None, metadata=rng(1, 10_000_000))
    eval_benchmarks: List[str] = field(default_factory=list)
    """Benchmarks of evaluation/ (e.g. [math500]) also scored at every evaluation, through hacrl_exp.evaluation."""
    eval_benchmark_limit: Optional[int] = field(default=None, metadata=rng(1, 10_000_000))
    """First N problems of each of eval_benchmarks."""
    checkpoint_every: int = field(default=0, metadata=rng(0, 10_000_000))
    """Checkpoint every N steps (and at the end); 0 = only at the end."""
    keep_checkpoints: int = field(default=2, metadata=rng(1, 10_000))
    resume: Optional[str] = None
    """A run's output folder (or its checkpoints folder) to resume from."""
    stop_after: Optional[int] = field(default=None, metadata=rng(1, 10_000_000))
    """Stop after this step, as if interrupted (resume tests)."""
    output_dir: Optional[str] = None
    """Default: Hydra's job output folder."""
    cache_dir: Optional[str] = None
    """Warm-start cache; default $HACRL_CACHE_DIR or ~/.cache/hacrl_exp."""
    device: str = "auto"
    threads: Optional[int] = field(default=None, metadata=rng(1, 4096))
    """torch threads (default: torch's choice)."""
    progress: bool = True
    save_final_models: bool = True


@dataclass
class TrackingConfig:
    backend: str = "mlflow"
    """mlflow | none."""
    uri: Optional[str] = None
    """Tracking URI; default $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db."""
    experiment: str = "hacrl"
    run_name: Optional[str] = None
    """Name of the job's parent run; default `<method>-<agents>-s<seed>` and the job's overrides
    (hacrl_exp.tracking.names.run_name)."""
    flush_every: int = field(default=10, metadata=rng(1, 1_000_000))
    """Write buffered metrics every N steps when trainer.checkpoint_every is 0; else at each checkpoint."""
    retry_s: float = field(default=20.0, metadata=rng(0, 3600))
    """Seconds a failed store write is retried (with backoff) before training goes on with metrics buffered."""
    log_models: bool = True
    """Log each agent's final model as an MLflow transformers model of its run (when trainer.save_final_models)."""
    log_every_checkpoint: bool = False
    """Also log every checkpoint's agents as MLflow models (artifact path model_step_<N>)."""
    register_model: Optional[str] = None
    """Register each final model in MLflow's model registry as `<register_model>-<agent>`."""
    system_metrics: bool = False
    """Sample CPU, memory, disk (and GPU) use into the parent run with MLflow's system-metrics monitor."""
    system_metrics_interval_s: float = field(default=10.0, metadata=rng(0.1, 3600))
    """Seconds between system-metrics samples."""
    tags: Dict[str, str] = field(default_factory=dict)
    """Extra MLflow tags on every run of the job (e.g. {grid: table1}); sweeps and presets set them."""


@dataclass
class SweepTrialConfig:
    """Set by the hacrl_optuna sweeper on each job it launches (docs/sweeps.md); empty outside a sweep."""

    storage: Optional[str] = None
    """Optuna storage URL of the sweep's studies."""
    studies: List[str] = field(default_factory=list)
    """The edge studies this job is a trial of, `<study_name>/<learner><-<source>`."""
    numbers: List[int] = field(default_factory=list)
    """This job's trial number in each of `studies`."""


@dataclass
class ExecutorConfig:
    backend: str = "local"
    """local: every agent in this process, one after another | ray: each agent a Ray actor (hacrl_exp.trainer.executor).
    Both give the same metrics for the same seed."""
    address: Optional[str] = None
    """ray: null starts a private Ray for the run, bound to 127.0.0.1 and stopped at the end; 'auto' or 'host:port'
    joins a running cluster (`ray start --head`); inside a Ray job (hydra/launcher=hacrl_ray) the job's cluster."""
    include_dashboard: bool = False
    """ray: start Ray's dashboard with a private Ray (it then listens on 127.0.0.1:8265)."""
    num_cpus: Optional[int] = field(default=None, metadata=rng(1, 1_000_000))
    """ray: CPUs a private Ray may schedule (default: all of this machine's)."""
    cpus_per_agent: float = field(default=1.0, metadata=rng(0, 1024))
    """ray: CPUs reserved by each agent's actor."""
    gpus_per_agent: float = field(default=0.0, metadata=rng(0, 64))
    """ray: GPUs reserved by each agent's actor (a fraction shares a GPU); 0 = the actor sees no GPU."""
    threads_per_agent: Optional[int] = field(default=None, metadata=rng(1, 4096))
    """ray: torch threads in each actor; default trainer.threads, else max(1, cpus_per_agent)."""
    runtime_env: Dict[str, Any] = field(default_factory=dict)
    """ray: Ray runtime_env of the actors, e.g. {env_vars: {HF_HOME: /data/hf}}."""
    placement: str = "auto"
    """How the agents share the GPUs (docs/distributed.md, "Placements"). disjoint: every agent its own GPUs, phases
    in parallel across agents; shared: rank r of every agent on GPU r, the agents run each phase in turn, one awake
    at a time (wake, call, sleep; the order recorded in <run>/schedule.jsonl); auto: disjoint when the planner says
    it fits, else shared (hacrl_exp.trainer.placement)."""


@dataclass
class MechanismsConfig:
    """On/off switches for HACPO's mechanisms; each "off" is the ablation of spec §2 ("Toggled off").

    The trainer resolves them once, at validation, into plain step parameters (hacrl_exp.algo.resolve_mechanisms).
    """

    capability_advantage: bool = True
    """§2.1 off ("HACPO − Adv", Table 2): the baseline is the unweighted joint mean."""
    omega: bool = True
    """§2.2 off ("HACPO − ω", Table 3): cross loss weight 1, baseline weights kept."""
    exponential_is: bool = True
    """§2.3 off: α = 0, no sg[c]^α reweighting."""
    stepwise: bool = True
    """§2.4 off ("no Stepwise", Fig. 4): static window [1 − δ, 1], i.e. δ_step = 0."""
    clip: bool = True
    """Cross clipping off ("no Clip", Fig. 4): J = s · sg[s]^α · ρ · A with the raw ratio."""


@dataclass
class ClusterConfig:
    """The GPUs a run may use, for the resource planner (`python -m hacrl_exp.plan`, hacrl_exp.agents.memory_plan)."""

    gpus: Optional[int] = field(default=None, metadata=rng(0, 1_000_000))
    """GPUs available to the run, all nodes together; null: the GPUs visible to this process."""
    gpu_memory_gb: Optional[float] = field(default=None, metadata=rng(0, 1_000_000, low_open=True))
    """Memory of each GPU as vendors quote it, read as GiB (80 for an H100, 141 for an H200); null: the smallest
    visible GPU's."""
    headroom_gb: float = field(default=4.0, metadata=rng(0, 1_000_000))
    """GiB of each GPU that tensors cannot use: CUDA context, NCCL buffers, allocator fragmentation."""
    cpu_memory_gb: Optional[float] = field(default=None, metadata=rng(0, 1_000_000_000, low_open=True))
    """Host RAM (GiB, all nodes together) that CPU offload may fill; null: not checked."""


@dataclass
class RehearsalConfig:
    """A dress rehearsal of the run on a CPU: `python -m hacrl_exp.rehearse experiment=<preset>` (hacrl_exp.rehearsal).
    Each pretrained agent becomes a random-initialised model of its architecture class with its real tokenizer,
    vocabulary and special tokens; every stage runs once, cut to minutes, lengths kept. The run never reads these."""

    tokenizers: Optional[str] = None
    """Folder of tokenizer folders, used when the hub and the local Hugging Face cache do not have a checkpoint's:
    <family>/ (qwen3/, llama3/: tokenizer.json or tokenizer.json.gz + tokenizer_config.json, e.g.
    ../shared/tokenizers) or <org>/<name>/ for one checkpoint. A family folder gets the checkpoint's eos/pad/bos."""
    output_dir: Optional[str] = None
    """The rehearsal's folder (rehearsal.md, stand-in models, the run, evaluation, lm-eval tasks); default
    outputs/rehearsal/<experiment>/<date>_<time>."""
    hidden_size: int = field(default=16, metadata=rng(8, 4096))
    """Width of each random stand-in model (2 query heads, 1 key/value head, MLP 2× wide); must be even."""
    num_layers: int = field(default=2, metadata=rng(1, 64))
    """Decoder layers of each stand-in model."""
    steps: int = field(default=1, metadata=rng(1, 1000))
    """Training steps of the rehearsal (trainer.steps)."""
    prompts_per_step: int = field(default=1, metadata=rng(1, 100_000))
    """trainer.prompts_per_step of the rehearsal."""
    group_size: int = field(default=2, metadata=rng(2, 100_000))
    """trainer.group_size (G) of the rehearsal."""
    micro_batch_size: int = field(default=1, metadata=rng(1, 100_000))
    """trainer.micro_batch_size of the rehearsal: one row of prompt + max_new_tokens at the real vocabulary is the
    largest tensor of the step (float32 logits), so the default is 1."""
    eval_limit: int = field(default=1, metadata=rng(1, 10_000_000))
    """Problems of the held-out set during training (trainer.eval_limit) and of each benchmark in `evaluate`."""
    threads: int = field(default=1, metadata=rng(1, 4096))
    """torch threads of the rehearsal's training and `evaluate` (trainer.threads): the stand-ins are 16 wide, so only
    the vocabulary-sized logits could be shared out, and on a shared machine extra threads mostly wait."""
    eval_max_new_tokens: Optional[int] = field(default=32, metadata=rng(1, 1 << 20))
    """`evaluate`'s response budget (null: each benchmark's own, 8192 for the math benchmarks). Training rollouts
    and the held-out evaluation during training keep rollout.max_new_tokens."""
    statistics_limit: Optional[int] = field(default=None, metadata=rng(1, 10_000_000))
    """Rows of each data set the statistics read (null: all of them, as the report's shares need)."""
    train: bool = True
    """false: stop after the checks, the statistics, building the stand-in models and the plan (seconds): no
    training, evaluate or lm-eval export."""


@dataclass
class Config:
    seed: int = field(default=0, metadata=rng(0, SEED_MAX))
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    mechanisms: MechanismsConfig = field(default_factory=MechanismsConfig)
    """HACPO's mechanism switches: false = that ablation."""
    task: TaskConfig = field(default_factory=TaskConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where the agents run: in this process or as Ray actors (conf/executor)."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """The GPUs the resource planner places the agents on (conf/cluster)."""
    rehearsal: RehearsalConfig = field(default_factory=RehearsalConfig)
    """Settings of `python -m hacrl_exp.rehearse` (conf/rehearsal); a training run never reads them."""
    extra: Dict[str, Any] = field(default_factory=dict)
    """Free-form notes and tags; logged, never read."""
    trial: SweepTrialConfig = field(default_factory=SweepTrialConfig)
    """This job's trials when an α sweep launched it (hacrl_exp.sweep); empty otherwise."""
