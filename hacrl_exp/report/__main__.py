"""`python -m hacrl_exp.report [overrides]`: compare training runs from MLflow in a Markdown + HTML report with plots.

A Hydra app with its own primary config (conf/report.yaml, schema hacrl_exp/config/report_schema.py), like
`python -m hacrl_exp.evaluate`: the overrides are composed and validated first, so a bad key or value prints one
line naming it and exits with code 2; so does a selection that matches no run. The report's folder is checked
before any run is read (report/folder.py: a plain name, a folder only a report made, room on the disk), and a full
disk while writing is one line naming the file. `--follow-symlinks` lets output_root and the folder be symlinks.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from hacrl_exp.config.cli import check_config_files, check_job_name, hydra_argv, overrides_of
from hacrl_exp.config.preflight import CONFIG_DIR, check_hydra_values
from hacrl_exp.config.report_schema import compose_report, validate_report
from hacrl_exp.errors import ConfigError, OutputError, exit_on_bad_input
from hacrl_exp.paths import take_follow_flag
from hacrl_exp.report.folder import check_target
from hacrl_exp.report.load import check_studies_storage, store_uri


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="report")
def hydra_main(cfg: DictConfig) -> None:
    from hacrl_exp.report.build import make_report

    with exit_on_bad_input(ConfigError, OutputError):
        report = make_report(validate_report(cfg))
    print(report.headline)
    logged = f"; MLflow run {report.run_id}" if report.run_id else ""
    print(f"report in {report.folder}/report.md and report.html{logged}")


def tag_overrides(argv: list[str]) -> list[str]:
    """`tags.<key>=<value>` adds a tag filter without Hydra's '+' (tags is a free-form dict)."""
    return ["+" + arg if arg.startswith("tags.") and "=" in arg else arg for arg in argv]


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once written or printed, a bad input exits 2 (SystemExit)."""
    argv = take_follow_flag(sys.argv[1:] if argv is None else list(argv))  # --follow-symlinks is ours, not Hydra's
    argv = tag_overrides(argv)
    with hydra_argv(__file__, argv):
        with exit_on_bad_input(ConfigError, OutputError):
            check_config_files(argv)
            check_job_name(argv)  # the name of Hydra's log file
            config = validate_report(compose_report(overrides_of(argv)))
            check_hydra_values(overrides_of(argv), "report")
            store_uri(config)  # before any run is read: the store, the studies' storage, then the folder
            check_studies_storage(config)
            check_target(config)
        hydra_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
