"""Helpers and spec data shared by the tests of hacrl_exp.algo (hacpo-spec §8). Imported by conftest and tests."""

from __future__ import annotations

import torch

F64 = torch.float64

# Spec §8: "Tolerances: 1e-9 relative for float64".
RTOL = 1e-9
ATOL = 1e-12


def t(values, dtype=F64, requires_grad: bool = False) -> torch.Tensor:
    """A float64 tensor (the dtype every test vector is specified in)."""
    return torch.tensor(values, dtype=dtype, requires_grad=requires_grad)


def close(got, expected, rtol: float = RTOL, atol: float = ATOL) -> None:
    """assert got == expected within rel 1e-9 (float64), for scalars, lists or tensors."""
    got_t = got.detach() if torch.is_tensor(got) else t(got)
    exp_t = t(expected) if not torch.is_tensor(expected) else expected.detach()
    torch.testing.assert_close(got_t.to(F64), exp_t.to(F64).expand_as(got_t), rtol=rtol, atol=atol)


def close_printed(got, printed, decimals: int) -> None:
    """Check a value the spec prints rounded to `decimals` places (half a unit of the last digit)."""
    close(got, printed, rtol=0.0, atol=0.5 * 10.0**-decimals + 1e-15)


# ---------------------------------------------------------------------------------------------------
# TV-1 data: two agents, one prompt, G = 4 each, agent 0 = A (learner), agent 1 = B.

TV1_ACC_A = [0.40, 0.45, 0.50, 0.55, 0.60]
TV1_ACC_B = [0.70, 0.72, 0.75, 0.78, 0.80]
TV1_REWARDS = [[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]]  # A's 4 then B's 4
TV1_SOURCE = [0, 0, 0, 0, 1, 1, 1, 1]
TV1_M_OLD = [-0.50, -0.80, -0.60, -0.30, -0.20, -0.25, -0.40, -0.30]
TV1_M_CUR = [-0.4998, -0.7990, -0.6010, -0.2990, -0.35, -0.45, -0.38, -0.33]
TV1_C1_SOURCE_TOKENS = [-0.1, -0.3, -0.2, -0.25, -0.15]  # B's old token log-probs of c1 (5 tokens)
TV1_C1_LEARNER_TOKENS = [-0.3, -0.4, -0.35, -0.5, -0.2, -0.35]  # A's current token log-probs of c1 (6 tokens)
TV1_C1_INDEX = 4  # row 5 of the table, 0-based
