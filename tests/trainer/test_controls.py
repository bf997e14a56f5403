"""Issue 38's controls: the partner-rows control (partner rewards shuffled within the step) and the dynamic-sampling
GSPO (degenerate groups regenerated up to a cap), on hand values and in tiny real runs."""

import pytest
import torch

from hacrl_exp.trainer.loop import sources_for
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import (
    SharedRollouts,
    degenerate_prompts,
    resample_degenerate,
    shuffled_rewards,
    with_shuffled_rewards,
)
from hacrl_exp.trainer.step import SourceRollouts as SourceRollout
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides


def shared(agent: int, rewards) -> SharedRollouts:
    n = len(rewards)
    return SharedRollouts(agent, [i // 4 for i in range(n)], [f"t{i}" for i in range(n)],
                          torch.tensor(rewards, dtype=torch.float64), torch.zeros(n, dtype=torch.float64),
                          torch.ones(n, dtype=torch.long), ["add3"] * n)  # fmt: skip


def test_shuffled_rewards_are_a_seeded_permutation_within_the_step():
    rewards = torch.tensor([1.0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1], dtype=torch.float64)
    out = shuffled_rewards(rewards, seed=0, step=3, learner=1, source=0)
    assert sorted(out.tolist()) == sorted(rewards.tolist()) and not torch.equal(out, rewards)  # same multiset, moved
    assert torch.equal(out, shuffled_rewards(rewards, 0, 3, 1, 0))  # pure: a resumed run draws the same π
    assert not torch.equal(out, shuffled_rewards(rewards, 0, 4, 1, 0))  # a new permutation every step
    original = shared(0, rewards.tolist())
    seen = with_shuffled_rewards(original, 0, 3, 1)
    assert (
        torch.equal(seen.rewards, out) and seen.texts == original.texts and seen.prompt_index == original.prompt_index
    )
    assert torch.equal(original.rewards, rewards)  # the pool (capability estimates) keeps the true rewards


def test_sources_for_shuffles_partners_only_for_the_control():
    pool = {0: shared(0, [1.0, 0, 0, 1] * 2), 1: shared(1, [0.0, 0, 1, 1] * 2)}
    control = learner_params(preflight([*tiny_overrides("pair", 1), "algorithm=hacpo_shuffled_partner"]))
    plain = learner_params(preflight([*tiny_overrides("pair", 1), "algorithm=hacpo"]))
    assert control[0].shuffle_partner_rewards and not plain[0].shuffle_partner_rewards
    assert sources_for(plain[0], pool, 0, 1)[1] is pool[1]  # the off switch is exact: the very same object
    mixed = sources_for(control[0], pool, 0, 1)[1]
    assert sorted(mixed.rewards.tolist()) == sorted(pool[1].rewards.tolist()) and mixed.texts == pool[1].texts


def test_the_control_trains_a_tiny_pair(tmp_path):
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.metrics import read_metrics

    config = preflight([*tiny_overrides("pair", 1), "algorithm=hacpo_shuffled_partner", "tracking.backend=none"])
    summary = train(config, tmp_path)
    rows = read_metrics(f"{summary['output_dir']}/metrics.jsonl")
    assert summary["last_step"] == 1
    last = [r for r in rows if r["agent"] and r["step"] == 1 and "train/reward_mean" in r]
    assert len(last) == 2 and all(any(k.startswith("cross/") for k in r) for r in last)  # partner rows came in


def own_rollouts(rewards, g=4, tag="a") -> SourceRollout:
    n = len(rewards)
    return SourceRollout(
        agent=0, prompt_index=[r // g for r in range(n)], prompt_ids=[[1]] * n,
        response_ids=[[ord(tag), r] for r in range(n)], texts=[f"{tag}{r}" for r in range(n)],
        rewards=torch.tensor(rewards, dtype=torch.float64), old_token_logp=[torch.zeros(2)] * n, sampling=None,
        categories=[f"{tag}{r // g}" for r in range(n)],
    )  # fmt: skip


def test_degenerate_prompts_and_dynamic_sampling_reach_the_target_or_log_the_cap():
    # prompts 0 and 2 all wrong / all right: A = 0 for each of their rows
    own = own_rollouts([0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1])
    assert degenerate_prompts(own.rewards, 4) == [0, 2]
    draws = iter([[0, 0, 0, 0, 0, 1, 0, 0], [1, 0, 0, 0]])  # round 1: prompt 2 fixed; round 2: prompt 0 fixed
    rounds = []

    def draw(stale, round):
        rewards = next(draws)
        assert len(rewards) == 4 * len(stale)
        rounds.append(round)
        return own_rollouts(rewards, tag="b")

    out, done = resample_degenerate(own, draw, target_rows=12, max_rounds=5)
    assert (done.rounds, done.cap_hit, done.informative_rows, len(done.extra_rows)) == (2, False, 12, 12)
    assert rounds == [1, 2]  # each round told its number: fresh prompts are keyed by (step, round)
    assert out.rewards.tolist() == [1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0] and len(out.texts) == 12  # batch size kept
    assert out.texts[:4] == ["b0", "b1", "b2", "b3"] and out.texts[8:] == ["b4", "b5", "b6", "b7"]
    assert out.categories == ["b0"] * 4 + ["a1"] * 4 + ["b1"] * 4  # a kept group brings its problem's category
    assert out.prompt_index == own.prompt_index and degenerate_prompts(out.rewards, 4) == []
    # the cap: nothing ever becomes informative; 2 rounds, then cap_hit with the target unmet
    stuck, record = resample_degenerate(own, lambda stale, _: own_rollouts([0] * 4 * len(stale)), 12, max_rounds=2)
    assert (record.rounds, record.cap_hit, record.informative_rows) == (2, True, 4)
    assert torch.equal(stuck.rewards, own.rewards) and stuck.texts == own.texts  # nothing replaced
    # the target already met: no round; and off (target 0) never draws
    same, none = resample_degenerate(own, draw, target_rows=4, max_rounds=5)
    assert same is own and (none.rounds, none.cap_hit) == (0, False)


@pytest.mark.parametrize("prompts", ["fresh", "same"])
def test_dynamic_gspo_trains_a_tiny_agent_and_counts_its_extra_rollouts(tmp_path, monkeypatch, prompts):
    """gspo_dynamic on a tiny agent, with its extra rounds answering fresh prompts (the method's default, as DAPO) or
    the degenerate ones again; every extra row is counted in cost/*."""
    from hacrl_exp.tasks.arithmetic import ArithmeticTask
    from hacrl_exp.trainer.loop import train
    from hacrl_exp.trainer.metrics import read_metrics

    asked = []  # the fresh prompts' (step, round, n), recorded on the real task's way through
    extra_problems = ArithmeticTask.extra_problems
    monkeypatch.setattr(ArithmeticTask, "extra_problems", lambda t, *a: asked.append(a) or extra_problems(t, *a))
    overrides = [*tiny_overrides("solo", 2), "algorithm=gspo_dynamic", "algorithm.dynamic_max_rounds=2",
                 "tracking.backend=none"]  # fmt: skip
    config = preflight([*overrides, *([] if prompts == "fresh" else ["algorithm.dynamic_prompts=same"])])
    params = learner_params(config)[0]
    assert (params.dynamic_target_rows, params.dynamic_max_rounds) == (16, 2)  # P·G = 4 × 4
    assert params.dynamic_fresh_prompts == (prompts == "fresh")
    summary = train(config, tmp_path)
    rows = [r for r in read_metrics(f"{summary['output_dir']}/metrics.jsonl") if r["agent"] and "dynamic/rounds" in r]
    assert len(rows) == 2
    for row in rows:  # each step reached its target or hit its cap, and says which
        assert row["dynamic/informative_rows"] == 16 or row["dynamic/cap_hit"] == 1.0
        assert row["dynamic/extra_rollouts"] <= 2 * 16 and 0 <= row["dynamic/rounds"] <= 2
    extra = sum(r["dynamic/extra_rollouts"] for r in rows)
    assert summary["counters"]["opt_char"]["rollouts_total"] >= 2 * 16  # the batch's own rows
    generated = [r["cost/generated_rollouts"] for r in read_metrics(f"{summary['output_dir']}/metrics.jsonl")
                 if r["agent"] and "cost/generated_rollouts" in r]  # fmt: skip
    assert generated and generated[-1] == 2 * 16 + extra  # the extra rounds are counted in cost/*
    rounds = [(row["step"], r) for row in rows for r in range(1, int(row["dynamic/rounds"]) + 1)]
    assert rounds  # the untrained agent leaves degenerate groups: extra rounds ran
    if prompts == "same":
        assert asked == []
    else:  # one draw per extra round, as many prompts as were degenerate, keyed by the loop's step
        assert [(step, r) for step, r, _ in asked] == rounds and sum(n for _, _, n in asked) * 4 == extra


def test_dynamic_sampling_on_a_sharded_agent_is_refused_in_one_line():
    from hacrl_exp.errors import ConfigError

    overrides = [*tiny_overrides("pair", 1), "algorithm=gspo_dynamic", "executor=ray",
                 "agents.members.opt_char.world_size=2"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"algorithm=gspo_dynamic \(dynamic sampling\) with a sharded agent "):
        preflight(overrides)


def test_kept_fresh_groups_answer_the_drawn_problems_and_bring_their_categories(monkeypatch):
    """A worker's step with fresh prompts: every kept group answers its step prompt or a drawn extra problem, in its
    prompt ids, its problem prompt and its rows' categories (what the capability estimates file it under); one slot
    per G informative rows gained is an extra one; cost/* counts the step's first P·G rows and every extra row
    once."""
    from hacrl_exp.tasks.arithmetic import ArithmeticTask
    from hacrl_exp.trainer.worker import AgentWorker

    drawn = []
    extra_problems = ArithmeticTask.extra_problems
    monkeypatch.setattr(
        ArithmeticTask, "extra_problems", lambda t, *a: drawn.append(extra_problems(t, *a)) or drawn[-1]
    )
    config = preflight([*tiny_overrides("solo", 1), "algorithm=gspo_dynamic", "tracking.backend=none"])
    worker = AgentWorker(config, 0, learner_params(config)[0])
    problems = worker.task.train_problems(1, 4)
    worker.rollout(problems, 4, 1)
    own, done = worker._own, worker._resampled
    assert done.rounds >= 1 and len(drawn) == done.rounds  # the untrained agent leaves degenerate prompts
    prompt = {p.id: worker.agent.prompt_ids(p.prompt) for p in [*problems, *(e for d in drawn for e in d)]}
    category = {p.id: p.category for p in [*problems, *(e for d in drawn for e in d)]}
    fresh = 0
    for slot, problem in enumerate(problems):
        answered = [pid for pid in prompt if prompt[pid] == own.prompt_ids[4 * slot]]
        assert answered, slot
        assert own.prompt_ids[4 * slot : 4 * slot + 4] == [prompt[answered[0]]] * 4
        assert own.problem_prompt_ids[slot] == prompt[answered[0]]
        assert own.categories[4 * slot : 4 * slot + 4] == [category[answered[0]]] * 4
        assert own.shared().categories == own.categories
        fresh += answered[0] != problem.id
    first_informative = 16 - 4 * len(drawn[0])
    assert fresh == (done.informative_rows - first_informative) // 4
    costs = worker.take_costs()
    assert costs["generated_rollouts"] == 16 + len(done.extra_rows)


def test_dynamic_prompts_is_checked_and_only_for_a_method_that_shares_nothing():
    from hacrl_exp.algo.algorithms import Algorithm, gspo_objective_loss
    from hacrl_exp.errors import ConfigError

    with pytest.raises(ConfigError, match=r"algorithm.dynamic_prompts='other'"):
        preflight([*tiny_overrides("solo", 1), "algorithm=gspo_dynamic", "algorithm.dynamic_prompts=other"])
    with pytest.raises(ValueError, match="dynamic sampling is built for algorithms that do not share rollouts"):
        Algorithm("x", gspo_objective_loss, shares_rollouts=True, capability_baseline=False, dynamic_sampling=True)


def test_each_agents_rows_are_filed_under_their_own_categories():
    """CapabilityEstimates.update with a category list per agent: aligned lists give the shared-prompt update; a
    category missing from one agent's rows this step does not advance its tracker."""
    from hacrl_exp.trainer.capability_estimates import CapabilityEstimates

    rewards = [torch.tensor([1.0, 0, 1, 1]), torch.tensor([0.0, 0, 1, 0])]
    estimates = CapabilityEstimates(2, ["add3", "add4"], 5, 0, "batch")
    estimates.update(rewards, [["add3", "add3", "add4", "add4"]] * 2)
    assert estimates.last_category_accuracy == {"add3": [0.5, 0.0], "add4": [1.0, 0.5]}
    estimates.update(rewards, [["add3", "add3", "add4", "add4"], ["add3", "add3", "add3", "add3"]])
    assert estimates.last_category_accuracy == {"add3": [0.5, 0.25]}  # agent 1 has no add4 row: add4 waits
    assert len(estimates.by_category["add4"].history) == 1 and len(estimates.by_category["add3"].history) == 2
