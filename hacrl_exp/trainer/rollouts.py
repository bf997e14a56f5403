"""One agent's rollouts of a step (phases 1–3: generate, reward, score own) and what it shares of them.

An agent keeps its own rollouts whole (`SourceRollouts`: token ids, per-token log-probs); what it shares with
other agents is tokenizer-neutral (`SharedRollouts`): prompt index, source, text, reward, and the source's old mean
log-prob with its token count (spec §1.2, as C1 stores it). Rows are prompt-major: row r answers prompt r // G.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hacrl_exp.agents.logprobs import batched_response_logprobs
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.base import Problem, Task


@dataclass
class SharedRollouts:
    """One agent's rollouts of this step as other agents see them: P·G rows, row r answers prompt r // G.

    The only per-step payload that crosses between agents (and between Ray actors): text, reward, and the
    source's old mean log-prob over its own |y|_j tokens (spec §1.2–§1.4; C1 stores the sum and the count).
    """

    agent: int
    prompt_index: list[int]
    texts: list[str]
    rewards: torch.Tensor
    """(rows,) float64 0/1."""
    old_mean_logp: torch.Tensor
    """(rows,) float64: mean over the source's tokens of log π_old^(j)(y_t)."""
    num_tokens: torch.Tensor
    """(rows,) long: |y|_j, the response length in the source's tokenizer."""

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)


@dataclass
class SourceRollouts:
    """One agent's own rollouts of this step, whole: P·G rows, row r answers prompt r // G."""

    agent: int
    prompt_index: list[int]
    prompt_ids: list[list[int]]
    """Per row: the prompt in this agent's tokens (chat template applied)."""
    response_ids: list[list[int]]
    texts: list[str]
    rewards: torch.Tensor
    """(rows,) float64 0/1."""
    old_token_logp: list[torch.Tensor]
    """The agent's own per-token log-probs before any update (spec §1.2)."""
    sampling: SamplingSettings
    """What generated the rows and the temperature their old log-probs were scored at; the update scores the new
    log-probs at the same one (one source for both halves of the ratio)."""
    ref_token_logp: list[torch.Tensor] | None = None
    problem_prompt_ids: list[list[int]] | None = None
    """Per problem: its prompt in this agent's tokens, the prompt partners' answers are placed under."""

    @property
    def old_mean_logp(self) -> torch.Tensor:
        return torch.stack([t.mean() for t in self.old_token_logp]).double()

    @property
    def group_size(self) -> int:
        return len(self.texts) // (max(self.prompt_index) + 1)

    def shared(self) -> SharedRollouts:
        """What other agents get of these rollouts: text, reward and the old log-prob summary (no token ids)."""
        counts = torch.tensor([len(t) for t in self.old_token_logp], dtype=torch.long)
        return SharedRollouts(self.agent, self.prompt_index, self.texts, self.rewards, self.old_mean_logp, counts)


def collect_rollouts(
    agent,
    index: int,
    problems: list[Problem],
    group: int,
    sampling: SamplingSettings,
    task: Task,
    score_batch_size: int,
    times: dict[str, float],
    score: Callable[..., list[torch.Tensor]] | None = None,
) -> SourceRollouts:
    """Phases 1–3 for one agent: sample G responses per prompt, grade them, and score them with the
    agent's own training model before any update of the step (the source's old log-probs, spec §1.2);
    also the reference log-probs when the KL term is on. Adds the seconds of each phase to `times`.

    score: a function of `batched_response_logprobs`'s signature and result, used instead of it (a sharded agent's
    ranks split the chunks, agents.sharding.rank_sliced_logprobs)."""
    started = time.perf_counter()
    problem_prompt_ids = [agent.prompt_ids(p.prompt) for p in problems]
    rollouts = agent.engine.generate(problem_prompt_ids, group, sampling)
    prompt_index = [r // group for r in range(len(rollouts))]
    graded = time.perf_counter()
    grades = task.grade(rollouts.texts, [problems[p] for p in prompt_index])
    rewards = torch.tensor([g.reward for g in grades], dtype=torch.float64)
    scored = time.perf_counter()
    args = (rollouts.prompt_ids, rollouts.response_ids, agent.pad_id, score_batch_size, sampling.temperature)
    score = score or batched_response_logprobs
    old = score(agent.model, *args)
    ref = score(agent.reference, *args) if agent.reference is not None else None
    done = time.perf_counter()
    times["generate"] += graded - started
    times["reward"] += scored - graded
    times["score_own"] += done - scored
    return SourceRollouts(
        agent=index,
        prompt_index=prompt_index,
        prompt_ids=rollouts.prompt_ids,
        response_ids=rollouts.response_ids,
        texts=rollouts.texts,
        rewards=rewards,
        old_token_logp=old,
        sampling=sampling,
        ref_token_logp=ref,
        problem_prompt_ids=problem_prompt_ids,
    )
