"""Validate a composed config against the schema, before any model loads. Errors are `ConfigError`s.

`validate_schema` checks what the schema alone knows: types, ranges, fixed choices, agent names, batch arithmetic,
devices and optional extras. The names that live in other packages' registries (algorithms, topologies, rewards,
bad-row policies, benchmarks) are checked one layer up, by `hacrl_exp.trainer.validate`, because `config` imports no
other package of ours (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import re
import typing
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    GrammarParseError,
    InterpolationKeyError,
    InterpolationResolutionError,
    InterpolationValidationError,
    OmegaConfBaseException,
)

from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError

CHOICES = {  # fixed by the schema; registry names are checked in hacrl_exp.trainer.validate
    "model.source": ("tiny", "pretrained"),
    "model.arch": ("opt", "gpt2", "llama"),
    "model.dtype": ("float32", "bfloat16", "float16"),
    "model.mixed_precision": ("master", "autocast"),
    "tokenizer.kind": ("char", "bpe", "pretrained"),
    "algorithm.kl_aggregation": ("seq_mean_token_mean", "token_mean"),
    "algorithm.capability_scope": ("batch", "category"),
    "algorithm.dynamic_prompts": ("fresh", "same"),
    "task.name": ("arithmetic", "math"),
    "task.grader_forms": ("requested", "value"),  # hacrl_exp.rewards.FORMS (a test holds them equal)
    "rollout.backend": ("hf", "vllm"),
    "rollout.sampler": ("counter", "multinomial"),  # hacrl_exp.rollout.hf.SAMPLERS
    "rollout.hf_cache": ("dynamic", "static"),
    "tracking.backend": ("mlflow", "none"),
    "executor.backend": ("local", "ray"),
    "executor.placement": ("auto", "disjoint", "shared"),
}
ARITHMETIC_TIERS = ("add2", "add3", "add4", "mul21", "mul31", "mul41")


def validate_schema(cfg: DictConfig | dict) -> Config:
    """Typed, range-checked Config from a composed Hydra config (the `hydra` node is ignored).

    The schema's checks only; `hacrl_exp.trainer.validate.validate` adds the registries' (algorithm, graph, ...).
    """
    config: Config = typed_config(cfg, Config)
    _check_choices(config)
    _check_semantics(config)
    _check_gpu(config)
    return resolve_task_seeds(config)


def resolve_task_seeds(config: Config) -> Config:
    """Fill task.seed and task.heldout_seed with the values the run uses (in place; idempotent).

    task.seed null → the job's `seed`: the training stream, its sampling and the warm start all vary with the seed.
    task.heldout_seed null → task.seed when the user set it (what task.seed alone always drew), else 0: the held-out
    problems stay fixed across seeds unless asked. The math task's held-out set is its eval_file: its held-out seed
    stays null.
    """
    task = config.task
    if task.name == "math" and task.heldout_seed is not None:
        raise ConfigError(
            f"task.heldout_seed={task.heldout_seed} draws held-out problems of a generated task; task=math is scored "
            f"on task.eval_file. Drop the override"
        )
    if task.heldout_seed is None and task.name != "math":
        task.heldout_seed = task.seed if task.seed is not None else 0
    if task.seed is None:
        task.seed = config.seed
    return config


def typed_config(cfg: DictConfig | dict, schema: type, what: str = "a config key") -> Any:
    """The `schema` dataclass filled from a composed config (its `hydra` node ignored), every range checked.

    Errors are one-line ConfigErrors from `describe(exc, schema, what)`.
    """
    try:
        raw = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    except OmegaConfBaseException as exc:  # an interpolation: a missing key or variable, a cycle, bad grammar
        raise ConfigError(describe(exc, schema, what)) from None
    raw.pop("hydra", None)
    try:
        config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), raw))
    except OmegaConfBaseException as exc:
        raise ConfigError(describe(exc, schema, what)) from None
    _check_ranges(config, "")
    return config


def describe(exc: OmegaConfBaseException, schema: type = Config, what: str = "a config key") -> str:
    """One line naming the key: unknown keys get a did-you-mean from `schema` (the training Config by default)."""
    key = getattr(exc, "full_key", "") or ""
    interpolation = describe_interpolation(exc)
    if interpolation:
        return f"{key}: {interpolation}" if key else interpolation
    if isinstance(exc, (ConfigKeyError, ConfigAttributeError)) and key:
        parent, _, leaf = key.rpartition(".")
        if typing.get_origin(_node_at(parent, schema)) is dict:  # a free-form table (extra, alpha_from, tags)
            return f"{key} is not set yet; add a new entry with +{key}=<value>"
        options = _fields_at(parent, schema)
        close = difflib.get_close_matches(leaf, options, n=1)
        hint = f" Did you mean {parent + '.' if parent else ''}{close[0]}?" if close else ""
        known = f" Known keys here: {sorted(options)}" if options else ""  # e.g. hydra.* nodes: not in the schema
        return f"{key} is not {what}.{hint}{known}"
    message = str(exc).splitlines()[0]
    field = _field_at(key, schema)
    spec = field.metadata.get("range") if field else None
    if spec:  # e.g. a word where a number goes: say which numbers would do
        message += f"; allowed {range_text(spec)}"
    return f"{key}: {message}" if key else message


ENV_VARIABLE = re.compile(r"Environment variable '([^']*)' not found")


def describe_interpolation(exc: BaseException) -> str | None:
    """What is wrong with a `${...}` and the fix, in one line (without the key), or None for another error."""
    first = (str(getattr(exc, "msg", None) or exc).strip().splitlines() or [""])[0].strip()
    if isinstance(exc, GrammarParseError):
        return f"cannot parse the interpolation ({first}); write it as ${{other.key}} or ${{oc.env:NAME}}"
    if isinstance(exc, InterpolationKeyError):
        return f"{first.rstrip('.')}; point the interpolation at an existing key, or give a value"
    if isinstance(exc, InterpolationResolutionError) and "Recursive interpolation" in first:
        return "the interpolation refers back to itself (a cycle of ${...}); give one of the keys a value"
    if isinstance(exc, InterpolationResolutionError) and (env := ENV_VARIABLE.search(first)):
        name = env.group(1)
        return f"environment variable {name} is not set; export it, or give a default: ${{oc.env:{name},<default>}}"
    if isinstance(exc, (InterpolationResolutionError, InterpolationValidationError)):
        return f"the interpolation cannot be resolved ({first})"
    return None


def describe_for(schema: type, what: str):
    """`describe` bound to another schema (evaluate, report), for compose_config(explain=...)."""
    return lambda exc: describe(exc, schema, what)


def _node_at(path: str, schema: type = Config) -> Any:
    """The schema type at a dotted path: a dataclass, a Dict[...] table (when the path ends at it), or None.

    A Dict[str, Dataclass] (agents.members) consumes the key after it.
    """
    node: Any = schema
    parts = [p for p in path.split(".") if p]
    i = 0
    while i < len(parts):
        hint = typing.get_type_hints(node).get(parts[i]) if dataclasses.is_dataclass(node) else None
        if hint is None:
            return None
        is_dict = typing.get_origin(hint) is dict
        if is_dict and i + 1 == len(parts):
            return hint
        node = typing.get_args(hint)[1] if is_dict else hint
        i += 2 if is_dict else 1
    return node


def _fields_at(path: str, schema: type = Config) -> list[str]:
    """Field names of the schema node at a dotted path."""
    node = _node_at(path, schema)
    return [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []


def _field_at(key: str, schema: type = Config) -> dataclasses.Field | None:
    """The schema field a dotted key names, or None."""
    parent, _, leaf = key.rpartition(".")
    node = _node_at(parent, schema)
    if not dataclasses.is_dataclass(node):
        return None
    return next((f for f in dataclasses.fields(node) if f.name == leaf), None)


def range_text(spec: tuple) -> str:
    """'[0, 1)' for rng(0, 1, high_open=True): the interval a `range` metadata allows."""
    low, high, low_open, high_open = spec
    return f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def out_of_range(value: float, spec: tuple) -> bool:
    """True when value lies outside the `range` metadata spec; NaN lies outside every range."""
    low, high, low_open, high_open = spec
    if value != value:  # NaN compares false with everything
        return True
    return (low is not None and (value <= low if low_open else value < low)) or (
        high is not None and (value >= high if high_open else value > high)
    )


def _check_ranges(node: Any, prefix: str) -> None:
    """Every field with `range` metadata (each value of a Dict field) lies in its range; nested configs too."""
    if isinstance(node, dict):
        for name, value in node.items():
            _check_ranges(value, f"{prefix}.{name}")
        return
    if not dataclasses.is_dataclass(node):
        return
    for f in dataclasses.fields(node):
        value, key = getattr(node, f.name), f"{prefix}.{f.name}".lstrip(".")
        if "range" in f.metadata and value is not None:
            entries = {f"{key}.{k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value}
            for name, entry in entries.items():
                if out_of_range(entry, f.metadata["range"]):
                    raise ConfigError(f"{name}={entry!r} is out of range; allowed {range_text(f.metadata['range'])}")
        _check_ranges(value, key)


def check_choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    """ConfigError naming the key, the value, the allowed values and the closest one, unless value is allowed."""
    if value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{key}={value!r} is not one of {list(allowed)}.{hint}")


def _check_choices(config: Config) -> None:
    check = check_choice
    for name, agent in config.agents.members.items():
        check(f"agents.members.{name}.model.source", agent.model.source, CHOICES["model.source"])
        check(f"agents.members.{name}.model.arch", agent.model.arch, CHOICES["model.arch"])
        check(f"agents.members.{name}.model.dtype", agent.model.dtype, CHOICES["model.dtype"])
        mode = agent.model.mixed_precision
        check(f"agents.members.{name}.model.mixed_precision", mode, CHOICES["model.mixed_precision"])
        check(f"agents.members.{name}.tokenizer.kind", agent.tokenizer.kind, CHOICES["tokenizer.kind"])
    for key, allowed in CHOICES.items():
        group, leaf = key.split(".")
        if group not in ("model", "tokenizer"):  # those two are per agent, checked above
            check(key, getattr(getattr(config, group), leaf), allowed)
    if config.task.name == "arithmetic":
        for tier in config.task.tiers:
            check("task.tiers", tier, ARITHMETIC_TIERS)


DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
AGENT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Agent names become folder, file and MLflow metric names: letters, digits, _ and - only."""
TAG_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}(/[A-Za-z0-9_.-]{1,64}){0,3}")
"""MLflow tag keys: like agent names, plus '.' and '/' between parts (alpha/<learner>_from_<source>); no '.' or '..'
part (MLflow refuses a key that leaves its folder) and no `mlflow.` prefix (MLflow's own tags)."""
MAX_TAG_VALUE = 5000


