"""Where the agent workers run: in the trainer's process (`executor=local`) or as Ray actors (`executor=ray`).

Both executors call the same `AgentWorker` methods with the same arguments and return the same values, so
a run gives the same metrics either way (tests/trainer/test_ray.py). Local workers run one after another;
Ray actors run each phase in parallel, so a phase then takes as long as its slowest agent. The loop calls the
typed methods of `Executor` (`rollout`, `learn`, `evaluate`, `save`, `load`); only `call` knows how.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from hacrl_exp.config.schema import Config, ExecutorConfig
from hacrl_exp.distributed import connect, import_ray
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.tasks.base import Problem, Task
from hacrl_exp.trainer.rollouts import SharedRollouts
from hacrl_exp.trainer.worker import AgentWorker

Times = dict[str, float]


class Executor:
    """Calls a method on some or all agent workers and returns their results by agent index."""

    parallel = False
    workers: list

    def call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        """{i: worker_i.method(*args[i])} for the workers named in args."""
        raise NotImplementedError

    def call_all(self, method: str, *args: Any) -> list[Any]:
        """[worker.method(*args) for every worker], in agent order."""
        results = self.call(method, dict.fromkeys(range(len(self.workers)), args))
        return [results[i] for i in range(len(self.workers))]

    def rollout(
        self, problems: Sequence[Problem], group: int, sampling: SamplingSettings
    ) -> list[tuple[SharedRollouts, Times]]:
        """Phases 1–3 on every agent (`AgentWorker.rollout`): its shared rollouts and phase seconds, in agent order."""
        return self.call_all("rollout", problems, group, sampling)

    def learn(
        self, sources: Mapping[int, tuple[dict[int, SharedRollouts], torch.Tensor]]
    ) -> dict[int, tuple[dict[str, float], Times]]:
        """Phases 4–7 on each learner k in `sources` (`AgentWorker.learn(shared rollouts, ρ_k)`): metrics, seconds."""
        return self.call("learn", sources)

    def evaluate(self, problems: Sequence[Problem], max_new_tokens: int) -> list[tuple[list[dict], dict[str, float]]]:
        """Every agent's greedy records and benchmark metrics (`AgentWorker.evaluate`), in agent order."""
        return self.call_all("evaluate", problems, max_new_tokens)

    def save(self, folder: Path) -> None:
        """Each worker writes its agent's part of checkpoint `folder`."""
        self.call_all("save", folder)

    def load(self, folder: Path) -> None:
        """Each worker restores its agent from checkpoint `folder`."""
        self.call_all("load", folder)

    def add_times(self, times: dict[str, float], per_worker: list[dict[str, float]]) -> None:
        """Add the workers' phase seconds to `times`: their sum when they ran in turn, their max in parallel."""
        for phase in {p for t in per_worker for p in t}:
            values = [t.get(phase, 0.0) for t in per_worker]
            times[phase] += max(values) if self.parallel else sum(values)

    def close(self) -> None: ...

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    """Every agent in this process, called one after another."""

    def __init__(self, config: Config, task: Task | None = None) -> None:
        n = len(config.agents.members)
        self.workers = [AgentWorker(config, i, config.trainer.threads, task) for i in range(n)]

    def call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        return {i: getattr(self.workers[i], method)(*a) for i, a in args.items()}

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


class RayExecutor(Executor):
    """Each agent a Ray actor that owns its model, optimizer and rollout engine; the driver keeps the loop.

    A private Ray (executor.address null) listens on 127.0.0.1 only and is shut down by `close`.
    """

    parallel = True

    def __init__(self, config: Config) -> None:
        settings = config.executor
        self.ray = import_ray()
        self.owns_ray = connect(settings.address, settings.include_dashboard, settings.num_cpus, settings.runtime_env)
        self.workers = []
        n = len(config.agents.members)
        threads = settings.threads_per_agent or config.trainer.threads or max(1, int(settings.cpus_per_agent))
        resources = {"num_cpus": settings.cpus_per_agent, "num_gpus": settings.gpus_per_agent}
        try:
            _check_fits(self.ray.cluster_resources(), n, settings)
            self.workers = [
                self.ray.remote(_ActorWorker).options(**resources).remote(config, i, threads) for i in range(n)
            ]
            self.call_all("ready")  # build errors (a bad model path, ...) surface here, as in the local executor
        except BaseException:
            self.close()  # and the private Ray with it
            raise

    def call(self, method: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        refs = {i: getattr(self.workers[i], method).remote(*a) for i, a in args.items()}
        try:
            values = self.ray.get(list(refs.values()))
        except self.ray.exceptions.RayTaskError as exc:  # re-raise the worker's own exception (a ConfigError, ...)
            raise exc.cause from None
        return dict(zip(refs, values))

    def close(self) -> None:
        try:  # let each actor stop its grader processes before it is killed
            self.ray.get([worker.close.remote() for worker in self.workers], timeout=30)
        except Exception:  # a dead or hung actor is killed below all the same
            pass
        for worker in self.workers:
            self.ray.kill(worker)
        self.workers = []
        if self.owns_ray:
            self.ray.shutdown()
            self.owns_ray = False


def _check_fits(cluster: dict[str, float], n_agents: int, settings: ExecutorConfig) -> None:
    """Actors that can never be placed would wait forever: say so, naming the key to lower."""
    for key, resource in (("cpus_per_agent", "CPU"), ("gpus_per_agent", "GPU")):
        per_agent = getattr(settings, key)
        if per_agent * n_agents > cluster.get(resource, 0.0):
            raise ConfigError(
                f"executor.{key}={per_agent:g} × {n_agents} agents needs {per_agent * n_agents:g} {resource}s but the "
                f"Ray cluster has {cluster.get(resource, 0.0):g}; lower executor.{key} (fractions share a device)"
            )


class _ActorWorker(AgentWorker):
    """An AgentWorker whose build error is raised by `ready()`: Ray hands a constructor's exception to the
    driver only as text, a method's as the exception itself (so a ConfigError still exits with one line)."""

    def __init__(self, *args: Any) -> None:
        self._error: Exception | None = None
        try:
            super().__init__(*args)
        except Exception as exc:
            self._error = exc

    def ready(self) -> str:
        if self._error is not None:
            raise self._error
        return super().ready()

    def close(self) -> None:
        if self._error is None:
            super().close()


def make_executor(config: Config, task: Task | None = None) -> Executor:
    """The executor named by executor.backend, with one worker per agent, built. In-process workers share `task`."""
    if config.executor.backend == "ray":
        return RayExecutor(config)
    return LocalExecutor(config, task)
