"""`python -m hacrl_exp.run [overrides]`: train N heterogeneous agents (Hydra app; -m for multirun).

Before Hydra starts, the overrides are composed once and validated, so a typo in a key, group or value
prints one line naming it and exits with code 2, before any model loads. For a single run the checks that need no
model come first too (run folder or resume target, tracking store, devices, memory): an error leaves no file
behind. `--cfg`, `--help` and `--info` only print. Ctrl-C / SIGTERM stop after a checkpoint (exit 130 / 143).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from hacrl_exp.config.cli import config_dirs_of, overrides_of
from hacrl_exp.config.preflight import CONFIG_DIR
from hacrl_exp.errors import ConfigError, NumericsError, RunInterrupted, exit_on_bad_input
from hacrl_exp.tracking import create_stores
from hacrl_exp.trainer.validate import preflight, validate


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def hydra_main(cfg: DictConfig) -> dict:
    from hacrl_exp.sweep.trial import join_trial
    from hacrl_exp.tasks.math import DataError
    from hacrl_exp.trainer.loop import train  # heavy imports only once the config is valid

    with exit_on_bad_input(ConfigError, DataError):
        config = validate(cfg)
        output_dir = Path(config.trainer.output_dir or HydraConfig.get().runtime.output_dir)
        on_evaluate = join_trial(config)  # an α-sweep trial: MLflow tags and pruning reports (docs/sweeps.md)
    # in an α sweep a diverged run is a failed trial, not the end of the sweep
    with exit_on_bad_input(ConfigError, DataError, *(() if on_evaluate else (NumericsError,))):
        try:
            summary = train(config, output_dir, on_evaluate=on_evaluate)
        except RunInterrupted as exc:
            print(exc, file=sys.stderr)
            sys.exit(exc.exit_code)
    for step in (0, summary["last_step"]):
        for agent, metrics in summary["evals"].get(step, {}).items():
            print(f"step {step:>5} {agent:>12}: held-out accuracy {metrics['accuracy/mean']:.3f}")
    print(f"{summary['seconds_per_step']:.3f} s/step; outputs in {summary['output_dir']}")
    if summary.get("mlflow_ui"):
        print(summary["mlflow_ui"])
    return summary  # a sweeper reads it from the job's return value


INSPECT_FLAGS = {"--cfg", "-c", "--help", "-h", "--info", "-i", "--hydra-help", "--shell-completion", "-sc"}
"""Flags that only print something: nothing is checked beyond the config, nothing is written."""


def main() -> None:
    argv = sys.argv[1:]
    try:
        with exit_on_bad_input(ConfigError):
            config = preflight(overrides_of(argv) + config_dirs_of(argv), "config")
            if INSPECT_FLAGS.intersection(argv):
                return hydra_main()
            if not {"-m", "--multirun"}.intersection(argv):  # each job of a sweep checks its own folder
                from hacrl_exp.trainer.runfolder import prepare_run

                output_dir = config.trainer.output_dir
                config, _ = prepare_run(config, Path(output_dir) if output_dir else None)
        create_stores([config])  # once, here: parallel jobs (joblib, Ray, sweeps) must not race to create it
        hydra_main()
    except KeyboardInterrupt:  # before training started (or in a sweep): nothing to checkpoint
        print("interrupted before training started; nothing was trained", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
