"""Run names, tags and the params that apply (hacrl_exp.tracking.names): pure functions of the resolved config."""

import copy

import pytest

from hacrl_exp.tracking import flatten
from hacrl_exp.tracking.names import applicable_params, method_name, run_name, run_tags
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


@pytest.mark.parametrize("algorithm, clip", [("gspo_x2", "self_clip_low"), ("grpo", "grpo_clip_low")])
def test_algorithms_without_shared_rollouts_drop_sharing_settings(algorithm, clip):
    kept = flatten(applicable_params(config_params(preflight([f"algorithm={algorithm}"]))))
    assert not [k for k in kept if k.startswith("mechanisms.")]
    assert not {"algorithm.alpha", "algorithm.delta", "agents.members.opt_char.learns_from"} & set(kept)
    assert f"algorithm.{clip}" in kept and "algorithm.capability_window" in kept  # P̂ is logged for every method
