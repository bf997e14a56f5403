"""MATH-style tasks: problems with a final answer, the paper's prompt suffix, and the one grader (`hacrl_exp.rewards`).

Data comes from local JSONL files (one object per line with `problem`, `answer`, and optionally `id`, `solution`,
`subject`, `level`, ...; see shared/data/README.md) or, when no path is given, from a Hugging Face dataset.

Where data files live: `task.data_dir`, else `HACRL_DATA_DIR`, names the folder holding the JSONL files (e.g.
`math_train.jsonl`, `math500.jsonl`): the one rule of `hacrl_exp.tasks.problem_data`, which the benchmarks follow too.
A relative path or bare name is looked up in the working directory first, then in that folder (`resolve_data_path`);
paths may also spell the variable, as in `${HACRL_DATA_DIR}/math_train.jsonl`. Rows become Problems through the same
loader as the benchmarks' (`problem_data.problems_from_records`).
"""

from __future__ import annotations

import logging
import os
import string
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from hacrl_exp.rewards import REWARDS, Grader, resolve_compare, resolve_forms
from hacrl_exp.rewards.boxed import last_boxed
from hacrl_exp.tasks.base import Grade, Problem
from hacrl_exp.tasks.problem_data import DATA_DIR_ENV, problems_from_records, resolve_data_path
from hacrl_exp.tasks.rows import BadRows, DataError, jsonl_records

__all__ = ["DataError", "MathTask", "gold_answer"]

log = logging.getLogger(__name__)

PROMPT_SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."
"""The paper's instruction after each problem (spec §4); evaluation/_math.yaml's template is built from it."""
HF_TRAIN = "DigitalLearningGmbH/MATH-lighteval"  # the paper's 7.5k MATH train split (spec §4)
HF_EVAL = "HuggingFaceH4/MATH-500"  # validation during training (spec §4)
EXTRACTOR, COMPARE = "boxed", "math"
"""How MathTask grades by default (task.reward=math_verify); the math benchmark YAMLs name the same pair (a test holds
them equal). task.reward=verl grades with compare='verl' instead (the paper's reward, docs/algorithm.md §3.3)."""
_SKIP_HINT = "Fix or delete that line, or set task.bad_rows=skip to skip and count bad rows."
_CORE = ("id", "problem", "answer", "solution")
"""Row fields of a MATH file, each named as the Problem part it fills (the category's field is `category_field`)."""
_EXTRA_STREAM = 606  # dynamic sampling's draws: rng([seed, 606, step, round]), apart from the epochs' rng([seed, e])


def question_text(problem: Problem) -> str:
    """The problem as its dataset states it (without the prompt's instruction): what the grader reads for the forms a
    question asks for. Tasks and benchmarks keep it in `meta["problem_text"]`."""
    return problem.meta.get("problem_text", problem.prompt)


def _describe(src: tuple[str, str | Path, str]) -> str:
    kind, where, split = src
    return (
        str(where) if kind == "jsonl" else f"huggingface dataset {where} split {split}"
    )  # no scheme: MLflow reads one


def gold_answer(problem: Problem, compare: str) -> str:
    """The gold answer `compare` expects: as the data file writes it (`meta["answer_raw"]`) for 'verl', which
    normalises both sides itself as verl does; else the canonical `Problem.answer`."""
    return problem.meta.get("answer_raw", problem.answer) if resolve_compare(compare) == "verl" else problem.answer


def _hf_records(dataset_id: str, split: str) -> Iterator[tuple[int, dict | DataError]]:
    """(1-based row, row) of a Hugging Face dataset split, with MATH-lighteval's `type` as `subject` and the
    `answer` taken from the solution's last box when the dataset has no answer column."""
    try:
        import datasets
    except ImportError as e:
        raise ImportError(
            f"Loading {dataset_id!r} from the Hugging Face hub needs the `datasets` package: pip install datasets. "
            f"Or pass a local JSONL file (train_path=/eval_path=, e.g. ${DATA_DIR_ENV}/math_train.jsonl)."
        ) from e
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as e:
        raise DataError(
            f"Could not load Hugging Face dataset {dataset_id!r} split {split!r} ({type(e).__name__}: {e}). "
            f"Offline? Pass a local JSONL file instead (train_path=/eval_path=, see {DATA_DIR_ENV}), "
            f"or download it once into the HF cache and set HF_DATASETS_OFFLINE=1."
        ) from e
    for i, row in enumerate(ds, 1):
        row = dict(row)
        row.setdefault("id", row.get("unique_id") or f"{dataset_id}/{split}/{i - 1}")
        if "subject" not in row and "type" in row:
            row["subject"] = row["type"]
        if "answer" not in row and isinstance(row.get("solution"), str):
            row["answer"] = last_boxed(row["solution"])
        yield i, row


