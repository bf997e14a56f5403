"""A run folder belongs to one run, and a resume continues exactly that run or is refused.

- A new run refuses a folder that already holds anything but Hydra's own files (`.hydra/`, `*.log`).
- `RunLock`: an exclusive `flock` on <run>/.lock for as long as the process trains; a second process is refused
  with the holder's pid. The kernel drops the lock when the holder dies, even by kill -9.
- `check_run_folder`: where the run writes and which checkpoint it resumes. A step folder resumes its own run folder
  (<run>/checkpoints/step_N) or is refused; a damaged newest checkpoint falls back to the newest intact one.
- The checkpoint keeps the resolved config and its hash; a resume whose config differs in a key outside
  `MAY_CHANGE` is refused with the changed keys. docs/reliability.md lists the keys that may change.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import (
    FOLLOW_SYMLINKS_FLAG,
    check_free_space,
    check_output,
    follow_symlinks,
    open_no_follow,
    size_of,
)
from hacrl_exp.tracking.masking import MASK
from hacrl_exp.trainer.checkpoint import intact_checkpoint

log = logging.getLogger(__name__)
LOCK = ".lock"
RUN_ID = "run_id"
"""The file holding a run folder's id, given at the run's start and copied into each of its checkpoints."""
STARTUP_FILES = (".hydra", LOCK, RUN_ID)
"""What a folder may hold and still take a new run: Hydra's files, the lock, the id of a start that failed before
writing anything else (the new run keeps it)."""
MAY_CHANGE = (  # how long, how often to evaluate/checkpoint, where to log, how to execute: not what is trained
    "trainer.steps",
    "trainer.resume",
    "trainer.output_dir",
    "trainer.stop_after",
    "trainer.progress",
    "trainer.eval_every",
    "trainer.checkpoint_every",
    "trainer.keep_checkpoints",
    "trainer.threads",
    "trainer.save_final_models",
    "trainer.cache_dir",
    "tracking.uri",
    "tracking.flush_every",
    "tracking.retry_s",
    "tracking.log_models",
    "tracking.log_every_checkpoint",
    "tracking.register_model",
    "tracking.system_metrics",
    "tracking.system_metrics_interval_s",
    "tracking.run_name",
    "tracking.tags.",
    "executor.",
    "trial.",
    "extra.",
    "rehearsal.",  # read by `python -m hacrl_exp.rehearse` only, never by a run
)


@dataclass
class RunFolder:
    """Where a run writes, and the checkpoint (with its state.json) it resumes from; None for a new run."""

    output_dir: Path
    checkpoint: Path | None = None
    state: dict | None = None


def config_params(config: Config) -> dict:
    """The config as stored in config.json and checkpoints: plain JSON, secrets redacted."""
    from hacrl_exp.tracking import redact_secrets

    return redact_secrets(json.loads(json.dumps(asdict(config))))


AGENT_DEFAULTS = {
    "world_size": "1",
    "fsdp.offload": "False",
    "warm_start.target_accuracy": "None",
    "warm_start.check_every": "25",
    "warm_start.check_per_category": "50",
}
"""Keys of an agent that are left out of the comparison at these values, so a checkpoint written before they existed
still resumes. Another value changes what was trained (a warm start stopped at a target accuracy) or the checkpoint's
layout (optim/<name>.dcp, sharding), so it must stay."""
ADDED_DEFAULTS = {
    "rollout.sample_stream": "agent",  # removed by issue 36 (every row draws by counter); older checkpoints hold it
    "rollout.sampler": "multinomial",  # the default until issue 36: such a checkpoint resumes with this value
    "task.heldout_seed": "0",
    "task.validation_per_tier": "50",
    "algorithm.dynamic_target_rows": "0",
    "algorithm.dynamic_max_rounds": "4",
    "algorithm.dynamic_prompts": "same",
    "task.grader_forms": "requested",
}
"""Keys added after checkpoints were written, left out of the comparison at the value that behaves as before they
existed, so those checkpoints still resume. Another value changes what is sampled, so it must stay."""


def _flat(params: dict) -> dict[str, str]:
    from hacrl_exp.tracking import flatten

    def kept(key: str, value: str) -> bool:
        if key.startswith(MAY_CHANGE) or key in MAY_CHANGE or ADDED_DEFAULTS.get(key) == value:
            return False
        if key.startswith("agents.members."):
            field = key.split(".", 3)[3]
            # where an agent's actors run (placement, span_nodes) does not change what is trained
            return field not in ("placement", "span_nodes") and AGENT_DEFAULTS.get(field) != value
        return True

    return {k: v for k, v in flatten(params).items() if kept(k, v)}


def config_hash(params: dict) -> str:
    """SHA-256 of the keys a resume must keep (everything but `MAY_CHANGE`)."""
    return hashlib.sha256(json.dumps(_flat(params), sort_keys=True).encode()).hexdigest()


def check_same_config(params: dict, state: dict, resume: str) -> None:
    """Refuse a resume whose config differs from the checkpoint's in a key that changes what is trained."""
    if "config_hash" not in state:
        log.warning("checkpoint of %s records no config (written by an older version): not compared", resume)
        return
    if config_hash(params) == state["config_hash"]:
        return
    old, new = _flat(state["config"]), _flat(params)
    masked = [k for k, v in old.items() if v == MASK and new.get(k) != MASK]
    keys = [k for k in sorted(old.keys() | new.keys()) if not any(k == m or k.startswith(f"{m}.") for m in masked)]
    changed = [f"{k} ({old.get(k, '<unset>')} → {new.get(k, '<unset>')})" for k in keys if old.get(k) != new.get(k)]
    if not changed:  # an older version masked keys that only looked secret (tokenizer, max_new_tokens): not comparable
        log.warning("checkpoint of %s masks %s (an older version did): not compared", resume, ", ".join(masked))
        return
    raise ConfigError(
        f"trainer.resume={resume}: the config differs from the checkpoint's in {', '.join(changed[:8])}"
        f"{' …' if len(changed) > 8 else ''}; resume with the original values, or start a new run in a new "
        "trainer.output_dir (keys that may change on resume: docs/reliability.md)"
    )


