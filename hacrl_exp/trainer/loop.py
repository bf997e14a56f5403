"""The N-agent HACPO training loop. One step reads top to bottom:

1 ROLLOUT     every agent answers the same prompts, G samples each
2 REWARD      the task's grader (the same one the evaluation uses)
3 SCORE OWN   each source's old log-probs before any update (spec §1.2), reference log-probs for KL
4 CAPABILITY  tracker.update(accuracy) before any advantage (spec §2.2)
5 EXCHANGE    re-tokenise partners' rollouts for each learner, then its advantages (spec §1.3, §2.1)
6 UPDATE      for u in range(updates): loss(..., L_u)  (spec §1.6, §2.5)
7 LOG         one row per agent: reward, capability, ω, cross-ratio statistics, times, counters
8 EVAL/CKPT   on schedule; a checkpoint holds everything needed to resume exactly
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from hacrl_exp.agents.factory import make_agents
from hacrl_exp.algo import CapabilityTracker, Mechanisms, get_algorithm
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.graph import build_graph
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.scoring import batched_response_logprobs
from hacrl_exp.tasks import build_task
from hacrl_exp.tracking import make_tracker
from hacrl_exp.trainer.checkpoint import find_checkpoint, load_checkpoint, save_checkpoint
from hacrl_exp.trainer.evaluation import greedy_accuracy
from hacrl_exp.trainer.metrics import MetricsLog, capability_metrics, progress_text
from hacrl_exp.trainer.pool import SourceRollouts, build_learner_batch
from hacrl_exp.trainer.update import update_learner

PHASES = ("generate", "reward", "score_own", "score_cross", "update")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def train(config: Config, output_dir: Path) -> dict:
    """Run (or resume) one experiment; returns the summary also written to <output_dir>/summary.json."""
    task = build_task(config.task)
    try:
        return _train(config, output_dir, task)
    finally:
        close = getattr(task, "close", None)  # grader worker processes, if the task has any
        if close is not None:
            close()


def _train(config: Config, output_dir: Path, task) -> dict:
    trainer, algo_cfg = config.trainer, config.algorithm
    if trainer.threads:
        torch.set_num_threads(trainer.threads)
    checkpoint = None
    if trainer.resume:
        checkpoint = find_checkpoint(Path(trainer.resume))
        if checkpoint is None:
            raise ConfigError(f"trainer.resume={trainer.resume!r} holds no complete checkpoint; give a run folder")
        output_dir = checkpoint.parent.parent  # continue in the interrupted run's folder
    output_dir.mkdir(parents=True, exist_ok=True)
    device = resolve_device(trainer.device)
    algorithm = get_algorithm(algo_cfg.name)
    mechanisms = Mechanisms(**asdict(config.mechanisms))
    members = config.agents.members
    names = list(members)
    graph = build_graph(
        names,
        config.agents.topology,
        {n: a.frozen for n, a in members.items()},
        algo_cfg.alpha,
        {n: a.alpha_from for n, a in members.items()},
        {n: a.learns_from for n, a in members.items()},
        config.agents.hub,
    )
    agents = make_agents(config, task, device)
    capability = CapabilityTracker(len(names), algo_cfg.capability_window, warmup_steps=algo_cfg.capability_warmup)
    by_category = {
        c: CapabilityTracker(len(names), algo_cfg.capability_window, warmup_steps=algo_cfg.capability_warmup)
        for c in task.categories
    }
    counters = {n: {"rollouts_total": 0.0, "tokens_total": 0.0} for n in names}
    start_step, run_ids = 0, None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, agents)
        start_step, counters, run_ids = state["step"], state["counters"], state["run_ids"]
        capability.load_state_dict(state["capability"])
        for c, s in state["capability_by_category"].items():
            by_category[c].load_state_dict(s)
    else:
        torch.manual_seed(config.seed)  # after warm start, so a cached warm start changes nothing
    log = MetricsLog(output_dir / "metrics.jsonl", truncate_after=start_step if checkpoint else None)
    params = json.loads(json.dumps(asdict(config)))
    tags = {
        "algorithm": algo_cfg.name,
        "seed": str(config.seed),
        "task": config.task.name,
        "agents": ",".join(names),
        "output_dir": str(output_dir),
    }
    tracker = make_tracker(config.tracking, params, names, tags, run_ids)
    (output_dir / "config.json").write_text(json.dumps(params, indent=1))

    group = trainer.group_size * algorithm.rollout_multiplier
    sampling = SamplingSettings(
        config.rollout.temperature, config.rollout.top_p, max_new_tokens=config.rollout.max_new_tokens
    )
    eval_set = task.eval_problems()[: trainer.eval_limit or None]
    evals: dict[int, dict[str, dict[str, float]]] = {}

    def evaluate(step: int) -> None:
        evals[step] = {a.name: greedy_accuracy(a, task, eval_set, config.rollout.max_new_tokens) for a in agents}
        for name, metrics in evals[step].items():
            log.add(step, {f"eval/{k}": v for k, v in metrics.items()}, name, tracker)

    def checkpoint_now(step: int) -> None:
        state = {
            "counters": counters,
            "run_ids": tracker.run_ids,
            "capability": capability.state_dict(),
            "capability_by_category": {c: t.state_dict() for c, t in by_category.items()},
        }
        log.flush(tracker)  # metrics up to this step are durable before the checkpoint names it
        save_checkpoint(output_dir / "checkpoints", step, agents, state, trainer.keep_checkpoints)

    if start_step == 0:
        evaluate(0)
    step_times: list[float] = []
    bar = tqdm(range(start_step + 1, trainer.steps + 1), disable=not trainer.progress, desc="hacpo", unit="step")
    for step in bar:
        times = dict.fromkeys(PHASES, 0.0)
        started = time.perf_counter()
        problems = task.train_problems(step, trainer.prompts_per_step)
        prompt_index = [p for p in range(len(problems)) for _ in range(group)]
        pool: dict[int, SourceRollouts] = {}
        learner_prompts = {}
        for i, agent in enumerate(agents):
            # 1 ROLLOUT
            t = time.perf_counter()
            learner_prompts[i] = [agent.prompt_ids(p.prompt) for p in problems]
            rollouts = agent.engine.generate(learner_prompts[i], group, sampling)
            times["generate"] += time.perf_counter() - t
            # 2 REWARD
            t = time.perf_counter()
            grades = task.grade(rollouts.texts, [problems[p] for p in prompt_index])
            rewards = torch.tensor([g.reward for g in grades], dtype=torch.float64)
            times["reward"] += time.perf_counter() - t
            # 3 SCORE OWN: old log-probs from the training model, before any update this step
            t = time.perf_counter()
            score = dict(pad_id=agent.pad_id, batch_size=trainer.micro_batch_size)
            old = batched_response_logprobs(agent.model, rollouts.prompt_ids, rollouts.response_ids, **score)
            ref = None
            if agent.reference is not None:
                ref = batched_response_logprobs(agent.reference, rollouts.prompt_ids, rollouts.response_ids, **score)
            times["score_own"] += time.perf_counter() - t
            pool[i] = SourceRollouts(
                i, prompt_index, rollouts.prompt_ids, rollouts.response_ids, rollouts.texts, rewards, old, ref
            )
            counters[agent.name]["rollouts_total"] += len(rollouts)
            counters[agent.name]["tokens_total"] += rollouts.num_tokens

        # 4 CAPABILITY: one update per step, before any learner's advantages
        # accuracy = share of responses with R > 0 (spec §2.2), the same as the mean for 0/1 rewards
        capability.update([float((pool[i].rewards > 0).double().mean()) for i in range(len(agents))])
        category_of = [problems[p].category for p in prompt_index]
        category_accuracy = {}
        for c, tracker_c in by_category.items():
            rows = torch.tensor([x == c for x in category_of])
            if bool(rows.any()):
                category_accuracy[c] = [float((pool[i].rewards[rows] > 0).double().mean()) for i in range(len(agents))]
                tracker_c.update(category_accuracy[c])
        if algo_cfg.capability_scope == "category":
            loss_weights = torch.stack([by_category[p.category].loss_weights() for p in problems], dim=1)  # (N, P, N)
        else:
            loss_weights = capability.loss_weights()  # (N, N): ρ[k, j]

        step_metrics = {name: {} for name in names}
        for learner_name in graph.learners:
            k = names.index(learner_name)
            # 5 EXCHANGE + ADVANTAGE
            t = time.perf_counter()
            batch = build_learner_batch(
                k,
                graph.sources_of(learner_name),
                names,
                pool,
                learner_prompts[k],
                agents[k].tokenizer,
                config.rollout.max_new_tokens,
                algorithm,
                mechanisms,
                1.0 / loss_weights[k],
                loss_weights[k],
                algo_cfg.adv_eps,
            )
            times["score_cross"] += time.perf_counter() - t
            # 6 UPDATE
            t = time.perf_counter()
            step_metrics[learner_name] = update_learner(
                agents[k], batch, names, algorithm, algo_cfg, mechanisms, trainer
            )
            times["update"] += time.perf_counter() - t

        # 7 LOG
        step_time = time.perf_counter() - started
        step_times.append(step_time)
        for i, name in enumerate(names):
            metrics = {"reward/mean": float(pool[i].rewards.mean()), **counters[name], **step_metrics[name]}
            metrics.update(
                capability_metrics(i, names, capability, by_category, category_accuracy, algo_cfg.capability_scope)
            )
            log.add(step, metrics, name, tracker)
        other = step_time - sum(times.values())
        log.add(
            step,
            {"time/step": step_time, "time/other": other, **{f"time/{k}": v for k, v in times.items()}},
            None,
            tracker,
        )
        bar.set_postfix_str(progress_text(names, pool, capability, step_time))

        # 8 EVAL / CHECKPOINT
        if (trainer.eval_every and step % trainer.eval_every == 0) or step == trainer.steps:
            evaluate(step)
        if (trainer.checkpoint_every and step % trainer.checkpoint_every == 0) or step == trainer.steps:
            checkpoint_now(step)
        if trainer.stop_after is not None and step >= trainer.stop_after:
            break
    bar.close()
    log.flush(tracker)
    finished = step_times and (start_step + len(step_times)) >= trainer.steps
    summary = {
        "steps_run": len(step_times),
        "last_step": start_step + len(step_times),
        "seconds_per_step": sum(step_times) / max(len(step_times), 1),
        "evals": evals,
        "counters": counters,
        "run_ids": tracker.run_ids,
        "output_dir": str(output_dir),
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if finished and trainer.save_final_models:
        final = output_dir / "checkpoints" / (output_dir / "checkpoints" / "latest").read_text().strip()
        if config.tracking.log_models:
            for agent in agents:
                tracker.log_artifacts(final / "agents" / agent.name, "model", agent.name)
    tracker.close("FINISHED" if finished else "KILLED")
    return summary
