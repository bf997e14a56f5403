"""Gradient alignment ⟨∇J_hete, ∇J_homo⟩ by exact enumeration (hacpo-spec §6.3; §6.4 tests 4–5; P Thm 4.3 / D.11).

Toy model: a finite set of responses y with lengths |y| and rewards R(y) ∈ {0, 1}. The learner is
π1 = softmax(θ) with θ the parameters; the source π2 is fixed. A sequence's mean token log-prob is
m(y) = log π(y)/|y|, so the sequence ratio is s = exp(m1 − m2) = (π1/π2)^(1/|y|). Everything is
evaluated at θ = θ_old, where the self ratio is 1 (Assumption D.7 holds exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hacrl_exp.algo import capability_ratios, cross_objective, gspo_objective, sequence_log_ratio
from hacrl_exp.theory.results import CheckResult, DataTable, Identity, fmt

RESPONSES = ("c1", "c2", "c3", "w1", "w2", "w3")
REWARDS = (1.0, 1.0, 1.0, 0.0, 0.0, 0.0)
LENGTHS = (12, 10, 14, 6, 12, 8)
LEARNER_PROBS = (0.10, 0.05, 0.05, 0.70, 0.05, 0.05)
"""π1_old: the learner mostly gives the short wrong answer w1."""
SOURCES = {
    # name: (π2, expected sign of the inner product)
    "aligned (source mass on correct answers)": ((0.30, 0.30, 0.30, 0.03, 0.04, 0.03), +1),
    "counter-example (source mass on w2)": ((0.01, 0.01, 0.01, 0.01, 0.95, 0.01), -1),
}
ALPHA = 1.0
GRAD_TOL = 1e-10
"""Relative: max |autograd − closed form| / max |closed form|."""
DECOMPOSITION_TOL = 1e-10
"""Relative to the inner product."""


@dataclass(frozen=True)
class ToyPolicies:
    """Rewards, lengths, π1_old and π2 over the response set, all (Y,) float64."""

    rewards: torch.Tensor
    lengths: torch.Tensor
    learner: torch.Tensor
    source: torch.Tensor

    @classmethod
    def of(cls, source: tuple[float, ...]) -> ToyPolicies:
        """The module's response set and learner, with source policy π2 = `source`."""
        return cls(_f64(REWARDS), _f64(LENGTHS), _f64(LEARNER_PROBS), _f64(source))


