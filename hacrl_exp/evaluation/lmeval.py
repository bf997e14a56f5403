"""lm-eval interop: each benchmark as an lm-eval task YAML over the local JSONL, scored by our grader.

    python -m hacrl_exp.evaluation.lmeval --data-dir ../shared/data --out evaluation/lm_eval
    lm_eval --model hf --model_args pretrained=<model> --include_path evaluation/lm_eval --tasks hacrl_math500
    # a short position limit: cap the benchmarks' budget (8192) at half the model's positions, or --max-gen-toks N
    python -m hacrl_exp.evaluation.lmeval --data-dir ../shared/data --out /tmp/tasks --model <model>

Each task reads `dataset_path: json` with `data_files` pointing at the benchmark's local file, renders the same
prompt template (lm-eval's `apply_chat_template` applies a chat template), generates with the benchmark's defaults,
and scores with `process_results` from the generated `hacrl_lmeval.py`, which calls `make_process_results`: the
same grading call (`hacrl_exp.evaluation.runner.grade_responses`, the one Grader) as `python -m hacrl_exp.evaluate`.
Metrics: `exact_match` = mean 0/1 reward over the task's `repeats` (= the benchmark's samples), and `best` (any right)
when it samples more than once. Needs `pip install -e .[lmeval]` (lm-eval 0.4.13,
never its [math] extra, which needs antlr 4.11 and breaks hydra-core).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from hacrl_exp.config.flags import check_number
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.evaluation.spec import BenchmarkSpec, known_benchmarks, load_benchmark
from hacrl_exp.rewards import normalize_gold
from hacrl_exp.tasks.base import Problem

TASK_PREFIX = "hacrl_"
MODULE = "hacrl_lmeval"
POSITION_KEYS = ("n_positions", "max_position_embeddings", "n_ctx")
"""config.json keys of a model's position limit, in the order lm-eval's resolve_max_length reads them."""
_GRADER = None


def _grader():
    """One Grader per process, shared by every task (its math-verify workers start on first use)."""
    global _GRADER
    if _GRADER is None:
        from hacrl_exp.rewards import Grader

        _GRADER = Grader(workers=1)
        atexit.register(_GRADER.close)
    return _GRADER


def make_process_results(name: str) -> Callable[[dict, list[str]], dict[str, float]]:
    """lm-eval `process_results(doc, results)` for benchmark `name`: {'exact_match': mean reward of the responses
    (avg@n over lm-eval `repeats`), 'best': 1 if any response is right (best@n; only when repeats > 1)}."""
    from hacrl_exp.evaluation.runner import grade_responses

    spec = load_benchmark(name)
    answer_field, problem_field = spec.fields["answer"], spec.fields["problem"]

    def process_results(doc: dict, results: list[str]) -> dict[str, float]:
        text = str(doc[problem_field])
        problem = Problem("doc", spec.render(text), normalize_gold(str(doc[answer_field])), meta={"problem_text": text})
        rewards = [g.reward for g in grade_responses(_grader(), spec, results, [problem] * len(results))]
        out = {"exact_match": sum(rewards) / len(rewards)}
        if len(rewards) > 1:
            out["best"] = max(rewards)
        return out

    process_results.__name__ = f"process_{name}"
    return process_results


def task_config(spec: BenchmarkSpec, data_file: str, max_gen_toks: int | None = None) -> dict:
    """The lm-eval task mapping of one benchmark (process_results is added as a `!function` line on export).

    `max_gen_toks` caps the benchmark's own budget (generation.max_new_tokens); None keeps it.
    """
    gen = spec.generation
    budget = gen.max_new_tokens if max_gen_toks is None else min(gen.max_new_tokens, max_gen_toks)
    kwargs = {"until": [], "do_sample": gen.temperature > 0, "max_gen_toks": budget}
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


def model_gen_budget(model_dir: str | Path) -> int:
    """New tokens that fit a save_pretrained model: half its position limit (config.json), the rule
    `hacrl_exp.evaluation.runner.token_budget` applies when the benchmark's budget does not fit."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--model={model_dir!r}: cannot read {path} ({exc}); give a save_pretrained folder") from None
    for source in (config.get("text_config") or {}, config):
        for key in POSITION_KEYS:
            if isinstance(source.get(key), int) and source[key] > 1:
                return source[key] // 2
    raise ConfigError(
        f"--model={model_dir!r}: {path} names no position limit ({', '.join(POSITION_KEYS)}); "
        "give --max-gen-toks N instead"
    )


def export(
    out_dir: Path,
    data_dir: str,
    names: list[str] | None = None,
    relative: bool = False,
    max_gen_toks: int | None = None,
) -> list[Path]:
    """Write one task YAML per benchmark with a local file, plus the `hacrl_lmeval.py` they import, into out_dir.

    data_files are absolute paths, or paths relative to the working directory lm-eval runs in when `relative`.
    `max_gen_toks` caps every task's generation budget; lm-eval's hf model stops with an assertion when the
    budget is not below the model's position limit (the benchmarks ask for 8192 new tokens).
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
        text = yaml.safe_dump(
            task_config(spec, data_file, max_gen_toks), sort_keys=False, allow_unicode=True, width=120
        )
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
    parser.add_argument(
        "--max-gen-toks", type=int, default=None, help="cap on every task's max_gen_toks (default: each benchmark's)"
    )
    parser.add_argument("--model", default=None, help="save_pretrained folder: cap max_gen_toks at half its positions")
    args = parser.parse_args(argv)
    with exit_on_bad_input(ConfigError):
        if not args.data_dir:
            raise ConfigError("--data-dir is required (or set HACRL_DATA_DIR): the folder of the benchmark JSONL files")
        check_number("--max-gen-toks", args.max_gen_toks, 1, 1 << 20)
        caps = [args.max_gen_toks, model_gen_budget(args.model) if args.model else None]
        cap = min((c for c in caps if c is not None), default=None)
        for path in export(Path(args.out), args.data_dir, args.benchmarks, args.relative, cap):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
