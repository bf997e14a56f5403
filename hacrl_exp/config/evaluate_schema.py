"""Typed schema and validation of `python -m hacrl_exp.evaluate` (primary config conf/evaluate.yaml).

Validation runs right after composition and before any model loads; every error is one ConfigError line naming the
key, the value and the fix. Benchmark names, the data folder and the checkpoints are checked next, by
`hacrl_exp.evaluation.inputs` (file system only), so a typo never waits for torch to import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from hacrl_exp.config.flags import check_threads
from hacrl_exp.config.preflight import CONFIG_DIR
from hacrl_exp.config.schema import SEED_MAX, rng
from hacrl_exp.config.validate import describe_for, typed_config
from hacrl_exp.errors import ConfigError

EVALUATE_KEY = "an evaluate config key"  # as in "x is not an evaluate config key"


@dataclass
class SamplingOverrides:
    temperature: float | None = field(default=None, metadata=rng(0, 10))
    """Sampling temperature for every benchmark; null keeps each benchmark's own (0 = greedy)."""
    top_p: float | None = field(default=None, metadata=rng(0, 1, low_open=True))
    top_k: int | None = field(default=None, metadata=rng(-1, 1 << 20))
    """-1 disables top-k."""


@dataclass
class GraderSettings:
    timeout_s: float = field(default=5.0, metadata=rng(0.1, 600))
    """Seconds math-verify may spend on one answer; slower answers count as wrong, reason 'timeout'."""
    workers: int = field(default=2, metadata=rng(1, 64))
    """Grading worker processes."""
    forms: str = "requested"
    """The grading policy of the `math` rule: requested (an answer equal in value but not in a form its question asks
    for is wrong) | value (the value alone decides). The headline under the other policy is reported beside it."""


@dataclass
class EvalTracking:
    backend: str = "mlflow"
    """mlflow | none."""
    uri: str | None = None
    """Tracking URI; default $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db."""
    experiment: str = "hacrl"
    """Used when the training run is not in this store; otherwise the training run's experiment."""


@dataclass
class EvaluateConfig:
    checkpoints: list[str] = field(default_factory=list)
    """Model folders, checkpoint step folders, or training run folders (each run's whole checkpoint series)."""
    agents: list[str] | None = None
    """Only these agents of the checkpoints (default: all)."""
    benchmarks: list[str] = field(default_factory=lambda: ["math500"])
    """Benchmark names: evaluation/<name>.yaml."""
    data_dir: str | None = None
    """Folder of the benchmark JSONL files; default $HACRL_DATA_DIR, else the Hugging Face datasets."""
    source: str = "auto"
    """auto | local | hf."""
    limit: int | None = field(default=None, metadata=rng(1, 10_000_000))
    """Only the first N problems of each benchmark (a quick subset)."""
    samples: int | None = field(default=None, metadata=rng(1, 100_000))
    """Responses per problem for every benchmark; null keeps each benchmark's own (e.g. 30 for aime2025)."""
    sampling: SamplingOverrides = field(default_factory=SamplingOverrides)
    max_new_tokens: int | None = field(default=None, metadata=rng(1, 1 << 20))
    """Response token budget; null keeps each benchmark's own. Cut to fit a model's position limit."""
    max_prompt_tokens: int = field(default=2048, metadata=rng(8, 1 << 20))
    seed: int = field(default=0, metadata=rng(0, SEED_MAX))
    bootstrap: int = field(default=1000, metadata=rng(0, 1_000_000))
    """Bootstrap resamples for the 95% confidence intervals."""
    grader: GraderSettings = field(default_factory=GraderSettings)
    tracking: EvalTracking = field(default_factory=EvalTracking)
    chat_template: bool = True
    """Render prompts with the tokenizer's chat template when it has one."""
    device: str = "auto"
    dtype: str = "float32"
    max_batch_size: int = field(default=64, metadata=rng(1, 1 << 20))
    threads: int | None = field(default=None, metadata=rng(1, 4096))
    output_dir: str | None = None
    """Where the parquet results go; default Hydra's job folder."""


ConfigStore.instance().store(name="evaluate_schema", node=EvaluateConfig)
EVALUATE_YAML = CONFIG_DIR / "evaluate.yaml"
# The evaluate app reads conf/evaluate.yaml from the ConfigStore, with conf/ off its search path: there Hydra would
# take `agents=[opt_char]` for the training app's `agents` group (conf/agents/) and refuse it, not set this key.
ConfigStore.instance().store(name="evaluate", node=OmegaConf.load(EVALUATE_YAML))
CHOICES = {
    "source": ("auto", "local", "hf"),
    "tracking.backend": ("mlflow", "none"),
    "dtype": ("float32", "bfloat16", "float16"),
    "grader.forms": ("requested", "value"),  # hacrl_exp.rewards.FORMS (a test holds them equal)
}


def compose_evaluate(overrides: list[str]) -> DictConfig:
    """conf/evaluate.yaml composed with command-line overrides; Hydra's errors become one-line ConfigErrors naming
    the evaluate key (unknown keys get a did-you-mean from EvaluateConfig)."""
    from hacrl_exp.config.preflight import compose_config, first_choices

    return compose_config(
        first_choices(overrides), "evaluate", explain=describe_for(EvaluateConfig, EVALUATE_KEY), config_dir=None
    )


def validate_evaluate(cfg: DictConfig | dict) -> EvaluateConfig:
    """Typed, range-checked EvaluateConfig. Benchmark names, data_dir and checkpoints are checked by
    `hacrl_exp.evaluation.inputs.check_inputs` (it knows the benchmarks; this package imports no other)."""
    config: EvaluateConfig = typed_config(cfg, EvaluateConfig, EVALUATE_KEY)
    for key, allowed in CHOICES.items():
        value = config
        for part in key.split("."):
            value = getattr(value, part)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not one of {list(allowed)}")
    check_threads("threads", config.threads)
    return config
