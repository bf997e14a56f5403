"""The generated run descriptions (hacrl_exp.tracking.description): the result first, then overrides, folder,
command."""

from hacrl_exp.tracking.description import agent_description, gain_text, job_description, start_and_final

TAGS = {
    "method": "gspo",
    "agents": "opt_char+gpt2_bpe",
    "task": "arithmetic",
    "seed": "1",
    "job": "gspo-opt_char+gpt2_bpe-s1-trainer.steps=20",
    "overrides": "algorithm=gspo trainer.steps=20 seed=1",
    "command": "python -m hacrl_exp.run algorithm=gspo trainer.steps=20 seed=1",
    "output_dir": "/runs/x",
}
HISTORY = {
    0: {"opt_char": {"accuracy/mean": 0.4925}, "gpt2_bpe": {"accuracy/mean": 0.21}},
    10: {"opt_char": {"accuracy/mean": 0.55}, "gpt2_bpe": {"accuracy/mean": 0.25}},
    20: {"opt_char": {"accuracy/mean": 0.6000000000000001}, "gpt2_bpe": {"accuracy/mean": 0.28750000000000003}},
}


def test_job_description_says_the_result_first_then_overrides_folder_and_command():
    text = job_description(TAGS, 20, HISTORY, "/runs/x/checkpoints/step_000020")
    # 4 decimals, not 0.6000000000000001; the result, method, steps and seed on the first line
    assert text.splitlines()[0] == "opt_char 0.4925 → 0.6000, gpt2_bpe 0.2100 → 0.2875 (gspo, 20 steps, seed 1)"
    assert "step 0 → step 20; **gspo** on opt_char + gpt2_bpe, task arithmetic." in text
    assert "Overrides: `algorithm=gspo trainer.steps=20 seed=1`" in text
    assert text.index("Overrides:") < text.index("Checkpoint: `/runs/x/checkpoints/step_000020`")
    assert text.endswith("Command: `python -m hacrl_exp.run algorithm=gspo trainer.steps=20 seed=1`")


def test_agent_description_names_its_job_and_its_folder():
    text = agent_description(TAGS, "gpt2_bpe", 20, HISTORY, "/runs/x/checkpoints/step_000020")
    assert text.splitlines()[0] == "gpt2_bpe 0.2100 → 0.2875 (gspo, 20 steps, seed 1)" and "0.4925" not in text
    assert "Agent **gpt2_bpe** of job `gspo-opt_char+gpt2_bpe-s1-trainer.steps=20`" in text
    assert "Overrides: `algorithm=gspo trainer.steps=20 seed=1`" in text
    assert "Checkpoint: `/runs/x/checkpoints/step_000020/agents/gpt2_bpe`" in text


def test_description_while_training_and_outside_hydra():
    opening = job_description(TAGS, 20, {}, None)
    assert opening.startswith("opt_char not evaluated yet, gpt2_bpe not evaluated yet (gspo, 20 steps, seed 1)")
    assert "Run folder: `/runs/x` (no final checkpoint yet)" in opening
    bare = {k: v for k, v in TAGS.items() if k not in ("overrides", "command")}
    text = job_description(bare, 20, HISTORY, None)
    assert "Overrides: not recorded" in text and "Command: not recorded" in text
    assert "Overrides: none (the defaults)" in job_description({**TAGS, "overrides": ""}, 20, HISTORY, None)


def test_gain_text_is_start_to_final():
    assert gain_text(HISTORY, "opt_char") == "0.4925 → 0.6000"
    assert gain_text(HISTORY, "nobody") is None


def test_start_and_final_skip_steps_without_the_agent():
    history = {0: {"a": {"accuracy/mean": 0.1}}, 5: {"b": {"accuracy/mean": 0.3}}, 9: {"a": {"accuracy/mean": 0.2}}}
    assert start_and_final(history, "a") == (0, 0.1, 9, 0.2)
    assert start_and_final(history, "b") == (5, 0.3, 5, 0.3) and start_and_final(history, "c") is None
