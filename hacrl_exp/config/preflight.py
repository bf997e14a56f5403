"""Compose the command line's overrides before Hydra runs the job(s) (`compose_config`, `first_choices`).

Hydra's own errors are multi-line and exit with 1; composing here turns a missing group option, an unknown
key or a bad value into one `ConfigError` line (exit code 2). Sweeps are checked at their first value;
every job validates its own config again when it starts. The preflight itself (compose, then validate against the
schema and the registries) is `hacrl_exp.trainer.validate.preflight`: the registries live above `config`.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from hydra import compose, initialize, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import MarkedYAMLError

from hacrl_exp.config.schema import Config
from hacrl_exp.config.validate import describe, describe_interpolation
from hacrl_exp.errors import ConfigError
from hacrl_exp.repo import REPO_ROOT

CONFIG_DIR = REPO_ROOT / "conf"
SWEEPS_DIR = REPO_ROOT / "sweeps"
SWEEPS_GROUP = "hparams_search"
"""The config group whose options are the studies in sweeps/ (served by hydra_plugins/hacrl_sweeps)."""
OLD_SWEEPS_GROUP = "sweep"
"""SWEEPS_GROUP's old name: an override of it is refused in one line naming SWEEPS_GROUP."""
"""The α studies: groups hparams_search and sweep (hydra_plugins/hacrl_sweeps, on conf/config.yaml's search path)."""
HYDRA_KEYS_CHECKED = ("hydra.searchpath", "hydra.sweeper.")  # composed too: the groups they find, sweeper typos
ConfigStore.instance().store(name="config_schema", node=Config)


def first_choices(overrides: list[str]) -> list[str]:
    """Each override with a sweep (a,b,c / range / glob) replaced by its first value; hydra.* dropped."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise ConfigError(f"cannot parse the overrides: {str(exc).splitlines()[0]}") from None
    out = []
    for override in parsed:
        key = override.get_key_element()
        if key.lstrip("+~").startswith("hydra") and not key.startswith(HYDRA_KEYS_CHECKED):
            continue
        if override.is_sweep_override():
            out.append(f"{key}={next(iter(override.sweep_string_iterator()))}")
        else:
            out.append(override.input_line)
    return out


def group_options(group: str) -> list[str]:
    folder = SWEEPS_DIR if group == SWEEPS_GROUP else CONFIG_DIR / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def compose_config(
    overrides: list[str],
    config_name: str = "config",
    explain=describe,
    config_dir: Path | None = CONFIG_DIR,
    with_hydra: bool = False,
) -> DictConfig:
    """The composed config for these overrides, with Hydra's errors turned into one-line ConfigErrors
    (`explain` words an OmegaConf error; the default knows the training schema). `config_dir=None` searches only
    Hydra's ConfigStore, for an app whose keys share names with conf/'s groups (see evaluate_schema)."""
    _refuse_old_sweeps_group(overrides)
    GlobalHydra.instance().clear()
    try:
        if config_dir is None:
            context = initialize(config_path=None, version_base="1.3")
        else:
            context = initialize_config_dir(config_dir=str(config_dir), version_base="1.3")
        with context:
            return compose(config_name=config_name, overrides=overrides, return_hydra_config=with_hydra)
    except MissingConfigException as exc:
        raise ConfigError(_missing_option(overrides, exc)) from None
    except MarkedYAMLError as exc:  # e.g. a key given twice in a config file: YAML refuses, say where
        mark = exc.problem_mark
        where = f"{mark.name}:{mark.line + 1}" if mark else "a config file"
        raise ConfigError(f"{where}: {exc.problem}; fix that line of the config file") from None
    except HydraException as exc:
        cause = exc.__cause__
        raise ConfigError(explain(cause) if isinstance(cause, OmegaConfBaseException) else _first_line(exc)) from None
    finally:
        GlobalHydra.instance().clear()


def check_hydra_values(overrides: list[str], config_name: str = "config", config_dir: Path | None = CONFIG_DIR) -> None:
    """The `hydra.*` overrides holding `${...}` resolved against Hydra's own composed config, so that a missing key or
    environment variable, a cycle or bad grammar there is one ConfigError line before Hydra starts (Hydra prints a
    traceback of 100+ lines and exits 1). `${hydra:...}` exists only while Hydra runs a job: not checked."""
    given = {}
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key.startswith("hydra.") and "${" in value and "${hydra:" not in value:
            given[key] = value
    if not given:
        return
    keys = [o.lstrip("+~") for o in overrides]
    own = [o for o, k in zip(overrides, keys) if k.startswith("hydra.") and not k.startswith(HYDRA_KEYS_CHECKED)]
    cfg = compose_config(first_choices(overrides) + own, config_name, config_dir=config_dir, with_hydra=True)
    for key, value in given.items():
        try:
            OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{key}={value}: {describe_interpolation(exc) or _first_line(exc)}") from None


def _refuse_old_sweeps_group(overrides: list[str]) -> None:
    """`+sweep=<name>` is one line naming `+hparams_search=<name>` (Hydra would take it for a new key `sweep`)."""
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key == OLD_SWEEPS_GROUP:
            raise ConfigError(
                f"{key}={value}: the group {key} is now {SWEEPS_GROUP}; use +{SWEEPS_GROUP}={value} "
                f"({SWEEPS_DIR.name}/{value}.yaml)"
            )


def _missing_option(overrides: list[str], exc: Exception) -> str:
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        options = group_options(key)
        if options and value not in options:
            close = difflib.get_close_matches(value, options, n=1)
            hint = f" Did you mean {key}={close[0]}?" if close else ""
            return f"{key}={value} is not a known {key} preset; choose one of {options}.{hint}"
    return _first_line(exc)


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__
