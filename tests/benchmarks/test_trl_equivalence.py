"""Our GSPO loss equals TRL's GRPOTrainer loss (sequence level, loss_type="grpo") on identical inputs (spec §3.4).

TRL's side is TRL's own `_compute_loss` (benchmarks/trl_loss.py). With our advantage ε at TRL's 1e-4 the loss and
its per-token gradient agree to 1e-6 (in fact to ~1e-12; the rest is TRL computing the Bessel factor of its std in
float32); with verl's 1e-6 each side reproduces its own row of test vector TV-5.
"""

import pytest

pytest.importorskip("trl", reason="trl is not installed; pip install -e '.[bench]' to run the TRL cross-check")
pytest.importorskip("datasets", reason="datasets (a trl dependency) is not installed")

from benchmarks.trl_loss import (  # noqa: E402
    TV5_TRL_LOSS,
    TV5_VERL_LOSS,
    TrlLoss,
    compare,
    our_advantages,
    our_loss,
    random_case,
    tv5_case,
)
from hacrl_exp.algo import TRL_ADVANTAGE_EPS, VERL_ADVANTAGE_EPS  # noqa: E402

CASES = [tv5_case(), random_case(0), random_case(1, prompts=4, group=16, max_len=8)]


@pytest.fixture(scope="module")
def trl_loss():
    return TrlLoss()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_loss_and_gradient_equal_trl_with_trl_epsilon(case, trl_loss):
    result = compare(case, trl_loss, TRL_ADVANTAGE_EPS)
    assert result["loss_abs_diff"] <= 1e-6
    assert result["loss_rel_diff"] <= 1e-6
    assert result["grad_max_abs_diff"] <= 1e-6
    assert result["adv_max_abs_diff"] <= 1e-6


def test_tv5_rows_of_both_conventions(trl_loss):
    case = tv5_case()
    trl = compare(case, trl_loss, TRL_ADVANTAGE_EPS)
    assert trl["loss_trl"] == pytest.approx(TV5_TRL_LOSS, rel=1e-7, abs=0)
    assert trl["loss_ours"] == pytest.approx(TV5_TRL_LOSS, rel=1e-12, abs=0)
    verl_loss = float(our_loss(case.current, case, our_advantages(case.rewards, case.group, VERL_ADVANTAGE_EPS)))
    assert verl_loss == pytest.approx(TV5_VERL_LOSS, rel=1e-12, abs=0)
    # the known difference (spec §3.4 item 1) is the advantage ε alone (to TRL's float32 Bessel factor)
    assert compare(case, trl_loss, VERL_ADVANTAGE_EPS)["loss_abs_diff"] == pytest.approx(
        TV5_VERL_LOSS - TV5_TRL_LOSS, abs=1e-11
    )
