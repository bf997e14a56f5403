"""Regenerate tests/rewards/data/outside/*.jsonl: the (gold, answer, verdict) cases of other graders' test suites.

    python -m benchmarks.outside_cases --mirrors /path/to/mirrors   # folders owner+name/repo (bare git repositories)

Each suite's test files are read from a git mirror at a pinned commit (`git show COMMIT:PATH`) and parsed with `ast`;
cases are the literal arguments of their parametrised or unittest cases (`ast.literal_eval`: nothing of theirs is run
or copied, only the case data). Each case is converted to our grader's inputs by the rules in
tests/rewards/data/outside/README.md (`gold`, and `answer` for a bare final answer or `response` for a text our
extractor reads), and tagged `depends_on` when its verdict hangs on a setting of theirs that we do not share.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

from hacrl_exp.repo import REPO_ROOT
from hacrl_exp.rewards.boxed import final_boxes

OUT = REPO_ROOT / "tests" / "rewards" / "data" / "outside"
SUITES = {
    "math-verify": {
        "repo": "huggingface/Math-Verify",
        "commit": "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a",
        "license": "Apache-2.0",
        "files": [
            "tests/test_all.py",
            "tests/test_boxed.py",
            "tests/test_numina_cases.py",
            "tests/test_open_thoughts.py",
            "tests/test_strict.py",
            "tests/test_yujianll.py",
        ],
    },
    "hendrycks-math": {
        "repo": "hendrycks/math",
        "commit": "985bdc1696e88e8643f081a0ff4719da39f2ae2a",
        "license": "MIT",
        "files": ["modeling/math_equivalence_test.py"],
    },
    "nemo-skills": {
        "repo": "NVIDIA/NeMo-Skills",
        "commit": "0b012df8a09cd4730d31b16e90a0d8f13d145fb8",
        "license": "Apache-2.0",
        "files": ["tests/test_math_equal.py"],
    },
}
"""Suites, each pinned to the commit its cases were read at."""

MATH_VERIFY_DEFAULTS = {
    "match_types": ["latex", "expr"],
    "precision": 6,
    "strict": True,
    "allow_set_relation_comp": False,
}
"""Math-Verify's `compare_strings` defaults in its tests. A case run with another precision, strict or set-relation
setting depends on it; so does one read without LaTeX extraction (`match_types=["expr"]`: plain-text numbers, decimal
commas). LaTeX alone (`["latex"]`) reads LaTeX answers as the default does."""

_SPANS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_DELIMITER = re.compile(r"\$\$|(?<!\\)\$|\\[()\[\]]")
_SPAN = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_PROSE = re.compile(r"[A-Za-z]{2,}[ ,.:;]+[A-Za-z]{2,}[ ,.:;]+[A-Za-z]{2,}")
_MAX_GOLD = 80  # a longer gold without a box is a solution text, not an answer


def whole_span(text: str) -> str | None:
    """The content of `text` when it is one math span (`$..$`, `$$..$$`, `\\(..\\)`, `\\[..\\]`), a full stop after
    it allowed; else None."""
    s = text.strip().removesuffix(".").strip()
    for opening, closing in _SPANS:
        inner = s[len(opening) : -len(closing)] if s.startswith(opening) and s.endswith(closing) else None
        if inner is not None and len(s) >= len(opening) + len(closing) and not _DELIMITER.search(inner):
            return inner.strip()
    return None


def spans(text: str) -> list[str]:
    """The math spans of a text (`$..$`, `$$..$$`, `\\(..\\)`, `\\[..\\]`), in order."""
    return [next(g for g in m.groups() if g).strip() for m in _SPAN.finditer(text)]


def convert_gold(text: str) -> tuple[str, str]:
    """(our gold answer, how it was read) for one of their gold strings."""
    if "\\boxed" in text or "\\fbox" in text:
        return ", ".join(final_boxes(text)), "gold's final boxes"
    inner = whole_span(text)
    if inner is not None:
        return inner, "gold's math span"
    stripped = _DELIMITER.sub(" ", text).strip()
    return stripped, "gold as written" if len(stripped) <= _MAX_GOLD else "gold in prose"


def convert_answer(text: str) -> tuple[str, str, str]:
    """(field, value, how it was read) for one of their answers: field 'response' (a text our extractor reads: it has
    a box, or it is prose) or 'answer' (a bare final answer, graded as extracted)."""
    if "\\boxed" in text or "\\fbox" in text:
        return "response", text, "boxed response"
    inner = whole_span(text)
    if inner is not None:
        return "answer", inner, "answer's math span"
    found = spans(text)
    outside = _SPAN.sub(" ", text)
    if len(found) == 1 and not re.search(r"\d", outside):  # `The largest $n$ is 34.`: the answer is in the prose
        return "answer", found[0], "the sentence's one math span"
    if not found and not _DELIMITER.search(text) and not _PROSE.search(text):
        return "answer", text.strip(), "answer as written"
    return "response", text, "answer in prose"


def case(suite: str, where: dict, gold: object, answer: object, expected: int, depends_on: str | None) -> dict:
    """One case row: their strings, our inputs, their verdict."""
    gold_text, answer_text = _text(gold), _text(answer)
    our_gold, gold_read = convert_gold(gold_text)
    field, value, answer_read = convert_answer(answer_text)
    prose = [side for side, read in (("gold", gold_read), ("answer", answer_read)) if read == f"{side} in prose"]
    if prose and not depends_on:
        depends_on = f"{prose[0]} in prose: read by their extraction"
    return {
        "id": f"{suite}/{where['file'].rsplit('/', 1)[-1]}::{where['test']}[{where['index']}]",
        "suite": suite,
        **where,
        "their_gold": gold_text,
        "their_answer": answer_text,
        "expected": int(expected),
        "gold": our_gold,
        field: value,
        "read": f"{gold_read}; {answer_read}",
        "depends_on": depends_on,
    }


def _text(value: object) -> str:
    return value if isinstance(value, str) else repr(value)


# ---- suites ---------------------------------------------------------------------------------------------------------
def math_verify(path: str, tree: ast.Module) -> Iterator[dict]:
    """Parametrised tests: (gold, pred, expected[, setting]) tuples, run through `compare_strings(gold, pred, ...)`
    or `verify(parse(gold), parse(pred))`; settings from the call's keywords or the case's own column."""
    for fn in _functions(tree):
        names, values = _parametrize(fn)
        if not names or not {"gold", "pred"} <= set(names):
            continue
        call = _settings_call(fn)
        for index, node in enumerate(values):
            try:
                row = dict(zip(names, ast.literal_eval(node)))
            except ValueError:  # an f-string or a computed value: not case data
                continue
            settings = {k: row.get(v, v) if isinstance(v, str) else v for k, v in call.items()}
            differs = {k: v for k, v in settings.items() if MATH_VERIFY_DEFAULTS.get(k) != v}
            if "latex" in settings["match_types"]:
                differs.pop("match_types", None)
            depends = ", ".join(f"{k}={v}" for k, v in differs.items()) or None
            where = {"file": path, "test": fn.name, "line": node.lineno, "index": index}
            expected = row.get("expected", row.get("result"))
            yield case("math-verify", where, row["gold"], row["pred"], expected, depends)


def hendrycks_math(path: str, tree: ast.Module) -> Iterator[dict]:
    """unittest methods: `test_in`, `test_out`, then `assertTrue/False(is_equiv(test_in, test_out))`; MATH's
    evaluation calls `is_equiv(model_output, answer)`, so test_out is the gold."""
    for fn in _functions(tree):
        values = {
            t.id: n.value.value
            for n in fn.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        asserts = [n.value.func.attr for n in fn.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        if {"test_in", "test_out"} <= set(values) and asserts and asserts[0] in ("assertTrue", "assertFalse"):
            where = {"file": path, "test": fn.name, "line": fn.lineno, "index": 0}
            yield case("hendrycks-math", where, values["test_out"], values["test_in"], asserts[0] == "assertTrue", None)


def nemo_skills(path: str, tree: ast.Module) -> Iterator[dict]:
    """Parametrised pairs, asserted `math_equal(a, b)` and `math_equal(b, a)`: one case each way (gold first); a
    pair with None (no answer) is left out."""
    for fn in _functions(tree):
        names, values = _parametrize(fn)
        if names != ["output_pair"]:
            continue
        for index, node in enumerate(values):
            a, b = (_number_or_literal(e) for e in node.elts)
            if a is None or b is None:
                continue
            for suffix, (gold, answer) in (("ab", (a, b)), ("ba", (b, a))):
                where = {"file": path, "test": fn.name, "line": node.lineno, "index": f"{index}{suffix}"}
                yield case("nemo-skills", where, gold, answer, fn.name == "test_correct_examples", None)


READERS = {"math-verify": math_verify, "hendrycks-math": hendrycks_math, "nemo-skills": nemo_skills}


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return sorted((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), key=lambda n: n.lineno)


def _parametrize(fn: ast.FunctionDef) -> tuple[list[str], list[ast.expr]]:
    """The argument names and value nodes of `@pytest.mark.parametrize("a,b", [...])`, or ([], [])."""
    for deco in fn.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize":
            names, values = deco.args[0], deco.args[1]
            return [n.strip() for n in ast.literal_eval(names).split(",")], list(values.elts)
    return [], []


def _settings_call(fn: ast.FunctionDef) -> dict:
    """Math-Verify settings of a test's `compare_strings` call: keyword -> literal, or -> the name of the case's own
    column (`precision=precision`); the defaults for what it does not pass."""
    settings = dict(MATH_VERIFY_DEFAULTS)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "compare_strings":
            for kw in node.keywords:
                settings[kw.arg] = kw.value.id if isinstance(kw.value, ast.Name) else ast.literal_eval(kw.value)
    return settings


def _number_or_literal(node: ast.expr) -> object:
    """A literal, or the value of a literal arithmetic expression (NeMo-Skills writes `5 / 2`)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _number_or_literal(node.left) / _number_or_literal(node.right)
    return ast.literal_eval(node)


def regenerate(mirrors: Path) -> dict[str, int]:
    """Write one JSONL per suite under OUT from the mirrors; returns cases per suite."""
    counts = {}
    for suite, spec in SUITES.items():
        repo = mirrors / (spec["repo"].replace("/", "+")) / "repo"
        rows = []
        for path in spec["files"]:
            source = subprocess.run(
                ["git", "-C", str(repo), "show", f"{spec['commit']}:{path}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            with warnings.catch_warnings():  # their `"\$10"`: an invalid escape, read as Python reads it
                warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
                tree = ast.parse(source)
            rows += READERS[suite](path, tree)
        target = OUT / f"{suite}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        counts[suite] = len(rows)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", required=True, help="folder holding owner+name/repo git mirrors")
    counts = regenerate(Path(parser.parse_args().mirrors))
    print("\n".join(f"{suite}: {n} cases -> {OUT / (suite + '.jsonl')}" for suite, n in counts.items()))


if __name__ == "__main__":
    main()
