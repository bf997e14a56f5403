"""lm-eval interop: task YAMLs over the local JSONL, scored by our grader, run through the real `lm_eval` command."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hacrl_exp.evaluation.lmeval import export, main, make_process_results, model_gen_budget


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def test_export_writes_tasks_and_module(tmp_path):
    written = export(tmp_path, "/data", ["math500", "aime2025", "gsm8k"])
    assert [p.name for p in written] == ["hacrl_math500.yaml", "hacrl_aime2025.yaml", "hacrl_gsm8k.yaml"]
    task = yaml.load((tmp_path / "hacrl_math500.yaml").read_text(), Loader=_Loader)
    assert task["dataset_path"] == "json" and task["dataset_kwargs"]["data_files"]["test"] == "/data/math500.jsonl"
    assert task["doc_to_text"] == "{{problem}} Let's think step by step and output the final answer within \\boxed{}."
    assert task["process_results"] == "!function hacrl_lmeval.process_math500"
    aime = yaml.load((tmp_path / "hacrl_aime2025.yaml").read_text(), Loader=_Loader)
    assert aime["repeats"] == 30 and [m["metric"] for m in aime["metric_list"]] == ["exact_match", "best"]
    assert 'process_gsm8k = make_process_results("gsm8k")' in (tmp_path / "hacrl_lmeval.py").read_text()


def test_process_results_uses_our_grader():
    gsm8k = make_process_results("gsm8k")
    doc = {"problem": "How many dollars?", "answer": "1080"}
    assert gsm8k(doc, ["... so \\boxed{\\$1,080}."]) == {"exact_match": 1.0}
    assert gsm8k(doc, ["\\boxed{1000}"]) == {"exact_match": 0.0}
    olympiad = make_process_results("olympiadbench")
    doc = {"problem": "Determine all values of $k$.", "answer": "8$,$4"}
    assert olympiad(doc, ["\\boxed{4, 8}", "no box"]) == {"exact_match": 0.5, "best": 1.0}
    math500 = make_process_results("math500")  # the question's requested form counts, as in training
    doc = {"problem": "Express your answer as a common fraction.", "answer": "\\frac{3}{2}"}
    assert math500(doc, ["\\boxed{1.5}", "\\boxed{\\dfrac32}"]) == {"exact_match": 0.5, "best": 1.0}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny GPT-2 with 128 positions, saved with save_pretrained: what `lm_eval --model hf` loads."""
    from hacrl_exp.agents.tiny import build_tiny_model, build_tokenizer

    path = tmp_path_factory.mktemp("tiny_model")
    alphabet = "".join(c for c in string.printable if c not in "<>\x0b\x0c")
    tokenizer = build_tokenizer("char", alphabet)
    build_tiny_model("gpt2", tokenizer, hidden_size=16, num_layers=1, num_heads=2, max_positions=128).save_pretrained(
        path
    )
    tokenizer.save_pretrained(path)
    return path


def test_max_gen_toks_is_capped(tiny_model, tmp_path, capsys):
    assert model_gen_budget(tiny_model) == 64  # half of 128 positions, as evaluate's token_budget cuts it
    assert (
        main(
            [
                "--data-dir",
                "/data",
                "--out",
                str(tmp_path),
                "--benchmarks",
                "math500",
                "aime2025",
                "--model",
                str(tiny_model),
                "--max-gen-toks",
                "100",
            ]
        )
        == 0
    )
    for name in ("math500", "aime2025"):
        task = yaml.load((tmp_path / f"hacrl_{name}.yaml").read_text(), Loader=_Loader)
        assert task["generation_kwargs"]["max_gen_toks"] == 64
    export(tmp_path, "/data", ["gsm8k"], max_gen_toks=100)
    gsm8k = yaml.load((tmp_path / "hacrl_gsm8k.yaml").read_text(), Loader=_Loader)
    assert gsm8k["generation_kwargs"]["max_gen_toks"] == 100
    export(tmp_path, "/data", ["gsm8k"])
    gsm8k = yaml.load((tmp_path / "hacrl_gsm8k.yaml").read_text(), Loader=_Loader)
    assert gsm8k["generation_kwargs"]["max_gen_toks"] == 8192  # no cap: the benchmark's own budget
    capsys.readouterr()

    for args, needle in [
        (["--max-gen-toks", "0"], "--max-gen-toks=0 is out of range; allowed [1, "),
        (["--model", str(tmp_path / "nope")], "config.json"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(["--data-dir", "/data", "--out", str(tmp_path / "bad"), *args])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_export_runs_in_the_real_lm_eval_command(tiny_model, tmp_path):
    """Export with --model, then the `lm_eval` command on a 128-position model; uncapped, lm-eval asserts that
    8192 new tokens do not fit, and the whole run fails."""
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install -e .[lmeval])")
    lm_eval = Path(sys.executable).with_name("lm_eval")
    if not lm_eval.is_file():
        pytest.skip(f"the lm_eval command is not at {lm_eval}")
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        {"id": f"t{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i), "subject": "Algebra"} for i in range(3)
    ]
    (data / "math500.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks, results = tmp_path / "tasks", tmp_path / "results"
    # lm-eval caches the JSON dataset; keep that cache (and anything else under HF_HOME) in tmp
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets"),
    }
    export_cmd = [
        sys.executable,
        "-m",
        "hacrl_exp.evaluation.lmeval",
        "--data-dir",
        str(data),
        "--out",
        str(tasks),
        "--benchmarks",
        "math500",
        "--model",
        str(tiny_model),
    ]
    subprocess.run(export_cmd, check=True, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    proc = subprocess.run(
        [
            str(lm_eval),
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model},dtype=float32",
            "--include_path",
            str(tasks),
            "--tasks",
            "hacrl_math500",
            "--limit",
            "2",
            "--device",
            "cpu",
            "--batch_size",
            "2",
            "--output_path",
            str(results),
            "--log_samples",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'max_gen_toks': 64" in proc.stderr and "hacrl_math500" in proc.stdout
    (result_file,) = results.rglob("results_*.json")
    result = json.loads(result_file.read_text())["results"]["hacrl_math500"]
    assert 0.0 <= result["exact_match,none"] <= 1.0
    (samples_file,) = results.rglob("samples_hacrl_math500_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 2
    process = make_process_results("math500")
    for sample in samples:  # lm-eval's per-document score is our grader's verdict on the logged response
        assert sample["exact_match"] == process(sample["doc"], sample["resps"][0])["exact_match"]
    assert result["exact_match,none"] == sum(s["exact_match"] for s in samples) / 2
