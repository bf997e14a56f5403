"""Numerical checks of HACPO's theory against the algorithm library (hacpo-spec §6, §6.4).

Run `python -m hacrl_exp.theory [--seed N] [--quick]`. Each check calls the real functions of
`hacrl_exp.algo` (capability_aware_baseline, capability_ratios, CapabilityTracker, sequence_log_ratio,
gspo_objective, cross_objective), so it tests the implementation, not a re-derivation:

1. `baseline.check_exact_baseline`      exact E[μ̂] under Bernoulli agents (§6.4 test 1)
2. `baseline.check_per_prompt_omega`    per-prompt bias of a batch-level ω (§6.4 test 2)
3. `window.check_window_bias`           Monte-Carlo bias vs the capability window K (§6.4 test 3, §6.1)
4. `alignment.check_gradient_alignment` Prop. D.6 and the sign of ⟨∇J_hete, ∇J_homo⟩ (§6.4 tests 4–5, §6.3)
"""

from hacrl_exp.theory.alignment import check_gradient_alignment
from hacrl_exp.theory.baseline import check_exact_baseline, check_per_prompt_omega
from hacrl_exp.theory.results import CheckResult, DataTable, Identity
from hacrl_exp.theory.window import check_window_bias


def run_checks(seed: int = 0, quick: bool = False) -> list[CheckResult]:
    """All theory checks in order; `seed` and `quick` only affect the Monte-Carlo check."""
    return [
        check_exact_baseline(),
        check_per_prompt_omega(),
        check_window_bias(seed=seed, quick=quick),
        check_gradient_alignment(),
    ]


__all__ = [
    "CheckResult",
    "DataTable",
    "Identity",
    "check_exact_baseline",
    "check_gradient_alignment",
    "check_per_prompt_omega",
    "check_window_bias",
    "run_checks",
]