def _check_device_present(key: str, device: str) -> None:
    """A named accelerator must exist on this machine (auto falls back to CPU by itself)."""
    import torch

    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            found = f"{count} CUDA device(s)" if count else "no CUDA device"
            raise ConfigError(f"{key}={device!r} but this machine has {found}; use {key}=auto or cpu")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{key}='mps' but MPS is not available here; use {key}=auto or cpu")


def _check_gpu(config: Config) -> None:
    """Devices, precision, LoRA and the vLLM backend: optional extras must be installed before any model loads."""
    if not DEVICE.fullmatch(config.trainer.device):
        raise ConfigError(f"trainer.device={config.trainer.device!r} is not a device; use auto, cpu, cuda or cuda:N")
    _check_device_present("trainer.device", config.trainer.device)
    for name, agent in config.agents.members.items():
        key = f"agents.members.{name}"
        if agent.device is not None and not DEVICE.fullmatch(agent.device):
            raise ConfigError(f"{key}.device={agent.device!r} is not a device; use auto, cpu, cuda or cuda:N (or null)")
        if agent.device is not None:
            _check_device_present(f"{key}.device", agent.device)
        if agent.model.compute_dtype not in (None, "bfloat16"):
            dtype = agent.model.compute_dtype
            raise ConfigError(f"{key}.model.compute_dtype={dtype!r} is not one of [null, 'bfloat16']")
        if agent.lora.r > 0 and importlib.util.find_spec("peft") is None:
            raise ConfigError(f'{key}.lora.r={agent.lora.r} needs peft, not installed: pip install -e ".[lora]"')
        if agent.lora.r > 0 and not agent.lora.target_modules:
            raise ConfigError(f"{key}.lora.target_modules is empty; name the modules to adapt, or [all-linear]")
    if config.rollout.sampler == "multinomial" and config.rollout.backend != "hf":
        raise ConfigError(
            "rollout.sampler=multinomial is transformers' own sampling (rollout=hf); vLLM seeds each row's request"
            " from the counter sampler's (call seed, row): set rollout.sampler=counter, or use rollout=hf"
        )
    if config.rollout.tensor_parallel > 1 and config.rollout.backend != "vllm":
        raise ConfigError(
            f"rollout.tensor_parallel={config.rollout.tensor_parallel} is for rollout=vllm only (the hf backend "
            "generates on each rank's gathered weights); set rollout.tensor_parallel=1 or use rollout=vllm"
        )
    if config.rollout.sampler == "multinomial" and config.rollout.backend == "hf":
        members = config.agents.members.items()
        sharded = [name for name, agent in members if agent.world_size > 1 or agent.fsdp.offload]
        if sharded:
            raise ConfigError(
                f"rollout.sampler=multinomial draws one stream for the whole batch, so the ranks of a sharded agent"
                f" ({', '.join(sharded)}) cannot split its rows; set rollout.sampler=counter, or leave it unsharded"
            )
    if config.rollout.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            'rollout.backend=vllm needs vLLM, which is not installed: pip install -e ".[gpu]" on a CUDA machine, '
            "or use rollout=hf"
        )


