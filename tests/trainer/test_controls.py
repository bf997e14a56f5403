"""Issue 38's controls: the partner-rows control (partner rewards shuffled within the step) on hand values and in a
tiny real run."""

import torch

from hacrl_exp.trainer.loop import sources_for
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.step import SharedRollouts, shuffled_rewards, with_shuffled_rewards
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides


def shared(agent: int, rewards) -> SharedRollouts:
    n = len(rewards)
    return SharedRollouts(agent, [i // 4 for i in range(n)], [f"t{i}" for i in range(n)],
                          torch.tensor(rewards, dtype=torch.float64), torch.zeros(n, dtype=torch.float64),
                          torch.ones(n, dtype=torch.long))  # fmt: skip


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

    config = preflight([*tiny_overrides("pair", 2), "algorithm=hacpo_shuffled_partner", "tracking.backend=none"])
    summary = train(config, tmp_path)
    rows = read_metrics(f"{summary['output_dir']}/metrics.jsonl")
    assert summary["last_step"] == 2
    last = [r for r in rows if r["agent"] and r["step"] == 2 and "train/reward_mean" in r]
    assert len(last) == 2 and all(any(k.startswith("cross/") for k in r) for r in last)  # partner rows came in
