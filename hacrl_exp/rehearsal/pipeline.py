"""One rehearsal, top to bottom: checks before any model, statistics, stand-ins, the plan, then every stage.

1 COMPOSE     the overrides as `python -m hacrl_exp.run` composes and validates them (one line, exit 2, on a bad one)
2 SOURCES     each pretrained agent's config and tokenizer (sources.py); its tokenizer folder written and loaded
3 CHECKS      errors (exit 2) and warnings per agent (checks.py), before any model is built
4 STATISTICS  prompt and gold-solution lengths, re-tokenisation round trips (stats.py)
5 STAND-INS   a random model of each checkpoint's class (models.py), built once more as the run builds it
6 PLAN        the planner at the real sizes
7 STAGES      train, evaluate, lm-eval export (stages.py), unless rehearsal.train=false
8 REPORT      rehearsal.md in the rehearsal's folder, and printed
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path

from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import check_name, check_output
from hacrl_exp.rehearsal.checks import AgentView, check_agent, length_warnings
from hacrl_exp.rehearsal.findings import AgentStats, Findings
from hacrl_exp.rehearsal.sources import AgentSource, resolve_sources, write_tokenizer
from hacrl_exp.rehearsal.stages import cut_down, evaluate_stage, export_stage, plan_stage, train_stage
from hacrl_exp.rehearsal.stats import prompt_lengths, round_trip, text_lengths
from hacrl_exp.trainer.checkpoint import write_text_atomic


def rehearsal_folder(config: Config, experiment: str) -> Path:
    """rehearsal.output_dir, else outputs/rehearsal/<experiment>/<date>_<time>; refused when it holds anything."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    given = config.rehearsal.output_dir
    folder = Path(given or Path("outputs", "rehearsal", check_name(experiment, "experiment"), stamp)).expanduser()
    folder = check_output(folder, "rehearsal.output_dir")  # not a file or device, a symlink only if asked; writable
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"rehearsal.output_dir={folder} is not an empty folder; give a new one")
    return folder


def check_settings(config: Config) -> None:
    """The rehearsal's own settings, and that the preset has something to rehearse."""
    settings = config.rehearsal
    if settings.tokenizers is not None and not Path(settings.tokenizers).expanduser().is_dir():
        raise ConfigError(
            f"rehearsal.tokenizers={settings.tokenizers} is not a folder; give the folder holding qwen3/, llama3/ "
            "(e.g. ../shared/tokenizers)"
        )
    if settings.hidden_size % 2:
        raise ConfigError(f"rehearsal.hidden_size={settings.hidden_size} must be even (2 attention heads)")
    if not any(a.model.source == "pretrained" for a in config.agents.members.values()):
        raise ConfigError(
            "the preset has no pretrained agent (model.source=pretrained): nothing to rehearse; tiny presets run on "
            "a CPU as they are (python -m hacrl_exp.run)"
        )
    if config.task.name != "math":
        raise ConfigError(f"task={config.task.name}: the rehearsal reads the MATH task's data; use task=math")


def load_views(config: Config, sources: list[AgentSource], models: Path) -> list[AgentView]:
    """Each agent's tokenizer files written into its stand-in folder and loaded as `agents.agent.load_pretrained`
    loads them."""
    from transformers import AutoTokenizer

    views = []
    for source in sources:
        folder = models / source.name
        write_tokenizer(source, folder)
        cfg = config.agents.members[source.name]
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                folder, trust_remote_code=cfg.model.trust_remote_code, padding_side="left"
            )
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{source.key}: its tokenizer ({source.tokenizer_from}) does not load: {first}") from None
        views.append(AgentView(source, cfg, tokenizer))
    return views


