"""ArithmeticTask: scratchpad and bare formats per tier, grading, determinism, held-out split."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hacrl_exp.tasks.arithmetic import ALPHABET, TIERS, ArithmeticTask, chain, reversed_answer
from hacrl_exp.tasks.base import Grade, Problem

LINK = re.compile(r"^(\d)([+*])(\d)\+(\d)=(\d\d)$")


@pytest.mark.parametrize(
    "a, b, op, expected",
    [
        (141, 365, "+", "1+5+0=06,4+6+0=10,1+3+1=05|605"),
        (123, 7, "*", "3*7+0=21,2*7+2=16,1*7+1=08|168"),
        (999, 9, "*", "9*9+0=81,9*9+8=89,9*9+8=89|1998"),
        (999, 999, "+", "9+9+0=18,9+9+1=19,9+9+1=19|8991"),
        (50, 50, "+", "0+0+0=00,5+5+0=10|001"),
        (8840, 4, "*", "0*4+0=00,4*4+0=16,8*4+1=33,8*4+3=35|06353"),
    ],
)
def test_chain_examples(a, b, op, expected):
    assert chain(a, b, op) == expected


def check_chain(problem: Problem) -> None:
    """Recompute every link of a scratchpad solution from the operands."""
    a, b, op = problem.meta["a"], problem.meta["b"], problem.meta["op"]
    assert problem.prompt == f"{a}{op}{b}="
    links, answer = problem.solution.split("|")
    da, db = str(a)[::-1], str(b)[::-1]
    carry, digits = 0, ""
    links = links.split(",")
    assert len(links) == len(da)
    for i, link in enumerate(links):
        x, lop, y, c, v = LINK.match(link).groups()
        assert (lop, int(x), int(c)) == (op, int(da[i]), carry)
        assert int(y) == (int(db[i]) if op == "+" else b)
        value = int(x) + int(y) + carry if op == "+" else int(x) * b + carry
        assert int(v) == value
        carry, digits = value // 10, digits + v[1]
    digits += str(carry) if carry else ""
    assert answer == digits == problem.answer == reversed_answer(a, b, op)
    assert int(answer[::-1]) == (a + b if op == "+" else a * b)


@pytest.mark.parametrize("tier", list(TIERS))
def test_every_tier_format(tier):
    task = ArithmeticTask([tier], eval_per_tier=20)
    problems = task.train_problems(0, 200) + task.eval_problems()
    for p in problems:
        assert p.category == tier
        check_chain(p)
        assert set(p.prompt + p.solution) <= set(task.alphabet)
    t = TIERS[tier]
    assert all(len(str(p.meta["a"])) == t.digits for p in problems)
    finals = {len(p.answer) > t.digits for p in problems}
    assert finals == {True, False}, "both final-carry and no-final-carry cases occur"
    graded = task.grade([p.solution for p in problems], problems)
    assert all(g == Grade(1.0, "correct") for g in graded)


def test_bare_variant():
    task = ArithmeticTask(scratchpad=False)
    for p in task.train_problems(0, 50):
        assert p.solution == p.answer == reversed_answer(p.meta["a"], p.meta["b"], p.meta["op"])
    p = task.train_problems(0, 1)[0]
    assert task.grade([p.answer, f" {p.answer}\n", "", "x|" + p.answer], [p] * 4) == [
        Grade(1.0),
        Grade(1.0),
        Grade(0.0, "no_answer"),
        Grade(0.0, "wrong"),
    ]


def test_grading_scratchpad():
    task = ArithmeticTask()
    p = task.problem("add3", 141, 365, "x")
    cases = {
        p.solution: "correct",
        "|605": "correct",
        "junk|999|605": "correct",
        "1+5+0=06|605 ": "correct",
        "1+5+0=06,4+6+0=10,1+3+1=05|506": "wrong",
        "1+5+0=06,4+6+0=10,1+3+1=05|6050": "wrong",
        "605|": "no_answer",  # a chain that states no answer after its bar
        "605": "no_answer",
        "": "no_answer",
        "\x00\uffff<eos>": "no_answer",
        "9" * 1_000_000 + "|605": "correct",
        "|" * 100_000: "no_answer",
    }
    grades = task.grade(list(cases), [p] * len(cases))
    assert [g.reason for g in grades] == list(cases.values())
    assert [g.reward for g in grades] == [1.0 if r == "correct" else 0.0 for r in cases.values()]
    assert task.grade([None, 3], [p, p]) == [Grade(0.0, "no_answer")] * 2  # type: ignore[list-item]
    with pytest.raises(ValueError):
        task.grade(["a"], [p, p])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.booleans())
def test_grade_never_raises(text, scratchpad):
    task = ArithmeticTask(scratchpad=scratchpad)
    p = task.problem("mul31", 123, 7, "x")
    (g,) = task.grade([text], [p])
    assert g.reward in (0.0, 1.0) and g.reason in ("correct", "wrong", "no_answer")


def test_train_problems_pure_and_uniform():
    t1, t2 = ArithmeticTask(seed=3), ArithmeticTask(seed=3)
    assert t1.train_problems(5, 64) == t2.train_problems(5, 64)
    t1.train_problems(6, 10)  # calls in between change nothing
    assert t1.train_problems(5, 64) == t2.train_problems(5, 64)
    assert t1.train_problems(5, 64) != t1.train_problems(6, 64)
    assert ArithmeticTask(seed=4).train_problems(5, 64) != t1.train_problems(5, 64)
    assert t1.train_problems(0, 0) == []
    counts = {c: 0 for c in t1.categories}
    for p in t1.train_problems(1, 4000):
        counts[p.category] += 1
    assert all(850 < c < 1150 for c in counts.values()), counts
    assert t1.supervised_examples(30, seed=1) == t2.supervised_examples(30, seed=1)
    assert t1.supervised_examples(30, seed=1) != t1.supervised_examples(30, seed=2)


def test_extra_problems_are_a_stream_of_their_own_and_never_held_out():
    """Dynamic sampling's fresh prompts (algorithm.dynamic_prompts=fresh): drawn as the steps' are (every tier), a
    pure function of (seed, step, round, n), new per step and per round, not the steps' prompts, and never a scored
    or validation problem."""
    task, again = ArithmeticTask(seed=3, eval_per_tier=50), ArithmeticTask(seed=3, eval_per_tier=50)
    extra = task.extra_problems(5, 1, 64)
    assert extra == again.extra_problems(5, 1, 64) and [p.id for p in extra[:2]] == ["extra/5/1/0", "extra/5/1/1"]
    assert extra != task.extra_problems(5, 2, 64) != task.extra_problems(6, 2, 64)
    key = lambda p: (p.category, p.meta["a"], p.meta["b"])  # noqa: E731
    assert len({key(p) for p in extra} & {key(p) for p in task.train_problems(5, 64)}) < 8  # chance overlaps only
    assert {p.category for p in extra} == set(task.categories)
    drawn = {key(p) for s in range(50) for r in (1, 2, 3, 4) for p in task.extra_problems(s, r, 64)}
    assert not drawn & {key(p) for p in task.eval_problems() + task.validation_problems(50)}
    assert task.extra_problems(1, 1, 0) == []
    with pytest.raises(ValueError, match="round >= 1"):
        task.extra_problems(1, 0, 4)


def test_eval_set_fixed_distinct_and_held_out():
    task = ArithmeticTask(eval_per_tier=100)
    ev = task.eval_problems()
    assert ev == ArithmeticTask(eval_per_tier=100).eval_problems() == task.eval_problems()
    assert [p.category for p in ev] == [t for t in task.categories for _ in range(100)]
    keys = {(p.category, p.meta["a"], p.meta["b"]) for p in ev}
    assert len(keys) == len(ev)
    drawn = [p for s in range(200) for p in task.train_problems(s, 64)] + task.supervised_examples(20_000)
    assert not keys & {(p.category, p.meta["a"], p.meta["b"]) for p in drawn}
    assert all(p.solution and p.answer for p in ev)
    assert ArithmeticTask(seed=1).eval_problems() != ev


SCORED_DIGEST = {0: "662df21cfb6b111d1b7235d9b1536099", 3: "4cf7f2dfa108d0737f3239a3f7d82ac6"}
"""md5 of repr([(id, prompt, answer)]) of the default eval set at heldout_seed 0 and 3, taken before the validation
split existed (issue 38): drawing the validation split must leave the scored problems exactly as they were."""


@pytest.mark.parametrize("heldout_seed", [0, 3])
def test_the_validation_split_never_overlaps_the_scored_problems_and_leaves_them_unchanged(heldout_seed):
    import hashlib

    task = ArithmeticTask(heldout_seed=heldout_seed)
    valid = task.validation_problems(50)
    scored = task.eval_problems()
    digest = hashlib.md5(repr([(p.id, p.prompt, p.answer) for p in scored]).encode()).hexdigest()
    assert digest == SCORED_DIGEST[heldout_seed]  # the default run's scored problems, as before
    key = lambda p: (p.category, p.meta["a"], p.meta["b"])  # noqa: E731
    assert not {key(p) for p in valid} & {key(p) for p in scored}
    assert [p.category for p in valid] == [t for t in task.categories for _ in range(50)]
    assert len({key(p) for p in valid}) == len(valid) and all(p.id.startswith("valid/") for p in valid)
    assert valid == task.validation_problems(50)  # a pure function of the seeds
    drawn = [p for s in range(50) for p in task.train_problems(s, 64)] + task.supervised_examples(5000)
    assert not {key(p) for p in valid} & {key(p) for p in drawn}  # never trained on either
    # the small mul31 tier (7,200 problems, ~1/5 held out): asking past what is left after the scored 100 is one line
    small = ArithmeticTask(tiers=["mul31"], heldout_seed=heldout_seed)
    assert len(small.validation_problems(1000)) == 1000
    with pytest.raises(ValueError, match="task.validation_per_tier=2000 exceeds .* left after the scored ones"):
        small.validation_problems(2000)


def test_the_data_seed_draws_the_stream_and_the_heldout_seed_the_test():
    today = ArithmeticTask(seed=3)  # task.seed alone draws both, as it always did
    assert ArithmeticTask(seed=3, heldout_seed=3).train_problems(2, 32) == today.train_problems(2, 32)
    assert ArithmeticTask(seed=3, heldout_seed=3).eval_problems() == today.eval_problems()
    seed3 = ArithmeticTask(seed=3, heldout_seed=0)  # a job at seed 3 by default: its own stream, seed 0's test
    assert seed3.eval_problems() == ArithmeticTask(seed=0).eval_problems()
    assert seed3.train_problems(2, 32) != ArithmeticTask(seed=0).train_problems(2, 32)
    assert seed3.supervised_examples(30, seed=1) != ArithmeticTask(seed=0).supervised_examples(30, seed=1)
    assert ArithmeticTask(seed=0, heldout_seed=5).eval_problems() != seed3.eval_problems()
    held_out = {(p.category, p.meta["a"], p.meta["b"]) for p in seed3.eval_problems()}
    drawn = [p for s in range(100) for p in seed3.train_problems(s, 64)] + seed3.supervised_examples(5000)
    assert not held_out & {(p.category, p.meta["a"], p.meta["b"]) for p in drawn}  # still disjoint


def test_texts_alphabet_and_validation():
    task = ArithmeticTask(tiers=["add2", "mul21"])
    texts = task.sample_texts(50)
    assert len(texts) == 50 and all(set(t) <= set(ALPHABET) and "=" in t and "|" in t for t in texts)
    assert task.categories == ["add2", "mul21"] and task.alphabet == ALPHABET
    with pytest.raises(ValueError, match="tiers"):
        ArithmeticTask(tiers=["add9"])
    with pytest.raises(ValueError, match="eval_per_tier"):
        ArithmeticTask(tiers=["mul21"], eval_per_tier=1000).eval_problems()
