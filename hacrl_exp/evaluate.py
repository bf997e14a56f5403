"""`python -m hacrl_exp.evaluate checkpoints=[...] benchmarks=[...] [overrides]`: score checkpoints on benchmarks.

A Hydra app with its own primary config (conf/evaluate.yaml, schema hacrl_exp/config/evaluate_schema.py). Before
Hydra starts, the overrides are composed and validated, so a bad key, benchmark name, data folder or checkpoint prints
one line naming it and exits with code 2, before any model loads; so does a malformed data row. The gold-agreement
check of the graders is `python -m hacrl_exp.evaluation.gold`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from hacrl_exp.config.cli import check_config_files, check_job_name, hydra_argv, hydra_run_dir, overrides_of
from hacrl_exp.config.evaluate_schema import compose_evaluate, validate_evaluate
from hacrl_exp.config.preflight import check_hydra_values
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.evaluation.inputs import check_inputs
from hacrl_exp.paths import check_output, take_follow_flag
from hacrl_exp.tasks.math import DataError
from hacrl_exp.tracking.masking import mask_saved_config, refuse_secret_name, remember_config_secrets


@hydra.main(version_base="1.3", config_path=None, config_name="evaluate")  # conf/evaluate.yaml, via the ConfigStore
def hydra_main(cfg: DictConfig) -> None:
    from hacrl_exp.evaluation.pipeline import headline_table, run_evaluation

    with exit_on_bad_input(ConfigError, DataError):
        config = validate_secrets(cfg)
        check_inputs(config)
        mask_saved_config(HydraConfig.get())
        output_dir = Path(config.output_dir or HydraConfig.get().runtime.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        summary = run_evaluation(config, output_dir)
    print(headline_table(summary))
    print(f"results in {output_dir}")


def validate_secrets(cfg: DictConfig):
    """The typed config, its secret values remembered (masked in the evaluation runs' names, tags and params:
    tracking.masking) and an experiment name holding one refused (it is the store's key)."""
    config = validate_evaluate(cfg)
    remember_config_secrets(cfg)
    refuse_secret_name("tracking.experiment", config.tracking.experiment)
    return config


INSPECT_FLAGS = {"--cfg", "-c", "--help", "-h", "--info", "-i", "--hydra-help"}
"""Flags that only print something: the preflight checks types but not checkpoints or data."""


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once scored or printed, a bad input exits 2 (SystemExit)."""
    argv = take_follow_flag(sys.argv[1:] if argv is None else list(argv))  # --follow-symlinks is ours, not Hydra's
    with hydra_argv(__file__, argv):
        with exit_on_bad_input(ConfigError, DataError):
            check_config_files(argv)
            check_job_name(argv)  # the name of Hydra's log file
            config = validate_secrets(compose_evaluate(overrides_of(argv)))  # overrides_of: Hydra's own parser
            check_hydra_values(overrides_of(argv), "evaluate", config_dir=None)
            if not INSPECT_FLAGS.intersection(argv):
                hydra_dir = hydra_run_dir(overrides_of(argv), "outputs/eval/${now:%Y-%m-%d}")
                if hydra_dir is not None:  # Hydra's job folder (its .hydra/ and log): checked as run checks it
                    check_output(hydra_dir, "hydra.run.dir")
                check_inputs(config)
        hydra_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
