"""lm-eval interop: each benchmark as an lm-eval task YAML over the local JSONL, scored by our grader.

    python -m hacrl_exp.evaluation.lmeval --data-dir ../shared/data --out evaluation/lm_eval
    lm_eval --model hf --model_args pretrained=<model> --include_path evaluation/lm_eval --tasks hacrl_math500

Each task reads `dataset_path: json` with `data_files` pointing at the benchmark's local file, renders the same
prompt template (lm-eval's `apply_chat_template` applies a chat template), generates with the benchmark's defaults,
and scores with `process_results` from the generated `hacrl_lmeval.py`, which calls `make_process_results`: the
same extractor, answer clean-up and grader (MathGrader in worker processes) as `python -m hacrl_exp.evaluate`.
Metrics: `exact_match` = mean 0/1 reward over the task's `repeats` (= the benchmark's samples), and `best` (any right)
when it samples more than once. Needs `pip install -e .[lmeval]` (lm-eval 0.4.13,
never its [math] extra, which needs antlr 4.11 and breaks hydra-core).
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.evaluation.data import clean_answer
from hacrl_exp.evaluation.extract import ANSWER_EXTRACTORS
from hacrl_exp.evaluation.spec import BenchmarkSpec, known_benchmarks, load_benchmark

TASK_PREFIX = "hacrl_"
MODULE = "hacrl_lmeval"
_SCORER = None


def _scorer():
    """One Scorer per process, shared by every task (its MathGrader workers start on first use)."""
    global _SCORER
    if _SCORER is None:
        from hacrl_exp.evaluation.grading import Scorer

        _SCORER = Scorer(workers=1)
        atexit.register(_SCORER.close)
    return _SCORER


def make_process_results(name: str) -> Callable[[dict, list[str]], dict[str, float]]:
    """lm-eval `process_results(doc, results)` for benchmark `name`: {'exact_match': mean reward of the responses
    (avg@n over lm-eval `repeats`), 'best': 1 if any response is right (best@n; only when repeats > 1)}."""
    spec = load_benchmark(name)
    extract = ANSWER_EXTRACTORS[spec.answer_extractor]
    answer_field = spec.fields["answer"]

    def process_results(doc: dict, results: list[str]) -> dict[str, float]:
        gold = clean_answer(str(doc[answer_field]).strip(), spec.answer_cleanup)
        rewards = [g.reward for g in _scorer().grade(spec.grader, [extract(r) for r in results], [gold] * len(results))]
        out = {"exact_match": sum(rewards) / len(rewards)}
        if len(rewards) > 1:
            out["best"] = max(rewards)
        return out

    process_results.__name__ = f"process_{name}"
    return process_results


def task_config(spec: BenchmarkSpec, data_file: str) -> dict:
    """The lm-eval task mapping of one benchmark (process_results is added as a `!function` line on export)."""
    gen = spec.generation
    kwargs = {"until": [], "do_sample": gen.temperature > 0, "max_gen_toks": gen.max_new_tokens}
    if gen.temperature > 0:
        kwargs.update(temperature=gen.temperature, top_p=gen.top_p)
    return {
        "task": f"{TASK_PREFIX}{spec.name}",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": data_file}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": spec.template_text.replace("{problem}", "{{" + spec.fields["problem"] + "}}"),
        "doc_to_target": "{{" + spec.fields["answer"] + "}}",
        "generation_kwargs": kwargs,
        "repeats": gen.samples,
        "metric_list": [
            {"metric": m, "aggregation": "mean", "higher_is_better": True}
            for m in (["exact_match", "best"] if gen.samples > 1 else ["exact_match"])
        ],
        "metadata": {"version": spec.version, "source": str(spec.path.name)},
    }


def export(out_dir: Path, data_dir: str, names: list[str] | None = None, relative: bool = False) -> list[Path]:
    """Write one task YAML per benchmark with a local file, plus the `hacrl_lmeval.py` they import, into out_dir.

    data_files are absolute paths, or paths relative to the working directory lm-eval runs in when `relative`.
    """
    names = names or [n for n in known_benchmarks() if load_benchmark(n).local_file]
    out_dir.mkdir(parents=True, exist_ok=True)
    written, functions = [], []
    for name in names:
        spec = load_benchmark(name)
        if not spec.local_file:
            raise ConfigError(f"benchmark {name} has no local file; lm-eval tasks read local JSONL only")
        data_file = os.path.join(data_dir, spec.local_file)
        if not relative:
            data_file = str(Path(data_file).resolve())
        text = yaml.safe_dump(task_config(spec, data_file), sort_keys=False, allow_unicode=True, width=120)
        text += f"process_results: !function {MODULE}.process_{name}\n"
        header = f"# lm-eval task for {name} (evaluation/{spec.path.name}), written by python -m {__package__}.lmeval\n"
        path = out_dir / f"{TASK_PREFIX}{name}.yaml"
        path.write_text(header + text)
        written.append(path)
        functions.append(f'process_{name} = make_process_results("{name}")')
    module = [
        '"""process_results functions of the hacrl_* lm-eval tasks (written by hacrl_exp.evaluation.lmeval)."""',
        "",
        "from hacrl_exp.evaluation.lmeval import make_process_results",
        "",
        *functions,
        "",
    ]
    (out_dir / f"{MODULE}.py").write_text("\n".join(module))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("HACRL_DATA_DIR"), help="folder of the JSONL files")
    parser.add_argument("--out", default="evaluation/lm_eval", help="folder for the task YAMLs")
    parser.add_argument("--benchmarks", nargs="*", default=None)
    parser.add_argument("--relative", action="store_true", help="keep data_files relative (to lm-eval's cwd)")
    args = parser.parse_args(argv)
    with exit_on_bad_input(ConfigError):
        if not args.data_dir:
            raise ConfigError("--data-dir is required (or set HACRL_DATA_DIR): the folder of the benchmark JSONL files")
        for path in export(Path(args.out), args.data_dir, args.benchmarks, args.relative):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
