"""Settings of the hacrl_optuna sweeper (`hydra.sweeper.*`), checked and turned into Optuna objects.

Every bad value raises a ConfigError that names its `hydra.sweeper.*` key, before any trial starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from hacrl_exp.config.flags import check_number
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import check_name, check_output

SAMPLERS = ("tpe", "random")
PRUNERS = ("none", "median", "percentile", "threshold")
DIRECTIONS = ("maximize", "minimize")
STUDY_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
KEY = "hydra.sweeper"
ALPHA_MAX = 100.0
"""The largest α a trial may draw: algorithm.alpha's upper bound."""
COUNTS = {"n_trials": (1, 100_000), "n_jobs": (1, 1024), "max_failures": (1, 100_000)}
"""The range of each count of `hydra.sweeper` (n_jobs: trials launched at once, each a training job)."""


@dataclass(frozen=True)
class AlphaSpace:
    """The α search space of every edge: `choices` if given, else [low, high] (log-uniform when log)."""

    low: float
    high: float
    log: bool
    choices: tuple[float, ...]

    def distribution(self) -> optuna.distributions.BaseDistribution:
        if self.choices:
            return optuna.distributions.CategoricalDistribution(self.choices)
        return optuna.distributions.FloatDistribution(self.low, self.high, log=self.log)


@dataclass(frozen=True)
class SweepSettings:
    """Checked `hydra.sweeper.*` (each field is described in hydra_plugins/hacrl_optuna_sweeper/sweeper.py)."""

    study_name: str
    storage: str
    n_trials: int
    n_jobs: int
    metric: str
    direction: str
    sampler: str
    seed: int
    n_startup_trials: int
    pruner: dict
    alpha: AlphaSpace
    max_failures: int
    output_dir: Path

    def make_sampler(self, edge_index: int, ordinal: int) -> optuna.samplers.BaseSampler:
        """A sampler seeded by (seed, edge, the study's trial count less interrupted trials), so that edge studies
        draw independent α and a resumed sweep retries the α of the trial its interruption killed."""
        seed = int(np.random.SeedSequence([self.seed, edge_index, ordinal]).generate_state(1)[0])
        if self.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.n_startup_trials)


def make_pruner(spec: Mapping[str, Any]) -> optuna.pruners.BasePruner:
    """The Optuna pruner of a `hydra.sweeper.pruner` node: name plus the fields that pruner reads."""
    name = spec["name"]
    warmup = {"n_warmup_steps": int(spec["n_warmup_steps"])}
    startup = {"n_startup_trials": int(spec["n_startup_trials"]), **warmup}
    try:
        if name == "none":
            return optuna.pruners.NopPruner()
        if name == "median":
            return optuna.pruners.MedianPruner(**startup)
        if name == "percentile":
            return optuna.pruners.PercentilePruner(float(spec["percentile"]), **startup)
        if name == "threshold":
            return optuna.pruners.ThresholdPruner(lower=spec["lower"], upper=spec["upper"], **warmup)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{KEY}.pruner ({name}): {' '.join(str(exc).split())}") from None
    raise ConfigError(f"{KEY}.pruner.name={name!r} is not one of {list(PRUNERS)}")


def parse_settings(raw: Mapping[str, Any], sweep_dir: Path) -> SweepSettings:
    """Checked settings from the sweeper's config node (plain containers). Storage and output default to the
    sweep folder, so re-running the same command finds the same studies."""
    name = str(raw["study_name"])
    if not STUDY_NAME.match(name):
        raise ConfigError(f"{KEY}.study_name={name!r} may hold only letters, digits, '_', '.' and '-'")
    check_name(name, f"{KEY}.study_name")  # names best_alpha/<study>.yaml: not '.', '..' or hidden
    for key, (low, high) in COUNTS.items():
        check_number(f"{KEY}.{key}", _integer(raw, key), low, high)
    if raw["direction"] not in DIRECTIONS:
        raise ConfigError(f"{KEY}.direction={raw['direction']!r} is not one of {list(DIRECTIONS)}")
    sampler, pruner = dict(raw["sampler"]), dict(raw["pruner"])
    if sampler["name"] not in SAMPLERS:
        raise ConfigError(f"{KEY}.sampler.name={sampler['name']!r} is not one of {list(SAMPLERS)}")
    check_number(f"{KEY}.sampler.n_startup_trials", _integer(sampler, "n_startup_trials", "sampler."), 0, 100_000)
    check_number(f"{KEY}.sampler.seed", _integer(sampler, "seed", "sampler."), 0, 2**32 - 1)
    make_pruner(pruner)
    if raw["output_dir"]:  # a symlink only with --follow-symlinks, writable, not a file (best_alpha/ goes there)
        check_output(raw["output_dir"], f"{KEY}.output_dir")
    output_dir = Path(raw["output_dir"] or sweep_dir).expanduser().resolve()
    return SweepSettings(
        study_name=name,
        storage=_storage(raw["storage"], output_dir),
        n_trials=int(raw["n_trials"]),
        n_jobs=int(raw["n_jobs"]),
        metric=str(raw["metric"]),
        direction=str(raw["direction"]),
        sampler=sampler["name"],
        seed=int(sampler["seed"]),
        n_startup_trials=int(sampler["n_startup_trials"]),
        pruner=pruner,
        alpha=_alpha_space(dict(raw["alpha"])),
        max_failures=int(raw["max_failures"]),
        output_dir=output_dir,
    )


def _storage(given: str | None, output_dir: Path) -> str:
    """The Optuna storage URL: the one given (a sqlite URL parsed strictly: a `?` would open another database), else
    optuna.db in the sweep's output folder."""
    from hacrl_exp.tracking.store import check_database_url

    return check_database_url(given, f"{KEY}.storage={given}") if given else f"sqlite:///{output_dir / 'optuna.db'}"


def _integer(raw: Mapping[str, Any], key: str, prefix: str = "") -> int:
    """raw[key] as an int; a ConfigError naming `hydra.sweeper.<prefix><key>` when it is not a whole number."""
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{KEY}.{prefix}{key}={value!r} is not an integer")
    return value


def _alpha_space(raw: dict) -> AlphaSpace:
    choices = tuple(float(c) for c in raw.get("choices") or ())
    low, high, log = float(raw["low"]), float(raw["high"]), bool(raw["log"])
    for i, choice in enumerate(choices):
        check_number(f"{KEY}.alpha.choices[{i}]", choice, 0, ALPHA_MAX)
    if not choices:
        check_number(f"{KEY}.alpha.low", low, 0, ALPHA_MAX)
        check_number(f"{KEY}.alpha.high", high, 0, ALPHA_MAX)
    if choices:
        if min(choices) < 0 or len(set(choices)) != len(choices):
            raise ConfigError(f"{KEY}.alpha.choices={list(choices)} must be distinct values >= 0")
    elif not 0 <= low < high:
        raise ConfigError(f"{KEY}.alpha.low={low}, high={high}: need 0 <= low < high (or give alpha.choices)")
    elif log and low == 0:
        raise ConfigError(f"{KEY}.alpha.low=0 with alpha.log=true: a log-uniform range needs low > 0")
    return AlphaSpace(low, high, log, choices)
