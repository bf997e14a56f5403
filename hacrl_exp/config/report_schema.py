"""Typed schema and validation of `python -m hacrl_exp.report` (primary config conf/report.yaml).

Composition errors and bad values become one ConfigError line naming the key, as for `python -m hacrl_exp.evaluate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from hacrl_exp.config.schema import rng
from hacrl_exp.config.validate import describe_for, typed_config
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import check_name

REPORT_KEY = "a report config key"  # as in "x is not a report config key"


@dataclass
class StudiesConfig:
    storage: str | None = None
    """Optuna storage URL of α sweeps (e.g. sqlite:///multirun/alpha_pair/optuna.db); null: no α section."""
    sweeps: list[str] | None = None
    """Only the edge studies of these sweeps (`<sweep>/<learner><-<source>`); null: every study in the storage."""
    param: str = "alpha"
    """The studies' parameter plotted on the x axis."""


@dataclass
class ReportConfig:
    name: str | None = None
    """Report folder name: <output_root>/<name>/. Default: the `grid` tag filter, else the experiment, else 'report'."""
    output_root: str = "reports"
    uri: str | None = None
    """MLflow tracking URI; default $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db."""
    experiments: list[str] | None = None
    """MLflow experiments to read; null: all of them."""
    tags: dict[str, str] = field(default_factory=dict)
    """Runs must carry these tags (e.g. tags.grid=paper_table1_tiny: the preset's tracking.tags)."""
    filter: str | None = None
    """A further MLflow filter string, e.g. "params.`trainer.steps` = '80'"."""
    label_params: list[str] = field(default_factory=list)
    """Params appended to method labels, to keep apart runs that differ in them (e.g. [algorithm.alpha])."""
    include_unfinished: bool = False
    """Also use jobs whose parent run is not FINISHED (killed, failed, running)."""
    include_trials: bool = False
    """Also use α-sweep trial runs (param trial.studies set)."""
    level: float = field(default=0.95, metadata=rng(0, 1, low_open=True, high_open=True))
    """Confidence level of every interval."""
    significance: float = field(default=0.05, metadata=rng(0, 1, low_open=True, high_open=True))
    """Threshold of every Holm-adjusted p (Holm over all tests of a family: sign-flip, TOST, refutation): 'beat' /
    'fell short of' (sign-flip), else 'matched' (TOST), else 'refuted' (Δ ≥ δ rejected), else 'not established'."""
    equivalence_margin: float | None = field(default=None, metadata=rng(0, 1, low_open=True))
    """Margin m of 'matched' (a TOST at ±m, accuracy units) for every comparison; null: half the effect the paper
    reports for that comparison (hacrl_exp/report/paper.py), and no equivalence test where it reports none."""
    margin_reason: str | None = None
    """Why equivalence_margin is what it is; required with it, printed next to it."""
    hypothesised_effect: float | None = field(default=None, metadata=rng(-1, 1))
    """Gain δ every claim 'HACPO > B' hypothesises ('refuted' when the one-sided upper bound of Δ lies below it);
    null: the paper's effect for that comparison."""
    effect_reason: str | None = None
    """Why hypothesised_effect is what it is; required with it, printed next to it."""
    bootstrap: int = field(default=2000, metadata=rng(0, 10_000_000))
    """Paired-bootstrap resamples."""
    seed: int = 0
    """Seed of the bootstrap's and the power simulation's generators."""
    power_draws: int = field(default=500, metadata=rng(0, 100_000))
    """Simulated grids behind each comparison's power (hacrl_exp/report/power.py); 0: no power simulation."""
    studies: StudiesConfig = field(default_factory=StudiesConfig)
    log_to_mlflow: bool = True
    """Log the report folder as the artifacts of a run tagged role=report."""


ConfigStore.instance().store(name="report_schema", node=ReportConfig)


def name_setting(config: ReportConfig) -> tuple[str, str]:
    """(the report's folder name, the setting it comes from): `name`, else the grid tag, else the single
    experiment, else 'report'."""
    if config.name is not None:
        return config.name, "name"
    if config.tags.get("grid"):
        return config.tags["grid"], "tags.grid"
    if config.experiments and len(config.experiments) == 1:
        return config.experiments[0], "experiments[0]"
    return "report", "name"


def report_name(config: ReportConfig) -> str:
    """The report's folder name (`name_setting`), checked as one plain name (`paths.check_name`) naming its setting."""
    return check_name(*name_setting(config))


def compose_report(overrides: list[str]) -> DictConfig:
    """conf/report.yaml composed with command-line overrides; Hydra's errors become one-line ConfigErrors."""
    from hacrl_exp.config.preflight import compose_config, first_choices

    return compose_config(first_choices(overrides), "report", explain=describe_for(ReportConfig, REPORT_KEY))


def validate_report(cfg: DictConfig | dict) -> ReportConfig:
    """Typed, range-checked ReportConfig."""
    config: ReportConfig = typed_config(cfg, ReportConfig, REPORT_KEY)
    report_name(config)  # the folder name, whichever setting it comes from, is one plain name
    for value, reason in (("equivalence_margin", "margin_reason"), ("hypothesised_effect", "effect_reason")):
        if getattr(config, value) is not None and not (getattr(config, reason) or "").strip():
            raise ConfigError(
                f"{value}={getattr(config, value)} needs its reason: add {reason}='<why this number>' (the report "
                f"prints it), or drop {value} to use the paper's effect"
            )
    return config
