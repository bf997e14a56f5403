"""The generated descriptions of a training job's runs (MLflow's `mlflow.note.content`, shown atop each run's page).

Pure functions of the parent run's tags (hacrl_exp.tracking.names.run_tags) and the job's held-out accuracies. The
first line is the result, so a run page (and a list that shows a description's first line) says at once what the
job reached; then what made the job differ from the defaults, where its checkpoint is and how to run it again:

    opt_char 0.3400 → 0.4900, gpt2_bpe 0.1650 → 0.2725 (gspo, 20 steps, seed 0)

    Held-out accuracy (mean over categories), step 0 → step 20; **gspo** on opt_char + gpt2_bpe, task arithmetic.

    Overrides: `algorithm=gspo trainer.steps=20`

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


GAIN_TAG = "gain/"
"""Parent-run tag `gain/<agent>`: the agent's start → final held-out accuracy as `gain_text` writes it."""


def gain_text(history: History, agent: str) -> str | None:
    """An agent's start → final held-out accuracy, `0.3450 → 0.3975` (narrow enough for a 125 px column); None
    before any evaluation."""
    found = start_and_final(history, agent)
    return None if found is None else f"{accuracy_text(found[1])} → {accuracy_text(found[3])}"


def overrides_line(tags: Mapping[str, str]) -> str:
    """The job's overrides that set what it trains (the `overrides` tag: runtime settings left out)."""
    if "overrides" not in tags:
        return "Overrides: not recorded (the job was not started from the command line)"
    return f"Overrides: `{tags['overrides']}`" if tags["overrides"] else "Overrides: none (the defaults)"


def result_line(tags: Mapping[str, str], agents: list[str], steps: int, history: History) -> str:
    """The first line: each agent's start → final held-out accuracy, then method, steps and seed:
    `opt_char 0.3450 → 0.3975, gpt2_bpe 0.2350 → 0.2925 (hacpo, 3 steps, seed 0)`."""
    parts = []
    for agent in agents:
        found = start_and_final(history, agent)
        text = "not evaluated yet" if found is None else f"{accuracy_text(found[1])} → {accuracy_text(found[3])}"
        parts.append(f"{agent} {text}")
    return f"{', '.join(parts)} ({tags.get('method', '?')}, {steps} steps, seed {tags.get('seed', '?')})"


def _detail_line(tags: Mapping[str, str], agents: list[str], history: History) -> str:
    found = [start_and_final(history, a) for a in agents]
    steps = {(f[0], f[2]) for f in found if f is not None}
    span = f", step {min(s[0] for s in steps)} → step {max(s[1] for s in steps)}" if steps else ""
    names = " + ".join(tags.get("agents", "?").split("+"))
    return f"Held-out accuracy (mean over categories){span}; **{tags.get('method', '?')}** on {names}, task " \
        f"{tags.get('task', '?')}."  # fmt: skip


def _closing(tags: Mapping[str, str], checkpoint: str | None) -> list[str]:
    if checkpoint:
        folder = f"Checkpoint: `{checkpoint}`"
    else:
        folder = f"Run folder: `{tags.get('output_dir', '?')}` (no final checkpoint yet)"
    command = f"Command: `{tags['command']}`" if tags.get("command") else "Command: not recorded"
    return [folder, command]


def job_description(tags: Mapping[str, str], steps: int, history: History, checkpoint: str | None) -> str:
    """The parent run's description: each agent's start → final held-out accuracy with method, steps and seed
    (`result_line`); the held-out set, agents and task; the overrides; the checkpoint folder (else the run folder,
    tag output_dir); the command."""
    agents = [a for a in tags.get("agents", "").split("+") if a]
    head = [result_line(tags, agents, steps, history), _detail_line(tags, agents, history)]
    return "\n\n".join([*head, overrides_line(tags), *_closing(tags, checkpoint)])


def agent_description(tags: Mapping[str, str], agent: str, steps: int, history: History, checkpoint: str | None) -> str:
    """An agent run's description: its start → final held-out accuracy with method, steps and seed; its job; the
    overrides; its folder in the checkpoint (`<checkpoint>/agents/<agent>`); the command."""
    head = [result_line(tags, [agent], steps, history), f"{_detail_line(tags, [agent], history)} Agent **{agent}** "
            f"of job `{tags.get('job', '?')}`."]  # fmt: skip
    folder = f"{checkpoint}/agents/{agent}" if checkpoint else None
    return "\n\n".join([*head, overrides_line(tags), *_closing(tags, folder)])
