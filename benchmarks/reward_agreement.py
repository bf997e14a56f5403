"""How often the two MATH rewards (`task.reward`) disagree: math_verify (our grader) against verl (the paper's).

    python -m benchmarks.reward_agreement [--data-dir ../shared/data] [--gold math500 math_train]
    python -m benchmarks.reward_agreement --verl-file verl/utils/reward_score/math_reward.py --write-reference

Two measurements, both through the training reward's own code path:
  gold solutions   each reference solution of a MATH file graded against its own answer by `MathTask.grade` with
                   task.reward=math_verify and with task.reward=verl (MATH-500 by default; `--gold math_train` adds the
                   7,500 training problems the reward sees during training). A gold solution is correct by
                   construction, so every 0 is a false negative of that reward.
  labelled pairs   tests/rewards/data/grader_adversarial.jsonl and grader_heldout.jsonl (model-like responses with a
                   careful human's label): math_verify as the evaluation harness grades them (canonical gold and the
                   question's requested forms), verl against the row's `gold` as written. Agreement with the labels,
                   false positives (label 0, reward 1) and false negatives (label 1, reward 0).
Printed: one Markdown table per measurement, then the pairs where the rewards disagree (`--show N` of each kind); the
JSON goes to benchmarks/results/reward_agreement.json.

`--verl-file` loads verl's own `math_reward.py` (or `math.py` of verl <= 0.4; the file alone, e.g. unzipped from
`pip download verl --no-deps`: importing verl needs torch and ray) and checks that our port gives its score on every
pair measured; `--write-reference` then stores verl's scores in tests/rewards/data/verl_reference.json, which
tests/rewards/test_verl_reward.py checks the port against.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import finish, print_table
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.repo import REPO_ROOT

ROOT = REPO_ROOT
SETS = ROOT / "tests" / "rewards" / "data"
LABELLED = ("grader_adversarial", "grader_heldout")
REFERENCE = SETS / "verl_reference.json"
GOLD_FILES = {"math500": "math500.jsonl", "math_train": "math_train.jsonl", "math_test": "math_test.jsonl"}
BENCHMARKS = ("math500", "gsm8k", "aime2025", "amc23", "minerva", "olympiadbench")
VECTORS = [
    # (response, gold): verl's quirks, each scored by verl's own function when the reference is written
    ("so \\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
    ("so \\boxed{\\dfrac34}", "\\frac{3}{4}"),
    ("so \\boxed{0.75}", "\\frac{3}{4}"),
    ("so \\boxed{0.5}", "\\frac12"),
    ("so \\boxed{3/4}", "\\frac{3}{4}"),
    ("so \\boxed{.5}", "0.5"),
    ("so \\boxed{10,080}", "10080"),
    ("so \\boxed{10080}", "10{,}080"),
    ("so \\boxed{x = 3}", "3"),
    ("so \\boxed{y_1 = 3}", "3"),
    ("so \\boxed{k=-5}", "-5"),
    ("so \\boxed{2, 1}", "1,2"),
    ("so \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "(3,\\frac{\\pi}{2})"),
    ("so \\boxed{90^\\circ}", "90"),
    ("so \\boxed{20\\%}", "20"),
    ("so \\boxed{\\$32}", "32"),
    ("so \\boxed{5 \\text{ cm}}", "5"),
    ("so \\boxed{5 \\text{ cm} \\text{ long}}", "5"),
    ("so \\boxed{5\\text{cm}}", "5"),
    ("so \\boxed{2\\sqrt3}", "2\\sqrt{3}"),
    ("so \\boxed{\\sqrt}", "\\sqrt{3}"),
    ("so \\boxed{\\frac1}", "\\frac{1}{}"),
    ("so \\boxed{\\tfrac{1}{2}}", "\\frac{1}{2}"),
    ("so \\boxed{\\text{(C)}}", "C"),
    ("so \\boxed{\\textbf{(C)}}", "\\text{(C)}"),
    ("first \\boxed{3}, finally \\boxed{4}", "4"),
    ("first \\boxed{4}, finally \\boxed{3}", "4"),
    ("so $\\boxed 9$ done", "9"),
    ("\\boxed 5 and later \\boxed{6}", "6"),
    ("\\boxed 5 and later \\boxed{6}", "5 and later \\boxed{6}"),
    ("the answer is \\fbox{82}", "82"),
    ("so \\boxed{3} then \\boxed{4", "3"),
    ("so \\boxed{}", ""),
    ("so \\boxed{}", "0"),
    ("no box at all: 7", "7"),
    ("so \\boxed\n{7}", "7"),
    ("so \\boxed{\\left\\{1,2\\right\\}}", "\\{1,2\\}"),
    ("so \\boxed{1\\\\%}", "1"),
    ("so \\boxed{1\\\\\\%}", "1"),
    ("so \\boxed{a\nb}", "ab"),
    ("so \\boxed{4.5e33}", "4.5\\times10^{33}"),
]


def load_verl(path: str):
    """verl's reward module from its file alone (no `import verl`, which needs torch and ray)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--verl-file={path!r} does not exist; give verl/utils/reward_score/math_reward.py")
    spec = importlib.util.spec_from_file_location("verl_math_reference", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gold_solutions(names: list[str], data_dir: Path, grader, limit: int | None = None) -> dict[str, dict]:
    """Per MATH file: ids, both rewards of each gold solution against its own answer (MathTask.grade)."""
    from hacrl_exp.tasks.math import MathTask

    out = {}
    for name in names:
        path = data_dir / GOLD_FILES[name]
        rewards, problems = {}, []
        for reward in ("math_verify", "verl"):
            task = MathTask(eval_path=path, grader=grader, reward=reward)
            problems = [p for p in task.eval_problems() if p.solution][:limit]
            rewards[reward] = [g.reward for g in task.grade([p.solution for p in problems], problems)]
        out[name] = {
            "ids": [p.id for p in problems],
            "solutions": [p.solution for p in problems],
            "golds": [p.meta["answer_raw"] for p in problems],
            **rewards,
        }
    return out


def labelled_pairs(data_dir: Path, grader, limit: int | None = None) -> dict[str, dict]:
    """Per labelled set: ids, labels and both rewards of each (response, gold) pair."""
    from hacrl_exp.evaluation.data import load_problems
    from hacrl_exp.evaluation.runner import grade_responses
    from hacrl_exp.evaluation.spec import load_benchmark

    specs = {b: load_benchmark(b) for b in BENCHMARKS}
    problems = {(b, p.id): p for b in BENCHMARKS for p in load_problems(specs[b], data_dir)}
    out = {}
    for name in LABELLED:
        rows = [json.loads(line) for line in (SETS / f"{name}.jsonl").read_text().splitlines() if line.strip()][:limit]
        math_verify = {}
        for b in BENCHMARKS:
            mine = [r for r in rows if r["benchmark"] == b]
            own = [problems[(b, r["problem_id"])] for r in mine]
            for r, g in zip(mine, grade_responses(grader, specs[b], [r["response"] for r in mine], own)):
                math_verify[r["id"]] = g.reward
        verl = grader.grade([r["response"] for r in rows], [r["gold"] for r in rows], compare="verl")
        out[name] = {
            "ids": [r["id"] for r in rows],
            "labels": [r["label"] for r in rows],
            "benchmarks": [r["benchmark"] for r in rows],
            "kinds": [r["kind"] for r in rows],
            "responses": [r["response"] for r in rows],
            "golds": [r["gold"] for r in rows],
            "math_verify": [math_verify[r["id"]] for r in rows],
            "verl": [g.reward for g in verl],
        }
    return out


def agreement(a: list[float], b: list[float]) -> dict[str, int]:
    """Counts of (math_verify, verl) verdict pairs."""
    c = Counter((int(x), int(y)) for x, y in zip(a, b))
    return {"both_1": c[1, 1], "math_verify_only": c[1, 0], "verl_only": c[0, 1], "both_0": c[0, 0]}


def against_labels(labels: list[int], rewards: list[float]) -> dict[str, float]:
    fp = sum(1 for y, r in zip(labels, rewards) if y == 0 and r == 1)
    fn = sum(1 for y, r in zip(labels, rewards) if y == 1 and r == 0)
    return {"accuracy": 1 - (fp + fn) / len(labels), "false_positives": fp, "false_negatives": fn}


def check_against_verl(verl, gold: dict, labelled: dict) -> dict[str, object]:
    """verl's own scores of every measured pair and of VECTORS; raises when our port differs on any."""
    from hacrl_exp.rewards import verl_math

    reference: dict[str, object] = {}
    mismatches = []
    for name, data in {**gold, **labelled}.items():
        texts = data["solutions"] if "solutions" in data else data["responses"]
        scores = [float(verl.compute_score(t, g)) for t, g in zip(texts, data["golds"])]
        mismatches += [(name, i) for i, s, ours in zip(data["ids"], scores, data["verl"]) if s != ours]
        reference[name] = dict(zip(data["ids"], scores))
    vectors = [[r, g, float(verl.compute_score(r, g))] for r, g in VECTORS]
    mismatches += [("vectors", r) for r, g, s in vectors if verl_math.compute_score(r, g) != s]
    if mismatches:
        raise SystemExit(f"our verl port differs from verl's own function on {len(mismatches)}: {mismatches[:10]}")
    return {**reference, "vectors": vectors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("HACRL_DATA_DIR") or str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--gold", nargs="*", default=["math500"], choices=list(GOLD_FILES))
    parser.add_argument("--show", type=int, default=8, help="disagreeing pairs listed per kind")
    parser.add_argument("--verl-file", default=None, help="verl's own math_reward.py: check the port against it")
    parser.add_argument("--write-reference", action="store_true", help=f"with --verl-file: write {REFERENCE.name}")
    parser.add_argument("--out", default="benchmarks/results/reward_agreement.json")
    parser.add_argument("--limit", type=int, default=None, help="the first N rows of each set (benchmarks.smoke)")
    args = parser.parse_args()
    started = time.perf_counter()
    data_dir = Path(args.data_dir)
    with exit_on_bad_input(ConfigError):
        if not (data_dir / "math500.jsonl").is_file():
            raise ConfigError(f"--data-dir={args.data_dir!r} has no math500.jsonl; point it at shared/data")
        if args.write_reference and not args.verl_file:
            raise ConfigError("--write-reference needs --verl-file (the scores come from verl's own function)")
        verl = load_verl(args.verl_file) if args.verl_file else None

    from hacrl_exp.rewards import Grader

    with Grader(timeout_s=5.0, workers=2) as grader:
        gold = gold_solutions(args.gold, data_dir, grader, args.limit)
        labelled = labelled_pairs(data_dir, grader, args.limit)

    rows = []
    for name, d in gold.items():
        a = agreement(d["math_verify"], d["verl"])
        n = len(d["ids"])
        rows.append([name, n, sum(d["math_verify"]) / n, sum(d["verl"]) / n, a["math_verify_only"], a["verl_only"]])
    print_table(
        ["gold solutions", "n", "math_verify accepts", "verl accepts", "only math_verify", "only verl"],
        rows,
        "Gold solutions graded against their own answer (every 0 is a false negative)",
    )
    rows = []
    for name, d in labelled.items():
        for subset in ("all", "math500"):  # the MATH-500 rows: the problems the training reward grades
            keep = [i for i, b in enumerate(d["benchmarks"]) if subset == "all" or b == subset]
            pick = {k: [d[k][i] for i in keep] for k in ("labels", "math_verify", "verl")}
            label = name if subset == "all" else f"{name} (math500 rows)"
            for reward in ("math_verify", "verl"):
                s = against_labels(pick["labels"], pick[reward])
                rows.append([label, reward, len(keep), s["accuracy"], s["false_positives"], s["false_negatives"]])
            a = agreement(pick["math_verify"], pick["verl"])
            rows.append([label, "disagree", len(keep), "", a["math_verify_only"], a["verl_only"]])
    print_table(
        ["labelled set", "reward", "n", "agrees with label", "false pos.", "false neg."],
        rows,
        "Labelled model-like pairs ('disagree' rows: only math_verify accepts | only verl accepts)",
    )
    kinds = {}
    for name, d in labelled.items():
        for reward in ("math_verify", "verl"):
            fn = Counter(k for k, y, r in zip(d["kinds"], d["labels"], d[reward]) if y == 1 and r == 0)
            fp = Counter(k for k, y, r in zip(d["kinds"], d["labels"], d[reward]) if y == 0 and r == 1)
            kinds[f"{name}/{reward}"] = {"false_negatives": dict(fn), "false_positives": dict(fp)}
    print_table(
        ["set/reward", "false negatives by kind", "false positives by kind"],
        [
            [
                k,
                " ".join(f"{a}={b}" for a, b in sorted(v["false_negatives"].items())) or "-",
                " ".join(f"{a}={b}" for a, b in sorted(v["false_positives"].items())) or "-",
            ]
            for k, v in kinds.items()
        ],
        "Errors by kind of pair",
    )
    print("\nDisagreements (first of each):")
    for name, d in {**gold, **labelled}.items():
        texts = d.get("solutions") or d["responses"]
        for want, label in (((1, 0), "only math_verify accepts"), ((0, 1), "only verl accepts")):
            hits = [i for i, (x, y) in enumerate(zip(d["math_verify"], d["verl"])) if (int(x), int(y)) == want]
            for i in hits[: args.show]:
                tail = texts[i][-90:].replace("\n", " ")
                print(f"- {name} {d['ids'][i]} ({label}): gold {d['golds'][i]!r}, response ends {tail!r}")
    payload = {
        "data_dir": str(data_dir),
        "gold": {n: {"ids": d["ids"], **{r: d[r] for r in ("math_verify", "verl")}} for n, d in gold.items()},
        "labelled": {n: {k: d[k] for k in ("ids", "labels", "math_verify", "verl")} for n, d in labelled.items()},
        "kinds": kinds,
    }
    if verl is not None:
        with contextlib.redirect_stdout(io.StringIO()):  # verl prints every exception its compute_score swallows
            reference = check_against_verl(verl, gold, labelled)
        print(f"\nour port gives verl's own score on all {sum(map(len, reference.values()))} pairs and vectors")
        if args.write_reference:
            source = Path(args.verl_file).read_bytes()
            REFERENCE.write_text(
                json.dumps(
                    {
                        "verl_file": Path(args.verl_file).name,
                        "verl_file_sha256": hashlib.sha256(source).hexdigest(),
                        **{k: v for k, v in reference.items()},
                    },
                    indent=0,
                    ensure_ascii=False,
                )
                + "\n"
            )
            print(f"wrote {REFERENCE}")
    finish("reward_agreement", started, args.out, payload)


if __name__ == "__main__":
    main()
