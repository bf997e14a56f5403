"""Connecting to Ray: a private local Ray that listens on 127.0.0.1 only, or a running cluster.

Used by the Ray executor (`executor=ray`, hacrl_exp.trainer.executor) and the Hydra launcher
(`hydra/launcher=hacrl_ray`, hydra_plugins/hacrl_ray_launcher). Ray is imported lazily: it is an optional extra.

Why the environment variable: on Linux, ray 2.60 turns a node address of 127.0.0.1 into the machine's
reachable address, and its GCS, raylet and worker servers then listen on every interface ('::'). With
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (the single-machine mode Ray uses on macOS and Windows) the node address
stays 127.0.0.1 and every server binds 127.0.0.1 (measured with psutil; docs/distributed.md). Ray 2.60 also
turns on token authentication by default (the token lives in ~/.ray/auth_token); we leave it on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hacrl_exp.errors import ConfigError

SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray(key: str = "executor.backend=ray"):
    """The ray module, or a ConfigError naming the setting that needs it and how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{key} needs Ray: pip install 'hacrl_exp[ray]'") from None
    return ray


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Make Ray keep 127.0.0.1 as the node address while a private local Ray starts."""
    from ray._private import ray_constants

    previous_env, previous_flag = os.environ.get(SINGLE_MACHINE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_MACHINE_ENV] = "0"  # read at import by the processes Ray spawns
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at call time in this process (ray imported already)
    try:
        yield
    finally:  # a later connection to a real cluster must resolve this machine's address again
        ray_constants.ENABLE_RAY_CLUSTER = previous_flag
        if previous_env is None:
            os.environ.pop(SINGLE_MACHINE_ENV, None)
        else:
            os.environ[SINGLE_MACHINE_ENV] = previous_env


SWITCHES = {"executor": "executor.backend=ray", "hydra.launcher": "hydra/launcher=hacrl_ray"}
"""The setting that asks for Ray, by the config node that holds the Ray settings."""


def connect(
    address: str | None,
    include_dashboard: bool = False,
    num_cpus: int | None = None,
    runtime_env: dict[str, Any] | None = None,
    settings: str = "executor",
) -> bool:
    """Join Ray: the running session (inside a Ray task or actor), `address` ('auto', 'host:port'), or with
    address None a new private Ray on 127.0.0.1 without dashboard. Returns True when this call started or
    joined it, so the caller owns `ray.shutdown()`. settings: 'executor' or 'hydra.launcher', for messages."""
    ray = import_ray(SWITCHES[settings])
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"runtime_env": runtime_env or None, "logging_level": "WARNING"}
    if address is not None:
        try:
            ray.init(address=address, **options)
        except ConnectionError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"{settings}.address={address!r}: no Ray cluster there ({first}); start one with `ray start --head` "
                f"or set {settings}.address=null for a private Ray on this machine"
            ) from None
        return True
    # the private Ray's token authentication is on by default, as we want it; Ray's notice of that is not a warning
    # for our users (and an error exiting with code 2 must stay one line)
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    with _loopback_only():
        ray.init(address="local", include_dashboard=include_dashboard, num_cpus=num_cpus, **options)
    return True


def run_hydra_job(hydra_context, task_function, sweep_config, singleton_state):
    """One Hydra job inside a Ray task (hydra/launcher=hacrl_ray): Hydra's globals restored, then `run_job`.

    A job that exits (a bad config prints one line, exit code 2) comes back as a failed JobReturn whose
    return_value re-raises that SystemExit in the launching process, as a local job would."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals

    setup_globals()
    Singleton.set_state(singleton_state)
    try:
        return run_job(
            hydra_context=hydra_context,
            task_function=task_function,
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    except SystemExit as exc:
        overrides = list(sweep_config.hydra.overrides.task)
        return JobReturn(overrides=overrides, status=JobStatus.FAILED, _return_value=exc)
