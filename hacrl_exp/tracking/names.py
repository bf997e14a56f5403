"""What a training job's MLflow runs are called and tagged, and which config settings become params.

Pure functions of the resolved config and the job's Hydra overrides (docs/tracking.md): the parent run is named
`<method>-<agents>-s<seed>`, then the overrides that set anything else, or a digest of them when they are long
(`hacpo-opt_char+gpt2_bpe-s0`, `gspo-opt_char+gpt2_bpe-s0-trainer.steps=20`, `hacpo-…-s1-3f9a1c`;
`tracking.run_name` overrides it); each child run is `<parent name>/<agent>`; every run carries the tags method, seed,
data_seed, heldout_seed, agents, task, grid, job, config (the name without the seed: the unit to average seeds over)
and overrides. Params hold only the settings that apply to the run (`applicable_params`); the full resolved config is
`config.json`.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from typing import Any

from hacrl_exp.algo import get_algorithm
from hacrl_exp.config.schema import Config

EXPERIMENT_KIND = "custom_model_development"
"""Value of the experiment tag `mlflow.experimentKind` that opens MLflow 3's UI on training runs, not GenAI traces
(the UI's ExperimentKind enum; unset, it guesses GenAI)."""
EXPERIMENT_NOTE = (
    "Heterogeneous agent collaborative RL (HACPO and its baselines). One parent run per training job, named "
    "`<method>-<agents>-s<seed>` and its overrides, holding the job's timing and `final/*` summary (final held-out "
    "accuracy per agent, rollouts, tokens, seconds); one child run per agent, `<job>/<agent>`, with its `train/`, "
    "`cross/`, `eval/`, `time/`, `memory/` metrics (docs/metrics.md) and final model. The views menu (top right) "
    "has 'Final accuracy' and 'Compare configurations' (docs/tracking.md)."
)
MECHANISMS = ("capability_advantage", "omega", "exponential_is", "stepwise", "clip")
_TASK_KEYS = {
    "arithmetic": {"name", "seed", "heldout_seed", "tiers", "scratchpad", "eval_per_tier"},
    "math": {"name", "seed", "data_dir", "train_file", "eval_file", "hf_train", "eval_limit", "grader_timeout_s",
             "grader_workers", "reward", "grader_forms", "bad_rows", "max_prompt_tokens"},
}  # fmt: skip
_SHARING_KEYS = {"alpha", "delta", "delta_step", "restart_u_per_source", "is_factor_on_raw_ratio"}
"""Algorithm keys read only for cross rows (P̂ and its window are logged for every algorithm, so they stay)."""


NAMED_ALREADY = ("seed", "algorithm", "method", "mechanisms")
"""Override keys (and their sub-keys) the name states already: the seed, and the method with its mechanisms."""
NOT_TRAINING = ("trainer.output_dir", "trainer.resume", "trainer.progress", "trainer.threads", "trainer.cache_dir",
                "trainer.stop_after", "trainer.checkpoint_every", "trainer.keep_checkpoints", "tracking", "hydra",
                "executor", "cluster", "trial")  # fmt: skip
"""Override keys that change where and how a job runs or logs, not what it trains: left out of its name."""
READABLE = re.compile(r"[\w.=,+\-\[\]]{1,32}")
"""Overrides short and plain enough to be the name's suffix as they are; others become a digest."""
MODEL_NAME_REFUSED = re.compile(r"[/:.%\"']")
"""Characters MLflow refuses in a logged model's name (mlflow.utils.validation._validate_logged_model_name)."""
ENTRY_POINT = "python -m hacrl_exp.run"


def method_name(config: Config) -> str:
    """The algorithm and the HACPO mechanisms switched off: 'hacpo', 'hacpo-no_omega-no_clip', 'gspo_x2'.

    Mechanisms are named only for an algorithm that reads them all (HACPO's capability baseline), as the report's
    method labels (hacrl_exp.report.load.method_label)."""
    name = config.algorithm.name
    if get_algorithm(name).capability_baseline:
        name += "".join(f"-no_{m}" for m in MECHANISMS if not getattr(config.mechanisms, m))
    return name


def naming_overrides(overrides: list[str] | None) -> list[str]:
    """The overrides that make a job's configuration differ from the defaults of its method, agents and seed:
    Hydra's overrides without `NAMED_ALREADY` and `NOT_TRAINING` keys, sorted (their order changes nothing)."""

    def key(override: str) -> str:
        return override.split("=", 1)[0].lstrip("+~")

    skip = NAMED_ALREADY + NOT_TRAINING
    return sorted(o for o in overrides or [] if not any(key(o) == k or key(o).startswith(f"{k}.") for k in skip))


def name_suffix(overrides: list[str] | None) -> str:
    """'' without naming overrides; '-' + the overrides comma-joined when short and plain (`READABLE`), else '-' +
    the first 6 hex digits of their SHA-256 (the `overrides` tag and the run description spell them out)."""
    named = naming_overrides(overrides)
    if not named:
        return ""
    joined = ",".join(named)
    return f"-{joined}" if READABLE.fullmatch(joined) else f"-{hashlib.sha256(joined.encode()).hexdigest()[:6]}"


def config_name(config: Config, overrides: list[str] | None = None) -> str:
    """The job's configuration up to its seed, `<method>-<agents>[<suffix>]`: the `config` tag, so grouping runs by
    config (and agent) averages seeds of one configuration only."""
    return f"{method_name(config)}-{'+'.join(config.agents.members)}{name_suffix(overrides)}"


def run_name(config: Config, overrides: list[str] | None = None) -> str:
    """The parent run's name: tracking.run_name, else `<method>-<agent>+<agent>-s<seed>[<suffix>]` (`name_suffix`
    of the job's Hydra overrides). Two jobs whose overrides differ in a key that changes training get two names."""
    base = f"{method_name(config)}-{'+'.join(config.agents.members)}-s{config.seed}"
    return config.tracking.run_name or base + name_suffix(overrides)


def agent_run_name(job: str, agent: str) -> str:
    """An agent's run: `<parent name>/<agent>`, so a chart across jobs tells their lines apart."""
    return f"{job}/{agent}"


def model_name(job: str, agent: str) -> str:
    """An agent's logged model: `<job>-<agent>`, with the characters MLflow refuses in model names replaced by '_'."""
    return MODEL_NAME_REFUSED.sub("_", f"{job}-{agent}")


def run_tags(
    config: Config, grid: str | None = None, overrides: list[str] | None = None, config_dirs: list[str] = ()
) -> dict[str, str]:
    """Tags of every run of the job: tracking.tags, then method, seed, data_seed, heldout_seed, agents ('+'-joined),
    task, grid, job (the parent's name), config (`config_name`), and, for a Hydra job, overrides (space-joined, as
    given) and command (`job_command`).

    data_seed and heldout_seed are the seeds the task's data came from (task.seed and task.heldout_seed as validation
    resolved them: by default the job's seed and 0), so a report can say what its seeds varied; 'none' where the
    task has no such seed (math's held-out set is a file).
    grid: the experiment preset or multirun name; tracking.tags.grid (set by presets such as paper_table1_tiny) wins,
    else `grid`, else 'none'. overrides, config_dirs: the job's Hydra overrides and --config-dir folders
    (`hydra_overrides`); overrides None outside Hydra."""
    tags = {
        **config.tracking.tags,
        "method": method_name(config),
        "algorithm": config.algorithm.name,
        "seed": str(config.seed),
        "data_seed": "none" if config.task.seed is None else str(config.task.seed),
        "heldout_seed": "none" if config.task.heldout_seed is None else str(config.task.heldout_seed),
        "agents": "+".join(config.agents.members),
        "task": config.task.name,
        "grid": config.tracking.tags.get("grid") or grid or "none",
        "job": run_name(config, overrides),
        "config": config_name(config, overrides),
    }
    if overrides is not None:
        tags["overrides"] = " ".join(overrides)[:5000]
        tags["command"] = job_command(overrides, config_dirs)[:5000]
    return tags


def job_command(overrides: list[str], config_dirs: list[str] = ()) -> str:
    """The command line that runs this one job again (a multirun's job without -m): the entry point, --config-dir
    folders, then the job's overrides, shell-quoted."""
    dirs = [part for folder in config_dirs for part in ("--config-dir", folder)]
    return " ".join([ENTRY_POINT, *map(shlex.quote, dirs + list(overrides))])


def hydra_overrides() -> tuple[list[str] | None, list[str]]:
    """This Hydra job's task overrides (a multirun's sweep values included, hydra.* not) and its --config-dir
    folders; (None, []) outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        hydra = HydraConfig.get()
    except (ImportError, ValueError):  # ValueError: no Hydra job (a test, a script calling train())
        return None, []
    dirs = [s.path for s in hydra.runtime.config_sources if s.provider == "command-line"]
    return list(hydra.overrides.task), dirs


def hydra_grid() -> str | None:
    """The experiment preset this Hydra job was composed with (`experiment=<name>`), or None outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get().runtime.choices.get("experiment") or None
    except (ImportError, ValueError):  # ValueError: no Hydra job (a test, a script calling train())
        return None


def applicable_params(params: dict[str, Any]) -> dict[str, Any]:
    """The resolved config (config.json's tree) pruned of the branches this run never reads.

    Dropped: rollout.vllm with rollout=hf; task keys of the other task kind, and task.grader_forms with
    task.reward=verl (verl reads no answer form); executor settings but the backend with
    executor=local; ray-only keys; the sharing and mechanism keys of an algorithm without shared rollouts; the GRPO
    or GSPO clip of the other objective; LoRA settings with lora.r=0; warm-start settings with warm_start.steps=0;
    an empty sweep trial; the rehearsal's settings. What is left reproduces the run with its code version (defaults
    fill the rest)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()}
    rollout, task, executor = out.get("rollout", {}), out.get("task", {}), out.get("executor", {})
    if rollout.get("backend") != "vllm":
        rollout.pop("vllm", None)
    keep = _TASK_KEYS.get(task.get("name"))
    if keep is not None:
        keep = keep - {"grader_forms"} if task.get("reward") == "verl" else keep
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
    out.pop("rehearsal", None)  # python -m hacrl_exp.rehearse's settings: a run never reads them
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
