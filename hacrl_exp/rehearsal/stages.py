"""The stages of a real run, each run once on the stand-in models: training (the public `trainer.loop.train`: math
task, prompts, generation to rollout.max_new_tokens, grading, re-tokenisation, the HACPO update, checkpoints, held-out
evaluation), `evaluate` on the paper's seven benchmarks, the lm-eval export of the saved checkpoint, and the planner
at the real sizes. Each returns the lines the report shows; a failure propagates to `rehearsal.run`, which reports it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.schema import Config

BENCHMARKS = ("math500", "math", "gsm8k", "aime2025", "amc23", "minerva", "olympiadbench")
"""The paper's final evaluation (hacpo-spec §4; conf/experiment/paper_common.yaml)."""


@dataclass
class CutDown:
    """The preset with only the rehearsal's changes, and one line per change (printed first, as the report's)."""

    config: Config
    changes: list[str] = field(default_factory=list)

    def set(self, section, key: str, value, label: str, why: str = "") -> None:
        old = getattr(section, key)
        if old != value:
            setattr(section, key, value)
            self.changes.append(f"{label}: {old} → {value}" + (f" ({why})" if why else ""))


def cut_down(config: Config, stand_ins: dict[str, Path], folder: Path) -> CutDown:
    """Pretrained agents → their stand-in folders; steps, prompts, G, micro-batch, evaluation limit and threads → the
    rehearsal's; a private MLflow store; tiny agents without warm start.
    Lengths stay the preset's."""
    cut = CutDown(copy.deepcopy(config))
    new, settings = cut.config, config.rehearsal
    for name, path in stand_ins.items():
        agent = new.agents.members[name]
        cut.changes.append(f"agents.members.{name}.model.path: {agent.model.path} → {path} (a random stand-in)")
        agent.model.path, agent.tokenizer.path = str(path), None
    for name, agent in new.agents.members.items():
        if agent.model.source != "pretrained":
            cut.set(agent.warm_start, "steps", 0, f"agents.members.{name}.warm_start.steps")
    for key in ("steps", "prompts_per_step", "group_size", "micro_batch_size", "eval_limit", "threads"):
        cut.set(new.trainer, key, getattr(settings, key), f"trainer.{key}")
    block = new.trainer.prompts_per_step * new.trainer.group_size
    if block % new.trainer.minibatches_per_block:
        cut.set(new.trainer, "minibatches_per_block", 1, "trainer.minibatches_per_block")
    new.trainer.output_dir = str(folder / "run")
    cut.changes.append(f"trainer.output_dir: {config.trainer.output_dir} → {new.trainer.output_dir}")
    if new.tracking.backend == "mlflow":
        cut.set(new.tracking, "uri", f"sqlite:///{folder / 'mlflow.db'}", "tracking.uri")
    return cut


def train_stage(cut: CutDown) -> list[str]:
    """The training run on the stand-ins; lines: steps, rewards, rows re-tokenised and run, checkpoint."""
    from hacrl_exp.trainer.loop import train

    config = cut.config
    summary = train(config, Path(config.trainer.output_dir))
    rows = [json.loads(line) for line in (Path(summary["output_dir"]) / "metrics.jsonl").read_text().splitlines()]
    lines = [f"{summary['steps_run']} step(s), {summary['seconds_per_step']:.1f} s/step"]
    for name in config.agents.members:
        last = [r for r in rows if r.get("agent") == name and "train/reward_mean" in r]
        if last:
            m = last[-1]
            lines.append(
                f"{name}: reward {m['train/reward_mean']:.2f}, {m.get('train/tokens_total', 0):.0f} tokens generated, "
                f"updates {m.get('train/updates', 0):.0f} (empty {m.get('train/empty_updates', 0):.0f}), rows run "
                f"{m.get('train/rows_run_share', 0):.2f}, time generate {m.get('time/generate_s', 0):.1f} s, "
                f"score {m.get('time/score_own_s', 0):.1f} s, update {m.get('time/update_s', 0):.1f} s"
            )
    lines.append(f"checkpoint: {Path(summary['output_dir']) / 'checkpoints'}")
    return lines