def agent_statistics(views: list[AgentView], task, config: Config) -> dict[str, AgentStats]:
    """Lengths per agent, computed once per distinct tokenizer setup (same files, template and special tokens)."""
    from hacrl_exp.evaluation.data import load_problems
    from hacrl_exp.evaluation.spec import load_benchmark
    from hacrl_exp.rehearsal.stages import BENCHMARKS

    limit = config.rehearsal.statistics_limit
    train = task.train_set[:limit]
    benchmarks = [(n, load_problems(load_benchmark(n), config.task.data_dir, limit, "local")) for n in BENCHMARKS]
    first = task.train_problems(1, 1)[0]
    done: dict[tuple, AgentStats] = {}
    out = {}
    for view in views:
        key = setup_key(view)
        if key not in done:
            tok, chat = view.tokenizer, view.chat
            prompts = [prompt_lengths(f"MATH train ({config.task.train_file})", tok, [p.prompt for p in train], chat)]
            prompts += [prompt_lengths(name, tok, [p.prompt for p in problems], chat) for name, problems in benchmarks]
            solutions = text_lengths("MATH train", tok, [p.solution or p.answer for p in train])
            done[key] = AgentStats(prompts, solutions, "")
        stats = done[key]
        ids = view_prompt(view, first.prompt)
        out[view.name] = AgentStats(stats.prompts, stats.solutions, view.tokenizer.decode(ids))
    return out


def view_prompt(view: AgentView, text: str) -> list[int]:
    """The prompt ids the agent sends (agents.agent.Agent.prompt_ids: rendered, then its last prompt_limit tokens)."""
    from hacrl_exp.agents.agent import prompt_token_ids

    return prompt_token_ids(view.tokenizer, [text], view.chat)[0][-view.prompt_limit :]


def setup_key(view: AgentView) -> tuple:
    """What decides an agent's token counts: its vocabulary file, template, special tokens and prompt format."""
    folder = view.source.tokenizer_dir
    vocab = next(folder / n for n in ("tokenizer.json.gz", "tokenizer.json", "vocab.json") if (folder / n).is_file())
    digest = hashlib.sha256(vocab.read_bytes()).hexdigest()
    tok = view.tokenizer
    return digest, tok.chat_template if view.chat else None, tok.bos_token, tok.eos_token, view.chat


def edges_round_trips(views: list[AgentView], config: Config, task) -> list:
    """Round trips on MATH-500's gold solutions along every edge of the agent graph (source → learner)."""
    from hacrl_exp.graph import graph_from_config

    by_name = {v.name: v for v in views}
    golds = [p.solution or p.answer for p in task.eval_set[: config.rehearsal.statistics_limit]]
    graph = graph_from_config(config.agents, config.algorithm.alpha)
    edges = [(e.source, learner) for learner in graph.learners for e in graph.sources_of(learner)]
    return [
        round_trip(src, dst, by_name[src].tokenizer, by_name[dst].tokenizer, golds, config.rollout.max_new_tokens)
        for src, dst in edges
        if src in by_name and dst in by_name
    ]


def timed(findings: Findings, name: str, stage: Callable[[], list[str]]) -> None:
    """Run one stage, recording its lines and seconds; findings.running names it while it runs."""
    print(f"rehearsal: {name} ...", file=sys.stderr, flush=True)
    findings.running, started = name, time.perf_counter()
    lines = stage()
    findings.stages.append((name, time.perf_counter() - started, lines))
    findings.running = None


