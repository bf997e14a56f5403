"""MLflow tracking: one parent run per job (global metrics, the resolved config as params) and one
nested child run per agent (its metrics, tagged agent=<name>), so runs and agents compare easily.

Metrics are buffered and written with `log_batch` when the trainer flushes (see trainer.loop), which keeps
the sqlite store off the step's hot path. Secrets never become params: keys that look like
tokens or passwords are dropped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from hacrl_exp.config.schema import TrackingConfig

SECRET_MARKERS = ("token", "password", "secret", "api_key")


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """{'a.b.c': 'value'} from nested dicts/lists, values stringified (MLflow params are strings)."""
    if isinstance(tree, dict):
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): str(tree)}


def default_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


class NullTracker:
    """Tracking off: the same interface, doing nothing."""

    run_ids: dict[str, str] = {}

    def log(self, step: int, metrics: dict[str, float], agent: str | None = None) -> None: ...
    def flush(self) -> None: ...
    def log_artifacts(self, folder: Path, artifact_path: str, agent: str | None = None) -> None: ...
    def log_file(self, path: Path, agent: str | None = None, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def close(self, status: str = "FINISHED") -> None: ...


class MlflowTracker:
    """Parent + per-agent child runs in one experiment. Pass `run_ids` to continue a resumed run."""

    def __init__(
        self,
        cfg: TrackingConfig,
        params: dict[str, Any],
        agents: list[str],
        tags: dict[str, str],
        run_ids: dict[str, str] | None = None,
    ) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = cfg.uri or default_uri()
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(self.uri)
        experiment = self.client.get_experiment_by_name(cfg.experiment)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(cfg.experiment)
        self.pending: dict[str, list] = {}
        if run_ids:  # resume: continue the same runs instead of making new ones
            self.run_ids = dict(run_ids)
            for run_id in self.run_ids.values():
                self.client.update_run(run_id, status="RUNNING")
            return
        parent = self.client.create_run(experiment_id, run_name=cfg.run_name, tags={**tags, "role": "parent"})
        self.run_ids = {"": parent.info.run_id}
        safe = {k: v[:6000] for k, v in flatten(params).items() if not any(m in k.lower() for m in SECRET_MARKERS)}
        self._log_params(parent.info.run_id, safe)
        for name in agents:
            child = self.client.create_run(
                experiment_id,
                run_name=f"{cfg.run_name or parent.info.run_name}/{name}",
                tags={**tags, "agent": name, "role": "agent", "mlflow.parentRunId": parent.info.run_id},
            )
            self.run_ids[name] = child.info.run_id
            agent_params = {k: v for k, v in safe.items() if not k.startswith("agents.members.")}
            agent_params.update(
                {
                    k.split(f"agents.members.{name}.", 1)[1]: v
                    for k, v in safe.items()
                    if k.startswith(f"agents.members.{name}.")
                }
            )
            self._log_params(child.info.run_id, agent_params)

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def log(self, step: int, metrics: dict[str, float], agent: str | None = None) -> None:
        """Buffer metrics for the agent's child run (agent=None: the parent run)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        bucket = self.pending.setdefault(self.run_ids[agent or ""], [])
        bucket.extend(Metric(k, float(v), now, step) for k, v in metrics.items())

    def flush(self) -> None:
        for run_id, metrics in self.pending.items():
            for start in range(0, len(metrics), 1000):
                self.client.log_batch(run_id, metrics=metrics[start : start + 1000])
        self.pending = {}

    def log_artifacts(self, folder: Path, artifact_path: str, agent: str | None = None) -> None:
        self.client.log_artifacts(self.run_ids[agent or ""], str(folder), artifact_path)

    def log_file(self, path: Path, agent: str | None = None, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_ids[agent or ""], str(path), artifact_path)

    def set_tags(self, tags: dict[str, str]) -> None:
        """Tag the parent and every agent run."""
        for run_id in self.run_ids.values():
            for key, value in tags.items():
                self.client.set_tag(run_id, key, value)

    def close(self, status: str = "FINISHED") -> None:
        self.flush()
        for run_id in self.run_ids.values():
            self.client.set_terminated(run_id, status=status)


def make_tracker(cfg: TrackingConfig, params: dict, agents: list[str], tags: dict, run_ids=None):
    """An MlflowTracker, or a NullTracker with tracking.backend=none."""
    if cfg.backend == "none":
        return NullTracker()
    return MlflowTracker(cfg, params, agents, tags, run_ids)
