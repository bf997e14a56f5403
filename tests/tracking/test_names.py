"""Run names, tags and the params that apply (hacrl_exp.tracking.names): pure functions of the resolved config."""

import copy
import re

import pytest

from hacrl_exp.tracking import flatten
from hacrl_exp.tracking.names import (
    agent_run_name,
    applicable_params,
    config_name,
    method_name,
    model_name,
    run_name,
    run_tags,
)
from hacrl_exp.trainer.runfolder import config_params
from hacrl_exp.trainer.validate import preflight


@pytest.fixture(scope="module")
def default_params() -> dict:
    return config_params(preflight([]))


def test_parent_name_says_method_agents_and_seed():
    assert run_name(preflight([])) == "hacpo-opt_char+gpt2_bpe-s0"
    assert run_name(preflight(["seed=3", "agents=three_way"])) == "hacpo-opt_char+gpt2_bpe+llama_char-s3"
    assert run_name(preflight(["tracking.run_name=mine"])) == "mine"


def test_method_names_the_mechanisms_switched_off():
    assert method_name(preflight(["mechanisms.omega=false"])) == "hacpo-no_omega"
    both = preflight(["mechanisms.omega=false", "mechanisms.clip=false"])
    assert method_name(both) == "hacpo-no_omega-no_clip"  # in MECHANISMS order, whatever the override order
    # an algorithm that does not read the mechanisms is named alone, whatever they are set to
    assert method_name(preflight(["algorithm=gspo_x2", "mechanisms.omega=false"])) == "gspo_x2"


def test_tags_on_every_run():
    tags = run_tags(preflight(["seed=2"]))
    assert tags == {
        "method": "hacpo",
        "algorithm": "hacpo",
        "seed": "2",
        "data_seed": "2",  # the seed drew the training data (task.seed null)
        "heldout_seed": "0",  # and not the held-out problems
        "agents": "opt_char+gpt2_bpe",
        "task": "arithmetic",
        "grid": "none",
        "job": "hacpo-opt_char+gpt2_bpe-s2",
        "config": "hacpo-opt_char+gpt2_bpe",
    }
    assert run_tags(preflight([]), grid="my_sweep")["grid"] == "my_sweep"  # the Hydra preset / multirun name
    preset = run_tags(preflight(["experiment=paper_table1_tiny"]), grid="ignored")
    assert preset["grid"] == "paper_table1_tiny"  # tracking.tags.grid set by the preset wins
    assert run_tags(preflight(["+tracking.tags.team=rl"]))["team"] == "rl"


def test_pruning_keeps_values_and_does_not_mutate(default_params):
    before = copy.deepcopy(default_params)
    kept, full = flatten(applicable_params(default_params)), flatten(default_params)
    assert default_params == before
    assert set(kept) <= set(full) and all(full[k] == v for k, v in kept.items())  # a subset, values unchanged
    assert {"seed", "algorithm.name", "trainer.steps", "task.tiers", "rollout.backend", "executor.backend"} <= set(kept)


def test_pruning_drops_branches_that_do_not_apply(default_params):
    kept = flatten(applicable_params(default_params))
    assert not [k for k in kept if k.startswith("rollout.vllm.")]  # rollout=hf
    assert not {"task.hf_train", "task.train_file", "task.reward"} & set(kept)  # an arithmetic task
    assert [k for k in kept if k.startswith("executor.")] == ["executor.backend"]  # executor=local
    assert "algorithm.grpo_clip_low" not in kept and "algorithm.self_clip_low" in kept  # GSPO's clip, not GRPO's
    assert "agents.members.opt_char.lora.r" in kept and "agents.members.opt_char.lora.alpha" not in kept


def test_pruning_keeps_what_applies(default_params):
    params = copy.deepcopy(default_params)
    params["rollout"]["backend"] = "vllm"
    params["executor"] = {**params["executor"], "backend": "ray", "cpus_per_agent": 2}
    kept = flatten(applicable_params(params))
    assert "rollout.vllm.gpu_memory_utilization" in kept and kept["executor.cpus_per_agent"] == "2"
    math = flatten(applicable_params(config_params(preflight(["task=math"]))))
    assert "task.hf_train" in math and "task.tiers" not in math