def rehearse(config: Config, command: str, experiment: str) -> tuple[Findings, Path]:
    """Run the rehearsal of a validated config; returns its findings and folder (rehearsal.md written there).

    What the checks find raises ConfigError before any model is built, and leaves no folder behind; a failing stage
    is the findings' error (its traceback in <folder>/error.txt)."""
    import torch

    started = time.perf_counter()
    check_settings(config)
    folder = rehearsal_folder(config, experiment)
    torch.set_num_threads(config.rehearsal.threads)
    findings = Findings(
        command, prompt_limit=config.task.max_prompt_tokens, max_new_tokens=config.rollout.max_new_tokens
    )
    written = folder / "models" if folder.exists() else folder  # an empty folder that was given stays
    try:
        views = load_views(config, resolve_sources(config, config.rehearsal.tokenizers), folder / "models")
        for view in views:
            findings.warnings += check_agent(view, config)
    except ConfigError:
        shutil.rmtree(written, ignore_errors=True)  # only the tokenizer files written above
        raise
    findings.views = views
    cut = cut_down(config, {v.name: folder / "models" / v.name for v in views}, folder)
    findings.changes = cut.changes
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    findings.header = [f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPU cores, load average {load:.2f} at start"]
    for line in [*(f"change: {c}" for c in cut.changes), *(f"warning: {w}" for w in findings.warnings)]:
        print(line, file=sys.stderr)
    try:
        _stages(findings, cut, views, config, folder)
    except Exception as exc:  # a stage that fails here would fail the real run: rehearsal.md says which, and why
        (folder / "error.txt").write_text(traceback.format_exc())
        findings.error = (
            f"stage {findings.running} failed: {type(exc).__name__}: {first_line(exc)} ({folder / 'error.txt'})"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    findings.header.append(
        f"Wall time {time.perf_counter() - started:.0f} s, CPU {cpu.ru_utime + cpu.ru_stime:.0f} s, peak memory "
        f"{peak:.1f} GiB; folder {folder}"
    )
    write_text_atomic(folder / "rehearsal.md", findings.markdown())
    return findings, folder


def _stages(findings: Findings, cut, views: list[AgentView], config: Config, folder: Path) -> None:
    from hacrl_exp.rehearsal.models import save_stand_in
    from hacrl_exp.tasks import build_task

    task = build_task(config.task)
    try:
        timed(findings, "statistics", lambda: _statistics(findings, views, config, task))
    finally:
        task.close()
    for index, view in enumerate(views):
        seed, target = config.seed * 1000 + index, folder / "models" / view.name
        build = partial(save_stand_in, view.source, view.tokenizer, config.rehearsal, seed, target)
        timed(findings, f"stand-in {view.name}", lambda build=build: [build()])
    timed(findings, "construction", lambda: construct(cut))
    timed(findings, "plan (real sizes)", lambda: plan_stage(config))
    if config.rehearsal.train:
        timed(findings, "train", lambda: train_stage(cut))
        timed(findings, "evaluate", lambda: evaluate_stage(cut, folder))
        timed(findings, "lm-eval export", lambda: export_stage(cut, folder))


def _statistics(findings: Findings, views: list[AgentView], config: Config, task) -> list[str]:
    findings.stats = agent_statistics(views, task, config)
    for view in views:
        findings.warnings += length_warnings(view, findings.stats[view.name], config.rollout.max_new_tokens)
    findings.round_trips = edges_round_trips(views, config, task)
    return [f"{len(task.train_set)} MATH training problems, {len(task.eval_set)} held-out, {len(views)} agents"]


def construct(cut) -> list[str]:
    """Each stand-in built as the run builds an agent (agents.agent: load_pretrained, build_agent)."""
    import torch

    from hacrl_exp.agents.agent import build_agent, load_pretrained

    config, lines = cut.config, []
    for name, cfg in config.agents.members.items():
        if cfg.model.source != "pretrained":
            continue
        model, tokenizer = load_pretrained(name, cfg)
        agent = build_agent(
            name, cfg, model, tokenizer, device=torch.device("cpu"), kl_coef=config.algorithm.kl_coef,
            max_prompt_tokens=config.task.max_prompt_tokens, max_batch_size=config.rollout.max_batch_size,
        )  # fmt: skip
        params = sum(p.numel() for p in agent.model.parameters())
        rows = agent.model.get_input_embeddings().num_embeddings
        lines.append(
            f"{name}: {type(agent.model).__name__}, {params:,} parameters ({cfg.model.dtype}, compute "
            f"{cfg.model.compute_dtype or cfg.model.dtype}), {rows:,} embedding rows, "
            f"eos {agent.tokenizer.eos_token_id}, pad {agent.pad_id}, chat template {agent.use_chat_template}, "
            f"stops at {list(agent.stop_ids)}"
        )
    return lines


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