def evaluate_stage(cut: CutDown, folder: Path) -> list[str]:
    """`python -m hacrl_exp.evaluate` on the run's checkpoints, composed and checked as the command does."""
    from hacrl_exp.config.evaluate_schema import compose_evaluate, validate_evaluate
    from hacrl_exp.evaluation.inputs import check_inputs
    from hacrl_exp.evaluation.pipeline import headline_table, run_evaluation

    config, settings = cut.config, cut.config.rehearsal
    overrides = [
        f"checkpoints=[{config.trainer.output_dir}]",
        f"benchmarks=[{','.join(BENCHMARKS)}]",
        f"limit={settings.eval_limit}",
        f"output_dir={folder / 'evaluate'}",
        f"threads={settings.threads}",
        f"tracking.backend={config.tracking.backend}",
    ]
    if settings.eval_max_new_tokens is not None:
        overrides.append(f"max_new_tokens={settings.eval_max_new_tokens}")
    if config.task.data_dir is not None:
        overrides.append(f"data_dir={config.task.data_dir}")
    if config.tracking.uri is not None:
        overrides.append(f"tracking.uri={config.tracking.uri}")
    evaluate = validate_evaluate(compose_evaluate(overrides))
    check_inputs(evaluate)
    summary = run_evaluation(evaluate, Path(evaluate.output_dir))
    return ["python -m hacrl_exp.evaluate " + " ".join(overrides), "", headline_table(summary)]


def export_stage(cut: CutDown, folder: Path) -> list[str]:
    """`python -m hacrl_exp.evaluation.lmeval --model <saved agent>` for each agent (its max_gen_toks capped by the
    checkpoint's positions), then every exported task loaded by lm-eval's task index (YAML and process_results)."""
    from hacrl_exp.trainer.checkpoint import find_checkpoint

    config = cut.config
    final = find_checkpoint(Path(config.trainer.output_dir))
    lines = []
    for name in config.agents.members:
        model, out = final / "agents" / name, folder / "lm_eval" / name
        command = [sys.executable, "-m", "hacrl_exp.evaluation.lmeval", "--data-dir", config.task.data_dir or "",
                   "--out", str(out), "--model", str(model), "--benchmarks", *BENCHMARKS]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:4])} exited {done.returncode}: {last_line(done.stderr)}")
        tasks = loaded_tasks(out)
        budget = yaml.safe_load((out / "hacrl_math500.yaml").read_text().split("process_results:")[0])
        lines.append(
            f"{name}: {len(done.stdout.split())} files in {out}, lm-eval loads {len(tasks)} tasks "
            f"(max_gen_toks {budget['generation_kwargs']['max_gen_toks']}); run them with: lm_eval --model hf "
            f"--model_args pretrained={model} --include_path {out} --tasks {','.join(tasks)}"
        )
    return lines


def loaded_tasks(folder: Path) -> list[str]:
    """The hacrl_* tasks of `folder`, each loaded by lm-eval (its data file read, process_results imported)."""
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(folder), include_defaults=False)
    names = sorted(t for t in manager.all_tasks if t.startswith("hacrl_"))
    sys.path.insert(0, str(folder))  # the tasks' `!function hacrl_lmeval.process_*` module
    try:
        return sorted(get_task_dict(names, manager))
    finally:
        sys.path.remove(str(folder))


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def plan_stage(config: Config) -> list[str]:
    """The planner on the preset itself (the real sizes): a placement when cluster.gpus and gpu_memory_gb are given,
    else each agent's unsharded memory."""
    from hacrl_exp.agents.memory_plan import GIB, estimate, plan

    multiplier = ALGORITHMS[config.algorithm.name].rollout_multiplier
    gpus, memory = config.cluster.gpus, config.cluster.gpu_memory_gb
    memories = estimate(config, multiplier)
    lines = [
        f"{m.name}: {m.shape.params / 1e9:.2f} B parameters ({m.shape.source}); state {m.state / GIB:.1f} GiB "
        f"(weights, gradients, master, AdamW, reference), working set {m.working / GIB:.1f} GiB per micro-batch"
        for m in memories
    ]
    if gpus is None or memory is None:
        return [*lines, "no placement: give cluster.gpus=<n> cluster.gpu_memory_gb=<GiB> (python -m hacrl_exp.plan)"]
    result = plan(config, gpus, memory, multiplier)
    for p in result.placements:
        where = f"GPUs {p.gpus[0]}-{p.gpus[-1]}" if len(p.gpus) > 1 else f"GPU {p.gpus[0]}"
        lines.append(f"{p.name}: W={p.world}{' offload' if p.offload else ''} on {where}, update peak "
                     f"{p.update_peak / GIB:.1f} GiB, rollout peak {p.rollout_peak / GIB:.1f} GiB per GPU")  # fmt: skip
    return [*lines, result.line()]
