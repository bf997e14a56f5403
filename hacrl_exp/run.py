"""`python -m hacrl_exp.run [overrides]`: train N heterogeneous agents (Hydra app; -m for multirun).

Before Hydra starts, the command line is read with Hydra's own parser (an argument out of place is one line), the
config files it brings in are bounded (size, YAML aliases), and the overrides are composed once and validated, so a
typo in a key, group or value prints one line naming it and exits with code 2, before any model loads. For a single
run the checks that need no model come first too (run folder or resume target, output paths, free space, tracking
store, data rows, tokenizers, devices, memory): an error leaves no file behind. `--cfg`, `--help` and `--info` only
print. `--follow-symlinks` lets output paths be symlinks. Signals (trainer/signals.py): during start-up Ctrl-C /
SIGTERM / SIGHUP (a closed terminal) exit at once (130 / 143 / 129); while training the first stops after a checkpoint,
a second at once.
"""

from __future__ import annotations

from hacrl_exp.trainer.signals import exit_on_signals, say

if __name__ == "__main__":  # first: covers the imports below (a test that imports this module keeps its handlers)
    exit_on_signals("interrupted before training started; nothing was trained")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from hacrl_exp.config.cli import (  # noqa: E402
    check_config_files,
    check_job_name,
    config_dirs_of,
    hydra_argv,
    hydra_run_dir,
    parse_arguments,
)
from hacrl_exp.config.preflight import CONFIG_DIR, check_hydra_values  # noqa: E402
from hacrl_exp.errors import ConfigError, NumericsError, OutputError, RunInterrupted, exit_on_bad_input  # noqa: E402
from hacrl_exp.paths import check_output, take_follow_flag  # noqa: E402
from hacrl_exp.tasks.rows import DataError  # noqa: E402
from hacrl_exp.tracking import create_stores  # noqa: E402
from hacrl_exp.tracking.masking import mask_saved_config, mask_text  # noqa: E402
from hacrl_exp.trainer.validate import preflight, validate  # noqa: E402


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def hydra_main(cfg: DictConfig) -> dict:
    from hacrl_exp.sweep.trial import join_trial
    from hacrl_exp.trainer.loop import train  # heavy imports only once the config is valid

    with exit_on_bad_input(ConfigError, DataError):
        config = validate(cfg)
        mask_saved_config(HydraConfig.get())
        output_dir = Path(config.trainer.output_dir or HydraConfig.get().runtime.output_dir)
        on_evaluate = join_trial(config)  # an α-sweep trial: MLflow tags and pruning reports (docs/sweeps.md)
    # in an α sweep a diverged run is a failed trial, not the end of the sweep
    with exit_on_bad_input(ConfigError, DataError, OutputError, *(() if on_evaluate else (NumericsError,))):
        try:
            summary = train(config, output_dir, on_evaluate=on_evaluate)
        except RunInterrupted as exc:
            say(str(exc))  # the terminal may be gone (SIGHUP): a failed write must not change the exit code
            sys.exit(exc.exit_code)
    if __name__ == "__main__":
        exit_on_signals("interrupted after training ended; its results are written")
    for step in (0, summary["last_step"]):
        for agent, metrics in summary["evals"].get(step, {}).items():
            print(f"step {step:>5} {agent:>12}: held-out accuracy {metrics['accuracy/mean']:.3f}")
    print(mask_text(f"{summary['seconds_per_step']:.3f} s/step; outputs in {summary['output_dir']}"))
    if summary.get("mlflow_ui"):
        print(mask_text(summary["mlflow_ui"]))
    return summary  # a sweeper reads it from the job's return value


INSPECT_FLAGS = {"--cfg", "-c", "--help", "-h", "--info", "-i", "--hydra-help", "--shell-completion", "-sc"}
"""Flags that only print something: nothing is checked beyond the config, nothing is written."""


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once trained or printed, a bad input exits 2 (SystemExit)."""
    argv = take_follow_flag(sys.argv[1:] if argv is None else list(argv))  # --follow-symlinks is ours, not Hydra's
    with hydra_argv(__file__, argv):
        with exit_on_bad_input(ConfigError, DataError, OutputError):
            arguments = parse_arguments(argv)  # Hydra's parser: what it would refuse is refused here, before any file
            check_config_files(argv)
            check_job_name(argv)  # the name of Hydra's log file
            config = preflight(list(arguments.overrides or []) + config_dirs_of(argv), "config")
            check_hydra_values(list(arguments.overrides or []))
            if INSPECT_FLAGS.intersection(argv):
                hydra_main()
                return 0
            check_hydra_dir(arguments)
            if not arguments.multirun:  # each job of a sweep checks its own folder
                from hacrl_exp.trainer.runfolder import prepare_run

                output_dir = config.trainer.output_dir
                config, _ = prepare_run(config, Path(output_dir) if output_dir else None)
            create_stores([config])  # once, here: parallel jobs (joblib, Ray, sweeps) must not race to create it
        hydra_main()
    return 0


def check_hydra_dir(arguments) -> None:
    """Hydra's folder (hydra.run.dir, or hydra.sweep.dir with -m, where Hydra writes multirun.yaml and the jobs'
    folders), as far as it is known before Hydra starts: checked as an output path (paths.check_output)."""
    key, default = (
        ("hydra.sweep.dir", "multirun/${now:%Y-%m-%d}")
        if arguments.multirun
        else ("hydra.run.dir", "outputs/${now:%Y-%m-%d}")
    )
    hydra_dir = hydra_run_dir(arguments.overrides or [], default, key)
    if hydra_dir is not None:
        check_output(hydra_dir, key)


if __name__ == "__main__":
    sys.exit(main())