def unexpected_entries(folder: Path) -> list[str]:
    """What a folder holds besides Hydra's own files; empty when a new run may start there."""
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name not in STARTUP_FILES and not p.name.endswith(".log"))


def check_new_run_folder(folder: Path) -> None:
    """A new run starts only in a missing or empty folder (Hydra's .hydra/ and *.log, STARTUP_FILES aside)."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"trainer.output_dir={folder} is a file, not a folder; give a new folder")
    found = unexpected_entries(folder)
    if found:
        raise ConfigError(
            f"trainer.output_dir={folder} already holds a run ({', '.join(found[:5])}); give a new "
            f"trainer.output_dir, or continue that run with trainer.resume={folder}"
        )


def check_run_folder(config: Config, output_dir: Path | None) -> RunFolder:
    """Check where the run writes before anything is written; for a resume, find and check its checkpoint.

    output_dir: the new run's folder (None when not known yet, e.g. Hydra's job folder before Hydra starts).
    """
    trainer = config.trainer
    if not trainer.resume:
        if output_dir is not None:
            check_output(output_dir, "trainer.output_dir")  # not a file or device, a symlink only if asked; writable
            check_unlocked(output_dir)
            check_new_run_folder(output_dir)
        return RunFolder(output_dir or Path("."))
    resume = Path(trainer.resume).expanduser()
    if not resume.exists():
        raise ConfigError(f"trainer.resume={trainer.resume} does not exist; give the run folder of an earlier run")
    check_checkpoint_links(resume, trainer.resume)
    checkpoint, damaged = intact_checkpoint(resume)
    for problem in damaged:
        log.warning("damaged checkpoint, not used: %s", problem)
    if checkpoint is None:
        why = f" (damaged: {damaged[0]})" if damaged else ""
        raise ConfigError(f"trainer.resume={trainer.resume} holds no intact checkpoint{why}; give a run folder")
    if damaged:
        log.warning("resuming from %s, the newest intact checkpoint", checkpoint)
    run = checkpoint.parent.parent
    if checkpoint.parent.name != "checkpoints" or not (run / "metrics.jsonl").is_file():
        raise ConfigError(
            f"trainer.resume={trainer.resume} is a checkpoint outside its run folder ({run} holds no metrics.jsonl); "
            "resume the run folder it belongs to, or copy the whole run folder"
        )
    if trainer.output_dir and Path(trainer.output_dir).resolve() != run.resolve():
        raise ConfigError(
            f"trainer.output_dir={trainer.output_dir} is not the run folder of trainer.resume={trainer.resume} "
            f"({run}); drop trainer.output_dir or set it to {run}"
        )
    check_output(run, "trainer.resume")
    check_unlocked(run)
    state = json.loads((checkpoint / "state.json").read_text())
    check_same_run(checkpoint, state, run, trainer.resume)
    check_same_config(config_params(config), state, trainer.resume)
    return RunFolder(run, checkpoint, state)


def read_run_id(run: Path) -> str | None:
    """The id a run folder was given at its start (`<run>/run_id`); None for a run started before run ids existed."""
    path = run / RUN_ID
    return path.read_text().strip() or None if path.is_file() else None


def new_run_id() -> str:
    return uuid.uuid4().hex


def check_same_run(checkpoint: Path, state: dict, run: Path, resume: str) -> None:
    """Refuse a checkpoint that another run wrote (a step folder, or a whole checkpoints folder, copied or symlinked
    into this run folder): its state.json's run id must be the run folder's. A checkpoint written before run ids
    existed carries none and resumes as before."""
    theirs, ours = state.get("run_id"), read_run_id(run)
    if theirs is None or theirs == ours:
        return
    mine = f"run {ours}" if ours else f"no run id ({run / RUN_ID} is missing)"
    raise ConfigError(
        f"trainer.resume={resume}: checkpoint {checkpoint} belongs to run {theirs}, but its run folder {run} holds "
        f"{mine}; resume the run folder that checkpoint came from (copy the whole run folder, not its checkpoints)"
    )


def check_checkpoint_links(resume: Path, given: str) -> None:
    """A resume reads (and then writes and rotates) checkpoints in the run's own folder: the checkpoints folder, a
    step folder in it, or the path given, when a symlink (into another run, whose weights it would resume and whose
    checkpoints it would rotate), is refused before any checkpoint is read, as an output path that is a symlink is,
    unless --follow-symlinks."""
    if follow_symlinks():
        return
    checkpoints = resume.parent if resume.name.startswith("step_") else resume / "checkpoints"
    if resume.name == "checkpoints":
        checkpoints = resume
    found = [p for p in (resume, checkpoints) if os.path.islink(p)]
    if not found and checkpoints.is_dir():
        found = sorted(p for p in checkpoints.glob("step_*") if p.is_symlink())
    if found:
        raise ConfigError(
            f"trainer.resume={given}: {found[0]} is a symlink (to {os.readlink(found[0])}); a run resumes only the "
            f"checkpoints in its own folder: copy them in, or pass {FOLLOW_SYMLINKS_FLAG}"
        )


def prepare_run(config: Config, output_dir: Path | None, task=None) -> tuple[Config, RunFolder]:
    """Every check of a run that writes nothing and loads no model: run folder or resume target
    (`check_run_folder`), the tracking store (a resume uses the one its checkpoint recorded, unless tracking.uri is
    set; a recorded store that is gone is refused, never created empty), memory, the task's data rows and what they
    imply for the agents (`check_task`), and the free space for the next checkpoint.

    task: the run's task when already built (else one is built here and closed). Returns the config to train with (the
    recorded store filled in) and the folder.
    """
    from hacrl_exp.tasks import build_task
    from hacrl_exp.tracking.store import check_store
    from hacrl_exp.trainer.placement import check_placement
    from hacrl_exp.trainer.resources import check_memory
    from hacrl_exp.trainer.validate import check_task

    folder = check_run_folder(config, output_dir)
    recorded = (folder.state or {}).get("tracking_uri")
    if recorded and not config.tracking.uri and "***" not in recorded:
        config = replace(config, tracking=replace(config.tracking, uri=recorded))
        check_recorded_store(config, recorded)
    check_store(config.tracking)
    check_memory(config)  # from the config alone: before the task's data is read (it may be remote)
    check_placement(config)  # a GPU placement that cannot fit, before any model loads
    built = task is None
    task = build_task(config.task) if built else task
    try:
        check_task(config, task)
    finally:
        if built and hasattr(task, "close"):
            task.close()
    if output_dir is not None or folder.checkpoint is not None:  # the run folder is known (not yet Hydra's job folder)
        check_checkpoint_room(config, folder)
    return config, folder


def check_checkpoint_room(config: Config, folder: RunFolder) -> None:
    """OutputError unless the run folder's file system holds the next checkpoint: the size of the one resumed from, or
    for a new run the agents' weights and optimizer state (`resources.checkpoint_bytes`)."""
    from hacrl_exp.trainer.resources import checkpoint_bytes

    if folder.checkpoint is not None:
        needed, what = size_of(folder.checkpoint), f"the next checkpoint (the size of {folder.checkpoint.name})"
    else:
        needed, what = checkpoint_bytes(config), "the first checkpoint (weights and optimizer state)"
    check_free_space(folder.output_dir, needed, what, "free space or give another trainer.output_dir")


