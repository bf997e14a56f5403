"""Benchmark YAMLs: all of them load, includes merge, and bad definitions or names fail with one line."""

from __future__ import annotations

import pytest

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.spec import known_benchmarks, load_benchmark
from hacrl_exp.tasks.math import PROMPT_SUFFIX

PAPER = ["math500", "math", "gsm8k", "aime2025", "amc23", "minerva", "olympiadbench"]


def test_the_eight_benchmarks_and_variants_load():
    assert set(PAPER + ["arithmetic", "arithmetic_bare", "math500_sampled"]) <= set(known_benchmarks())
    for name in known_benchmarks():
        spec = load_benchmark(name)
        assert spec.name == name and spec.version >= 1 and spec.metrics, name
    for name in PAPER:
        spec = load_benchmark(name)
        # the paper's prompt (hacpo-spec §4) and the training task's suffix are the same text
        assert spec.render("What is 1+1?") == "What is 1+1?" + PROMPT_SUFFIX
        assert spec.template_text.endswith("within \\boxed{}.")
        assert spec.local_file and spec.hf and spec.hf.get("path"), name


def test_paper_settings():
    aime = load_benchmark("aime2025")
    assert aime.headline == "best_at_30" and aime.generation.samples == 30 and aime.generation.temperature > 0
    for name in ["math500", "math", "gsm8k", "amc23", "minerva", "olympiadbench"]:
        spec = load_benchmark(name)
        assert spec.generation.samples == 1 and spec.generation.temperature == 0 and spec.headline == "accuracy"
    from hacrl_exp.tasks.math import PROMPT_SUFFIX  # the paper's prompt is written once

    assert load_benchmark("math500").template_text == "{problem}" + PROMPT_SUFFIX
    assert load_benchmark("gsm8k").grader == "math" and load_benchmark("arithmetic").grader == "exact"


def test_include_merges_and_overrides():
    sampled = load_benchmark("math500_sampled")
    base = load_benchmark("math500")
    assert sampled.local_file == base.local_file and sampled.prompt_template == base.prompt_template
    assert sampled.generation.samples == 8 and sampled.generation.max_new_tokens == base.generation.max_new_tokens
    bare = load_benchmark("arithmetic_bare")
    assert (
        bare.embedded["scratchpad"] is False
        and bare.embedded["tiers"] == load_benchmark("arithmetic").embedded["tiers"]
    )


def test_unknown_benchmark_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_benchmark("math5000")
    message = str(err.value)
    assert "Did you mean 'math500'" in message and "aime2025" in message and "olympiadbench" in message
    with pytest.raises(ConfigError, match="unknown"):
        load_benchmark("_math")  # an include, not a benchmark


@pytest.mark.parametrize(
    "body, needle",
    [
        (
            "name: x\nversion: 1\nprompt_template: '{problem}'\nanswer_extractor: boxed\ngrader: nope\n"
            "metrics: [accuracy]\ndataset: {local: x.jsonl}\n",
            "grader 'nope' is not one of",
        ),
        (
            "name: x\nversion: 1\nprompt_template: 'no slot'\nanswer_extractor: boxed\ngrader: exact\n"
            "metrics: [accuracy]\ndataset: {local: x.jsonl}\n",
            "must contain {problem}",
        ),
        (
            "name: x\nversion: 1\nprompt_template: '{problem}'\nanswer_extractor: boxed\ngrader: exact\n"
            "metrics: [top@3]\ndataset: {local: x.jsonl}\n",
            "not a metric",
        ),
        (
            "name: y\nversion: 1\nprompt_template: '{problem}'\nanswer_extractor: boxed\ngrader: exact\n"
            "metrics: [accuracy]\ndataset: {local: x.jsonl}\n",
            "differs from the file name",
        ),
        ("name: x\nversion: 1\nprompt_templat: '{problem}'\n", "prompt_templat is not a benchmark key"),
        ("include: missing.yaml\n", "include 'missing.yaml' does not exist"),
        ("include: x.yaml\n", "include cycle"),
    ],
)
def test_bad_definitions(tmp_path, body, needle):
    (tmp_path / "x.yaml").write_text(body)
    with pytest.raises(ConfigError, match=needle.replace("{", r"\{").replace("(", r"\(")):
        load_benchmark("x", tmp_path)