def _check_shared(config: Config) -> None:
    """executor.placement=shared: one GPU per rank (a fraction of it per agent), no node placement of its own, and
    vLLM engines that can sleep."""
    settings = config.executor
    if settings.placement != "shared":
        return
    if settings.gpus_per_agent > 1:
        raise ConfigError(
            f"executor.gpus_per_agent={settings.gpus_per_agent:g} with executor.placement=shared: each rank of every "
            "agent shares one GPU; set executor.gpus_per_agent=1 and world_size for more GPUs"
        )
    for name, agent in config.agents.members.items():
        if agent.placement is not None or agent.span_nodes:
            raise ConfigError(
                f"agents.members.{name}.placement/span_nodes with executor.placement=shared: the agents share one "
                "placement group on one node; drop them or use executor.placement=disjoint"
            )
    if config.rollout.backend == "vllm" and config.rollout.vllm.sleep_level == 0:
        raise ConfigError(
            "rollout.vllm.sleep_level=0 with executor.placement=shared: an engine must sleep to free the GPU for the "
            "next agent; set rollout.vllm.sleep_level=1"
        )


def _check_sharding(config: Config, key: str, agent) -> None:
    """world_size, fsdp.offload and placement need Ray actors; sharding is not combined with LoRA (nor offload with
    vLLM) yet."""
    sharded = agent.world_size > 1 or agent.fsdp.offload
    asked = f"{key}.world_size={agent.world_size}" if agent.world_size > 1 else f"{key}.fsdp.offload=true"
    if sharded and config.executor.backend != "ray":
        raise ConfigError(f"{asked} needs executor=ray (each rank is a Ray actor); add executor=ray")
    if agent.placement is not None and config.executor.backend != "ray":
        raise ConfigError(f"{key}.placement={agent.placement!r} needs executor=ray; add executor=ray or drop it")
    _check_placement(key, agent)
    if agent.span_nodes and agent.world_size == 1:
        raise ConfigError(f"{key}.span_nodes=true is for the ranks of a sharded agent (world_size > 1); drop it")
    if sharded and agent.lora.r > 0:
        raise ConfigError(f"{asked} with {key}.lora.r={agent.lora.r}: sharded LoRA agents are not built; pick one")
    tensor_parallel = config.rollout.tensor_parallel
    if config.rollout.backend == "vllm" and agent.world_size > 1 and agent.world_size % tensor_parallel:
        raise ConfigError(
            f"{key}.world_size={agent.world_size} is not divisible by rollout.tensor_parallel={tensor_parallel} "
            f"(W = data-parallel × tensor-parallel); set world_size to a multiple of {tensor_parallel} or "
            "rollout.tensor_parallel to a divisor of it"
        )
    if agent.fsdp.offload and config.rollout.backend == "vllm":
        raise ConfigError(
            f"{key}.fsdp.offload=true with rollout=vllm is not built (the engine syncs from GPU-resident shards); "
            "use rollout=hf, or fsdp.offload=false and more ranks (world_size)"
        )


