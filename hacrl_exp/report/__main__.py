"""`python -m hacrl_exp.report [overrides]`: compare training runs from MLflow in a Markdown + HTML report with plots.

A Hydra app with its own primary config (conf/report.yaml, schema hacrl_exp/config/report_schema.py), like
`python -m hacrl_exp.evaluate`: the overrides are composed and validated first, so a bad key or value prints one
line naming it and exits with code 2; so does a selection that matches no run.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from hacrl_exp.config.cli import hydra_argv, overrides_of
from hacrl_exp.config.preflight import CONFIG_DIR, check_hydra_values
from hacrl_exp.config.report_schema import compose_report, validate_report
from hacrl_exp.errors import ConfigError, exit_on_bad_input


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="report")
def hydra_main(cfg: DictConfig) -> None:
    from hacrl_exp.report.build import make_report

    with exit_on_bad_input(ConfigError):
        report = make_report(validate_report(cfg))
    print(report.headline)
    logged = f"; MLflow run {report.run_id}" if report.run_id else ""
    print(f"report in {report.folder}/report.md and report.html{logged}")


def tag_overrides(argv: list[str]) -> list[str]:
    """`tags.<key>=<value>` adds a tag filter without Hydra's '+' (tags is a free-form dict)."""
    return ["+" + arg if arg.startswith("tags.") and "=" in arg else arg for arg in argv]


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 once written or printed, a bad input exits 2 (SystemExit)."""
    argv = tag_overrides(sys.argv[1:] if argv is None else list(argv))
    with hydra_argv(__file__, argv):
        with exit_on_bad_input(ConfigError):
            validate_report(compose_report(overrides_of(argv)))
            check_hydra_values(overrides_of(argv), "report")
        hydra_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
