"""What a training job's MLflow runs are called and tagged, and which config settings become params.

Pure functions of the resolved config (docs/tracking.md): the parent run is named `<method>-<agents>-s<seed>`
(`hacpo-opt_char+gpt2_bpe-s0`, `hacpo-no_omega-…`; `tracking.run_name` overrides it), each child run is named after
its agent, and every run carries the tags method, seed, data_seed, heldout_seed, agents, task and grid. Params hold
only the settings that apply to the run (`applicable_params`); the full resolved config is the parent's `config.json`
artifact.
"""

from __future__ import annotations

from typing import Any

from hacrl_exp.algo import get_algorithm
from hacrl_exp.config.schema import Config

EXPERIMENT_KIND = "custom_model_development"
"""Value of the experiment tag `mlflow.experimentKind` that opens MLflow 3's UI on training runs, not GenAI traces
(the UI's ExperimentKind enum; unset, it guesses GenAI)."""
EXPERIMENT_NOTE = (
    "Heterogeneous agent collaborative RL (HACPO and its baselines). One parent run per training job, named "
    "`<method>-<agents>-s<seed>`, holding the job's timing and `final/*` summary (final held-out accuracy per "
    "agent, rollouts, tokens, seconds); one child run per agent with its `train/`, `cross/`, `eval/`, `time/`, "
    "`memory/` metrics (docs/metrics.md). Compare agents by overlaying a key, e.g. `cross/omega`, across runs."
)
MECHANISMS = ("capability_advantage", "omega", "exponential_is", "stepwise", "clip")
_TASK_KEYS = {
    "arithmetic": {"name", "seed", "heldout_seed", "tiers", "scratchpad", "eval_per_tier"},
    "math": {"name", "seed", "data_dir", "train_file", "eval_file", "hf_train", "eval_limit", "grader_timeout_s",
             "grader_workers", "reward", "bad_rows", "max_prompt_tokens"},
}  # fmt: skip
_SHARING_KEYS = {"alpha", "delta", "delta_step", "restart_u_per_source", "is_factor_on_raw_ratio"}
"""Algorithm keys read only for cross rows (P̂ and its window are logged for every algorithm, so they stay)."""


def method_name(config: Config) -> str:
    """The algorithm and the HACPO mechanisms switched off: 'hacpo', 'hacpo-no_omega-no_clip', 'gspo_x2'.

    Mechanisms are named only for an algorithm that reads them all (HACPO's capability baseline), as the report's
    method labels (hacrl_exp.report.load.method_label)."""
    name = config.algorithm.name
    if get_algorithm(name).capability_baseline:
        name += "".join(f"-no_{m}" for m in MECHANISMS if not getattr(config.mechanisms, m))
    return name


def run_name(config: Config) -> str:
    """The parent run's name: tracking.run_name, else `<method>-<agent>+<agent>-s<seed>`."""
    return config.tracking.run_name or f"{method_name(config)}-{'+'.join(config.agents.members)}-s{config.seed}"


def run_tags(config: Config, grid: str | None = None) -> dict[str, str]:
    """Tags of every run of the job: tracking.tags, then method, seed, data_seed, heldout_seed, agents ('+'-joined),
    task and grid.

    data_seed and heldout_seed are the seeds the task's data came from (task.seed and task.heldout_seed as validation
    resolved them: by default the job's seed and 0), so a report can say what its seeds varied; 'none' where the
    task has no such seed (math's held-out set is a file).
    grid: the experiment preset or multirun name; tracking.tags.grid (set by presets such as paper_table1_tiny) wins,
    else `grid`, else 'none'."""
    return {
        **config.tracking.tags,
        "method": method_name(config),
        "algorithm": config.algorithm.name,
        "seed": str(config.seed),
        "data_seed": "none" if config.task.seed is None else str(config.task.seed),
        "heldout_seed": "none" if config.task.heldout_seed is None else str(config.task.heldout_seed),
        "agents": "+".join(config.agents.members),
        "task": config.task.name,
        "grid": config.tracking.tags.get("grid") or grid or "none",
    }


def hydra_grid() -> str | None:
    """The experiment preset this Hydra job was composed with (`experiment=<name>`), or None outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get().runtime.choices.get("experiment") or None
    except (ImportError, ValueError):  # ValueError: no Hydra job (a test, a script calling train())
        return None


def applicable_params(params: dict[str, Any]) -> dict[str, Any]:
    """The resolved config (config.json's tree) pruned of the branches this run never reads.

    Dropped: rollout.vllm with rollout=hf; task keys of the other task kind; executor settings but the backend with
    executor=local; ray-only keys; the sharing and mechanism keys of an algorithm without shared rollouts; the GRPO
    or GSPO clip of the other objective; LoRA settings with lora.r=0; warm-start settings with warm_start.steps=0;
    an empty sweep trial. What is left reproduces the run with its code version (defaults fill the rest)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()}
    rollout, task, executor = out.get("rollout", {}), out.get("task", {}), out.get("executor", {})
    if rollout.get("backend") != "vllm":
        rollout.pop("vllm", None)
    keep = _TASK_KEYS.get(task.get("name"))
    if keep is not None:
        out["task"] = {k: v for k, v in task.items() if k in keep}
    if executor.get("backend") == "local":
        out["executor"] = {"backend": "local"}
    algo = out.get("algorithm", {})
    try:
        spec = get_algorithm(algo.get("name", ""))
    except (KeyError, ValueError):
        spec = None
    if spec is not None:
        grpo = spec.token_level
        drop = {"grpo_clip_low", "grpo_clip_high"} if not grpo else {"self_clip_low", "self_clip_high"}
        if not spec.shares_rollouts:
            drop |= _SHARING_KEYS
            out.pop("mechanisms", None)
        out["algorithm"] = {k: v for k, v in algo.items() if k not in drop}
    members = out.get("agents", {}).get("members", {})
    if members:
        out["agents"] = {**out["agents"], "members": {n: _agent_params(a, spec) for n, a in members.items()}}
    if not out.get("trial", {}).get("studies"):
        out.pop("trial", None)
    return out


def _agent_params(agent: dict[str, Any], spec) -> dict[str, Any]:
    out = dict(agent)
    if not out.get("lora", {}).get("r"):
        out["lora"] = {"r": 0}
    warm = out.get("warm_start", {})
    if isinstance(warm, dict) and not warm.get("steps"):
        out["warm_start"] = {"steps": 0}
    if spec is not None and not spec.shares_rollouts:
        out.pop("alpha_from", None)
        out.pop("learns_from", None)
    return out
