"""MLflow tracking: one parent run per job (global metrics, the resolved config as params) and one
nested child run per agent (its metrics, tagged agent=<name>), so runs and agents compare easily.

Metrics are buffered and written with `log_batch` when the trainer flushes (see trainer.loop), which keeps
the sqlite store off the step's hot path. Secrets never become params: keys that look like
tokens or passwords are dropped, and a password inside a URL (scheme://user:password@host) is masked
(`redact_secrets`). Credentials for the tracking server itself are read by MLflow from the environment
(MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME/PASSWORD), never from the config.

The store is probed before the run starts (`check_store`). If it becomes unavailable mid-run (a lock held by another
process, a server down), a write is retried with backoff for tracking.retry_s seconds, then training goes on: the
metrics stay buffered (they are durable in metrics.jsonl), a warning is printed once, and they are sent when the
store answers again, or replayed from metrics.jsonl at resume. No metric is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import time
from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hacrl_exp.config.schema import TrackingConfig
from hacrl_exp.faults import crash_point
from hacrl_exp.paths import locked
from hacrl_exp.tracking.masking import is_secret, mask_tags, mask_text, mask_tree
from hacrl_exp.tracking.names import EXPERIMENT_KIND, EXPERIMENT_NOTE, agent_run_name, model_name
from hacrl_exp.tracking.store import StoreLocation, experiment_id_and_tags, prepare_mlflow, store_location
from hacrl_exp.tracking.views import runs_link, write_views

log = logging.getLogger(__name__)

redact_secrets = mask_tree
"""A copy of a config tree with its secrets masked (`hacrl_exp.tracking.masking`)."""


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """{'a.b.c': 'value'} from nested dicts/lists, values stringified (MLflow params are strings)."""
    if isinstance(tree, dict):
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): str(tree)}


NOT_IN_MLFLOW_NAMES = re.compile(r"[^/\w.\- :]")
"""Characters MLflow refuses in a metric name (it takes letters, digits, _ - . space : /)."""


def mlflow_key(name: str) -> str:
    """A metric name as MLflow stores it: any character it refuses becomes '_'. A MATH category such as
    "Counting & Probability" (train/p_hat/<category>) would otherwise make MLflow refuse the whole batch; metrics.jsonl
    keeps the name as it is."""
    return NOT_IN_MLFLOW_NAMES.sub("_", name)


def ui_hint(uri: str, experiment_id: str) -> str:
    """How to open an experiment's runs in MLflow's UI: the server's page for an http(s) store (credentials in the
    URI left out), else `python -m hacrl_exp.ui` (or `mlflow ui`) and the local page. The link opens the experiment's
    "Final accuracy" saved view in MLflow 3's "Model training" mode (`hacrl_exp.tracking.views.runs_link`)."""
    if uri.startswith("http"):
        server = urlsplit(uri)
        netloc = server.netloc.rsplit("@", 1)[-1]
        base = urlunsplit((server.scheme, netloc, server.path.rstrip("/"), "", ""))
        return f"MLflow: {runs_link(base, experiment_id)}"
    link = runs_link("http://127.0.0.1:5000", experiment_id)
    store = shlex.quote(uri)  # a path with spaces stays one argument
    start = f"python -m hacrl_exp.ui --store {store} (or mlflow ui --backend-store-uri {store} --host 127.0.0.1)"
    return f"MLflow: {start}, then {link}"


