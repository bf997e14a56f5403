"""What hacrl_exp/rollout/vllm.py asks of vLLM, as tests/rollout/vllm_contract.py reads it from the module's source
(no vLLM needed): the list test_vllm_contract.py checks against the installed vLLM must hold every call."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import hacrl_exp.rollout.vllm as ours
from tests.rollout.vllm_contract import uses

OURS = uses(ast.parse(Path(ours.__file__).read_text(encoding="utf-8")))


def by_kind(kind: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for use in OURS:
        if use.kind == kind:
            out.setdefault(use.name, set()).update(use.keywords)
    return out


def test_every_use_of_vllm_in_our_module_is_found():
    """The extraction itself (no vLLM needed): what rollout/vllm.py calls today, **-built keywords included."""
    classes, methods = by_kind("class"), by_kind("method")
    assert set(classes) == {"LLM", "SamplingParams"}
    assert {"tensor_parallel_size", "data_parallel_size", "distributed_executor_backend", "load_format"} <= classes[
        "LLM"
    ]  # from Layout.engine_kwargs() and the call itself
    assert {"n", "max_tokens", "stop_token_ids", "temperature", "top_p", "top_k", "detokenize"} <= classes[
        "SamplingParams"
    ]  # from sampling_kwargs()
    assert set(methods) == {"sleep", "wake_up", "apply_model", "reset_prefix_cache", "generate"}
    assert {u.name for u in OURS if u.kind == "model"} == {"load_weights"}
    assert {u.name for u in OURS if u.kind == "prompt"} == {"prompt_token_ids"}
    assert {u.name for u in OURS if u.kind == "tag"} == {"weights", "kv_cache"}
    outputs = {u.name for u in OURS if u.kind == "output"}
    assert outputs == {"RequestOutput.outputs", "CompletionOutput.index", "CompletionOutput.token_ids",
                       "CompletionOutput.finish_reason"}  # fmt: skip
    values = {k: v for u in OURS if u.name == "LLM" for k, v in u.keywords.items()}
    assert values["distributed_executor_backend"] == "external_launcher" and values["load_format"] == "dummy"


def test_our_module_reaches_vllm_only_through_the_forms_the_extraction_reads():
    """No `from vllm import`, no getattr on an engine: every use goes through `vllm.X` or `llm.m`."""
    tree = ast.parse(Path(ours.__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("vllm"), ast.unparse(node)
        if isinstance(node, ast.Import):
            assert [a.name for a in node.names if a.name.startswith("vllm")] in ([], ["vllm"]), ast.unparse(node)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("getattr", "setattr"):
            assert "llm" not in ast.unparse(node.args[0]), ast.unparse(node)


def test_an_unresolvable_splat_is_an_error():
    snippet = "import vllm\ndef f(kw):\n    vllm.LLM(model='x', **kw)\n"
    with pytest.raises(ValueError, match=r"cannot resolve \*\*kw"):
        uses(ast.parse(snippet))


def test_ci_installs_the_vllm_the_contract_names():
    """.ci/run installs the wheel test_vllm_contract.py checks against (one version, named in both)."""
    ci = (Path(__file__).parents[2] / ".ci" / "run").read_text(encoding="utf-8")
    contract = (Path(__file__).parent / "test_vllm_contract.py").read_text(encoding="utf-8")
    pinned = re.search(r'^PINNED = "([0-9.]+)"$', contract, re.M).group(1)
    assert f'pip install --quiet --no-deps --target .ci-venv/vllm-source "vllm=={pinned}"' in ci
    assert 'HACRL_VLLM_SOURCE="$PWD/.ci-venv/vllm-source"' in ci  # off sys.path: the contract test reads it there
