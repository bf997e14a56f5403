"""Logged = applied: the per-row weight and window an objective reports are the ones its gradient used.

For every method preset (HACPO, its five ablations, Naive, GSPO), the objective's `RowTerms` must satisfy, row by row,
    ∂J/∂s = weight · A   where in_window,   and   ∂J/∂s = 0   elsewhere,
measured with autograd on the objective itself. The step logs these terms as they are (cross/weight_mean,
cross/in_window_share): it recomputes no formula, so a switch that changes the objective changes the log with it.
"""

import pytest
import torch

from hacrl_exp.algo import PolicyRows, stepwise_lower_bound
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.validate import preflight

METHODS = [
    "hacpo",
    "hacpo_no_capability_advantage",
    "hacpo_no_omega",
    "hacpo_no_exponential_is",
    "hacpo_no_stepwise",
    "hacpo_no_clip",
    "naive",
    "gspo",
]


def rows_for(params, seed: int = 0) -> tuple[PolicyRows, torch.Tensor]:
    """Eight self and eight cross rows with ratios on both sides of the windows, and a leaf s to differentiate."""
    g = torch.Generator().manual_seed(seed)
    n = 16
    s = torch.cat([1 + (torch.rand(8, generator=g, dtype=torch.float64) - 0.5) * 2e-3,  # around the GSPO clip
                   0.6 + 0.6 * torch.rand(8, generator=g, dtype=torch.float64)])  # around [L_u, 1]  # fmt: skip
    s.requires_grad_(True)
    is_self = torch.arange(n) < 8
    advantages = torch.randn(n, generator=g, dtype=torch.float64)
    rho = params.mechanisms.loss_weight(0.2 + 3 * torch.rand(n, generator=g, dtype=torch.float64))
    source = params.sources[0] if params.sources else params.index
    alpha = torch.where(is_self, 0.0, params.mechanisms.alpha_from.get(source, 0.0)).double()
    lower = stepwise_lower_bound(2, params.delta, params.mechanisms.delta_step)
    logp = torch.zeros(n, 3, dtype=torch.float64)
    mask = torch.ones(n, 3, dtype=torch.bool)
    rows = PolicyRows(
        logp=logp, mask=mask, s=s, advantages=advantages, is_self=is_self, loss_weight=rho, alpha=alpha, lower=lower,
        minibatch_rows=n, minibatch_tokens=3 * n,
    )  # fmt: skip
    return rows, s


@pytest.mark.parametrize("method", METHODS)
def test_the_logged_weight_and_window_are_the_gradients(method):
    config = preflight([f"+method={method}", "algorithm.alpha=2.0"])
    params = learner_params(config)[0]
    rows, s = rows_for(params)
    _, _, applied = params.objective(rows, params.objective_params)
    (grad,) = torch.autograd.grad(applied.objective.sum(), s)
    expected = torch.where(applied.in_window, applied.weight * rows.advantages, torch.zeros_like(grad))
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)
    cross = ~rows.is_self
    if method == "hacpo_no_clip":  # every cross row gets gradient, weighted by ρ·s^α of the raw ratio
        assert bool(applied.in_window[cross].all())
        torch.testing.assert_close(applied.weight[cross], rows.loss_weight[cross] * s.detach()[cross].pow(2.0))
    elif method in ("naive", "gspo"):  # GSPO's objective on every row: no weight
        assert bool((applied.weight == 1).all())
    else:  # HACPO's window [L_u, 1] decides, and some rows fall outside it
        assert 0 < int(applied.in_window[cross].sum()) < int(cross.sum())
