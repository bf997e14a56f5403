"""What a job's seed varies: by default the training stream, its sampling and the warm start, not the held-out set
(task.seed and task.heldout_seed as validation resolves them), and the tags that say so on every MLflow run."""

import pytest

from hacrl_exp.errors import ConfigError
from hacrl_exp.tasks import build_task
from hacrl_exp.tracking.names import run_tags
from hacrl_exp.trainer.validate import preflight


@pytest.mark.parametrize(
    "overrides, data_seed, heldout_seed",
    [
        ([], 0, 0),  # the default run: both 0, as before the split
        (["seed=4"], 4, 0),  # seeds vary the data; the held-out problems stay
        (["seed=4", "task.heldout_seed=2"], 4, 2),
        (["seed=4", "task.seed=7"], 7, 7),  # an explicit task.seed wins and draws both, as it always did
        (["seed=4", "task.seed=7", "task.heldout_seed=1"], 7, 1),
    ],
)
def test_effective_seeds_are_resolved_and_tagged(overrides, data_seed, heldout_seed):
    config = preflight(overrides)
    assert (config.task.seed, config.task.heldout_seed) == (data_seed, heldout_seed)
    tags = run_tags(config)
    assert (tags["data_seed"], tags["heldout_seed"]) == (str(data_seed), str(heldout_seed))


def test_two_seeds_train_on_different_prompts_and_are_scored_on_the_same_problems():
    a, b = (build_task(preflight([f"seed={s}"]).task) for s in (0, 1))
    assert a.eval_problems() == b.eval_problems()
    assert a.train_problems(1, 16) != b.train_problems(1, 16)
    again = build_task(preflight(["seed=1"]).task)
    assert again.train_problems(1, 16) == b.train_problems(1, 16)


def test_math_has_no_heldout_seed(tmp_path):
    math = ["task=math", f"task.data_dir={tmp_path}", "agents.members.gpt2_bpe.tokenizer.vocab_size=160"]
    (tmp_path / "math_train.jsonl").write_text('{"id": "a", "problem": "1+1?", "answer": "2"}\n')
    (tmp_path / "math500.jsonl").write_text('{"id": "b", "problem": "2+2?", "answer": "4"}\n')
    config = preflight([*math, "seed=3"])
    assert (config.task.seed, config.task.heldout_seed) == (3, None)
    assert run_tags(config)["heldout_seed"] == "none"
    with pytest.raises(ConfigError, match="task.heldout_seed=1 .*task.eval_file"):
        preflight([*math, "task.heldout_seed=1"])
