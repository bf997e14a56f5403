"""The N-agent HACPO training loop. The driver keeps the loop, the capability estimates and the graph; each agent
is an `AgentWorker` (model, optimizer, rollout engine) in this process or a Ray actor (executor=local | ray), and
only text, rewards and per-sequence log-prob summaries pass between them. One step reads top to bottom, its phases
numbered as in trainer/step.py (one agent's whole step) and docs/architecture.md:

1-3 ROLLOUT, REWARD, SCORE OWN   every agent answers the same prompts, G samples each, graded and scored (step.py)
4   CAPABILITY                   one capability update per step, before any advantage (spec §2.2)
5-7 EXCHANGE, ADVANTAGE, UPDATE  each learner: its sources' shared rollouts, advantages, optimizer steps (step.py)
8   LOG                          one row per agent (train/, cross/, cost/, time/, memory/ of docs/metrics.md), one for
                                 the job
9   EVAL/CKPT                    on schedule; a checkpoint holds everything needed to resume exactly (runstate.py)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from tqdm.auto import tqdm

from hacrl_exp.algo import get_algorithm
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import NumericsError
from hacrl_exp.graph import AgentGraph, graph_from_config
from hacrl_exp.paths import output_error
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.rows import skipped_row_metrics
from hacrl_exp.trainer.costs import add_costs
from hacrl_exp.trainer.executor import make_executor
from hacrl_exp.trainer.heldout import accuracy_metrics
from hacrl_exp.trainer.metrics import progress_text
from hacrl_exp.trainer.params import LearnerParams, learner_params
from hacrl_exp.trainer.runfolder import RunFolder, RunLock, check_new_run_folder, prepare_run
from hacrl_exp.trainer.runstate import RunState, write_eval_records
from hacrl_exp.trainer.schedule import FILE as SCHEDULE_FILE
from hacrl_exp.trainer.signals import StopRequests
from hacrl_exp.trainer.step import SharedRollouts, with_shuffled_rewards

PHASES = ("generate", "reward", "score_own", "build_batch", "update")
"""The phases timed as time/<phase>_s: 1-3 on every agent (generate, reward, score_own), 5-7 on each learner."""
EvalHook = Callable[[int, dict], bool]


def train(config: Config, output_dir: Path, on_evaluate: EvalHook | None = None) -> dict:
    """Run (or resume) one experiment; returns the summary also written to <output_dir>/summary.json.

    on_evaluate(step, {agent: metrics}) runs after every evaluation but the first; returning True stops the run
    there (a pruned sweep trial), recorded as summary["stopped_early"] and the MLflow tag stopped_early=<step>.

    Checks come before anything is written (hacrl_exp.trainer.runfolder): a new run needs an empty folder, a resume
    an intact checkpoint of the same config. The run folder is locked while training. SIGINT/SIGTERM end the run
    after the current step and a checkpoint, raising RunInterrupted.
    """
    task = build_task(config.task)
    try:
        config, folder = prepare_run(config, Path(output_dir), task)  # a resume logs to its run's recorded store
        with RunLock(folder.output_dir), StopRequests(folder.output_dir) as stop, ExitStack() as cleanup:
            if folder.checkpoint is None:
                check_new_run_folder(folder.output_dir)  # again under the lock: another process may have started
            return _train(config, folder, task, on_evaluate, cleanup, stop)
    except OSError as exc:  # a full disk or a denied path in the run folder: one line naming it (paths.output_error)
        error = output_error(exc, Path(output_dir), f"then resume with trainer.resume={output_dir}")
        if error is None:
            raise
        raise error from None
    finally:
        close = getattr(task, "close", None)  # grader worker processes, if the task has any
        if close is not None:
            close()


def _train(
    config: Config, folder: RunFolder, task, on_evaluate: EvalHook | None, cleanup: ExitStack, stop: StopRequests
) -> dict:
    process_start = time.process_time()  # the job's own CPU seconds start here (a multirun reuses its processes)
    trainer = config.trainer
    if trainer.threads:
        torch.set_num_threads(trainer.threads)
    graph = graph_from_config(config.agents, config.algorithm.alpha)
    learners = learner_params(config, graph)  # every mechanism switch resolved here, once, and handed to the workers
    workers = cleanup.enter_context(make_executor(config, learners, task))  # one AgentWorker per agent, in order
    state = cleanup.enter_context(RunState.start_or_resume(config, folder, task, workers, process_start))
    names, capability = state.names, state.capability
    if workers.schedule is not None:  # shared placement: the agents' turns, from the checkpoint's step on a resume
        after = state.step if folder.checkpoint is not None else None
        workers.schedule.open(folder.output_dir / SCHEDULE_FILE, after)
    group_size = trainer.group_size * get_algorithm(config.algorithm.name).rollout_multiplier
    if folder.checkpoint is None:
        state.log.add(0, skipped_row_metrics(task), None, state.tracker)  # the task.bad_rows=skip report
        for name, warm_start in zip(names, workers.call_all("warm_start_metrics")):
            state.log.add(0, warm_start, name, state.tracker)  # where each warm start stopped
        evaluate(state, 0)
    bad_steps = 0  # consecutive steps in which some learner skipped every update (NaN/inf)
    bar = tqdm(range(state.step + 1, trainer.steps + 1), disable=not trainer.progress, desc=config.algorithm.name)
    for step in bar:
        if stop.signum is not None:
            break
        times = dict.fromkeys(PHASES, 0.0)
        started = time.perf_counter()
        if workers.schedule is not None:
            workers.schedule.step = step
        problems = task.train_problems(step, trainer.prompts_per_step)

        # 1-3 ROLLOUT, REWARD, SCORE OWN: every agent, before any update this step; each keeps its token ids and
        # per-token log-probs and shares text, rewards and its old mean log-prob per response (spec §1.2)
        rollouts = workers.rollout(problems, group_size, step)
        pool = {i: shared for i, (shared, _) in enumerate(rollouts)}
        agent_times = {names[i]: dict(phase_times) for i, (_, phase_times) in enumerate(rollouts)}
        workers.add_times(times, [phase_times for _, phase_times in rollouts])

        # 4 CAPABILITY: one update per step, before any learner's advantages
        capability.update([pool[i].rewards for i in pool], [pool[i].categories for i in pool])
        loss_weights = capability.loss_weights([p.category for p in problems])  # ρ[k, j] or ρ[k, p, j]

        # 5-7 EXCHANGE, ADVANTAGE, UPDATE: each learner gets its sources' shared rollouts and its ρ. Learners only
        # read pre-update rollouts, so they may update in parallel.
        learned = workers.learn(
            {k: (sources_for(p, pool, config.seed, step), loss_weights[k]) for k, p in learners.items()}
        )
        workers.add_times(times, [phase_times for _, phase_times in learned.values()])
        step_metrics = {name: {} for name in names} | {names[k]: metrics for k, (metrics, _) in learned.items()}
        for k, (_, phase_times) in learned.items():
            agent_times[names[k]].update(phase_times)
        bad_steps = count_bad_steps(bad_steps, graph, step_metrics)

        # 8 LOG
        step_time = time.perf_counter() - started
        log_step(state, step, learners, pool, step_metrics, agent_times, times, step_time)
        if bad_steps >= trainer.max_bad_steps:
            state.log.flush(state.tracker)
            raise NumericsError(
                f"{bad_steps} consecutive steps had non-finite gradients for "
                f"{[n for n in graph.learners if is_bad_step(step_metrics[n])]} (every update skipped); lower the "
                "agents' lr, check trainer.max_grad_norm, or raise trainer.max_bad_steps"
            )
        bar.set_postfix_str(progress_text(names, pool, capability.batch, step_time))
        # with checkpoints, metrics become durable together with the checkpoint that covers them, so a resumed run
        # never logs a step twice; without, they are flushed every tracking.flush_every steps for a live view
        if not trainer.checkpoint_every and step % config.tracking.flush_every == 0:
            state.log.flush(state.tracker)

        # 9 EVAL / CHECKPOINT
        if (trainer.eval_every and step % trainer.eval_every == 0) or step == trainer.steps:
            evaluate(state, step)
            if on_evaluate is not None and step < trainer.steps and on_evaluate(step, state.evals[step]):
                state.stopped_early = step
        last = state.finished or state.stopped_early is not None
        if (trainer.checkpoint_every and step % trainer.checkpoint_every == 0) or last:
            state.save(step)
        if state.stopped_early is not None or (trainer.stop_after is not None and step >= trainer.stop_after):
            break
    bar.close()
    return state.finish(stop)


def sources_for(p: LearnerParams, pool: dict[int, SharedRollouts], seed: int, step: int) -> dict:
    """Learner p's sources' rollouts: as shared, or with their rewards permuted within the step for the shuffle
    control (LearnerParams.shuffle_partner_rewards; step.with_shuffled_rewards)."""
    if not p.shuffle_partner_rewards:
        return {j: pool[j] for j in p.sources}
    return {j: with_shuffled_rewards(pool[j], seed, step, p.index) for j in p.sources}


def evaluate(state: RunState, step: int) -> None:
    """Phase 9's held-out evaluation of every agent: greedy answers to the run's held-out problems (one record per
    problem in eval/step_<step>/<agent>.jsonl, for the report's paired tests), eval/* and benchmark metrics."""
    results = state.workers.evaluate(state.eval_set, state.config.rollout.max_new_tokens)
    state.evals[step] = {name: accuracy_metrics(records) for name, (records, _) in zip(state.names, results)}
    for name, (records, _) in zip(state.names, results):
        path = write_eval_records(state.output_dir, step, name, records)
        state.tracker.log_file(path, name, f"eval/step_{step:06d}")
    for name, (_, benchmark_metrics) in zip(state.names, results):
        metrics = {f"eval/{k}": v for k, v in state.evals[step][name].items()}
        state.log.add(step, {**metrics, **benchmark_metrics}, name, state.tracker)


def log_step(
    state: RunState,
    step: int,
    learners: dict[int, LearnerParams],
    pool: dict[int, SharedRollouts],
    step_metrics: dict[str, dict[str, float]],
    agent_times: dict[str, dict[str, float]],
    times: dict[str, float],
    step_time: float,
) -> None:
    """Phase 8: the step's counters and costs added to the run's totals, then one metric row per agent (reward,
    totals, costs, the learner's train/ and cross/ metrics, its capability, its phase seconds) and one for the job."""
    state.step, state.steps_run = step, state.steps_run + 1
    for name, taken in zip(state.names, state.workers.take_costs()):
        add_costs(state.costs[name], taken)
    for i, name in enumerate(state.names):
        state.counters[name]["rollouts_total"] += len(pool[i].texts)
        state.counters[name]["tokens_total"] += float(pool[i].num_tokens.sum())
        sources = learners[i].sources if i in learners else None
        metrics = {"train/reward_mean": float(pool[i].rewards.mean())}
        metrics |= {f"train/{key}": value for key, value in state.counters[name].items()}
        metrics |= {f"cost/{key}": value for key, value in state.costs[name].items()}
        metrics |= step_metrics[name] | state.capability.metrics(i, state.names, sources)
        metrics |= {f"time/{phase}_s": seconds for phase, seconds in agent_times[name].items()}
        state.log.add(step, metrics, name, state.tracker)
    phases = {f"time/{k}_s": v for k, v in times.items()}
    job_times = {"time/step_s": step_time, "time/other_s": step_time - sum(times.values()), **phases}
    state.log.add(step, {**job_times, "cost/process_seconds": state.job_process_seconds()}, None, state.tracker)


def is_bad_step(metrics: dict[str, float]) -> bool:
    """True when a learner skipped every update that had a gradient (NaN/inf), and there was at least one."""
    skipped = metrics["train/skipped_updates"]
    nonempty = metrics["train/updates"] - metrics.get("train/empty_updates", 0.0)
    return skipped > 0 and skipped == nonempty


def count_bad_steps(bad_steps: int, graph: AgentGraph, step_metrics: dict[str, dict[str, float]]) -> int:
    """Consecutive bad steps after this one: +1 when a learner skipped every update for non-finite values, 0 when
    every learner with a gradient stepped; a step with no gradient at all neither counts nor resets."""
    if any(is_bad_step(step_metrics[n]) for n in graph.learners):
        return bad_steps + 1
    learned = [step_metrics[n] for n in graph.learners]
    ran = any(metrics["train/updates"] > metrics.get("train/empty_updates", 0.0) for metrics in learned)
    return 0 if ran else bad_steps
