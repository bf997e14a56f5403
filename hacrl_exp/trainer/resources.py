"""A rough memory estimate of a run, checked before anything loads: a model or a step that cannot fit the machine
is refused in one line naming the key, instead of an allocation traceback or an out-of-memory kill minutes later.

The estimate errs low (it counts what must be held, not allocator overhead), so it only refuses what surely does not
fit: weights, gradients and AdamW state of every tiny model, and the rows a step keeps in memory.
"""

from __future__ import annotations

import psutil

from hacrl_exp.agents.model_shapes import CHAR_VOCAB
from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.schema import AgentConfig, Config
from hacrl_exp.errors import ConfigError

GIB = 2**30
BYTES_PER_TOKEN_ROW = 24  # a rollout token kept for the step: id (8), old and new log-prob (4 + 4), masks, text


def model_bytes(agent: AgentConfig) -> int:
    """Weights + gradients + two AdamW moments (float32) of a tiny model; 0 for a pretrained one (not known here)."""
    if agent.model.source != "tiny":
        return 0
    m = agent.model
    vocab = agent.tokenizer.vocab_size if agent.tokenizer.kind == "bpe" else CHAR_VOCAB
    params = m.num_layers * 12 * m.hidden_size**2 + (vocab + m.max_positions) * m.hidden_size
    copies = 1 if agent.frozen else 4
    return params * 4 * copies


def step_bytes(config: Config, agent: AgentConfig) -> int:
    """Rollout rows one agent keeps during a step (its own, and its partners' re-tokenised for it)."""
    rows = (
        config.trainer.prompts_per_step
        * config.trainer.group_size
        * ALGORITHMS[config.algorithm.name].rollout_multiplier
    )
    tokens = min(config.task.max_prompt_tokens, agent.model.max_positions) + config.rollout.max_new_tokens
    return rows * tokens * BYTES_PER_TOKEN_ROW * len(config.agents.members)


def check_memory(config: Config, available: int | None = None) -> None:
    """Refuse a config whose models or step rows need more than the machine's available memory (RAM; the estimate
    is compared with RAM for GPU runs too, where it is a lower bound of the host's share)."""
    available = psutil.virtual_memory().available if available is None else available
    models = {name: model_bytes(agent) for name, agent in config.agents.members.items()}
    steps = sum(step_bytes(config, agent) for agent in config.agents.members.values())
    total = sum(models.values()) + steps
    if total <= available:
        return
    have = f"this machine has {available / GIB:.1f} GiB available"
    biggest = max(models, key=models.get)
    if models[biggest] >= steps:
        key = f"agents.members.{biggest}.model.hidden_size={config.agents.members[biggest].model.hidden_size}"
        raise ConfigError(
            f"{key}: the model needs about {models[biggest] / GIB:.1f} GiB with its gradients and optimizer, {have}; "
            "lower hidden_size or num_layers"
        )
    raise ConfigError(
        f"trainer.group_size={config.trainer.group_size}: a step keeps about {steps / GIB:.1f} GiB of rollouts "
        f"(trainer.prompts_per_step × group_size rows per agent), {have}; lower trainer.group_size or "
        "trainer.prompts_per_step"
    )
