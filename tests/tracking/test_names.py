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
    rerun_name,
    run_name,
    run_tags,
    short_overrides,
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
        "setting": "opt_char+gpt2_bpe",
        "mlflow.runColor": "#d62728",  # hacpo's colour in every view (and the reports)
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
    assert twenty == "hacpo-opt_char+gpt2_bpe-s0-steps=20"
    assert thirty == "hacpo-opt_char+gpt2_bpe-s0-steps=30"
    assert run_name(config, []) == run_name(config, None) == "hacpo-opt_char+gpt2_bpe-s0"
    # what the name states already, and where or how a job runs, do not lengthen it
    quiet = ["seed=0", "algorithm=hacpo", "+method=hacpo", "mechanisms.omega=true", "trainer.output_dir=/x",
             "trainer.progress=false", "tracking.uri=sqlite\\:////m.db", "trainer.threads=1", "trainer.device=cpu",
             "agents.members.opt_char.device=cpu", "hydra/launcher=joblib", "executor=ray"]  # fmt: skip
    assert run_name(config, quiet) == "hacpo-opt_char+gpt2_bpe-s0"
    assert run_name(config, ["task.tiers=[add2]", "trainer.steps=20"]) == run_name(
        config, ["trainer.steps=20", "task.tiers=[add2]"]
    )  # order does not matter
    assert run_name(config, ["agents.members.opt_char.lr=0.002", "trainer.steps=20"]) != run_name(
        config, ["agents.members.opt_char.lr=0.003", "trainer.steps=20"]
    )
    assert run_name(preflight(["tracking.run_name=mine"]), ["trainer.steps=20"]) == "mine"


def test_three_ordinary_overrides_read_as_words():
    three = ["trainer.steps=3", "trainer.group_size=4", "trainer.prompts_per_step=8"]
    assert run_name(preflight([]), three) == "hacpo-opt_char+gpt2_bpe-s0-group_size=4,prompts_per_step=8,steps=3"
    # the last key component, with more of the key where two would read alike
    two = ["agents.members.opt_char.lr=0.002", "agents.members.gpt2_bpe.lr=0.003"]
    assert short_overrides(two) == ["gpt2_bpe.lr=0.003", "opt_char.lr=0.002"]


def test_a_long_list_keeps_64_characters_of_words_then_a_digest():
    many = [f"agents.members.opt_char.model.{k}=12345678" for k in ("hidden_size", "num_layers", "num_heads")]
    many += ["trainer.steps=20", "task.path=/data/x y"]  # not plain: counted in the digest only
    suffix = run_name(preflight([]), many).removeprefix("hacpo-opt_char+gpt2_bpe-s0-")
    words, digest = suffix.rsplit(",", 1)
    assert len(words) <= 64 and words.startswith("hidden_size=12345678") and re.fullmatch(r"[0-9a-f]{6}", digest)
    assert run_name(preflight([]), many[:-1] + ["task.path=/data/z"]) != run_name(preflight([]), many)


def test_a_rerun_gets_a_suffix():
    assert rerun_name("a", set()) == "a" and rerun_name("a", {"a"}) == "a-r2"
    assert rerun_name("a", {"a", "a-r2", "a-r3"}) == "a-r4"


def test_config_tag_is_the_name_without_the_seed_with_the_commit():
    one, two = preflight(["seed=1"]), preflight(["seed=2"])
    assert config_name(one, ["seed=1", "trainer.steps=20"]) == config_name(two, ["seed=2", "trainer.steps=20"])
    assert config_name(one, ["trainer.steps=20"]) == "hacpo-opt_char+gpt2_bpe-steps=20"
    overrides = ["seed=1", "trainer.steps=20", "tracking.uri=sqlite\\:////x.db", "trainer.progress=false"]
    tags = run_tags(one, overrides=overrides, config_dirs=["/my confs"], commit="9e7b1c8aa")
    assert tags["job"] == "hacpo-opt_char+gpt2_bpe-s1-steps=20"
    assert tags["config"] == "hacpo-opt_char+gpt2_bpe-steps=20@9e7b1c8"
    assert tags["setting"] == "opt_char+gpt2_bpe-steps=20@9e7b1c8"  # no method, no seed
    assert tags["overrides"] == "seed=1 trainer.steps=20"  # no runtime setting, no Hydra escape
    assert tags["command"] == (
        "python -m hacrl_exp.run --config-dir '/my confs' seed=1 trainer.steps=20 'tracking.uri=sqlite\\:////x.db' "
        "trainer.progress=false"
    )  # the command runs the job again: every override, as given
    rerun = run_tags(one, overrides=overrides, job="hacpo-opt_char+gpt2_bpe-s1-steps=20-r2", commit="9e7b1c8aa")
    assert rerun["config"] == "hacpo-opt_char+gpt2_bpe-steps=20-r2@9e7b1c8"  # never averaged with the first run
    assert "overrides" not in run_tags(one) and "command" not in run_tags(one)  # not a Hydra job: not recorded


def test_child_and_model_names():
    job = "gspo-opt_char+gpt2_bpe-s0-steps=20,lr=0.5"
    assert agent_run_name(job, "opt_char") == "gspo-opt_char+gpt2_bpe-s0-steps=20,lr=0.5/opt_char"
    assert model_name(job, "opt_char") == "opt_char@gspo-opt_char+gpt2_bpe-s0-steps=20,lr=0_5"  # MLflow refuses '.'
    assert model_name("a/b:c%d'e\"f", "x") == "x@a_b_c_d_e_f"
