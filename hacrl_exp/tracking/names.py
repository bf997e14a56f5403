"""What a training job's MLflow runs are called and tagged, and which config settings become params.

Pure functions of the resolved config and the job's Hydra overrides (docs/tracking.md): the parent run is named
`<method>-<agents>-s<seed>`, then the overrides that set anything else, abbreviated to their last key component
(`hacpo-opt_char+gpt2_bpe-s0`, `gspo-opt_char+gpt2_bpe-s0-steps=20`, `hacpo-…-s1-steps=3,group_size=4,…-3f9a1c`
past 64 characters; `tracking.run_name` overrides it), `-r2`, `-r3` for a rerun of a name the store holds; each
child run is `<parent name>/<agent>`, each model `<agent>@<parent name>`; every run carries the tags method, seed,
data_seed, heldout_seed, agents, task, grid, job, config (the name without the seed, with the short git commit: the
unit to average seeds over), setting (config without the method: the unit to compare methods in) and overrides.
Runtime settings (where and how a job runs: `RUNTIME`) enter none of these. Params hold only the settings that
apply to the run (`applicable_params`); the full resolved config is `config.json`.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from typing import Any

from hacrl_exp.algo import get_algorithm
from hacrl_exp.config.schema import Config
from hacrl_exp.tracking.views import method_colour

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
RUNTIME = ("trainer.output_dir", "trainer.resume", "trainer.progress", "trainer.threads", "trainer.cache_dir",
           "trainer.device", "trainer.stop_after", "trainer.checkpoint_every", "trainer.keep_checkpoints", "tracking",
           "hydra", "executor", "cluster", "trial", "rehearsal")  # fmt: skip
"""Override keys (and their sub-keys) that change where and how a job runs or logs, not what it trains: never in its
name, its `config` and `setting` tags, its overrides tag or the first lines of its description."""
RUNTIME_LEAVES = ("device", "threads", "threads_per_agent", "progress", "output_dir", "cache_dir")
"""Last key components that are runtime settings wherever they sit (`agents.members.opt_char.device`)."""
NAME_TEXT = 64
"""The most characters of abbreviated overrides a name holds before the rest becomes a digest."""
PLAIN = re.compile(r"[\w.=,+\-\[\]]+")
"""Characters an override may show in a name as it is (a `/` would read as the agent run's separator)."""
MODEL_NAME_REFUSED = re.compile(r"[/:.%\"']")
"""Characters MLflow refuses in a logged model's name (mlflow.utils.validation._validate_logged_model_name)."""
ENTRY_POINT = "python -m hacrl_exp.run"
RUN_COLOUR = "mlflow.runColor"
"""The run tag MLflow 3's UI reads a run's colour from (set when a user picks one)."""


def method_name(config: Config) -> str:
    """The algorithm and the HACPO mechanisms switched off: 'hacpo', 'hacpo-no_omega-no_clip', 'gspo_x2'.

    Mechanisms are named only for an algorithm that reads them all (HACPO's capability baseline), as the report's
    method labels (hacrl_exp.report.load.method_label)."""
    name = config.algorithm.name
    if get_algorithm(name).capability_baseline:
        name += "".join(f"-no_{m}" for m in MECHANISMS if not getattr(config.mechanisms, m))
    return name


def override_key(override: str) -> str:
    """An override's key as a dotted path: `+`/`~` prefixes dropped, a config group's `/` read as `.`
    (`hydra/launcher=joblib` → `hydra.launcher`)."""
    return override.split("=", 1)[0].lstrip("+~").replace("/", ".")


def unescape(value: str) -> str:
    """A Hydra override value without its backslash escapes (`sqlite\\:////x` → `sqlite:////x`)."""
    return re.sub(r"\\(.)", r"\1", value)


def is_runtime(override: str) -> bool:
    """Whether an override sets where or how a job runs, not what it trains (`RUNTIME`, `RUNTIME_LEAVES`)."""
    key = override_key(override)
    return key.rsplit(".", 1)[-1] in RUNTIME_LEAVES or any(key == k or key.startswith(f"{k}.") for k in RUNTIME)


def training_overrides(overrides: list[str] | None) -> list[str]:
    """The job's overrides without runtime ones (`is_runtime`), in the order given, Hydra's escapes removed: what
    the overrides tag and a description show."""
    return [unescape(o) for o in overrides or [] if not is_runtime(o)]


def naming_overrides(overrides: list[str] | None) -> list[str]:
    """The overrides that make a job's configuration differ from the defaults of its method, agents and seed:
    `training_overrides` without `NAMED_ALREADY` keys, sorted (their order changes nothing)."""
    named = [o for o in training_overrides(overrides) if override_key(o).split(".")[0] not in NAMED_ALREADY]
    return sorted(named)


def short_overrides(overrides: list[str] | None) -> list[str]:
    """`naming_overrides` abbreviated to the last key component and the value as given (`trainer.steps=3` →
    `steps=3`), with more of the key where two would read alike (`opt_char.lr=0.002,gpt2_bpe.lr=0.003`)."""
    named = naming_overrides(overrides)
    keys = [override_key(o).split(".") for o in named]
    out = []
    for parts, override in zip(keys, named):
        depth = 1
        while depth < len(parts) and sum(k[-depth:] == parts[-depth:] for k in keys) > 1:
            depth += 1
        out.append(".".join(parts[-depth:]) + "=" + override.split("=", 1)[1] if "=" in override else override)
    return out


def name_suffix(overrides: list[str] | None) -> str:
    """'' without naming overrides; else '-' + the abbreviated overrides (`short_overrides`) comma-joined when they
    are plain (`PLAIN`) and at most `NAME_TEXT` characters, else '-' + those of them that fit, then '-' + the first
    6 hex digits of the full list's SHA-256 (the `overrides` tag and the run description spell them out)."""
    short = short_overrides(overrides)
    if not short:
        return ""
    joined = ",".join(short)
    if len(joined) <= NAME_TEXT and PLAIN.fullmatch(joined):
        return f"-{joined}"
    fits: list[str] = []
    for text in (s for s in short if PLAIN.fullmatch(s)):
        if len(",".join([*fits, text])) <= NAME_TEXT:
            fits.append(text)
    digest = hashlib.sha256(",".join(naming_overrides(overrides)).encode()).hexdigest()[:6]
    return "-" + ",".join([*fits, digest]) if fits else f"-{digest}"


def config_name(config: Config, overrides: list[str] | None = None, rerun: str = "", commit: str | None = None) -> str:
    """The job's configuration up to its seed, `<method>-<agents>[<suffix>][<rerun>][@<commit>]`: the `config` tag,
    so grouping runs by config (and agent) averages seeds of one configuration, code version and run only (a rerun,
    `-r2`, is never averaged with its first run as if it were another seed). commit: the short git commit."""
    return f"{method_name(config)}-{setting_name(config, overrides, rerun, commit)}"


def setting_name(config: Config, overrides: list[str] | None = None, rerun: str = "", commit: str | None = None) -> str:
    """The `setting` tag: `config_name` without the method, `<agents>[<suffix>][<rerun>][@<commit>]`, so the methods
    run on one setting can be compared."""
    return f"{'+'.join(config.agents.members)}{name_suffix(overrides)}{rerun}" + (f"@{commit}" if commit else "")


def run_name(config: Config, overrides: list[str] | None = None) -> str:
    """The parent run's name: tracking.run_name, else `<method>-<agent>+<agent>-s<seed>[<suffix>]` (`name_suffix`
    of the job's Hydra overrides). Two jobs whose overrides differ in a key that changes training get two names;
    `rerun_name` then tells a rerun of a name the store holds already."""
    base = f"{method_name(config)}-{'+'.join(config.agents.members)}-s{config.seed}"
    return config.tracking.run_name or base + name_suffix(overrides)


def rerun_name(name: str, taken: set[str]) -> str:
    """`name` when no job of the experiment has it yet, else `name-r<K>` with the smallest K >= 2 not taken."""
    if name not in taken:
        return name
    return next(f"{name}-r{k}" for k in range(2, len(taken) + 3) if f"{name}-r{k}" not in taken)


def agent_run_name(job: str, agent: str) -> str:
    """An agent's run: `<parent name>/<agent>`, so a chart across jobs tells their lines apart."""
    return f"{job}/{agent}"


def model_name(job: str, agent: str) -> str:
    """An agent's logged model: `<agent>@<job>`, agent first so that a list that cuts long names still shows it, with
    the characters MLflow refuses in logged-model names (`MODEL_NAME_REFUSED`) replaced by '_'."""
    return MODEL_NAME_REFUSED.sub("_", f"{agent}@{job}")


def run_tags(
    config: Config,
    grid: str | None = None,
    overrides: list[str] | None = None,
    config_dirs: list[str] = (),
    job: str | None = None,
    commit: str | None = None,
) -> dict[str, str]:
    """Tags of every run of the job: tracking.tags, then method, seed, data_seed, heldout_seed, agents ('+'-joined),
    task, grid, job (the parent's name), config (`config_name`), setting (`setting_name`), and, for a Hydra job,
    overrides (`training_overrides`, space-joined) and command (`job_command`: every override, as given).

    data_seed and heldout_seed are the seeds the task's data came from (task.seed and task.heldout_seed as validation
    resolved them: by default the job's seed and 0), so a report can say what its seeds varied; 'none' where the
    task has no such seed (math's held-out set is a file).
    grid: the experiment preset or multirun name; tracking.tags.grid (set by presets such as paper_table1_tiny) wins,
    else `grid`, else 'none'. overrides, config_dirs: the job's Hydra overrides and --config-dir folders
    (`hydra_overrides`); overrides None outside Hydra. job: the parent's name when `rerun_name` made it a rerun's
    (default `run_name`); commit: the git commit of the code (its first 7 hex digits go into config and setting)."""
    base = run_name(config, overrides)
    job = job or base
    rerun = job[len(base) :] if job.startswith(base) and re.fullmatch(r"-r\d+", job[len(base) :]) else ""
    short = commit[:7] if commit else None
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
        "job": job,
        "config": config_name(config, overrides, rerun, short),
        "setting": setting_name(config, overrides, rerun, short),
        RUN_COLOUR: method_colour(method_name(config)),  # MLflow draws a run's lines in this colour, in every view
    }
    if overrides is not None:
        tags["overrides"] = " ".join(training_overrides(overrides))[:5000]
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
