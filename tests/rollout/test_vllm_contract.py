"""The contract with the real vLLM: every vLLM class, method, keyword argument, field, prompt key, tag and output
attribute hacrl_exp/rollout/vllm.py uses, and everything the CPU fake (tests/rollout/fake_vllm.py) accepts, must exist
in the installed vLLM's source (read with ast, never imported: tests/rollout/vllm_contract.py).

vLLM is found with importlib.util.find_spec (which locates a package without importing it), or under
$HACRL_VLLM_SOURCE (a `pip install --no-deps --target` folder). CI installs the wheel that way (`pip install
--no-deps --target .ci-venv/vllm-source vllm==0.31.0`, .ci/run: in the venv itself, TRL would import vLLM's missing
dependencies); where it is absent this module skips with one line. What our module uses is listed by
tests/rollout/test_vllm_uses.py, which runs everywhere.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import os
from pathlib import Path

import pytest

import hacrl_exp.rollout.vllm as ours
from tests.rollout import fake_vllm
from tests.rollout.vllm_contract import REQUIRED, Use, VLLMSource, uses

PINNED = "0.31.0"
"""The vLLM version the contract was written against (pyproject's gpu extra: vllm>=0.31, torch<2.14)."""


def vllm_root() -> Path | None:
    """The folder of the installed vllm/__init__.py, without importing it; None when vLLM is not installed."""
    target = os.environ.get("HACRL_VLLM_SOURCE")
    if target:
        root = Path(target) / "vllm"
        return root if (root / "__init__.py").is_file() else None
    spec = importlib.util.find_spec("vllm")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


ROOT = vllm_root()
if ROOT is None:
    pytest.skip(f"vLLM is not installed: pip install --no-deps vllm=={PINNED} (see .ci/run)", allow_module_level=True)
OURS = uses(ast.parse(Path(ours.__file__).read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def source() -> VLLMSource:
    return VLLMSource(ROOT)


def test_the_installed_vllm_accepts_every_call_of_our_module(source):
    problems = source.problems(OURS)
    assert not problems, "\n".join(problems)
    version = (ROOT / "_version.py").read_text(encoding="utf-8") if (ROOT / "_version.py").exists() else ""
    print(f"vLLM source at {ROOT} ({PINNED if PINNED in version else 'version unknown'}): {len(OURS)} uses checked")


def test_the_fields_the_project_needs_exist(source):
    """SamplingParams(seed=...) for the per-request seed of the counter-based sampler (issue 36)."""
    for cls, name in REQUIRED:
        assert not source.problems([Use("class", cls, 0, {name: None})])


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("vllm.LLM(model='x', bogus_arg=1)", "vllm.LLM() takes no keyword 'bogus_arg'"),
        ("self._vllm.SamplingParams(n=1, bogus_field=2)", "vllm.SamplingParams() takes no keyword 'bogus_field'"),
        ("self.llm.generate([], sampling_params=None, bogus=True)", "vllm.LLM.generate() takes no keyword 'bogus'"),
        ("self.llm.no_such_method()", "vllm.LLM has no method no_such_method"),
        ("vllm.NoSuchClass()", "vllm.NoSuchClass is not exported"),
        ("vllm.LLM(model='x', distributed_executor_backend='bogus')", "not one of vLLM's DistributedExecutorBackend"),
        ("llm.sleep(1, 2, 3)", "vllm.LLM.sleep() takes 2 positional arguments, 3 given"),
        ("llm.apply_model(lambda m: m.no_such_loader([]))", "has no method no_such_loader"),
    ],
)
def test_a_planted_wrong_call_fails_the_check(source, snippet, expected):
    found = uses(ast.parse(f"import vllm\ndef f(self, llm):\n    {snippet}\n"))
    problems = source.problems(found)
    assert any(expected in p for p in problems), problems


def _explicit(function) -> set[str]:
    return {p.name for p in inspect.signature(function).parameters.values() if p.kind not in (p.VAR_KEYWORD,)} - {
        "self"
    }


def test_the_fake_engine_accepts_nothing_the_real_one_refuses(source):
    """Every parameter, field and method of tests/rollout/fake_vllm.py exists in the installed vLLM."""
    assert _explicit(fake_vllm.LLM.__init__) <= source.engine_keywords()
    assert fake_vllm.ENGINE_ARGS <= source.fields(*source.find_class(*source.export("EngineArgs")))
    llm = source.llm()
    for name in ("generate", "sleep", "wake_up", "apply_model", "reset_prefix_cache"):
        method = source.method(*llm, name)
        assert method is not None, name
        real, _, _ = source.accepted(method, llm)
        assert _explicit(getattr(fake_vllm.LLM, name)) <= real, name
    for name in ("SamplingParams", "CompletionOutput", "RequestOutput"):
        cls = source.find_class(*source.export(name))
        real = source.accepted(source.method(*cls, "__init__"), cls)[0] | source.fields(*cls)
        fake = {f.name for f in dataclasses.fields(getattr(fake_vllm, name))}
        assert fake <= real, (name, fake - real)
