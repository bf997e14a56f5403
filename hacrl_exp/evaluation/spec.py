"""Benchmark definitions: one small declarative YAML per benchmark in the top-level `evaluation/` folder.

A file names its data (a local JSONL file and the usual Hugging Face dataset, or the embedded arithmetic tiers), the
field names, the prompt template, the answer extractor, the grader, the generation defaults, the metrics and a version.
`include: other.yaml` (lm-eval style) deep-merges another file first; the including file wins key by key. Files whose
name starts with `_` are includes only, not benchmarks. The format is documented in docs/evaluation.md.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.metrics import parse_metric
from hacrl_exp.repo import REPO_ROOT
from hacrl_exp.rewards.extract import ANSWER_EXTRACTORS, GOLD_EXTRACTORS, SOURCE_EXTRACTORS
from hacrl_exp.rewards.grader import COMPARE_ALIASES, COMPARES
from hacrl_exp.tasks.math import PROMPT_SUFFIX
from hacrl_exp.tasks.problem_data import PROBLEM_PARTS

SPEC_DIR = Path(os.environ.get("HACRL_EVAL_DIR") or REPO_ROOT / "evaluation")
"""Where benchmark YAMLs live: $HACRL_EVAL_DIR, else <repo>/evaluation."""

NAMED_TEMPLATES = {"paper_math": "{problem}" + PROMPT_SUFFIX.replace("{", "{{").replace("}", "}}")}
"""Prompt templates a YAML may name instead of spelling out; `paper_math` is the training task's prompt, so the paper's
prompt is written once (hacrl_exp.tasks.math.PROMPT_SUFFIX)."""
_TOP_KEYS = {
    "name",
    "version",
    "description",
    "include",
    "dataset",
    "prompt_template",
    "answer_extractor",
    "grader",
    "generation",
    "metrics",
    "headline",
    "gold",
}
_DATASET_KEYS = {"local", "hf", "fields", "hf_fields", "hf_derive", "embedded"}
_GOLD_KEYS = {"text", "extractor", "threshold", "more_texts", "quirks"}
_GENERATION_KEYS = {"samples", "temperature", "top_p", "top_k", "max_new_tokens"}


@dataclass(frozen=True)
class Generation:
    """Decoding defaults: `samples` responses per problem; temperature 0 means greedy."""

    samples: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    max_new_tokens: int = 8192


@dataclass(frozen=True)
class GoldCheck:
    """How to grade a gold solution: text template over the row's fields, extractor, minimum agreement."""

    text: str
    extractor: str
    threshold: float
    more_texts: str | None = None
    """A row field holding a list of further gold solutions; candidates come from each of them too."""
    quirks: tuple[tuple[str, str], ...] = ()
    """Reviewed (row id, reason) pairs whose gold text cannot agree (e.g. a proof that never states the answer):
    left out of the agreement rate, and reported beside it."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark, parsed and checked. `path` is its YAML file."""

    name: str
    version: int
    path: Path
    prompt_template: str
    answer_extractor: str
    grader: str
    generation: Generation
    metrics: tuple[str, ...]
    headline: str
    local_file: str | None = None
    hf: dict[str, Any] | None = None
    fields: dict[str, str | None] = field(default_factory=dict)
    hf_fields: dict[str, str | None] = field(default_factory=dict)
    hf_derive: dict[str, tuple[str, str]] = field(default_factory=dict)
    embedded: dict[str, Any] | None = None
    gold: GoldCheck | None = None

    @property
    def template_text(self) -> str:
        """The prompt template as the model sees it, with `{problem}` left in place (logged as a run param)."""
        return self.prompt_template.format(problem="{problem}")

    def render(self, problem: str) -> str:
        """The user message for one problem: the template with `{problem}` filled in."""
        return self.prompt_template.format(problem=problem)


def known_benchmarks(spec_dir: Path | None = None) -> list[str]:
    """Names of the benchmark YAMLs (files not starting with `_`), sorted."""
    folder = Path(spec_dir or SPEC_DIR)
    return sorted(p.stem for p in folder.glob("*.yaml") if not p.name.startswith("_"))


def load_benchmark(name: str, spec_dir: Path | None = None) -> BenchmarkSpec:
    """The benchmark called `name`; an unknown name raises ConfigError listing the known ones."""
    folder = Path(spec_dir or SPEC_DIR)
    path = folder / f"{name}.yaml"
    if name.startswith("_") or "/" in name or not path.is_file():
        known = known_benchmarks(folder)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"benchmark {name!r} is unknown.{hint} Known benchmarks ({folder}): {', '.join(known)}")
    return parse_spec(_read_with_includes(path, ()), path)


