"""The N-agent HACPO training loop. The driver keeps the loop, the capability trackers and the graph; each agent
is an `AgentWorker` (model, optimizer, rollout engine) in this process or a Ray actor (executor=local | ray), and
only text, rewards and per-sequence log-prob summaries pass between them. One step reads top to bottom:

1 ROLLOUT     every agent answers the same prompts, G samples each        (trainer/rollouts.py: collect_rollouts)
2 REWARD      the task's grader (the same one the evaluation uses)
3 SCORE OWN   each source's old log-probs before any update (spec §1.2), reference log-probs for KL
4 CAPABILITY  tracker.update(accuracy) before any advantage (spec §2.2)
5 LEARN       each learner: pool, exchange, advantages, schedule, loss, optimizer step (trainer/step.py)
6 LOG         one row per agent (train/, cross/, time/, memory/ of docs/metrics.md) and one for the job
7 EVAL/CKPT   on schedule; a checkpoint holds everything needed to resume exactly
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from tqdm.auto import tqdm

from hacrl_exp.algo import get_algorithm
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import NumericsError, RunInterrupted
from hacrl_exp.graph import graph_from_config
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.rows import skipped_row_metrics
from hacrl_exp.tracking import make_tracker
from hacrl_exp.tracking_names import applicable_params, hydra_grid, run_name, run_tags
from hacrl_exp.tracking_provenance import problems_dataset, source_tags
from hacrl_exp.trainer.capability_estimates import CapabilityEstimates
from hacrl_exp.trainer.checkpoint import find_checkpoint, load_checkpoint, save_checkpoint, write_text_atomic
from hacrl_exp.trainer.evaluation import accuracy_metrics
from hacrl_exp.trainer.executor import make_executor
from hacrl_exp.trainer.metrics import MetricsLog, final_metrics, progress_text, run_history
from hacrl_exp.trainer.params import learner_params
from hacrl_exp.trainer.runfolder import RunLock, RunPlan, check_new_run_folder, config_hash, config_params, prepare_run
from hacrl_exp.trainer.signals import StopRequests

PHASES = ("generate", "reward", "score_own", "build_batch", "update")
EvalHook = Callable[[int, dict], bool]


def is_bad_step(metrics: dict[str, float]) -> bool:
    """True when a learner skipped every update that had a gradient (NaN/inf), and there was at least one."""
    skipped = metrics["train/skipped_updates"]
    nonempty = metrics["train/updates"] - metrics.get("train/empty_updates", 0.0)
    return skipped > 0 and skipped == nonempty


def train(config: Config, output_dir: Path, on_evaluate: EvalHook | None = None) -> dict:
    """Run (or resume) one experiment; returns the summary also written to <output_dir>/summary.json.

    on_evaluate(step, {agent: metrics}) runs after every evaluation but the first; returning True stops the run
    there (a pruned sweep trial), recorded as summary["stopped_early"] and the MLflow tag stopped_early=<step>.

    Checks come before anything is written (hacrl_exp.trainer.runfolder): a new run needs an empty folder, a resume
    an intact checkpoint of the same config. The run folder is locked while training. SIGINT/SIGTERM end the run
    after the current step and a checkpoint, raising RunInterrupted.
    """
    config, plan = prepare_run(config, Path(output_dir))  # a resume logs to its run's store, wherever launched
    task = build_task(config.task)
    try:
        with RunLock(plan.output_dir), StopRequests() as stop, ExitStack() as cleanup:
            if plan.checkpoint is None:
                check_new_run_folder(plan.output_dir)  # again under the lock: another process may have started
            return _train(config, plan, task, on_evaluate, cleanup, stop)
    except KeyboardInterrupt:
        raise RunInterrupted(
            f"stopped at once; resume from the last checkpoint with trainer.resume={plan.output_dir}", 130
        ) from None
    finally:
        close = getattr(task, "close", None)  # grader worker processes, if the task has any
        if close is not None:
            close()


def _train(
    config: Config, plan: RunPlan, task, on_evaluate: EvalHook | None, cleanup: ExitStack, stop: StopRequests
) -> dict:
    trainer, algo_cfg = config.trainer, config.algorithm
    if trainer.threads:
        torch.set_num_threads(trainer.threads)
    checkpoint, output_dir = plan.checkpoint, plan.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    algorithm = get_algorithm(algo_cfg.name)
    graph = graph_from_config(config.agents, algo_cfg.alpha)
    names = list(graph.names)
    learners = learner_params(config, graph)  # every mechanism switch resolved here, once; errors before any model
    workers = cleanup.enter_context(make_executor(config, task))  # one AgentWorker per agent, in declared order
    capability = CapabilityEstimates(
        len(names), task.categories, algo_cfg.capability_window, algo_cfg.capability_warmup, algo_cfg.capability_scope
    )
    counters = {n: {"rollouts_total": 0.0, "tokens_total": 0.0} for n in names}
    start_step, run_ids = 0, None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint)
        workers.load(checkpoint)
        start_step, counters, run_ids = state["step"], state["counters"], state["run_ids"]
        capability.load_state_dict(state["capability"])
    else:
        torch.manual_seed(config.seed)  # the driver's; each worker samples from its own (seed, agent) stream
    log = MetricsLog(output_dir / "metrics.jsonl", truncate_after=start_step if checkpoint else None)
    params = config_params(config)  # config.json, checkpoints and MLflow params hold no secret
    # names, tags, the params that apply and provenance: docs/tracking.md
    tags = {**run_tags(config, hydra_grid()), "output_dir": str(output_dir)}
    tracker = make_tracker(
        config.tracking, applicable_params(params), names, tags, run_ids, run_name(config), source_tags()
    )
    eval_set = task.eval_problems()[: trainer.eval_limit or None]
    if checkpoint is None:
        write_text_atomic(output_dir / "config.json", json.dumps(params, indent=1))
        tracker.log_file(output_dir / "config.json")  # the full resolved config, as an artifact of the parent run
        source = getattr(task, "eval_source", None) or f"hacrl_exp.tasks:{config.task.name} (seed {config.task.seed})"
        tracker.log_datasets([(problems_dataset(f"{config.task.name}/eval", eval_set, str(source)), "eval")])
    else:
        log.replay(tracker)  # metrics an unreachable store missed before the checkpoint (MLflow skips what it has)

    group = trainer.group_size * algorithm.rollout_multiplier
    rollout = config.rollout
    sampling = SamplingSettings(rollout.temperature, rollout.top_p, max_new_tokens=rollout.max_new_tokens)
    log.add(0, skipped_row_metrics(task) if checkpoint is None else {}, None, tracker)  # task.bad_rows=skip report
    evals: dict[int, dict[str, dict[str, float]]] = {}

    def evaluate(step: int) -> None:
        evals[step] = {}
        results = workers.evaluate(eval_set, rollout.max_new_tokens)  # (records, benchmark metrics) per agent
        for name, (records, _) in zip(names, results):  # per-problem records feed paired tests (hacrl_exp.report)
            evals[step][name] = accuracy_metrics(records)
            path = output_dir / "eval" / f"step_{step:06d}" / f"{name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
            tracker.log_file(path, name, f"eval/step_{step:06d}")
        for name, (_, benchmark_metrics) in zip(names, results):
            metrics = {f"eval/{k}": v for k, v in evals[step][name].items()}
            log.add(step, {**metrics, **benchmark_metrics}, name, tracker)

    def checkpoint_now(step: int) -> None:
        state = {"counters": counters, "run_ids": tracker.run_ids, "capability": capability.state_dict()}
        state.update(config=params, config_hash=config_hash(params), tracking_uri=getattr(tracker, "uri", None))
        log.flush(tracker)  # metrics up to this step are durable before the checkpoint names it
        saved = save_checkpoint(output_dir / "checkpoints", step, workers.save, state, trainer.keep_checkpoints)
        if config.tracking.log_every_checkpoint:
            for name in names:
                tracker.log_model(saved / "agents" / name, name, artifact_path=f"model_step_{step:06d}")

    if checkpoint is None:
        evaluate(0)
    step_times: list[float] = []
    stopped_early = None
    bad_steps = 0  # consecutive steps in which some learner skipped every update (NaN/inf)
    last_saved = start_step if checkpoint is not None else None
    bar = tqdm(range(start_step + 1, trainer.steps + 1), disable=not trainer.progress, desc=algo_cfg.name)
    for step in bar:
        if stop.signum is not None:
            break
        times = dict.fromkeys(PHASES, 0.0)
        started = time.perf_counter()
        problems = task.train_problems(step, trainer.prompts_per_step)
        # 1-3 ROLLOUT, REWARD, SCORE OWN: every agent, before any update this step; each keeps its token ids and
        # per-token log-probs and hands back text, rewards and its old mean log-prob per response (spec §1.2)
        rollouts = workers.rollout(problems, group, sampling)
        pool = dict(enumerate(shared for shared, _ in rollouts))
        agent_times = {names[i]: dict(phase_times) for i, (_, phase_times) in enumerate(rollouts)}
        workers.add_times(times, [phase_times for _, phase_times in rollouts])
        for i, name in enumerate(names):
            counters[name]["rollouts_total"] += len(pool[i].texts)
            counters[name]["tokens_total"] += float(pool[i].num_tokens.sum())
        # 4 CAPABILITY: one update per step, before any learner's advantages
        capability.update(
            [pool[i].rewards for i in range(len(names))], [problems[p].category for p in pool[0].prompt_index]
        )
        loss_weights = capability.loss_weights([p.category for p in problems])  # ρ[k, j] or ρ[k, p, j]

        # 5 LEARN: each learner gets its sources' shared rollouts and its ρ (trainer/step.py). Learners only read
        # pre-update rollouts, so they may update in parallel.
        learned = workers.learn({k: ({j: pool[j] for j in p.sources}, loss_weights[k]) for k, p in learners.items()})
        workers.add_times(times, [phase_times for _, phase_times in learned.values()])
        step_metrics: dict[str, dict[str, float]] = {name: {} for name in names}
        step_metrics.update({names[k]: metrics for k, (metrics, _) in learned.items()})
        for k, (_, phase_times) in learned.items():
            agent_times[names[k]].update(phase_times)

        bad = [n for n in graph.learners if is_bad_step(step_metrics[n])]
        ran = any(
            step_metrics[n]["train/updates"] > step_metrics[n].get("train/empty_updates", 0.0) for n in graph.learners
        )
        bad_steps = bad_steps + 1 if bad else (0 if ran else bad_steps)  # no gradient at all: neither counts nor resets
        if bad_steps >= trainer.max_bad_steps:
            for name in names:
                log.add(step, step_metrics[name], name, tracker)
            log.flush(tracker)
            tracker.close("FAILED")
            raise NumericsError(
                f"{bad_steps} consecutive steps had non-finite gradients for {bad} (every update skipped); "
                "lower the agents' lr, check trainer.max_grad_norm, or raise trainer.max_bad_steps"
            )

        # 6 LOG
        step_time = time.perf_counter() - started
        step_times.append(step_time)
        for i, name in enumerate(names):
            metrics = {"train/reward_mean": float(pool[i].rewards.mean())}
            metrics |= {f"train/{key}": value for key, value in counters[name].items()}
            metrics |= step_metrics[name] | capability.metrics(i, names, learners.get(i) and learners[i].sources)
            metrics |= {f"time/{phase}_s": seconds for phase, seconds in agent_times[name].items()}
            log.add(step, metrics, name, tracker)
        phases = {f"time/{k}_s": v for k, v in times.items()}
        job_times = {"time/step_s": step_time, "time/other_s": step_time - sum(times.values()), **phases}
        log.add(step, job_times, None, tracker)
        bar.set_postfix_str(progress_text(names, pool, capability.batch, step_time))

        # with checkpoints, metrics become durable together with the checkpoint that covers them, so a resumed run
        # never logs a step twice; without, they are flushed every tracking.flush_every steps for a live view
        if not trainer.checkpoint_every and step % config.tracking.flush_every == 0:
            log.flush(tracker)

        # 7 EVAL / CHECKPOINT
        if (trainer.eval_every and step % trainer.eval_every == 0) or step == trainer.steps:
            evaluate(step)
            if on_evaluate is not None and step < trainer.steps and on_evaluate(step, evals[step]):
                stopped_early = step
        last = step in (trainer.steps, stopped_early)
        if (trainer.checkpoint_every and step % trainer.checkpoint_every == 0) or last:
            checkpoint_now(step)
            last_saved = step
        if stopped_early is not None or (trainer.stop_after is not None and step >= trainer.stop_after):
            break
    bar.close()
    last_step = start_step + len(step_times)
    finished = last_step >= trainer.steps
    if stop.signum is not None and not finished:
        if last_saved != last_step:
            checkpoint_now(last_step)
        log.flush(tracker)
        tracker.close("KILLED")
        how = f"{signal.Signals(stop.signum).name} at step {last_step}: checkpoint written"
        raise RunInterrupted(f"{how}; resume with trainer.resume={output_dir}", stop.exit_code)
    log.flush(tracker)
    history, seconds_per_step, seconds_total = run_history(output_dir / "metrics.jsonl")  # over every resume
    if finished:
        tracker.log_summary(final_metrics(history, counters, seconds_total), last_step)
    summary = {
        "steps_run": len(step_times),
        "last_step": last_step,
        "seconds_per_step": seconds_per_step,
        "evals": history,
        "counters": counters,
        "run_ids": tracker.run_ids,
        "output_dir": str(output_dir),
        "stopped_early": stopped_early,
    }
    write_text_atomic(output_dir / "summary.json", json.dumps(summary, indent=1))
    if finished and trainer.save_final_models and config.tracking.log_models:
        final = find_checkpoint(output_dir)
        for name in names:  # an MLflow transformers model per agent, registered with tracking.register_model
            tracker.log_model(final / "agents" / name, name, config.tracking.register_model)
    if stopped_early is not None:
        tracker.set_tags({"stopped_early": str(stopped_early)})
    tracker.close("FINISHED" if finished or stopped_early is not None else "KILLED")
    return summary
