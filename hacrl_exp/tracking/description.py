"""The generated descriptions of a training job's runs (MLflow's `mlflow.note.content`, shown atop each run's page).

Pure functions of the parent run's tags (hacrl_exp.tracking.names.run_tags) and the job's held-out accuracies. The
first line is always the job's overrides, so a run page says at once what made this job differ from the defaults:

    Overrides: `algorithm=gspo trainer.steps=20`

    **gspo** on opt_char + gpt2_bpe, task arithmetic, seed 0, 20 steps. Held-out accuracy (mean over categories):
    - opt_char: 0.3400 (step 0) → 0.4900 (step 20)
    - gpt2_bpe: 0.1650 (step 0) → 0.2725 (step 20)

    Checkpoint: `/runs/x/checkpoints/step_000020`

    Command: `python -m hacrl_exp.run algorithm=gspo trainer.steps=20`

Accuracies are counts over totals (greedy answers right / problems, averaged over categories), so they are printed
to `ACCURACY_DECIMALS` decimals: exact for the default held-out set (4 tiers × 100 problems: multiples of 1/400).
"""

from __future__ import annotations

from collections.abc import Mapping

ACCURACY_DECIMALS = 4
History = Mapping[int, Mapping[str, Mapping[str, float]]]
"""{step: {agent: {accuracy/mean: value, accuracy/<category>: value}}}, as trainer.metrics.run_history reads it."""


def accuracy_text(value: float) -> str:
    """An accuracy as the description prints it: `ACCURACY_DECIMALS` decimals."""
    return f"{value:.{ACCURACY_DECIMALS}f}"


def start_and_final(history: History, agent: str) -> tuple[int, float, int, float] | None:
    """(first step, its mean accuracy, last step, its mean accuracy) of an agent's held-out evaluations, or None."""
    steps = [s for s in sorted(history) if "accuracy/mean" in history[s].get(agent, {})]
    if not steps:
        return None
    first, last = steps[0], steps[-1]
    return first, history[first][agent]["accuracy/mean"], last, history[last][agent]["accuracy/mean"]


def overrides_line(tags: Mapping[str, str]) -> str:
    """The first line: the job's Hydra overrides as given."""
    if "overrides" not in tags:
        return "Overrides: not recorded (the job was not started from the command line)"
    return f"Overrides: `{tags['overrides']}`" if tags["overrides"] else "Overrides: none (the defaults)"


def _job_line(tags: Mapping[str, str], steps: int) -> str:
    agents = " + ".join(tags.get("agents", "?").split("+"))
    return f"**{tags.get('method', '?')}** on {agents}, task {tags.get('task', '?')}, seed {tags.get('seed', '?')}, " \
        f"{steps} steps."  # fmt: skip


def _accuracy(found: tuple[int, float, int, float] | None) -> str:
    if found is None:
        return "not evaluated yet"
    first, start, last, final = found
    return f"{accuracy_text(start)} (step {first}) → {accuracy_text(final)} (step {last})"


def _closing(tags: Mapping[str, str], checkpoint: str | None) -> list[str]:
    if checkpoint:
        folder = f"Checkpoint: `{checkpoint}`"
    else:
        folder = f"Run folder: `{tags.get('output_dir', '?')}` (no final checkpoint yet)"
    command = f"Command: `{tags['command']}`" if tags.get("command") else "Command: not recorded"
    return [folder, command]


def job_description(tags: Mapping[str, str], steps: int, history: History, checkpoint: str | None) -> str:
    """The parent run's description: overrides; method, agents, task, seed, steps; each agent's start → final
    held-out accuracy; the checkpoint folder (else the run folder, tag output_dir); the command."""
    agents = tags.get("agents", "").split("+")
    lines = [f"- {a}: {_accuracy(start_and_final(history, a))}" for a in agents if a]
    body = _job_line(tags, steps) + " Held-out accuracy (mean over categories):\n" + "\n".join(lines)
    return "\n\n".join([overrides_line(tags), body, *_closing(tags, checkpoint)])


def agent_description(tags: Mapping[str, str], agent: str, steps: int, history: History, checkpoint: str | None) -> str:
    """An agent run's description: overrides; the agent, its job and the job's line; its start → final held-out
    accuracy; its folder in the checkpoint (`<checkpoint>/agents/<agent>`); the command."""
    body = f"Agent **{agent}** of job `{tags.get('job', '?')}`: {_job_line(tags, steps)}\n\n" \
        f"Held-out accuracy (mean over categories): {_accuracy(start_and_final(history, agent))}"  # fmt: skip
    folder = f"{checkpoint}/agents/{agent}" if checkpoint else None
    return "\n\n".join([overrides_line(tags), body, *_closing(tags, folder)])
