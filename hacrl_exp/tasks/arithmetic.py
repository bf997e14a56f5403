"""Arithmetic generated in code, with scratchpad chains (the embedded default task).

Prompt `141+365=`; scratchpad response `1+5+0=06,4+6+0=10,1+3+1=05|605`: one link per column, least-significant
first, `digit+digit+carry=two-digit sum`, then `|` and the answer written least-significant digit first (a final carry
digit included). Multiplication by one digit uses the same chain: `123*7=` → `3*7+0=21,2*7+2=16,1*7+1=08|168`.
The bare variant (`scratchpad=False`) answers with the reversed number only. Facts behind the format:
shared/docs/embedded-task-notes.md, "Third round".

Held-out split: a problem is held out iff a seeded integer hash of its operands falls in a 1/5 slice. Training,
warm-start and tokenizer-corpus draws reject held-out problems and the eval set takes only held-out ones, so the two
are exactly disjoint, even for the small multiplication tiers (mul31 has only 7,200 problems).

Validation split (issue 38): `validation_problems(per_tier)` draws further held-out-side problems from their own
stream ([heldout_seed, _VALID, tier]), leaving out the scored eval problems: never trained on, never scored. The
warm-start target and any other stopping rule read it; the scored eval set is drawn first and is unchanged by it.

Two seeds: `seed` draws the training stream, the warm-start examples and the tokenizer corpus; `heldout_seed`
(default: `seed`) draws the split and the held-out problems. A job passes its own seed as `seed` and keeps
`heldout_seed` fixed (hacrl_exp.config.validate.resolve_task_seeds), so seeds vary the data, not the test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hacrl_exp.rewards import Grader
from hacrl_exp.tasks.base import Grade, Problem

ALPHABET = "0123456789+*=,|"
"""Every character that can appear in a prompt or a response, in a stable order (for char tokenizers)."""

HELD_OUT_MODULUS = 5
"""One problem in HELD_OUT_MODULUS is held out for evaluation (by a hash of its operands, see `_held_out`)."""

MULTIPLIERS = (2, 9)
"""Range (inclusive) of the one-digit multiplier: 0 and 1 would make trivial chains."""

# Stream tags: np.random.default_rng([seed, TAG, x]) gives independent streams per use.
_TRAIN, _EVAL, _SUPERVISED, _TEXTS, _VALID, _EXTRA = 101, 202, 303, 404, 505, 606
_MAX_ENUMERATE = 1_000_000


@dataclass(frozen=True)
class Tier:
    """Operand ranges of one tier: `digits`-digit `a`, and `b` with `b_digits` digits (op '+') or one digit ('*')."""

    op: str
    digits: int

    @property
    def a_range(self) -> tuple[int, int]:
        return 10 ** (self.digits - 1), 10**self.digits - 1

    @property
    def b_range(self) -> tuple[int, int]:
        return self.a_range if self.op == "+" else MULTIPLIERS


TIERS: dict[str, Tier] = {
    "add2": Tier("+", 2),
    "add3": Tier("+", 3),
    "add4": Tier("+", 4),
    "mul21": Tier("*", 2),
    "mul31": Tier("*", 3),
    "mul41": Tier("*", 4),
}
"""All tiers: addN adds two N-digit numbers, mulN1 multiplies an N-digit number by a digit in MULTIPLIERS."""


def chain(a: int, b: int, op: str) -> str:
    """The scratchpad chain and answer for `a op b`, e.g. chain(123, 7, '*') == '3*7+0=21,2*7+2=16,1*7+1=08|168'."""
    da = [int(c) for c in reversed(str(a))]
    db = [int(c) for c in reversed(str(b))]
    carry, links = 0, []
    for i, x in enumerate(da):
        if op == "+":
            y = db[i]
            v = x + y + carry
            links.append(f"{x}+{y}+{carry}={v:02d}")
        else:
            v = x * b + carry
            links.append(f"{x}*{b}+{carry}={v:02d}")
        carry = v // 10
    return ",".join(links) + "|" + reversed_answer(a, b, op)


def reversed_answer(a: int, b: int, op: str) -> str:
    """The result of `a op b` written least-significant digit first: 141+365 → '605', 999*9 → '1998'."""
    return str(a + b if op == "+" else a * b)[::-1]


def _held_out(a: np.ndarray, b: np.ndarray, seed: int) -> np.ndarray:
    """Boolean mask: is (a, b) held out? A splitmix64-style hash of (seed, a, b), modulo HELD_OUT_MODULUS, is 0."""
    with np.errstate(over="ignore"):
        x = a.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + b.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        x = x + np.uint64(seed % 2**63) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
    return (x % np.uint64(HELD_OUT_MODULUS)) == 0


class ArithmeticTask:
    """The Task protocol over arithmetic tiers; see the module docstring for formats and the held-out split."""

    name = "arithmetic"

    def __init__(
        self,
        tiers: Sequence[str] = ("add3", "add4", "mul31", "mul41"),
        scratchpad: bool = True,
        eval_per_tier: int = 100,
        seed: int = 0,
        heldout_seed: int | None = None,
    ) -> None:
        tiers = tuple(tiers)
        unknown = [t for t in tiers if t not in TIERS]
        if unknown or not tiers:
            raise ValueError(f"tiers={list(tiers)}: unknown {unknown}. Choose from {list(TIERS)}")
        if len(set(tiers)) != len(tiers):
            raise ValueError(f"tiers={list(tiers)} has duplicates")
        if eval_per_tier < 1:
            raise ValueError(f"eval_per_tier={eval_per_tier} must be >= 1")
        self.tiers, self.scratchpad, self.eval_per_tier, self.seed = tiers, bool(scratchpad), int(eval_per_tier), seed
        self.heldout_seed = seed if heldout_seed is None else heldout_seed
        self._eval: list[Problem] | None = None
        self.grader = Grader()  # the `exact` rule never starts math-verify workers

    @property
    def categories(self) -> list[str]:
        """The tier names, in the order given."""
        return list(self.tiers)

    @property
    def alphabet(self) -> str:
        """Every character a prompt or response can contain (the same for every tier set, so tokenizers agree)."""
        return ALPHABET

    def problem(self, tier: str, a: int, b: int, pid: str) -> Problem:
        """The Problem for `a op b` in `tier`: prompt 'a op b=', answer reversed, solution chain (or bare answer)."""
        op = TIERS[tier].op
        answer = reversed_answer(a, b, op)
        solution = chain(a, b, op) if self.scratchpad else answer
        return Problem(pid, f"{a}{op}{b}=", answer, tier, solution, {"a": a, "b": b, "op": op})

    def _draw(self, rng: np.random.Generator, tier: str, n: int) -> list[tuple[int, int]]:
        """n training-side operand pairs of `tier`, uniform over its non-held-out problems."""
        t = TIERS[tier]
        a = np.empty(0, np.int64)
        b = np.empty(0, np.int64)
        while len(a) < n:  # rejection: ~1/5 of draws are held out, so this loops 1–3 times
            k = n - len(a) + 8
            ca = rng.integers(t.a_range[0], t.a_range[1] + 1, size=k)
            cb = rng.integers(t.b_range[0], t.b_range[1] + 1, size=k)
            keep = ~_held_out(ca, cb, self.heldout_seed)
            a, b = np.concatenate([a, ca[keep]]), np.concatenate([b, cb[keep]])
        return list(zip(a[:n].tolist(), b[:n].tolist()))

    def _sample(self, rng: np.random.Generator, n: int, prefix: str) -> list[Problem]:
        """n problems with tiers drawn uniformly, then operands per tier (vectorised), in draw order."""
        tier_idx = rng.integers(len(self.tiers), size=n)
        pairs: dict[int, list[tuple[int, int]]] = {}
        for j, tier in enumerate(self.tiers):
            pairs[j] = self._draw(rng, tier, int((tier_idx == j).sum()))
        used = dict.fromkeys(pairs, 0)
        out = []
        for i, j in enumerate(tier_idx.tolist()):
            a, b = pairs[j][used[j]]
            used[j] += 1
            out.append(self.problem(self.tiers[j], a, b, f"{prefix}/{i}"))
        return out

    def train_problems(self, step: int, n: int) -> list[Problem]:
        """The n prompts of training step `step`: a pure function of (seed, heldout_seed, step, n); never an eval
        problem."""
        if step < 0 or n < 0:
            raise ValueError(f"step={step}, n={n} must be >= 0")
        return self._sample(np.random.default_rng([self.seed, _TRAIN, step]), n, f"train/{step}")

    def extra_problems(self, step: int, round: int, n: int) -> list[Problem]:
        """n more training prompts for dynamic sampling's extra round `round` of step `step` (tiers drawn uniformly,
        as train_problems): a pure function of (seed, heldout_seed, step, round, n); never an eval problem."""
        if step < 0 or round < 1 or n < 0:
            raise ValueError(f"step={step}, round={round}, n={n}: need step >= 0, round >= 1, n >= 0")
        return self._sample(np.random.default_rng([self.seed, _EXTRA, step, round]), n, f"extra/{step}/{round}")

    def supervised_examples(self, n: int, seed: int = 0) -> list[Problem]:
        """n warm-start problems (solution = target response), a pure function of (task seed, seed); never eval."""
        return self._sample(np.random.default_rng([self.seed, _SUPERVISED, seed]), n, f"sup/{seed}")

    def sample_texts(self, n: int, seed: int = 0) -> list[str]:
        """n full texts `prompt + solution` (no EOS) for training a BPE tokenizer; never eval problems."""
        return [p.prompt + p.solution for p in self._sample(np.random.default_rng([self.seed, _TEXTS, seed]), n, "t")]

    def eval_problems(self) -> list[Problem]:
        """The fixed held-out set: eval_per_tier distinct held-out problems per tier, tier by tier in order; a pure
        function of heldout_seed."""
        if self._eval is None:
            self._eval = [p for j, tier in enumerate(self.tiers) for p in self._eval_tier(j, tier)]
        return list(self._eval)

    def validation_problems(self, per_tier: int) -> list[Problem]:
        """per_tier distinct held-out-side problems per tier, none of them a scored eval problem (eval_problems), tier
        by tier in order: a pure function of (heldout_seed, eval_per_tier, per_tier), ids 'valid/<tier>/<i>'."""
        if per_tier < 1:
            raise ValueError(f"validation per tier={per_tier} must be >= 1")
        scored = {(p.meta["a"], p.meta["b"]) for p in self.eval_problems()}
        out = []
        for j, tier in enumerate(self.tiers):
            pairs = self._held_out_pairs(j, tier, per_tier, _VALID, exclude=scored)
            out += [self.problem(tier, a, b, f"valid/{tier}/{i}") for i, (a, b) in enumerate(pairs)]
        return out

    def _eval_tier(self, j: int, tier: str) -> list[Problem]:
        pairs = self._held_out_pairs(j, tier, self.eval_per_tier, _EVAL)
        return [self.problem(tier, a, b, f"eval/{tier}/{i}") for i, (a, b) in enumerate(pairs)]

    def _held_out_pairs(self, j: int, tier: str, count: int, tag: int, exclude=frozenset()) -> list[tuple[int, int]]:
        """count distinct held-out operand pairs of tier j from the stream [heldout_seed, tag, j + 1], none in
        `exclude` (the eval draw passes none, so its pairs are what they always were)."""
        t = TIERS[tier]
        rng = np.random.default_rng([self.heldout_seed, tag, j + 1])
        (a0, a1), (b0, b1) = t.a_range, t.b_range
        if (a1 - a0 + 1) * (b1 - b0 + 1) <= _MAX_ENUMERATE:  # small space: choose without replacement
            a, b = (g.ravel() for g in np.meshgrid(np.arange(a0, a1 + 1), np.arange(b0, b1 + 1), indexing="ij"))
            mask = _held_out(a, b, self.heldout_seed)
            if exclude:
                mask &= np.array([(x, y) not in exclude for x, y in zip(a.tolist(), b.tolist())])
            a, b = a[mask], b[mask]
            if len(a) < count:
                what = "task.validation_per_tier" if exclude else "eval_per_tier"
                left = " left after the scored ones" if exclude else ""
                raise ValueError(f"{what}={count} exceeds the {len(a)} held-out problems of tier {tier}{left}")
            pick = rng.choice(len(a), size=count, replace=False)
            return list(zip(a[pick].tolist(), b[pick].tolist()))
        seen: dict[tuple[int, int], None] = {}  # large space: rejection-sample distinct held-out pairs
        while len(seen) < count:
            ca = rng.integers(a0, a1 + 1, size=4 * HELD_OUT_MODULUS * count)
            cb = rng.integers(b0, b1 + 1, size=len(ca))
            keep = _held_out(ca, cb, self.heldout_seed)
            for pair in zip(ca[keep].tolist(), cb[keep].tolist()):
                if pair not in exclude:
                    seen.setdefault(pair)
        return list(seen)[:count]

    @property
    def extractor(self) -> str:
        """The answer extractor (`hacrl_exp.rewards.EXTRACTORS`): after the last '|' (scratchpad) or the whole text."""
        return "after_bar" if self.scratchpad else "whole_text"

    def grade(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Grade]:
        """Reward 1.0 iff the extracted answer equals `problem.answer` exactly (the one grader, `exact` rule, as the
        arithmetic benchmark YAMLs); reason correct, wrong or no_answer."""
        if len(responses) != len(problems):
            raise ValueError(f"{len(responses)} responses for {len(problems)} problems")
        return self.grader.grade(responses, [p.answer for p in problems], extractor=self.extractor, compare="exact")