def _read_with_includes(path: Path, chain: tuple[Path, ...]) -> dict:
    """The YAML mapping at `path` merged over its `include` (recursively); cycles raise ConfigError."""
    if path in chain:
        raise ConfigError(f"{chain[0]}: include cycle through {path.name}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read benchmark YAML ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a benchmark YAML must be a mapping, got {type(raw).__name__}")
    include = raw.pop("include", None)
    if include is None:
        return raw
    base_path = path.parent / str(include)
    if not base_path.is_file():
        raise ConfigError(f"{path}: include {include!r} does not exist next to it")
    return deep_merge(_read_with_includes(base_path, (*chain, path)), raw)


def deep_merge(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`: nested mappings merge, everything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def parse_spec(raw: dict, path: Path) -> BenchmarkSpec:
    """A checked BenchmarkSpec from a merged YAML mapping; every problem is a ConfigError naming file and key."""

    def bad(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}: {key} {message}")

    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise bad(sorted(unknown)[0], f"is not a benchmark key; known keys: {sorted(_TOP_KEYS - {'include'})}")
    for key in ("name", "version", "prompt_template", "answer_extractor", "grader", "metrics", "dataset"):
        if raw.get(key) in (None, "", []):
            raise bad(key, "is missing")
    if raw["name"] != path.stem:
        raise bad("name", f"{raw['name']!r} differs from the file name {path.stem!r}")
    raw["prompt_template"] = NAMED_TEMPLATES.get(raw["prompt_template"], raw["prompt_template"])
    if "{problem}" not in raw["prompt_template"]:
        raise bad("prompt_template", "must contain {problem}")
    _choice(bad, "answer_extractor", raw["answer_extractor"], ANSWER_EXTRACTORS)
    _choice(bad, "grader", raw["grader"], (*COMPARES, *COMPARE_ALIASES))
    generation = _generation(bad, raw.get("generation") or {})
    metrics = tuple(str(m) for m in raw["metrics"])
    names = []
    for metric in metrics:
        try:
            names.append(parse_metric(metric).name)
        except ValueError as exc:
            raise bad("metrics", str(exc)) from None
    headline = str(raw.get("headline") or names[0])
    if headline not in names:
        raise bad("headline", f"{headline!r} is not one of the metrics {names}")
    data = raw["dataset"]
    if not isinstance(data, dict) or set(data) - _DATASET_KEYS:
        raise bad("dataset", f"must be a mapping with keys from {sorted(_DATASET_KEYS)}")
    if not data.get("embedded") and not data.get("local") and not data.get("hf"):
        raise bad("dataset", "needs local, hf or embedded")
    derive = {}
    for target, pair in (data.get("hf_derive") or {}).items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise bad("dataset.hf_derive", f"{target}: give [source_field, extractor]")
        _choice(bad, f"dataset.hf_derive.{target}", pair[1], SOURCE_EXTRACTORS)
        derive[target] = (str(pair[0]), str(pair[1]))
    return BenchmarkSpec(
        name=raw["name"],
        version=int(raw["version"]),
        path=path,
        prompt_template=str(raw["prompt_template"]),
        answer_extractor=raw["answer_extractor"],
        grader=COMPARE_ALIASES.get(raw["grader"], raw["grader"]),
        generation=generation,
        metrics=metrics,
        headline=headline,
        local_file=data.get("local"),
        hf=data.get("hf"),
        fields={**dict.fromkeys(PROBLEM_PARTS), "problem": "problem", "answer": "answer", **(data.get("fields") or {})},
        hf_fields=data.get("hf_fields") or {},
        hf_derive=derive,
        embedded=data.get("embedded"),
        gold=_gold(bad, raw.get("gold")),
    )


def _choice(bad, key: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise bad(key, f"{value!r} is not one of {sorted(allowed)}")


def _generation(bad, raw: dict) -> Generation:
    if set(raw) - _GENERATION_KEYS:
        raise bad("generation", f"keys must come from {sorted(_GENERATION_KEYS)}")
    gen = Generation(**raw)
    if gen.samples < 1 or gen.max_new_tokens < 1 or gen.temperature < 0 or not 0 < gen.top_p <= 1:
        raise bad("generation", f"{raw} needs samples >= 1, max_new_tokens >= 1, temperature >= 0, 0 < top_p <= 1")
    return gen


def _gold(bad, raw: dict | None) -> GoldCheck | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not {"text", "extractor", "threshold"} <= set(raw) <= _GOLD_KEYS:
        raise bad("gold", "must be {text: ..., extractor: ..., threshold: ...} with optional more_texts, quirks")
    _choice(bad, "gold.extractor", raw["extractor"], GOLD_EXTRACTORS)
    if not 0 <= float(raw["threshold"]) <= 1:
        raise bad("gold.threshold", f"{raw['threshold']} must lie in [0, 1]")
    quirks = raw.get("quirks") or {}
    if not isinstance(quirks, dict):
        raise bad("gold.quirks", "must map row ids to the reason each gold text cannot agree")
    quirk_pairs = tuple((str(k), str(v)) for k, v in quirks.items())
    return GoldCheck(
        str(raw["text"]), str(raw["extractor"]), float(raw["threshold"]), raw.get("more_texts"), quirk_pairs
    )