class MathTask:
    """MATH-style problems (implements `hacrl_exp.tasks.base.Task`); prompt = problem + PROMPT_SUFFIX."""

    def __init__(
        self,
        train_path: str | os.PathLike | None = None,
        eval_path: str | os.PathLike | None = None,
        *,
        name: str = "math",
        seed: int = 0,
        eval_limit: int | None = None,
        category_field: str = "subject",
        bad_rows: str = "error",
        data_dir: str | os.PathLike | None = None,
        train_dataset: str = HF_TRAIN,
        train_split: str = "train",
        eval_dataset: str = HF_EVAL,
        eval_split: str = "test",
        grader_timeout_s: float = 5.0,
        grader_workers: int = 1,
        grader_max_chars: int = 20000,
        grader: Grader | None = None,
        reward: str = "math_verify",
        grader_forms: str = "requested",
    ):
        """train_path/eval_path: local JSONL (see `resolve_data_path`); when None, the HF `*_dataset`/`*_split` is
        loaded. seed: orders the training stream. eval_limit: keep the first rows of the eval set. category_field: row
        key giving `Problem.category` ('all' when absent). bad_rows: 'error' raises DataError at the first bad row,
        'skip' skips and counts them (`hacrl_exp.tasks.rows`). grader: a shared Grader; otherwise one is built
        from the `grader_*` settings and owned here. reward: 'math_verify' (the one grader's `math` rule) or 'verl' (the
        paper's reward: verl's string-normalised match against the answer as written). grader_forms: 'requested' (an
        answer that ignores a form its question asks for is wrong) or 'value' (the value alone decides;
        `hacrl_exp.rewards.FORMS`), for reward='math_verify'. Data is read on first use."""
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"MathTask seed={seed!r} must be an integer >= 0.")
        if eval_limit is not None and eval_limit < 1:
            raise ValueError(f"MathTask eval_limit={eval_limit!r} must be >= 1, or None for the whole eval set.")
        if reward not in REWARDS:
            raise ValueError(f"MathTask reward={reward!r} is unknown; use one of {list(REWARDS)}.")
        if resolve_forms(grader_forms) != "requested" and reward == "verl":
            raise ValueError(f"MathTask grader_forms={grader_forms!r} needs reward='math_verify'; verl reads no form.")
        self.name = name
        self.seed = seed
        self.eval_limit = eval_limit
        self.category_field = category_field
        self.compare = resolve_compare(reward)
        """The grader's comparison rule for rewards and in-training evaluation: 'math' or 'verl' (task.reward)."""
        self.forms = grader_forms
        """The grading policy of rewards and in-training evaluation (task.grader_forms): 'requested' or 'value'."""
        self.bad_rows = BadRows(bad_rows, hint=_SKIP_HINT)
        """The bad-row policy; with bad_rows='skip' it counts skipped rows by reason as the data loads."""
        self._train_src = self._source(train_path, data_dir, train_dataset, train_split)
        self._eval_src = self._source(eval_path, data_dir, eval_dataset, eval_split)
        self._owns_grader = grader is None
        self.grader = grader or Grader(grader_timeout_s, grader_workers, grader_max_chars)
        self._perms: dict[int, np.ndarray] = {}

    @property
    def train_source(self) -> str:
        """Where the training problems come from: the JSONL path, or `huggingface dataset <name> split <split>`."""
        return _describe(self._train_src)

    @property
    def eval_source(self) -> str:
        """Where the held-out problems come from: the JSONL path, or `huggingface dataset <name> split <split>`."""
        return _describe(self._eval_src)

    @staticmethod
    def _source(path, data_dir, dataset: str, split: str) -> tuple[str, str | Path, str]:
        if path is not None:
            return ("jsonl", resolve_data_path(path, data_dir), "")
        return ("hf", dataset, split)

    def _load(self, src: tuple[str, str | Path, str]) -> list[Problem]:
        kind, where, split = src
        if kind == "jsonl":
            records, label, name = jsonl_records(where), f"{where}:{{}}", Path(where).name
        else:
            records, label, name = _hf_records(where, split), f"{where}[{split}] row {{}}", str(where)
        fields = {**{part: part for part in _CORE}, "category": self.category_field}
        return problems_from_records(
            records, fields, label, lambda text: text + PROMPT_SUFFIX, lambda line: f"{name}:{line}", self.bad_rows
        )

    @cached_property
    def train_set(self) -> list[Problem]:
        """All training problems, in file order (read on first use)."""
        return self._load(self._train_src)

    @cached_property
    def eval_set(self) -> list[Problem]:
        """The held-out problems: the first `eval_limit` rows of the eval data (read on first use)."""
        return self._load(self._eval_src)[: self.eval_limit]

    @property
    def categories(self) -> list[str]:
        """Sorted categories of the train and eval problems."""
        return sorted({p.category for p in self.train_set} | {p.category for p in self.eval_set})

    def _perm(self, epoch: int) -> np.ndarray:
        if epoch not in self._perms:
            if len(self._perms) >= 4:
                self._perms.pop(next(iter(self._perms)))
            # A fixed function of (seed, epoch): numpy's PCG64 stream is stable across platforms and versions.
            self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(len(self.train_set))
        return self._perms[epoch]

    def train_problems(self, step: int, n: int) -> list[Problem]:
        """Problems (step−1)·n .. step·n−1 of an endless stream (training steps count from 1): epoch e is the train
        set in a (seed, e)-seeded random order, so every problem is drawn once per epoch, and the batch is a pure
        function of (seed, step, n): a resumed run sees the same prompts."""
        if step < 1 or n < 1:
            raise ValueError(f"train_problems needs step >= 1 (steps count from 1) and n >= 1; got step={step}, n={n}.")
        size = len(self.train_set)
        out = []
        for g in range((step - 1) * n, step * n):
            epoch, pos = divmod(g, size)
            out.append(self.train_set[int(self._perm(epoch)[pos])])
        return out

    def extra_problems(self, step: int, round: int, n: int) -> list[Problem]:
        """n training problems for dynamic sampling's extra round `round` of step `step`, uniform over the train set
        (distinct while n <= its size): a pure function of (seed, step, round, n), drawn apart from the epoch stream
        (train_problems), which does not move."""
        if step < 0 or round < 1 or n < 0:
            raise ValueError(f"extra_problems needs step >= 0, round >= 1 and n >= 0; got {step}, {round}, {n}.")
        size = len(self.train_set)
        rng = np.random.default_rng([self.seed, _EXTRA_STREAM, step, round])
        return [self.train_set[int(i)] for i in rng.choice(size, n, replace=n > size)]

    alphabet = "".join(c for c in string.printable if c not in "<>\r\x0b\x0c")
    """Characters for tiny agents' locally built tokenizers; anything else, '<' and '>' included, is <unk>."""

    def supervised_examples(self, n: int, seed: int = 0) -> list[Problem]:
        """n training problems that carry a worked solution, in a seeded order (warm start of tiny agents)."""
        with_solution = [p for p in self.train_set if p.solution]
        if not with_solution:
            raise DataError("the training data has no `solution` fields; set the agents' warm_start.steps=0")
        order = np.random.default_rng([seed, 7]).permutation(len(with_solution))
        return [with_solution[int(order[i % len(order)])] for i in range(n)]

    def sample_texts(self, n: int, seed: int = 0) -> list[str]:
        """Prompt + solution texts, for training a BPE tokenizer."""
        return [p.prompt + (p.solution or p.answer) for p in self.supervised_examples(n, seed)]

    def validation_problems(self, per_category: int) -> list[Problem]:
        """The validation split of a stopping rule: the first per_category training problems of each category in a
        seeded order ([seed, 11]); training problems, so never scored (the eval set is a separate file)."""
        order = np.random.default_rng([self.seed, 11]).permutation(len(self.train_set))
        taken: dict[str, int] = {}
        out = []
        for i in order.tolist():
            problem = self.train_set[i]
            if taken.get(problem.category, 0) < per_category:
                taken[problem.category] = taken.get(problem.category, 0) + 1
                out.append(problem)
        return out

    def eval_problems(self) -> list[Problem]:
        """The fixed held-out set (first `eval_limit` rows of the eval data, or all)."""
        return list(self.eval_set)

    def grade(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Grade]:
        """Reward of each response's last `\\boxed{}` against its problem's answer, with the forms its prompt asks for:
        `Grader.grade` with the same extractor, comparison and question as the math benchmarks (evaluation/_math.yaml
        via `hacrl_exp.evaluation.runner.grade_responses`), so a reward equals the evaluation verdict, under the
        task's policy (`forms`). With reward='verl' the comparison is verl's, against the answer as written
        (`gold_answer`)."""
        if len(responses) != len(problems):
            raise ValueError(f"grade got {len(responses)} responses, {len(problems)} problems; pass one per response.")
        golds = [gold_answer(p, self.compare) for p in problems]
        questions = [question_text(p) for p in problems]
        return self.grader.grade(
            responses, golds, extractor=EXTRACTOR, compare=self.compare, questions=questions, forms=self.forms
        )

    def close(self) -> None:
        """Stop the grader's worker processes if this task created the grader."""
        if self._owns_grader:
            self.grader.close()

    def __enter__(self) -> MathTask:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
