"""Every experiment preset composes and validates on a CPU without loading a model, and carries its numbers."""

import itertools

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hacrl_exp.config.preflight import CONFIG_DIR
from hacrl_exp.trainer.validate import preflight

PAPER = {  # preset: (models, α, δ, δ_step) from hacpo-spec §4 and Table 5 (its "δ" column is 1 − δ)
    "paper_qwen3_1p7b_4b": (["Qwen/Qwen3-1.7B-Base", "Qwen/Qwen3-4B-Base"], 1.0, 0.2, 0.025),
    "paper_qwen3_4b_llama3p2_3b": (["Qwen/Qwen3-4B-Base", "meta-llama/Llama-3.2-3B-Instruct"], 1.0, 0.2, 0.025),
    "paper_qwen3_4b_4b_instruct": (["Qwen/Qwen3-4B", "Qwen/Qwen3-4B-Instruct-2507"], 3.0, 0.2, 0.01),
    "paper_qwen3_4b_8b": (["Qwen/Qwen3-4B-Base", "Qwen/Qwen3-8B-Base"], 3.0, 0.2, 0.025),
    "three_way": (
        ["Qwen/Qwen3-1.7B-Base", "Qwen/Qwen3-4B-Base", "meta-llama/Llama-3.2-3B-Instruct"],
        1.0,
        0.2,
        0.025,
    ),
}
MECHANISMS = ("capability_advantage", "omega", "exponential_is", "stepwise", "clip")
GRID_METHODS = {  # conf/method option: (algorithm.name, mechanism switched off)
    "gspo": ("gspo", None),
    "gspo_x2": ("gspo_x2", None),
    "gspo_update_matched": ("gspo_update_matched", None),
    "naive": ("naive", None),
    "grpo": ("grpo", None),
    "gspo_dynamic": ("gspo_dynamic", None),
    "hacpo_shuffled_partner": ("hacpo_shuffled_partner", None),
    "hacpo": ("hacpo", None),
    "hacpo_no_capability_advantage": ("hacpo", "capability_advantage"),
    "hacpo_no_omega": ("hacpo", "omega"),
    "hacpo_no_exponential_is": ("hacpo", "exponential_is"),
    "hacpo_no_stepwise": ("hacpo", "stepwise"),
    "hacpo_no_clip": ("hacpo", "clip"),
}