def check_recorded_store(config: Config, recorded: str) -> None:
    """A resume logs to the store its checkpoint recorded; when that sqlite file is gone, refuse (MLflow would create
    an empty store there) and say how to go on."""
    from hacrl_exp.tracking.store import store_location

    if config.tracking.backend == "none":
        return
    location = store_location(config.tracking)
    if location.scheme == "sqlite" and location.path is not None and not location.path.is_file():
        raise ConfigError(
            f"trainer.resume={config.trainer.resume}: its MLflow store {recorded} is gone (moved or deleted); give "
            "tracking.uri=<where the store is now> to continue its runs there, or tracking.uri=<a new store> to "
            "create them again there from metrics.jsonl"
        )


def _in_use(folder: Path, holder: str) -> ConfigError:
    return ConfigError(
        f"trainer.output_dir={folder} is in use by process {holder or '?'} (it holds {folder / LOCK}); "
        "wait for it to end, or give another trainer.output_dir"
    )


def check_unlocked(folder: Path) -> None:
    """Refuse a run folder another process holds, without writing anything (a probe of its lock)."""
    lock = folder / LOCK
    if not os.path.lexists(lock):
        return
    fd = open_no_follow(lock, os.O_RDONLY)  # a symlink planted as .lock is refused here, before anything is written
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(folder, lock.read_text().strip()) from None
    finally:
        os.close(fd)  # closing drops the probe's lock


class RunLock:
    """An exclusive lock on a run folder for the life of the training; a second holder gets a ConfigError."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.fd = folder, None

    def __enter__(self) -> RunLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = open_no_follow(self.folder / LOCK, os.O_RDWR | os.O_CREAT)  # never truncates a symlink's target
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise _in_use(self.folder, holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock; the file stays (removing it would race a waiting process)
            self.fd = None
