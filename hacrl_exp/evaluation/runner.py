"""Evaluate one in-memory agent on benchmarks: generate through its rollout engine, grade, score, bootstrap.

`evaluate_agent` is shared by the CLI (`python -m hacrl_exp.evaluate`) and the trainer (every N steps), so both
produce the same numbers. Prompts are the benchmark's template rendered with the agent's chat template (or as plain
text, `Agent.prompt_ids`), cut to fit the model's position limit. Sampling runs under `torch.random.fork_rng`, seeded
per benchmark, so evaluating never moves the caller's RNG stream (a resumed training run stays exact).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from hacrl_exp.agents.agent import Agent
from hacrl_exp.evaluation.data import load_problems
from hacrl_exp.evaluation.metrics import CORRECT, Metric, bootstrap_ci, parse_metric, problem_score
from hacrl_exp.evaluation.spec import BenchmarkSpec, Generation, load_benchmark
from hacrl_exp.rewards import FORMS, Grade, Grader, resolve_compare
from hacrl_exp.rewards.forms import compact
from hacrl_exp.rollout.base import SamplingSettings, compute_device
from hacrl_exp.tasks.base import Problem
from hacrl_exp.tasks.math import gold_answer, question_text

if TYPE_CHECKING:  # the schema module registers Hydra configs: not imported by a training run's evaluation
    from hacrl_exp.config.evaluate_schema import EvaluateConfig

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, int]] = set()
COUNTS = ("problems", "samples_per_problem", "no_answer_rate", "timeouts", "grader_errors", "truncated_rate")


@dataclass(frozen=True)
class EvalSettings:
    """Evaluation settings; None means "the benchmark's own default" (its YAML `generation` block)."""

    data_dir: str | None = None
    """JSONL folder; default $HACRL_DATA_DIR."""
    source: str = "auto"
    """auto | local | hf (see hacrl_exp.evaluation.data)."""
    limit: int | None = None
    """Only the first `limit` problems of each benchmark."""
    samples: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_new_tokens: int | None = None
    seed: int = 0
    """Seeds sampling (per benchmark) and the bootstrap."""
    bootstrap: int = 1000
    """Bootstrap resamples for the 95% CIs (0: none)."""
    grader_timeout_s: float = 5.0
    grader_workers: int = 1
    grader_forms: str = FORMS[0]
    """The grading policy rewards follow (`hacrl_exp.rewards.FORMS`); the other's headline is reported beside it."""

    @classmethod
    def from_config(cls, config: EvaluateConfig) -> EvalSettings:
        """The settings of `python -m hacrl_exp.evaluate`: its config's fields, the one place they are copied."""
        return cls(
            data_dir=config.data_dir,
            source=config.source,
            limit=config.limit,
            samples=config.samples,
            temperature=config.sampling.temperature,
            top_p=config.sampling.top_p,
            top_k=config.sampling.top_k,
            max_new_tokens=config.max_new_tokens,
            seed=config.seed,
            bootstrap=config.bootstrap,
            grader_timeout_s=config.grader.timeout_s,
            grader_workers=config.grader.workers,
            grader_forms=config.grader.forms,
        )

    def generation(self, spec: BenchmarkSpec) -> Generation:
        """The benchmark's generation defaults with these settings' overrides applied."""
        overrides = {k: getattr(self, k) for k in ("samples", "temperature", "top_p", "top_k", "max_new_tokens")}
        return replace(spec.generation, **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class EvalResult:
    """Everything one agent's evaluation produced. `summary` is tidy: one row per (benchmark, metric)."""

    samples: pd.DataFrame
    """One row per response: benchmark, problem_id, category, sample, response, extracted, reward, reason (under
    `grader_forms`), reward_forms_requested, reward_forms_value (under each policy), ..."""
    problems: pd.DataFrame
    """One row per problem: benchmark, problem_id, category, answer, n, correct, one column per metric."""
    summary: pd.DataFrame
    """benchmark, metric, value, ci_low, ci_high, n. Under the `math` rule the headline is also given under the other
    grading policy, as `<headline>_forms_<policy>`."""
    params: dict[str, str] = field(default_factory=dict)
    """The grading policy (`grader.forms`), prompt templates, effective generation settings and data versions, for
    MLflow params."""

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat `<prefix><benchmark>/<metric>` values, plus `_ci_low` / `_ci_high` where a CI exists."""
        out = {}
        for row in self.summary.itertuples(index=False):
            key = f"{prefix}{row.benchmark}/{row.metric}"
            out[key] = float(row.value)
            if not np.isnan(row.ci_low):
                out[f"{key}_ci_low"], out[f"{key}_ci_high"] = float(row.ci_low), float(row.ci_high)
        return out


def evaluate_agent(
    agent: Agent,
    benchmarks: Sequence[str | BenchmarkSpec],
    settings: EvalSettings | None = None,
    *,
    grader: Grader | None = None,
    problems: Mapping[str, list[Problem]] | None = None,
) -> EvalResult:
    """Evaluate `agent` on each benchmark (a name or a loaded spec) and return per-sample, per-problem and summary
    tables. `grader`: a running Grader to reuse (e.g. the training task's); else one is started and stopped here.
    `problems`: already-loaded problems by benchmark name (else read with `settings.data_dir` / `limit`)."""
    settings = settings or EvalSettings()
    specs = [b if isinstance(b, BenchmarkSpec) else load_benchmark(b) for b in benchmarks]
    data = {
        s.name: (problems or {}).get(s.name) or load_problems(s, settings.data_dir, settings.limit, settings.source)
        for s in specs
    }
    samples, tables, summaries, params = [], [], [], {"grader.forms": settings.grader_forms}
    own = grader is None
    grader = grader or Grader(settings.grader_timeout_s, settings.grader_workers)
    try:
        for spec in specs:
            gen = settings.generation(spec)
            frame, effective = _run_benchmark(
                agent, spec, data[spec.name], gen, settings.seed, grader, settings.grader_forms
            )
            table, summary = score_benchmark(
                frame, spec, gen.samples, settings.seed, settings.bootstrap, forms=settings.grader_forms
            )
            samples.append(frame)
            tables.append(table)
            summaries.append(summary)
            params.update(_params(spec, effective, agent))
    finally:
        if own:
            grader.close()
    return EvalResult(
        pd.concat(samples, ignore_index=True),
        pd.concat(tables, ignore_index=True),
        pd.concat(summaries, ignore_index=True),
        params,
    )


def token_budget(agent: Agent, max_new_tokens: int) -> tuple[int, int]:
    """(max prompt tokens, max new tokens) that fit the model's position limit P (when it has one).

    Unchanged when max_prompt_tokens + max_new_tokens <= P; otherwise new tokens get min(max_new_tokens, P // 2) and
    the prompt the rest (prompts are cut on the left, keeping the question's end and the instruction).
    """
    config = agent.model.config
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    prompt = agent.max_prompt_tokens
    if limit is None or prompt + max_new_tokens <= limit:
        return prompt, max_new_tokens
    new = min(max_new_tokens, limit // 2)
    return min(prompt, limit - new), new


def _run_benchmark(
    agent: Agent,
    spec: BenchmarkSpec,
    problems: list[Problem],
    gen: Generation,
    seed: int,
    grader: Grader,
    forms: str = FORMS[0],
) -> tuple[pd.DataFrame, Generation]:
    """Generate gen.samples responses per problem, extract and grade them (under policy `forms`): one DataFrame row
    per response."""
    if gen.samples > 1 and gen.temperature == 0:
        raise ValueError(f"benchmark {spec.name}: {gen.samples} samples with greedy decoding repeat one answer")
    prompt_limit, new_tokens = token_budget(agent, gen.max_new_tokens)
    if new_tokens < gen.max_new_tokens and (agent.name, gen.max_new_tokens) not in _WARNED:
        _WARNED.add((agent.name, gen.max_new_tokens))
        log.warning("%s: its position limit fits %d new tokens, not %d", agent.name, new_tokens, gen.max_new_tokens)
    gen = replace(gen, max_new_tokens=new_tokens)
    prompts = [agent.prompt_ids(p.prompt)[-prompt_limit:] for p in problems]
    sampling = SamplingSettings(
        gen.temperature, gen.top_p, gen.top_k, gen.max_new_tokens, do_sample=gen.temperature > 0
    )
    device = compute_device(agent.model)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed * 1_000_003 + zlib.crc32(spec.name.encode()))  # per benchmark, order-independent
        rollouts = agent.engine.generate(prompts, gen.samples, sampling)
    owner = [problems[r // gen.samples] for r in range(len(rollouts))]
    grades = grade_responses(grader, spec, rollouts.texts, owner, forms=forms)
    frame = pd.DataFrame(
        {
            "benchmark": spec.name,
            "problem_id": [p.id for p in owner],
            "id": [p.id for p in owner],  # the trainer's eval records name it id: the same columns in both
            "category": [p.category for p in owner],
            "sample": [r % gen.samples for r in range(len(rollouts))],
            "prompt": [p.prompt for p in owner],
            "response": rollouts.texts,
            "extracted": [g.extracted for g in grades],
            "gold": [gold_answer(p, spec.grader) for p in owner],
            "answer": [p.answer for p in owner],
            "reward": [g.reward for g in grades],
            "reason": [g.reason for g in grades],
            **{f"reward_forms_{forms}": [g.reward_under(forms) for g in grades] for forms in FORMS},
            "finished": rollouts.finished,
            "prompt_tokens": [len(ids) for ids in rollouts.prompt_ids],
            "response_tokens": [len(ids) for ids in rollouts.response_ids],
        }
    )
    return frame, gen


def grade_responses(
    grader: Grader,
    spec: BenchmarkSpec,
    responses: Sequence[str],
    problems: Sequence[Problem],
    forms: str = FORMS[0],
) -> list[Grade]:
    """A benchmark's verdicts: `grader.grade` with the benchmark's extractor and comparison rule, each response against
    its problem's gold answer (`gold_answer`: the raw answer for `grader: verl`) and text (for the forms the question
    asks for), under grading policy `forms`. The training task makes the same call (`MathTask.grade`), so a reward and
    an evaluation verdict on the same response agree."""
    golds = [gold_answer(p, spec.grader) for p in problems]
    questions = [question_text(p) for p in problems]
    return grader.grade(
        responses, golds, extractor=spec.answer_extractor, compare=spec.grader, questions=questions, forms=forms
    )


def vote_key(extracted: str | None, reward: float) -> str | None:
    """maj@k vote of one response: CORRECT when graded right, else its normalised answer; None (or NaN, as pandas
    stores a missing string) abstains."""
    if reward >= 1.0:
        return CORRECT
    return compact(extracted) if isinstance(extracted, str) else None


def score_benchmark(
    frame: pd.DataFrame,
    spec: BenchmarkSpec,
    samples: int,
    seed: int = 0,
    n_boot: int = 1000,
    *,
    forms: str = FORMS[0],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-problem metric scores and the tidy summary (value, bootstrap CI) of one benchmark's responses.

    Metrics needing more samples than were drawn (e.g. best@30 with samples=4) are skipped with a warning. `frame`'s
    rewards follow policy `forms`; under the `math` rule the headline under the other policy is added as
    `<headline>_forms_<other>` (from the `reward_forms_<other>` column, with its own bootstrap CI, same seed).
    """
    metrics: list[Metric] = []
    for text in spec.metrics:
        metric = parse_metric(text)
        if metric.k <= samples:
            metrics.append(metric)
        else:
            log.warning("%s: %s skipped, it needs %d samples per problem (got %d)", spec.name, text, metric.k, samples)
    rows = []
    for pid, group in frame.groupby("problem_id", sort=False):
        group = group.sort_values("sample")
        rewards = group["reward"].tolist()
        votes = _votes(group, rewards)
        row = {
            "benchmark": spec.name,
            "problem_id": pid,
            "category": group["category"].iat[0],
            "answer": group["answer"].iat[0],
            "n": len(rewards),
            "correct": int(sum(r >= 1.0 for r in rewards)),
        }
        row.update({m.name: problem_score(m, rewards, votes) for m in metrics})
        rows.append(row)
    table = pd.DataFrame(rows)
    names = [m.name for m in metrics]
    scores = table[names].to_numpy(dtype=np.float64)
    low, high = bootstrap_ci(scores, n_boot, seed) if names else ([], [])
    summary = [
        (spec.name, name, float(scores[:, j].mean()), float(low[j]), float(high[j]), len(table))
        for j, name in enumerate(names)
    ]
    counts = {
        "problems": len(table),
        "samples_per_problem": samples,
        "no_answer_rate": float((frame["reason"] == "no_answer").mean()),
        "timeouts": int((frame["reason"] == "timeout").sum()),
        "grader_errors": int((frame["reason"] == "grader_error").sum()),
        "truncated_rate": float((~frame["finished"]).mean()),
    }
    summary += [(spec.name, k, float(v), np.nan, np.nan, len(frame)) for k, v in counts.items()]
    other = "reward_forms_" + next(f for f in FORMS if f != forms)
    if spec.headline in names and resolve_compare(spec.grader) == "math" and other in frame:
        summary.append(_other_forms_row(frame, spec, parse_metric(spec.headline), other, seed, n_boot))
    if spec.headline in names and table["category"].nunique() > 1:  # headline per MATH subject / arithmetic tier
        for category, part in table.groupby("category", sort=True):
            key = f"{spec.headline}/{_slug(category)}"
            summary.append((spec.name, key, float(part[spec.headline].mean()), np.nan, np.nan, len(part)))
    columns = ["benchmark", "metric", "value", "ci_low", "ci_high", "n"]
    return table, pd.DataFrame(summary, columns=columns)


def _votes(group: pd.DataFrame, rewards: Sequence[float]) -> list[str | None]:
    return [vote_key(e, r) for e, r in zip(group["extracted"], rewards)]


def _other_forms_row(frame: pd.DataFrame, spec: BenchmarkSpec, headline: Metric, column: str, seed: int, n_boot: int):
    """The summary row of the headline scored on the rewards in `column` (`reward_forms_<policy>`), with its CI."""
    scores = []
    for _, group in frame.groupby("problem_id", sort=False):
        group = group.sort_values("sample")
        rewards = group[column].tolist()
        scores.append(problem_score(headline, rewards, _votes(group, rewards)))
    values = np.asarray(scores, dtype=np.float64)
    (low,), (high,) = bootstrap_ci(values, n_boot, seed)
    name = f"{headline.name}_{column.removeprefix('reward_')}"
    return (spec.name, name, float(values.mean()), float(low), float(high), len(values))


def _slug(text: str) -> str:
    """An MLflow-safe metric path component: 'Counting & Probability' -> 'counting_probability'."""
    return "_".join("".join(c if c.isalnum() else " " for c in str(text).lower()).split()) or "all"


def _params(spec: BenchmarkSpec, gen: Generation, agent: Agent) -> dict[str, str]:
    """Run params of one benchmark: template (as the model sees it), prompt format, version, generation."""
    prefix = f"{spec.name}/"
    return {
        f"{prefix}prompt_template": spec.template_text,
        f"{prefix}prompt_format": "chat_template" if agent.use_chat_template else "plain",
        f"{prefix}version": str(spec.version),
        f"{prefix}extractor": spec.answer_extractor,
        f"{prefix}grader": spec.grader,
        **{f"{prefix}{k}": str(v) for k, v in vars(gen).items()},
    }
