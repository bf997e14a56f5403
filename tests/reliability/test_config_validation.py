"""Bad config input: every numeric field has a range, and a value outside it (or NaN, or a word) names the key, the
value and the allowed range; an unknown key gets a did-you-mean; the CLI prints one line and exits 2."""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing

import pytest
from omegaconf import OmegaConf

from hacrl_exp.config.evaluate_schema import EvaluateConfig, validate_evaluate
from hacrl_exp.config.preflight import compose_config
from hacrl_exp.config.schema import Config
from hacrl_exp.config.validate import _check_ranges, range_text
from hacrl_exp.errors import ConfigError
from hacrl_exp.trainer.validate import preflight, validate
from tests.cli import run_cli

NUMBERS = (int, float)
AGENT = "agents.members.opt_char"  # a member of the default preset (agents=pair)


def _numeric(hint) -> type | None:
    """int or float for a numeric field (Optional[...] and Dict[str, number] included), else None."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if hint in NUMBERS:
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 and args[0] in NUMBERS:
        return args[0]
    if typing.get_origin(hint) is dict and args[-1] in NUMBERS:
        return args[-1]
    return None


def numeric_fields(node: type, prefix: str = "") -> list[tuple[str, type, dataclasses.Field]]:
    """(dotted key, int|float, field) of every numeric field under a schema dataclass."""
    out = []
    for f in dataclasses.fields(node):
        hint = typing.get_type_hints(node)[f.name]
        key = f"{prefix}{f.name}"
        if typing.get_origin(hint) is dict and dataclasses.is_dataclass(typing.get_args(hint)[1]):
            out += numeric_fields(typing.get_args(hint)[1], f"{key}.opt_char.")  # agents.members.<name>
        elif dataclasses.is_dataclass(hint):
            out += numeric_fields(hint, f"{key}.")
        elif (kind := _numeric(hint)) is not None:
            out.append((key, kind, f))
    return out


TRAIN_FIELDS = numeric_fields(Config)
EVAL_FIELDS = numeric_fields(EvaluateConfig)


def bad_values(kind: type, spec: tuple) -> list:
    """Values just outside each finite bound, plus NaN for floats."""
    low, high, low_open, high_open = spec
    step = 1 if kind is int else 0.5
    out = []
    if low is not None:
        out.append(kind(low) if low_open else kind(low - step))
    if high is not None:
        out.append(kind(high) if high_open else kind(high + step))
    return out + ([math.nan] if kind is float else [])


def cases(fields):
    return [
        pytest.param(key, value, f.metadata["range"], id=f"{key}={value}")
        for key, kind, f in fields
        for value in bad_values(kind, f.metadata["range"])
    ]


def test_every_numeric_field_has_a_range():
    assert len(TRAIN_FIELDS) > 40 and len(EVAL_FIELDS) > 8
    missing = [key for key, _, f in TRAIN_FIELDS + EVAL_FIELDS if "range" not in f.metadata]
    assert not missing, f"numeric config fields without rng(...) metadata: {missing}"


@pytest.fixture(scope="module")
def default_config() -> Config:
    return validate(compose_config([]))


def with_value(config, key: str, value):
    """A deep copy of a typed config with the dotted key set (a dict consumes the next part as its key)."""
    config = copy.deepcopy(config)
    *path, leaf = key.split(".")
    node = config
    for part in path:
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    if isinstance(node, dict):
        node[leaf] = value
    else:
        setattr(node, leaf, value)
    return config


@pytest.mark.parametrize("key, value, spec", cases(TRAIN_FIELDS))
def test_out_of_range_names_key_value_and_range(default_config, key, value, spec):
    if key.endswith(".alpha_from"):  # a table: each of its values is checked
        key = f"{key}.gpt2_bpe"
    with pytest.raises(ConfigError) as info:
        _check_ranges(with_value(default_config, key, value), "")  # the range check of validate(), on a typed config
    assert str(info.value) == f"{key}={value!r} is out of range; allowed {range_text(spec)}"


@pytest.mark.parametrize("override", ["trainer.steps=0", "algorithm.delta=1.0", "rollout.top_p=0", "seed=-1"])
def test_composed_out_of_range_values_fail_validation(override):
    key, _, value = override.partition("=")
    with pytest.raises(ConfigError, match=f"^{key}=.* is out of range; allowed "):
        preflight([override])


@pytest.mark.parametrize("key, value, spec", cases(EVAL_FIELDS))
def test_evaluate_out_of_range_names_key_value_and_range(key, value, spec):
    raw = OmegaConf.structured(EvaluateConfig)
    OmegaConf.update(raw, key, value)
    with pytest.raises(ConfigError) as info:
        validate_evaluate(raw)
    assert str(info.value) == f"{key}={value!r} is out of range; allowed {range_text(spec)}"


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "trainer.steps=abc",
            "trainer.steps: Value 'abc' of type 'str' could not be converted to Integer; allowed [1",
        ),
        (
            "algorithm.alpha=lots",
            "algorithm.alpha: Value 'lots' of type 'str' could not be converted to Float; allow",
        ),
        ("trainer.stepz=3", "trainer.stepz is not a config key. Did you mean trainer.steps?"),
        ("algorithm.alpah=2", "algorithm.alpah is not a config key. Did you mean algorithm.alpha?"),
        (f"{AGENT}.model.hiden_size=8", f"{AGENT}.model.hiden_size is not a config key. Did you mean {AGENT}.model.h"),
        ("tracking.experment=x", "tracking.experment is not a config key. Did you mean tracking.experiment?"),
        ("+sed=3", "sed is not a config key. Did you mean seed?"),
        ("task.bad_rows=skp", "task.bad_rows='skp' is not one of ['error', 'skip']. Did you mean 'skip'?"),
        (f"{AGENT}.alpha_from.gpt2_bpe=2", f"{AGENT}.alpha_from.gpt2_bpe is not set yet; add a new entry with +"),
        (f"+{AGENT}.alpha_from.gpt2_bpe=101", f"{AGENT}.alpha_from.gpt2_bpe=101.0 is out of range; allowed [0, 100]"),
        ("rollout.sampler=counters", "rollout.sampler='counters' is not one of ['counter', 'multinomial']. Did you"),
    ],
)
def test_wrong_type_and_unknown_keys(override, message):
    with pytest.raises(ConfigError) as info:
        preflight([override])
    assert str(info.value).startswith(message)


def test_offloaded_agents_are_refused_a_vllm_engine():
    offload = ["executor=ray", "rollout=vllm", f"{AGENT}.fsdp.offload=true"]
    with pytest.raises(ConfigError, match=rf"^{AGENT}.fsdp.offload=true with rollout=vllm is not built"):
        preflight(offload)


@pytest.mark.parametrize(
    "override, line",
    [
        ("trainer.stepz=3", "ConfigError: trainer.stepz is not a config key. Did you mean trainer.steps?"),
        ("algorithm.delta=nan", "ConfigError: algorithm.delta=nan is out of range; allowed [0, 1)"),
    ],
)
def test_cli_prints_one_line_and_exits_2(tmp_path, override, line):
    result = run_cli("hacrl_exp.run", [override, f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(line), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "mlflow.db").exists()  # nothing written
