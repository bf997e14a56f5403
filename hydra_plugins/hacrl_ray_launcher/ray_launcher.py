"""`hydra/launcher=hacrl_ray`: run the jobs of a multirun (an experiment grid, or a sweeper's batch of trials)
as Ray tasks, on a private Ray on this machine or on a running cluster (docs/distributed.md).

    python -m hacrl_exp.run -m hydra/launcher=hacrl_ray algorithm=hacpo,gspo_x2 seed=0,1,2
    python -m hacrl_exp.run -m hydra/launcher=hacrl_ray hydra.launcher.address=auto hydra.launcher.gpus_per_job=2 ...

Modelled on Hydra's BasicLauncher (same job numbering, sweep folders and JobReturns) and hydra-ray-launcher's
local mode (each job a Ray task that restores Hydra's globals and calls `run_job`). Jobs run in parallel as far
as the cluster's CPUs and GPUs allow (cpus_per_job, gpus_per_job); results come back in job order. The private
Ray (address null) listens on 127.0.0.1 only, without dashboard, and lives until the launching process exits,
so a sweeper's later batches reuse it.
"""

# no `from __future__ import annotations`: Hydra execs plugin modules outside sys.modules, where dataclasses
# cannot resolve string annotations
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Sequence  # noqa: UP035 - omegaconf 2.3 reads typing generics

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)


@dataclass
class HacrlRayLauncherConf:
    _target_: str = "hydra_plugins.hacrl_ray_launcher.ray_launcher.HacrlRayLauncher"
    address: Optional[str] = None  # noqa: UP045 - null: a private Ray on 127.0.0.1; auto / host:port: a cluster
    include_dashboard: bool = False  # with a private Ray; the dashboard then listens on 127.0.0.1:8265
    num_cpus: Optional[int] = None  # noqa: UP045 - CPUs of a private Ray (default: all of this machine's)
    cpus_per_job: float = 1.0  # CPUs a job reserves (its agents' actors reserve their own with executor=ray)
    gpus_per_job: float = 0.0  # GPUs a job reserves (executor=local jobs: the job's agents share them)
    max_retries: int = 0  # reruns of a job whose worker process died (a job's own error is never retried)
    runtime_env: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006 - Ray runtime_env of the jobs


ConfigStore.instance().store(group="hydra/launcher", name="hacrl_ray", node=HacrlRayLauncherConf, provider="hacrl_exp")


class HacrlRayLauncher(Launcher):
    def __init__(
        self,
        address: Optional[str] = None,  # noqa: UP045
        include_dashboard: bool = False,
        num_cpus: Optional[int] = None,  # noqa: UP045
        cpus_per_job: float = 1.0,
        gpus_per_job: float = 0.0,
        max_retries: int = 0,
        runtime_env: Optional[Dict[str, Any]] = None,  # noqa: UP006, UP045
    ) -> None:
        self.address, self.include_dashboard, self.num_cpus = address, include_dashboard, num_cpus
        self.resources = {"num_cpus": cpus_per_job, "num_gpus": gpus_per_job, "max_retries": max_retries}
        self.runtime_env = dict(runtime_env or {})
        self.config: Optional[DictConfig] = None  # noqa: UP045
        self.hydra_context: Optional[HydraContext] = None  # noqa: UP045
        self.task_function: Optional[TaskFunction] = None  # noqa: UP045

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit every job as a Ray task, then wait for all; JobReturns in job order."""
        from hacrl_exp.ray_cluster import connect, import_ray, run_hydra_job
        from hacrl_exp.tracking import create_stores

        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        ray = import_ray("hydra/launcher=hacrl_ray")
        connect(self.address, self.include_dashboard, self.num_cpus, self.runtime_env, settings="hydra.launcher")
        log.info(f"Launching {len(job_overrides)} jobs on Ray ({ray.cluster_resources().get('CPU', 0):g} CPUs)")
        configs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = idx
                sweep_config.hydra.job.num = idx
            configs.append(sweep_config)
        create_stores(configs)
        remote = ray.remote(run_hydra_job).options(**self.resources)
        singleton_state = Singleton.get_state()
        refs = [remote.remote(self.hydra_context, self.task_function, c, singleton_state) for c in configs]
        return ray.get(refs)