def _check_placement(key: str, agent) -> None:
    """placement: null, a resource name, or a list of world_size resource names (one per rank)."""
    placement = agent.placement
    if placement is None or isinstance(placement, str) and placement:
        return
    if not isinstance(placement, list) or not all(isinstance(p, str) and p for p in placement):
        raise ConfigError(
            f"{key}.placement={placement!r} is not a Ray resource name nor a list of them; e.g. node_a or "
            "[node_a,node_b]"
        )
    if len(placement) != agent.world_size:
        raise ConfigError(
            f"{key}.placement={placement!r} has {len(placement)} entries for world_size={agent.world_size} ranks; "
            "give one per rank, or one name for all"
        )


def _check_tags(tags: dict[str, str]) -> None:
    """tracking.tags: keys as `TAG_KEY`, values printable and at most MAX_TAG_VALUE characters."""
    for key, value in tags.items():
        parts = str(key).split("/")
        if not TAG_KEY.fullmatch(str(key)) or {".", ".."} & set(parts) or str(key).startswith("mlflow."):
            raise ConfigError(
                f"tracking.tags.{key}: a tag key may hold only letters, digits, _, - and ., in up to 4 parts joined by "
                "/ (no . or .. part, no mlflow. prefix); rename it"
            )
        text = str(value)
        if len(text) > MAX_TAG_VALUE or not text.isprintable():
            raise ConfigError(
                f"tracking.tags.{key}: a tag value must be printable text of at most {MAX_TAG_VALUE} characters"
            )


