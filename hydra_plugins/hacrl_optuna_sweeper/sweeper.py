"""`hydra/sweeper=hacrl_optuna`: tune α per directed edge of the agent graph with Optuna (docs/sweeps.md).

    python -m hacrl_exp.run -m +hparams_search=alpha_pair agents=pair

Each trial asks every edge study (`<study_name>/<learner><-<source>`) for α, launches one training job through
the configured Hydra launcher, and tells each study its learner's final held-out metric. Re-running the same
command resumes: trials left RUNNING by a killed sweep are marked FAIL, and the sweep runs until every edge
study holds n_trials COMPLETE or PRUNED trials in total. After every trial the best α per edge is written to
`<output_dir>/best_alpha/<study_name>.yaml`, a config group option a later run includes.

One process runs a study at a time: it holds `<optuna.db>.<study_name>.lock` (a `flock`, dropped by the kernel when
the process ends, however it ends), and a second process on the same study exits with one line naming the study and
the holder's pid (exit code 2), before it touches a trial or an MLflow run.
"""

# no `from __future__ import annotations`: Hydra execs plugin modules outside sys.modules, where dataclasses
# cannot resolve string annotations
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional  # noqa: UP035 - omegaconf 2.3 reads typing generics

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


@dataclass
class SamplerConf:
    name: str = "tpe"  # tpe | random
    seed: int = 0
    n_startup_trials: int = 10  # tpe: random trials before it models the results


@dataclass
class PrunerConf:
    name: str = "median"  # none | median | percentile | threshold
    n_startup_trials: int = 5  # median, percentile: finished trials before any pruning
    n_warmup_steps: int = 0  # median, percentile, threshold: no pruning before this training step
    percentile: float = 25.0  # percentile: prune below this percentile of earlier trials at the same step
    lower: Optional[float] = None  # noqa: UP045 - threshold: prune a value below this
    upper: Optional[float] = None  # noqa: UP045 - threshold: prune a value above this


@dataclass
class AlphaConf:
    low: float = 0.0
    high: float = 4.0
    log: bool = False
    choices: List[float] = field(default_factory=list)  # noqa: UP006 - non-empty: categorical over these α


@dataclass
class HacrlOptunaSweeperConf:
    _target_: str = "hydra_plugins.hacrl_optuna_sweeper.sweeper.HacrlOptunaSweeper"
    study_name: str = "alpha"
    storage: Optional[str] = None  # noqa: UP045 - default sqlite:///<output_dir>/optuna.db
    n_trials: int = 16  # COMPLETE + PRUNED trials per edge study, counting earlier runs of the sweep
    n_jobs: int = 1  # trials per launcher batch (a parallel launcher runs them at once)
    metric: str = "accuracy/mean"  # the learner's held-out metric (summary["evals"])
    direction: str = "maximize"
    sampler: SamplerConf = field(default_factory=SamplerConf)
    pruner: PrunerConf = field(default_factory=PrunerConf)
    alpha: AlphaConf = field(default_factory=AlphaConf)
    max_failures: int = 3  # stop after this many consecutive failed trials
    output_dir: Optional[str] = None  # noqa: UP045 - optuna.db and best_alpha/; default hydra.sweep.dir


ConfigStore.instance().store(group="hydra/sweeper", name="hacrl_optuna", node=HacrlOptunaSweeperConf)