def hydra_node(overrides):
    """The composed `hydra` node (sweeper params, launcher) for these overrides."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            return compose("config", overrides=overrides, return_hydra_config=True).hydra
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("preset", sorted(PAPER))
def test_paper_presets_carry_the_papers_hyperparameters(preset):
    models, alpha, delta, delta_step = PAPER[preset]
    config = preflight([f"experiment={preset}"])  # composes and validates; no model is loaded
    members = config.agents.members
    assert [m.model.path for m in members.values()] == models
    for agent in members.values():
        assert agent.model.source == "pretrained" and agent.tokenizer.kind == "pretrained"
        assert agent.lr == 1e-6 and agent.weight_decay == 0.01 and agent.warm_start.steps == 0
        assert agent.model.dtype == "float32" and not agent.model.trust_remote_code
    algo, trainer = config.algorithm, config.trainer
    assert (algo.name, algo.alpha, algo.delta, algo.delta_step) == ("hacpo", alpha, delta, delta_step)
    assert (algo.capability_window, algo.self_clip_low, algo.self_clip_high) == (5, 3e-4, 4e-4)
    assert (algo.kl_coef, algo.adv_eps, algo.log_ratio_clamp) == (0.001, 1e-6, 10.0)
    assert (trainer.prompts_per_step, trainer.group_size, trainer.minibatches_per_block) == (128, 8, 2)
    assert (trainer.steps, trainer.eval_every, trainer.max_grad_norm) == (58, 3, 1.0)
    assert (config.rollout.max_new_tokens, config.rollout.temperature, config.rollout.top_p) == (4096, 1.0, 1.0)
    assert config.task.name == "math" and config.task.max_prompt_tokens == 1024
    assert config.tracking.tags["grid"] == preset


def test_paper_preset_baselines_keep_the_shared_settings():
    config = preflight(["experiment=paper_qwen3_1p7b_4b", "+method=gspo_x2"])
    assert config.algorithm.name == "gspo_x2" and config.algorithm.kl_coef == 0.001
    assert config.agents.members["qwen3_1p7b"].lr == 1e-6


def test_table1_tiny_sweeps_the_whole_grid():
    node = hydra_node(["experiment=paper_table1_tiny"])
    params = node.sweeper.params
    methods, seeds = params["+method"].split(","), params["seed"].split(",")
    added = {"gspo_update_matched", "gspo_dynamic", "grpo", "hacpo_shuffled_partner"}  # the 10-seed grid's
    assert sorted(methods) == sorted(set(GRID_METHODS) - added) and seeds == ["0", "1", "2"]
    assert len(list(itertools.product(methods, seeds))) == 27
    assert node.launcher.n_jobs == 2 and "joblib" in node.launcher._target_.lower()


def test_table1_tiny_10seeds_is_the_grid_and_the_update_matched_gspo_over_ten_seeds_in_its_own_experiment():
    base, ten = hydra_node(["experiment=paper_table1_tiny"]), hydra_node(["experiment=paper_table1_tiny_10seeds"])
    methods = ten.sweeper.params["+method"].split(",")
    added = ["gspo_update_matched", "gspo_dynamic", "grpo", "hacpo_shuffled_partner"]
    assert sorted(methods) == sorted([*base.sweeper.params["+method"].split(","), *added])
    assert ten.sweeper.params["seed"].split(",") == [str(s) for s in range(10)]
    assert len(list(itertools.product(methods, ten.sweeper.params["seed"].split(",")))) == 130
    config = preflight(["experiment=paper_table1_tiny_10seeds"])
    assert config.tracking.experiment == config.tracking.tags["grid"] == "paper_table1_tiny_10seeds"  # never mixed
    assert config.trainer.steps == preflight(["experiment=paper_table1_tiny"]).trainer.steps == 80


def test_gap_regime_is_the_pair_warm_started_to_target_accuracies_over_ten_seeds_in_its_own_experiment():
    node = hydra_node(["experiment=paper_gap_tiny"])
    methods = node.sweeper.params["+method"].split(",")
    assert methods == [
        "gspo", "gspo_x2", "gspo_update_matched", "gspo_dynamic", "grpo", "naive", "hacpo", "hacpo_shuffled_partner",
        "hacpo_no_omega", "hacpo_no_capability_advantage", "hacpo_no_clip",
    ]  # fmt: skip
    seeds = node.sweeper.params["seed"].split(",")
    assert seeds == [str(s) for s in range(10)] and len(list(itertools.product(methods, seeds))) == 110
    config = preflight(["experiment=paper_gap_tiny", "+method=hacpo_no_omega", "seed=3"])
    assert config.tracking.experiment == config.tracking.tags["grid"] == "paper_gap_tiny"  # never mixed
    assert config.task.tiers == ["add3", "add4"] and not config.mechanisms.omega
    assert (config.task.seed, config.task.heldout_seed) == (3, 0)  # the seed draws the data, not the test
    strong, weak = config.agents.members["opt_char"], config.agents.members["gpt2_bpe"]
    assert (strong.warm_start.target_accuracy, weak.warm_start.target_accuracy) == (0.85, 0.20)
    assert strong.warm_start.steps >= 700 and weak.warm_start.steps >= 300  # caps above the old fixed counts
    assert config.trainer.steps == 80


def test_the_room_regime_is_the_gap_grid_with_both_agents_warm_started_lower_in_its_own_experiment():
    """paper_gap_room_tiny (issue 38): the gap grid's methods, seeds, tiers and steps, the strong agent warm-started to
    0.40 and the weak one to 0.15 (room at both ends), its own MLflow experiment and grid tag."""
    room, gap = hydra_node(["experiment=paper_gap_room_tiny"]), hydra_node(["experiment=paper_gap_tiny"])
    assert room.sweeper.params == gap.sweeper.params  # 11 methods x seeds 0-9
    config = preflight(["experiment=paper_gap_room_tiny", "+method=gspo_dynamic", "seed=4"])
    assert config.tracking.experiment == config.tracking.tags["grid"] == "paper_gap_room_tiny"  # never mixed
    assert config.task.tiers == ["add3", "add4"] and config.trainer.steps == 80
    assert config.algorithm.name == "gspo_dynamic"
    strong, weak = config.agents.members["opt_char"], config.agents.members["gpt2_bpe"]
    assert (strong.warm_start.target_accuracy, weak.warm_start.target_accuracy) == (0.40, 0.15)
    assert (config.task.seed, config.task.heldout_seed) == (4, 0)


@pytest.mark.parametrize("method", sorted(GRID_METHODS))
def test_every_grid_job_composes_to_its_method(method):
    config = preflight(["experiment=paper_table1_tiny", f"+method={method}", "seed=2"])
    algorithm, off = GRID_METHODS[method]
    assert config.algorithm.name == algorithm and config.seed == 2
    switched_off = {k for k in MECHANISMS if not getattr(config.mechanisms, k)}
    assert switched_off == ({off} if off else set())
    assert (config.trainer.steps, config.trainer.eval_every, config.trainer.threads) == (80, 20, 1)
    assert config.tracking.tags == {"grid": "paper_table1_tiny"}
    assert config.tracking.experiment == "paper_table1_tiny"
    assert list(config.agents.members) == ["opt_char", "gpt2_bpe"]