def test_the_grading_policy_is_a_param_where_answer_forms_are_read(default_params):
    math = flatten(applicable_params(config_params(preflight(["task=math", "task.grader_forms=value"]))))
    assert math["task.grader_forms"] == "value" and math["task.reward"] == "math_verify"
    verl = flatten(applicable_params(config_params(preflight(["task=math", "task.reward=verl"]))))
    assert "task.grader_forms" not in verl  # verl's string match reads no answer form
    assert "task.grader_forms" not in flatten(applicable_params(default_params))  # arithmetic: exact match


@pytest.mark.parametrize("algorithm, clip", [("gspo_x2", "self_clip_low"), ("grpo", "grpo_clip_low")])
def test_algorithms_without_shared_rollouts_drop_sharing_settings(algorithm, clip):
    kept = flatten(applicable_params(config_params(preflight([f"algorithm={algorithm}"]))))
    assert not [k for k in kept if k.startswith("mechanisms.")]
    assert not {"algorithm.alpha", "algorithm.delta", "agents.members.opt_char.learns_from"} & set(kept)
    assert f"algorithm.{clip}" in kept and "algorithm.capability_window" in kept  # P̂ is logged for every method


def test_jobs_that_differ_in_a_setting_get_different_names():
    config = preflight([])
    twenty, thirty = run_name(config, ["trainer.steps=20"]), run_name(config, ["trainer.steps=30"])
    assert twenty == "hacpo-opt_char+gpt2_bpe-s0-trainer.steps=20"
    assert thirty == "hacpo-opt_char+gpt2_bpe-s0-trainer.steps=30"
    assert run_name(config, []) == run_name(config, None) == "hacpo-opt_char+gpt2_bpe-s0"
    # what the name states already, and where or how a job runs, do not lengthen it
    quiet = ["seed=0", "algorithm=hacpo", "+method=hacpo", "mechanisms.omega=true", "trainer.output_dir=/x",
             "trainer.progress=false", "tracking.uri=sqlite:///m.db", "trainer.threads=1"]  # fmt: skip
    assert run_name(config, quiet) == "hacpo-opt_char+gpt2_bpe-s0"
    assert run_name(config, ["task.tiers=[add2]", "trainer.steps=20"]) == run_name(
        config, ["trainer.steps=20", "task.tiers=[add2]"]
    )  # order does not matter
    long = ["agents.members.opt_char.lr=0.002", "trainer.steps=20"]
    assert re.fullmatch(r"hacpo-opt_char\+gpt2_bpe-s0-[0-9a-f]{6}", run_name(config, long))
    assert run_name(config, long) != run_name(config, ["agents.members.opt_char.lr=0.003", "trainer.steps=20"])
    assert run_name(preflight(["tracking.run_name=mine"]), ["trainer.steps=20"]) == "mine"


def test_config_tag_is_the_name_without_the_seed():
    one, two = preflight(["seed=1"]), preflight(["seed=2"])
    assert config_name(one, ["seed=1", "trainer.steps=20"]) == config_name(two, ["seed=2", "trainer.steps=20"])
    assert config_name(one, ["trainer.steps=20"]) == "hacpo-opt_char+gpt2_bpe-trainer.steps=20"
    tags = run_tags(one, overrides=["seed=1", "trainer.steps=20"], config_dirs=["/my confs"])
    assert tags["job"] == "hacpo-opt_char+gpt2_bpe-s1-trainer.steps=20"
    assert tags["config"] == "hacpo-opt_char+gpt2_bpe-trainer.steps=20"
    assert tags["overrides"] == "seed=1 trainer.steps=20"
    assert tags["command"] == "python -m hacrl_exp.run --config-dir '/my confs' seed=1 trainer.steps=20"
    assert "overrides" not in run_tags(one) and "command" not in run_tags(one)  # not a Hydra job: not recorded


def test_child_and_model_names():
    job = "gspo-opt_char+gpt2_bpe-s0-trainer.steps=20"
    assert agent_run_name(job, "opt_char") == "gspo-opt_char+gpt2_bpe-s0-trainer.steps=20/opt_char"
    assert model_name(job, "opt_char") == "gspo-opt_char+gpt2_bpe-s0-trainer_steps=20-opt_char"  # MLflow refuses '.'
    assert model_name("a/b:c%d'e\"f", "x") == "a_b_c_d_e_f-x"