def looks_like_local_path(path: str) -> bool:
    """A hub id is 'org/name' or 'name'; anything absolute, relative-dotted or deeper is a filesystem path."""
    return path.startswith(("/", ".", "~")) or path.count("/") > 1 or os.sep != "/" and os.sep in path


def _check_semantics(config: Config) -> None:
    members = config.agents.members
    if not members:
        raise ConfigError("agents.members is empty; pick a preset such as agents=pair or define agents.members.<name>")
    seen: dict[str, str] = {}
    for name in members:
        if not AGENT_NAME.fullmatch(name):
            raise ConfigError(
                f"agents.members.{name}: an agent name may hold only letters, digits, _ and - (1-64 of them); rename it"
            )
        if name.lower() in seen:  # case-insensitive file systems would merge their folders
            raise ConfigError(f"agents.members.{name} and agents.members.{seen[name.lower()]} collide; rename one")
        seen[name.lower()] = name
    task = config.task
    if task.grader_forms != "requested" and (task.name != "math" or task.reward == "verl"):
        why = f"task={task.name} is graded by exact match" if task.name != "math" else "task.reward=verl reads no form"
        raise ConfigError(
            f"task.grader_forms={task.grader_forms} applies to task=math with task.reward=math_verify only; {why}. "
            "Drop the override"
        )
    _check_tags(config.tracking.tags)
    _check_shared(config)
    if config.task.name == "arithmetic" and not config.task.tiers:
        raise ConfigError(f"task.tiers is empty; list at least one of {list(ARITHMETIC_TIERS)}, e.g. task.tiers=[add2]")
    for name, agent in members.items():
        key = f"agents.members.{name}"
        if agent.model.source == "pretrained":
            if not agent.model.path:
                raise ConfigError(f"{key}.model.path is required when model.source=pretrained (a hub id or a folder)")
            for sub, path in (("model.path", agent.model.path), ("tokenizer.path", agent.tokenizer.path)):
                if path and looks_like_local_path(path) and not Path(path).expanduser().exists():
                    raise ConfigError(f"{key}.{sub}={path!r} does not exist; give an existing folder or a hub id")
        elif agent.tokenizer.kind == "pretrained" and not agent.tokenizer.path:
            raise ConfigError(f"{key}.tokenizer.kind=pretrained needs {key}.tokenizer.path for a tiny model")
        room = agent.model.max_positions - config.rollout.max_new_tokens
        if agent.model.source == "tiny" and room < 8:  # the factory's check, before any model is built
            raise ConfigError(
                f"rollout.max_new_tokens={config.rollout.max_new_tokens} leaves no room for a prompt in {key}'s "
                f"{agent.model.max_positions} positions; raise {key}.model.max_positions or lower it"
            )
        _check_sharding(config, key, agent)
        if agent.model.source == "tiny" and agent.model.hidden_size % agent.model.num_heads:
            raise ConfigError(
                f"{key}.model.hidden_size={agent.model.hidden_size} is not divisible by "
                f"num_heads={agent.model.num_heads}; pick a divisor"
            )
    trainer = config.trainer
    block = trainer.prompts_per_step * trainer.group_size
    if block % trainer.minibatches_per_block:
        raise ConfigError(
            f"trainer.minibatches_per_block={trainer.minibatches_per_block} does not divide the "
            f"{block} rows of a block (trainer.prompts_per_step × trainer.group_size); pick a divisor"
        )
    if config.task.name == "math" and config.task.data_dir is None and not os.environ.get("HACRL_DATA_DIR"):
        if not config.task.hf_train:
            raise ConfigError("task.data_dir is unset and HACRL_DATA_DIR is empty; point one at the JSONL folder")