def _f64(values: tuple[float, ...]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def mean_logp(theta: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """m1(y) = log softmax(θ)_y / |y|: the learner's mean token log-prob of each response. (Y,)."""
    return torch.log_softmax(theta, dim=-1) / lengths


def advantages(p: ToyPolicies) -> torch.Tensor:
    """A(y) = R(y) − E_{π1}[R]: the oracle baseline of Thm 4.1, used for self and cross samples alike. (Y,)."""
    return p.rewards - (p.learner * p.rewards).sum()


def loss_weight(p: ToyPolicies) -> torch.Tensor:
    """ω^(2,1) = clip(E_{π2}[R] / E_{π1}[R], 0.1, 10) (source/learner, spec §2.2 role 2), via `capability_ratios`."""
    p_hat = torch.stack([(p.learner * p.rewards).sum(), (p.source * p.rewards).sum()])
    return capability_ratios(p_hat)[0, 1]


def homo_objective(theta: torch.Tensor, p: ToyPolicies) -> torch.Tensor:
    """J_homo(θ) = Σ_y π1_old(y)·J_self(y), J_self = gspo_objective(s_self, A), s_self = exp(m1(θ) − sg m1(θ_old)).

    Evaluated at θ = θ_old, so s_self = 1 sits inside the GSPO clip window and the gradient is the on-policy one.
    """
    m = mean_logp(theta, p.lengths)
    s = sequence_log_ratio(m, m.detach()).exp()
    return (p.learner * gspo_objective(s, advantages(p))).sum()


def hete_objective(theta: torch.Tensor, p: ToyPolicies) -> torch.Tensor:
    """J_hete(θ) = Σ_y π2(y)·cross_objective(s, A, ω^(2,1), α, clip=False), s = exp(m1(θ) − m2) (P eq. 50)."""
    s = sequence_log_ratio(mean_logp(theta, p.lengths), p.source.log() / p.lengths).exp()
    cross = cross_objective(s, advantages(p), loss_weight(p), ALPHA, 0.0, clip=False)
    return (p.source * cross).sum()


def autograd_gradients(p: ToyPolicies) -> tuple[torch.Tensor, torch.Tensor]:
    """(∇_θ J_homo, ∇_θ J_hete) at θ = θ_old = log π1_old, by torch.autograd. Each (Y,)."""
    theta = p.learner.log().requires_grad_(True)
    (homo,) = torch.autograd.grad(homo_objective(theta, p), theta)
    (hete,) = torch.autograd.grad(hete_objective(theta, p), theta)
    return homo, hete


def score_terms(p: ToyPolicies) -> torch.Tensor:
    """g(y) = A(y)·(1/|y|)·∇_θ log π1(y), with ∇_θ log softmax(θ)_y = e_y − π1. Rows y, shape (Y, Y)."""
    grad_log = torch.eye(len(p.learner), dtype=torch.float64) - p.learner
    return (advantages(p) / p.lengths)[:, None] * grad_log


def prop_d6_gradient(p: ToyPolicies) -> torch.Tensor:
    """Prop. D.6: ∇J_hete = Σ_y π2(y)·ω·s^(α+1)·A(y)·(1/|y|)·∇log π1(y), s = (π1/π2)^(1/|y|). (Y,)."""
    s = (p.learner / p.source) ** (1.0 / p.lengths)
    return ((p.source * loss_weight(p) * s ** (ALPHA + 1))[:, None] * score_terms(p)).sum(0)


@dataclass(frozen=True)
class Decomposition:
    """⟨∇J_hete, v⟩ = E_P[C·Z] = E_P[C]·‖v‖² + Cov_P(C, Z) with P = π1, v = ∇J_homo (spec §6.3)."""

    mean_c_times_v2: float
    cov_cz: float
    corr_cz: float


def decompose(p: ToyPolicies, v: torch.Tensor) -> Decomposition:
    """C(y) = ω·(π1/π2)^((α+1)/|y| − 1) and Z(y) = ⟨g(y), v⟩ (Assumption D.12), moments under P = π1.

    By Lemma D.10, ∇J_hete = E_P[C·g] and E_P[Z] = ⟨E_P[g], v⟩ = ‖v‖², hence the decomposition is exact.
    """
    c = loss_weight(p) * (p.learner / p.source) ** ((ALPHA + 1) / p.lengths - 1)
    z = score_terms(p) @ v

    def moment(x: torch.Tensor) -> torch.Tensor:  # E_P[x]
        return (p.learner * x).sum()

    cov = moment(c * z) - moment(c) * moment(z)
    corr = cov / (moment((c - moment(c)) ** 2) * moment((z - moment(z)) ** 2)).sqrt()
    return Decomposition(float(moment(c) * v.dot(v)), float(cov), float(corr))


@dataclass(frozen=True)
class AlignmentCase:
    """Gradients, their inner product and the checks on them for one source policy."""

    name: str
    omega: float
    inner: float
    cosine: float
    hete_error: float
    """max |autograd ∇J_hete − Prop. D.6| / max |Prop. D.6|."""
    homo_error: float
    """max |autograd ∇J_homo − Σ_y π1·A·(1/|y|)·∇log π1| / max |closed form|."""
    decomposition: Decomposition


def alignment_case(name: str, source: tuple[float, ...]) -> AlignmentCase:
    """Compute everything `check_gradient_alignment` reports for the learner LEARNER_PROBS and one source π2."""
    p = ToyPolicies.of(source)
    homo, hete = autograd_gradients(p)
    homo_closed = (p.learner[:, None] * score_terms(p)).sum(0)
    inner = hete.dot(homo)
    hete_closed = prop_d6_gradient(p)

    def relative(got: torch.Tensor, want: torch.Tensor) -> float:
        return float((got - want).abs().max() / want.abs().max())

    return AlignmentCase(
        name=name,
        omega=float(loss_weight(p)),
        inner=float(inner),
        cosine=float(inner / (hete.norm() * homo.norm())),
        hete_error=relative(hete, hete_closed),
        homo_error=relative(homo, homo_closed),
        decomposition=decompose(p, homo),
    )


def _policy_table() -> DataTable:
    rows = [
        [y, f"{r:g}", str(n), f"{q:.2f}", *(f"{src[i]:.2f}" for src, _ in SOURCES.values())]
        for i, (y, r, n, q) in enumerate(zip(RESPONSES, REWARDS, LENGTHS, LEARNER_PROBS, strict=True))
    ]
    return DataTable(["y", "R(y)", "|y|", "π1_old (learner)", *(f"π2: {n}" for n in SOURCES)], rows, "toy policies")


def check_gradient_alignment() -> CheckResult:
    """Spec §6.4 tests 4–5: ∇J_hete by autograd equals Prop. D.6, and the sign of ⟨∇J_hete, ∇J_homo⟩ follows D.12.

    Asserts per source: autograd = closed form (relative 1e-10) for both gradients; ⟨∇J_hete, v⟩ =
    E_P[C]‖v‖² + Cov_P(C, Z) (relative 1e-10); the inner product is > 0 for the aligned source and < 0 for the
    counter-example, with ρ_{C,Z} of the same sign (D.12 holds / fails).
    """
    rows, identities, values = [], [], {}
    for name, (source, sign) in SOURCES.items():
        case = alignment_case(name, source)
        d = case.decomposition
        rows.append(
            [name, f"{case.omega:.4f}", f"{case.inner:.4e}", fmt(case.cosine, 4)]
            + [f"{d.mean_c_times_v2:.4e}", f"{d.cov_cz:.4e}", fmt(d.corr_cz, 4)]
        )
        short = name.split(" (")[0]
        identities += [
            Identity.close(f"{short}: autograd ∇J_hete vs Prop. D.6, rel. max error", case.hete_error, 0.0, GRAD_TOL),
            Identity.close(f"{short}: autograd ∇J_homo vs closed form, rel. max error", case.homo_error, 0.0, GRAD_TOL),
            Identity.close(
                f"{short}: (⟨∇J_hete, v⟩ − E_P[C]‖v‖² − Cov(C, Z)) / ⟨∇J_hete, v⟩",
                (case.inner - d.mean_c_times_v2 - d.cov_cz) / case.inner,
                0.0,
                DECOMPOSITION_TOL,
            ),
            (Identity.above if sign > 0 else Identity.below)(f"{short}: cos(∇J_hete, ∇J_homo)", case.cosine, 0.0),
            (Identity.above if sign > 0 else Identity.below)(
                f"{short}: ρ_(C,Z) (D.12 {'holds' if sign > 0 else 'fails'})", d.corr_cz, 0.0
            ),
        ]
        values[f"{short} inner"], values[f"{short} cosine"] = case.inner, case.cosine
    gradients = DataTable(
        ["source π2", "ω^(2,1)", "⟨∇J_hete, ∇J_homo⟩", "cosine", "E_P[C]·‖v‖²", "Cov_P(C, Z)", "ρ_(C,Z)"],
        rows,
        "gradients at θ = θ_old",
    )
    return CheckResult(
        title=f"4. Gradient alignment ⟨∇J_hete, ∇J_homo⟩, exact enumeration, {len(RESPONSES)} responses, α = {ALPHA:g}",
        claim=(
            "Theorem 4.3 needs Assumption D.12: when the source's mass is positively correlated with reward the cross "
            "gradient points along the learner's own, but a source that mostly produces a wrong answer the learner "
            "rarely gives pushes the learner's mass onto its own wrong answer, against the on-policy gradient."
        ),
        tables=[_policy_table(), gradients],
        identities=identities,
        notes=[
            "A(y) = R(y) − E_π1[R]; J_homo = Σ π1_old·gspo_objective(s_self, A); J_hete = Σ π2·cross_objective(s, A, "
            "ω, α, clip=False); gradients w.r.t. the learner's logits θ by torch.autograd, float64.",
            "Decomposition: with P = π1, Q = π2, C(y) = ω·(P/Q)^((α+1)/|y| − 1), g(y) = A·(1/|y|)·∇log π1(y), "
            "v = ∇J_homo = E_P[g] and Z(y) = ⟨g(y), v⟩, the inner product is E_P[C·Z] = E_P[C]·‖v‖² + Cov_P(C, Z); "
            "E_P[C] > 0, so Cov > 0 (D.12) is sufficient, and a negative Cov large enough flips the sign.",
        ],
        values=values,
    )
