"""Tests of `python -m hacrl_exp.theory` (hacpo-spec §6.4): each check's identities and key numbers, plus the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import hacrl_exp.theory.__main__ as cli
from hacrl_exp.theory import alignment, baseline
from hacrl_exp.theory.alignment import check_gradient_alignment
from hacrl_exp.theory.baseline import check_exact_baseline, check_per_prompt_omega, expected_baseline
from hacrl_exp.theory.results import CheckResult, Identity
from hacrl_exp.theory.window import check_window_bias

# spec §6.4 test 1, copied here rather than imported so the test does not trust the module's constant
SPEC_ROWS = [
    # (p_k, p_j, w, paper formula, code rules, code uniform rule only)
    (0.3, 0.6, 0.5, 0.3, 0.3, 0.3),
    (0.8, 0.4, 2.0, 0.8, 0.772230, 0.799945),
    (0.8, 0.4, 1.0, 0.6, 0.6, 0.6),
    (0.9, 0.09, 10.0, 0.9, 0.706784, 0.9),
]


def failed(result: CheckResult) -> list[str]:
    return [i.name for i in result.identities if not i.passed]


@pytest.mark.parametrize("p_k, p_j, w, paper, code, uniform_only", SPEC_ROWS)
def test_exact_baseline_reproduces_spec_table(p_k, p_j, w, paper, code, uniform_only):
    got = [
        expected_baseline(p_k, p_j, w, uniform_rule=False, guard=False),
        expected_baseline(p_k, p_j, w, uniform_rule=True, guard=True),
        expected_baseline(p_k, p_j, w, uniform_rule=True, guard=False),
    ]
    assert got == pytest.approx([paper, code, uniform_only], abs=5e-7)


@pytest.mark.parametrize("p_k, p_j, w", [(0.1, 0.7, 0.3), (0.55, 0.25, 3.0), (0.5, 0.5, 1.0)])
def test_paper_formula_expectation_is_linear(p_k, p_j, w):
    # without the code's rules, μ̂ = (a + w·b)/(2G), so E[μ̂] = (p_k + w·p_j)/2 exactly (spec §6.2)
    assert expected_baseline(p_k, p_j, w, uniform_rule=False, guard=False) == pytest.approx(
        (p_k + w * p_j) / 2, abs=1e-14
    )


def test_check_exact_baseline_holds_and_shows_guard_bias():
    result = check_exact_baseline()
    assert result.passed, failed(result)
    assert result.values["code rules @ (0.8,0.4,2)"] == pytest.approx(0.772230, abs=5e-7)
    assert result.values["code rules @ (0.9,0.09,10)"] < 0.9 - 0.19  # the guard biases μ̂ downwards


def test_per_prompt_omega_biases_are_plus_minus_0_15():
    result = check_per_prompt_omega()
    assert result.passed, failed(result)
    assert result.values["w"] == pytest.approx(0.5 / 0.6, abs=1e-15)
    assert result.values["bias q1"] == pytest.approx(0.15, abs=1e-12)
    assert result.values["bias q2"] == pytest.approx(-0.15, abs=1e-12)
    assert result.values["mean bias"] == pytest.approx(0.0, abs=1e-12)


def test_window_bias_quick_holds():
    result = check_window_bias(seed=0, quick=True)
    assert result.passed, failed(result)
    c1, c20 = result.values["contribution K=1"], result.values["contribution K=20"]
    assert c1 < 0 and abs(c20) < abs(c1) / 4


def test_gradient_alignment_signs():
    result = check_gradient_alignment()
    assert result.passed, failed(result)
    assert result.values["aligned inner"] > 0 and result.values["aligned cosine"] > 0.9
    assert result.values["counter-example inner"] < 0 and result.values["counter-example cosine"] < -0.1


def test_alignment_uses_the_unbiased_baseline_and_source_over_learner_omega():
    p = alignment.ToyPolicies.of(alignment.SOURCES["aligned (source mass on correct answers)"][0])
    assert float((p.learner * alignment.advantages(p)).sum()) == pytest.approx(0.0, abs=1e-15)
    assert float(alignment.loss_weight(p)) == pytest.approx(0.9 / 0.2, abs=1e-12)


def test_checks_detect_a_wrong_baseline_denominator(monkeypatch):
    real = baseline.capability_aware_baseline

    def divides_by_weight_sum(rewards, source, learner, weight, **rules):
        # the bug §2.1.3 warns about: dividing by Σw instead of the count nG
        mu = real(rewards, source, learner, weight, **rules)
        return mu * rewards.shape[-1] / weight[..., source].sum(-1, keepdim=True)

    monkeypatch.setattr(baseline, "capability_aware_baseline", divides_by_weight_sum)
    assert not check_exact_baseline().passed
    assert not check_per_prompt_omega().passed


def test_checks_detect_a_cross_objective_without_stop_gradient(monkeypatch):
    def no_stop_gradient(s, advantages, loss_weight, alpha, lower_bound, **_):
        return s * s.pow(alpha) * loss_weight * advantages  # sg dropped: gradient (α+1)·s^(α+1)·ρ·A

    monkeypatch.setattr(alignment, "cross_objective", no_stop_gradient)
    result = check_gradient_alignment()
    assert any("Prop. D.6" in name for name in failed(result))


def test_identity_comparisons():
    assert Identity.close("x", 1.0, 1.0 + 1e-9, 1e-8).passed
    assert not Identity.close("x", float("nan"), 0.0, 1.0).passed
    assert Identity.above("x", 0.1, 0.0).passed and not Identity.above("x", 0.0, 0.0).passed
    assert Identity.below("x", -0.1, 0.0).passed and not Identity.below("x", 0.0, 0.0).passed


def test_main_exits_1_when_an_identity_fails(monkeypatch, capsys):
    bad = CheckResult("bad check", "fails on purpose", [], [Identity.close("one", 1.0, 0.0, 1e-12)])
    monkeypatch.setattr(cli, "run_checks", lambda seed, quick: [bad])
    assert cli.main(["--quick"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_cli_quick_exits_0_and_prints_every_heading():
    proc = subprocess.run(
        [sys.executable, "-m", "hacrl_exp.theory", "--quick", "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for heading in ("1. Exact E[μ̂]", "2. Per-prompt vs batch-level ω", "3. Baseline bias vs window K", "4. Gradient"):
        assert heading in proc.stdout
    assert "FAIL" not in proc.stdout
    assert "all 26 identities hold" in proc.stdout


def test_float64_everywhere():
    rewards, a, b = baseline.count_rows()
    assert rewards.dtype == torch.float64 and rewards.shape == (81, 16)
    assert bool((rewards[:, :8].sum(-1) == a).all()) and bool((rewards[:, 8:].sum(-1) == b).all())
