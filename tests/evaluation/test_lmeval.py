"""lm-eval interop: task YAMLs over the local JSONL, scored by our grader, run through lm-eval's Python API."""

from __future__ import annotations

import pytest
import yaml

from hacrl_exp.evaluation.lmeval import export, make_process_results


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
    assert gsm8k({"answer": "1080"}, ["... so \\boxed{\\$1,080}."]) == {"exact_match": 1.0}
    assert gsm8k({"answer": "1080"}, ["\\boxed{1000}"]) == {"exact_match": 0.0}
    olympiad = make_process_results("olympiadbench")
    assert olympiad({"answer": "8$,$4"}, ["\\boxed{4, 8}", "no box"]) == {"exact_match": 0.5, "best": 1.0}


def test_one_task_through_lm_eval(tiny_run, data_dir, tmp_path):
    lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install -e .[lmeval])")
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    export(tmp_path, str(data_dir), ["math500"])
    path = tiny_run["run_dir"] / "checkpoints" / "step_000002" / "agents" / "gpt2_bpe"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), PreTrainedTokenizerFast.from_pretrained(path)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=2, max_length=128)
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["hacrl_math500"],
        task_manager=TaskManager(include_path=str(tmp_path)),
        limit=2,
        gen_kwargs="max_gen_toks=16",
        log_samples=True,
    )
    result = out["results"]["hacrl_math500"]
    assert result["exact_match,none"] == 0.0 and result["sample_len"] == 2
    assert len(out["samples"]["hacrl_math500"]) == 2