class NullTracker:
    """Tracking off: the same interface, doing nothing."""

    run_ids: dict[str, str] = {}

    def log(self, step: int, metrics: dict[str, float], agent: str | None = None) -> None: ...
    def flush(self) -> None: ...
    def log_artifacts(self, folder: Path, artifact_path: str, agent: str | None = None) -> None: ...
    def log_file(self, path: Path, agent: str | None = None, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def log_datasets(self, datasets: list) -> None: ...
    def log_config(self, params: dict[str, Any]) -> None: ...
    def log_summary(self, metrics: dict[str, float], step: int) -> None: ...
    def log_model(self, folder: Path, agent: str, registered_name=None, artifact_path="model", step=0) -> None: ...
    def describe(self, steps: int, history: dict, checkpoint: Path | None = None) -> None: ...
    def close(self, status: str = "FINISHED") -> None: ...
    def ui_hint(self) -> str | None:
        return None


class MlflowTracker:
    """Parent + per-agent child runs in one experiment. Pass `run_ids` to continue a resumed run.

    name: the parent run's name (children are `<name>/<agent>`); tags go on every run, `source` (MLflow's
    system tags: git commit, entry point, user) too. With tracking.system_metrics, MLflow's sampler logs CPU, memory
    (and GPU) use to the parent run."""

    def __init__(
        self,
        cfg: TrackingConfig,
        params: dict[str, Any],
        agents: list[str],
        tags: dict[str, str],
        run_ids: dict[str, str] | None = None,
        name: str | None = None,
        source: dict[str, str] | None = None,
    ) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = store_location(cfg).uri  # parsed once, strictly: what the checkpoint records, what `ui_hint` shows
        self.retry_s, self.down, self.closed, self.recreated = cfg.retry_s, False, False, False
        prepare_mlflow()
        if self.uri.startswith("http"):  # MLflow's default retries stall a step for minutes; we retry ourselves
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(self.uri)
        experiment_id = self.experiment_id = open_experiment(self.client, cfg.experiment, agents, tags.get("setting"))
        self.pending: dict[str, list] = {}
        self.logged: dict[str, dict[str, int]] = {}
        self.system_metrics = None
        missing = self._missing_runs(run_ids or {})
        if missing:  # a new store, or a moved one: the runs are made again here
            log.warning(
                "MLflow store %s does not hold this run's runs (%s): creating them again there; the run's history is "
                "replayed from metrics.jsonl",
                self.uri,
                ", ".join(missing),
            )
            run_ids, self.recreated = None, True
        if run_ids:  # resume: continue the same runs instead of making new ones
            self.run_ids = dict(run_ids)
            for run_id in self.run_ids.values():
                self.client.update_run(run_id, status="RUNNING")
                self.logged[run_id] = self._last_steps(run_id)
            self._start_system_metrics(cfg, resume=True)
            return
        tags = {**tags, **(source or {})}
        job, tags = name or cfg.run_name, mask_tags(tags)  # the names and tags MLflow shows: no secret
        job = mask_text(job) if job else job  # None: MLflow names the run
        parent = self.client.create_run(experiment_id, run_name=job, tags={**tags, "role": "parent"})
        self.run_ids = {"": parent.info.run_id}
        safe = {k: v[:6000] for k, v in flatten(redact_secrets(params)).items() if not is_secret(k)}
        self._log_params(parent.info.run_id, safe)
        for name in agents:
            child = self.client.create_run(
                experiment_id,
                run_name=agent_run_name(job, name),
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
        self._start_system_metrics(cfg, resume=False)

    def _missing_runs(self, run_ids: dict[str, str]) -> list[str]:
        """The run ids (of a checkpoint) this store does not hold."""
        from mlflow.exceptions import MlflowException

        missing = []
        for run_id in run_ids.values():
            try:
                self.client.get_run(run_id)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                    raise
                missing.append(run_id)
        return missing

    def ui_hint(self) -> str:
        """How to open this experiment's runs in MLflow's UI (`ui_hint`)."""
        return ui_hint(self.uri, self.experiment_id)

    def _start_system_metrics(self, cfg: TrackingConfig, resume: bool) -> None:
        """MLflow's own sampler of CPU, memory, disk, network (and GPU) use, logged to the parent run."""
        if not cfg.system_metrics:
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self.system_metrics = SystemMetricsMonitor(
            self.run_ids[""], sampling_interval=cfg.system_metrics_interval_s, resume_logging=resume,
            tracking_uri=self.uri,
        )  # fmt: skip
        self.system_metrics.start()

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def _last_steps(self, run_id: str) -> dict[str, int]:
        """The last step of each metric a run already holds (read once, on resume)."""
        keys = self.client.get_run(run_id).data.metrics
        history = {key: self.client.get_metric_history(run_id, key) for key in keys}
        return {key: max((m.step for m in points), default=-1) for key, points in history.items()}

    def log(self, step: int, metrics: dict[str, float], agent: str | None = None) -> None:
        """Buffer metrics for the agent's child run (agent=None: the parent run).

        After a resume, a (metric, step) the interrupted run already logged is not logged again: batches are
        written in step order, so a metric's logged steps are exactly those up to its last one, and the resumed
        run reproduces their values (exact resume), so the histories never hold a step twice.
        """
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        run_id = self.run_ids[agent or ""]
        done = self.logged.get(run_id, {})
        bucket = self.pending.setdefault(run_id, [])
        named = ((mlflow_key(k), v) for k, v in metrics.items())
        bucket.extend(Metric(k, float(v), now, step) for k, v in named if step > done.get(k, -1))

    def _write(self, call: Callable[[], Any], what: str) -> bool:
        """Run one store write; on failure retry with backoff for retry_s seconds (one try while the store is
        known to be down). False when it did not get through: a warning the first time."""
        delay, deadline = 0.25, time.monotonic() + (0 if self.down else self.retry_s)
        while True:
            try:
                call()
                if self.down:
                    log.warning("MLflow store %s answers again; buffered metrics sent", self.uri)
                self.down = False
                return True
            except Exception as exc:  # noqa: BLE001 - any store failure: training must go on
                if time.monotonic() + delay > deadline:
                    if not self.down:
                        log.warning(
                            "MLflow store %s unavailable (%s: %s); training goes on, metrics are kept in metrics.jsonl "
                            "and sent when it answers (or replayed at resume). Skipped: %s",
                            self.uri,
                            type(exc).__name__,
                            " ".join(str(exc).split())[:200],
                            what,
                        )
                    self.down = True
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 4.0)

    def flush(self) -> None:
        """Send buffered metrics in step order; what the store does not take stays buffered for the next flush."""
        for run_id in list(self.pending):
            metrics = self.pending[run_id]
            while metrics:
                batch = metrics[:1000]
                if not self._write(partial(self.client.log_batch, run_id, metrics=batch), "metrics"):
                    return
                del metrics[: len(batch)]
                crash_point("mlflow")  # fault-injection hook (hacrl_exp.faults): a kill between MLflow batches
            del self.pending[run_id]

    def log_artifacts(self, folder: Path, artifact_path: str, agent: str | None = None) -> None:
        """Upload a folder; skipped with a warning while the store is down (the files stay in the run folder)."""
        run_id = self.run_ids[agent or ""]
        self._write(lambda: self.client.log_artifacts(run_id, str(folder), artifact_path), f"artifacts {folder}")

    def log_file(self, path: Path, agent: str | None = None, artifact_path: str | None = None) -> None:
        """Upload one file; skipped with a warning while the store is down (the file stays in the run folder)."""
        run_id = self.run_ids[agent or ""]
        self._write(lambda: self.client.log_artifact(run_id, str(path), artifact_path), f"artifact {path}")

    def set_tags(self, tags: dict[str, str]) -> None:
        """Tag the parent and every agent run."""
        for run_id in self.run_ids.values():
            for key, value in mask_tags(tags).items():
                self._write(partial(self.client.set_tag, run_id, key, value), f"tag {key}")

    def log_datasets(self, datasets: list) -> None:
        """Log (mlflow dataset, context) pairs as inputs of every run of the job (hacrl_exp.tracking.provenance)."""
        from hacrl_exp.tracking.provenance import log_datasets

        run_ids = list(self.run_ids.values())
        self._write(lambda: log_datasets(self.client, run_ids, datasets), "datasets")

    def log_config(self, params: dict[str, Any]) -> None:
        """The full resolved config (secrets redacted) as the parent run's `config.json` artifact."""
        run_id = self.run_ids[""]
        self._write(lambda: self.client.log_dict(run_id, params, "config.json"), "config.json")

    def log_summary(self, metrics: dict[str, float], step: int) -> None:
        """Log the job's `final/*` summary on the parent run now (docs/metrics.md), and each agent's
        `final/accuracy*/<agent>` on its own run without the `/<agent>` (so its logged model carries it)."""
        self.log(step, metrics)
        for agent in filter(None, self.run_ids):
            end = f"/{agent}"
            own = {k[: -len(end)]: v for k, v in metrics.items() if k.startswith("final/accuracy") and k.endswith(end)}
            self.log(step, own, agent)
        self.flush()

    def describe(self, steps: int, history: dict, checkpoint: Path | None = None) -> None:
        """Write the generated descriptions of the parent and agent runs (hacrl_exp.tracking.description) from the
        parent's tags: `steps` trained, the held-out `history` ({step: {agent: {accuracy/mean: …}}}), the
        checkpoint folder (None: the run folder, no final checkpoint yet); and the parent's `gain/<agent>` tags
        (start → final accuracy, `gain_text`)."""
        from hacrl_exp.tracking.description import GAIN_TAG, agent_description, gain_text, job_description

        def write() -> None:
            tags = self.client.get_run(self.run_ids[""]).data.tags
            for agent in filter(None, self.run_ids):  # the final-accuracy view's start → final column per agent
                gain = gain_text(history, agent)
                if gain is not None:
                    self.client.set_tag(self.run_ids[""], GAIN_TAG + agent, gain)
            folder = str(checkpoint) if checkpoint else None
            for agent, run_id in self.run_ids.items():
                if agent:
                    text = agent_description(tags, agent, steps, history, folder)
                else:
                    text = job_description(tags, steps, history, folder)
                self.client.set_tag(run_id, "mlflow.note.content", mask_text(text))  # a checkpoint path, too

        self._write(write, "run descriptions")

    def log_model(
        self, folder: Path, agent: str, registered_name: str | None = None, artifact_path: str = "model", step: int = 0
    ) -> None:
        """Log an agent's save_pretrained folder as an MLflow transformers model of its run at `step`, so the model
        carries the run's metrics of that step, named `<job>-<agent>` (`-<artifact_path>` for other than `model`) and
        registered as `<registered_name>-<agent>` when set; once per run and name (a resumed finished job logs
        nothing again). A failure is a warning, the files stay in the run folder."""
        from hacrl_exp.tracking.provenance import log_agent_model, logged_model_names

        run_id, registered = self.run_ids[agent], registered_name and mask_text(f"{registered_name}-{agent}")
        try:
            job = self.client.get_run(self.run_ids[""]).info.run_name
            name = model_name(job, agent) + ("" if artifact_path == "model" else f"-{artifact_path}")
            if name not in logged_model_names(self.client, run_id):
                log_agent_model(self.client, run_id, folder, name, registered, step, artifact_path)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be logged must not fail a finished run
            log.warning("could not log %s as an MLflow model (%s: %s)", folder, type(exc).__name__, exc)

    def close(self, status: str = "FINISHED") -> None:
        """Flush, then mark every run `status`; a store still down leaves them RUNNING, with a warning. Once only."""
        if self.closed:
            return
        self.closed = True
        if self.system_metrics is not None:
            self.system_metrics.finish()
            self.system_metrics = None
        self.flush()
        for run_id in self.run_ids.values():
            self._write(partial(self.client.set_terminated, run_id, status=status), f"status {status}")
        if self.pending or self.down:
            log.warning(
                "MLflow store %s still unavailable at the end: runs not marked %s; resume the run "
                "(trainer.resume=<run folder>) to send its metrics from metrics.jsonl",
                self.uri,
                status,
            )


def open_experiment(client, name: str, agents: list[str], setting: str | None = None) -> str:
    """The id of experiment `name` (created if new: `experiment_id_and_tags`), tagged as model development (so
    MLflow 3's UI opens on its runs, not on GenAI traces), described unless it already has a description, with saved
    views that show these agents' final accuracy and the methods of `setting` (hacrl_exp.tracking.views)."""
    experiment_id, found_tags = experiment_id_and_tags(client, name)
    if found_tags.get("mlflow.experimentKind") != EXPERIMENT_KIND:
        client.set_experiment_tag(experiment_id, "mlflow.experimentKind", EXPERIMENT_KIND)
    if "mlflow.note.content" not in found_tags:
        client.set_experiment_tag(experiment_id, "mlflow.note.content", EXPERIMENT_NOTE)
    write_views(client, experiment_id, agents, found_tags, setting)
    return experiment_id


def create_stores(configs) -> None:
    """Create the MLflow stores of these (job) configs, and their experiments, before jobs start side by side: two
    processes creating the same new sqlite store at once break MLflow's schema migration (seen: 'duplicate column
    name: step'), and two creating one experiment at once fail on its unique name. Two processes (two sweeps started
    together) take turns: a lock file beside a sqlite or file store (`<store>.lock`) is held while each creates."""
    experiments: dict[tuple[str, str], list[str]] = {}
    locations = {}
    for config in configs:
        if config.tracking.backend == "mlflow":
            location = store_location(config.tracking)
            locations[location.uri] = location
            agents = experiments.setdefault((location.uri, config.tracking.experiment), [])
            agents += [a for a in config.agents.members if a not in agents]
    if experiments:
        from mlflow.tracking import MlflowClient

        prepare_mlflow()
        for (uri, name), agents in sorted(experiments.items()):
            with creation_lock(locations[uri]):
                open_experiment(MlflowClient(uri), name, agents)


def creation_lock(location: StoreLocation):
    """The lock that makes processes create (and migrate) one local store in turn: `<db or folder>.lock` beside it;
    nothing for a server (it serialises its own writes) or an in-memory store."""
    if location.path is None:
        return contextlib.nullcontext()
    return locked(location.path.with_name(location.path.name + ".lock"))


def close_running_runs(
    uri: str, experiment: str, tags: dict[str, str], status: str = "KILLED", keep: Collection[str] = ()
) -> int:
    """Mark `status` every RUNNING run of `experiment` that carries all `tags`, but those in `keep` (runs of a killed
    process, which cannot close themselves, or of a job that failed while creating them); returns how many."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return 0
    conditions = [f"tags.`{key}` = '{value}'" for key, value in tags.items()] + ["attributes.status = 'RUNNING'"]
    runs = client.search_runs([found.experiment_id], filter_string=" and ".join(conditions))
    runs = [run for run in runs if run.info.run_id not in keep]
    for run in runs:
        client.set_terminated(run.info.run_id, status=status)
    return len(runs)