class HacrlOptunaSweeper(Sweeper):
    """Per-edge Optuna studies of α, one training job per trial; see the module docstring."""

    def __init__(self, **settings: Any) -> None:
        self.raw = {k: OmegaConf.to_container(v) if isinstance(v, DictConfig) else v for k, v in settings.items()}
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> list:
        from hacrl_exp.errors import ConfigError, exit_on_bad_input
        from hacrl_exp.sweep.settings import parse_settings
        from hacrl_exp.sweep.studies import lock_study

        assert self.config is not None and self.launcher is not None
        with exit_on_bad_input(ConfigError):
            settings = parse_settings(self.raw, Path(self.config.hydra.sweep.dir))
            lock = lock_study(settings)  # one process per study: a second is refused, naming the first's pid
        try:
            return self._sweep(settings, arguments)
        finally:
            os.close(lock)

    def _sweep(self, settings, arguments: list[str]) -> list:
        from hacrl_exp.errors import ConfigError, exit_on_bad_input
        from hacrl_exp.sweep.studies import EdgeStudies

        with exit_on_bad_input(ConfigError):
            studies = EdgeStudies(settings, self._edges(arguments))
            stale = studies.fail_stale()
            for name, number in stale:
                log.info(f"{name}#{number} was left RUNNING by an interrupted sweep: marked FAIL")
            self._close_killed_runs(settings.study_name, sorted({number for _, number in stale}))
            settings.output_dir.mkdir(parents=True, exist_ok=True)
            OmegaConf.save(self.config, settings.output_dir / "multirun.yaml")
            log.info(f"study {settings.study_name}: {len(studies.studies)} edge studies in {settings.storage}")
            returns = self._trials(studies, arguments)
            path = studies.write_best()
        print(f"\nstudy {settings.study_name}: best α per edge ({settings.storage})\n{studies.table()}")
        if path is not None:
            include = f"--config-dir {path.parent.parent} +best_alpha={settings.study_name}"
            found = sum(trial is not None for trial in studies.best().values())
            print(f"wrote {path} (α for {found} of {len(studies.studies)} edges)")
            print(f"include it: python -m hacrl_exp.run {include}")
        else:
            print(f"no best α on any edge: no best_alpha/{settings.study_name}.yaml written")
        return returns

    def _trials(self, studies, arguments: list[str]) -> list:
        """Launch batches of n_jobs trials until every edge study holds n_trials COMPLETE or PRUNED trials."""
        settings = studies.settings
        returns, running, failures = [], [], 0
        try:
            while (done := studies.finished()) < settings.n_trials:
                running = [studies.ask() for _ in range(min(settings.n_jobs, settings.n_trials - done))]
                batch = [[*arguments, *asked.overrides(settings.storage)] for asked in running]
                results = self.launcher.launch(batch, initial_job_idx=running[0].number)
                for asked, result in zip(running, results):
                    state = studies.tell(asked, _summary(result))
                    failures = failures + 1 if state == "FAIL" else 0
                    alphas = ", ".join(f"{e.learner}<-{e.source} α={a:.4g}" for e, a in asked.alphas.items())
                    log.info(f"trial {asked.number} {state}: {alphas}")
                running = []
                returns.append(results)
                studies.write_best()
                if failures >= settings.max_failures:
                    raise RuntimeError(f"{failures} trials in a row failed (hydra.sweeper.max_failures); see the logs")
        except BaseException:
            studies.fail(running)  # Ctrl-C or an error: the trials of this batch did not finish
            raise
        return returns

    def _close_killed_runs(self, study: str, numbers: list[int]) -> None:
        """A killed trial's MLflow runs cannot close themselves: mark them KILLED, as the trial is FAIL."""
        if not numbers or self.tracking.backend == "none":
            return
        from hacrl_exp.tracking import close_running_runs, default_uri

        for number in numbers:
            tags = {"study": study, "trial": str(number)}
            closed = close_running_runs(self.tracking.uri or default_uri(), self.tracking.experiment, tags)
            log.info(f"trial {number}: {closed} MLflow run(s) left RUNNING by the interrupted sweep marked KILLED")

    def _edges(self, arguments: list[str]) -> list:
        """The edges to tune: every edge of the job's agent graph (checked: a sweep needs one that uses α)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from hacrl_exp.algo import ALGORITHMS, hacpo_objective
        from hacrl_exp.errors import ConfigError
        from hacrl_exp.graph import graph_from_config
        from hacrl_exp.trainer.validate import validate

        for override in OverridesParser.create().parse_overrides(arguments):
            if override.is_sweep_override():
                raise ConfigError(
                    f"{override.input_line}: the hacrl_optuna sweeper takes no value sweeps; "
                    "run one study per value (hydra.sweeper.study_name=<name> per command)"
                )
        job = self.hydra_context.config_loader.load_sweep_config(self.config, list(arguments))
        config = validate(OmegaConf.masked_copy(job, [k for k in job if k != "hydra"]))
        self.tracking = config.tracking  # where the trials' MLflow runs go
        edges = list(graph_from_config(config.agents, config.algorithm.alpha).edges)
        uses_alpha = ALGORITHMS[config.algorithm.name].objective is hacpo_objective  # sg[c]^α: HACPO's cross rows
        if not uses_alpha or not config.mechanisms.exponential_is or not edges:
            raise ConfigError(
                f"algorithm={config.algorithm.name} with mechanisms.exponential_is={config.mechanisms.exponential_is} "
                f"and agents.topology={config.agents.topology} has no edge that uses α; an α sweep needs "
                "algorithm=hacpo, mechanisms.exponential_is=true and a topology with edges"
            )
        return edges


def _summary(result) -> dict | None:
    """The job's training summary, or None when it failed (the error is logged)."""
    try:
        return result.return_value
    except Exception as exc:  # the job raised: a failed trial, the sweep goes on
        log.warning(f"trial job failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return None
