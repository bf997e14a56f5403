"""`python -m hacrl_exp.rehearse experiment=<preset> [overrides]`: a dress rehearsal of a run on a CPU.

    python -m hacrl_exp.rehearse experiment=paper_qwen3_4b_llama3p2_3b task.data_dir=../shared/data \
        rehearsal.tokenizers=../shared/tokenizers

The overrides compose and validate exactly as for `python -m hacrl_exp.run`; rehearsal.* (conf/rehearsal) sets the
rehearsal. Prints the changes made to the preset, then the findings (also written as rehearsal.md in the rehearsal's
folder). Exit code 0 when every stage ran; 2 with one line when something would break the real run: a bad config,
a missing tokenizer, ids outside the embedding table, a template that drops the problem, or a stage that fails.
"""

from __future__ import annotations

import shlex
import sys

from hacrl_exp.config.cli import config_dirs_of, overrides_of
from hacrl_exp.errors import ConfigError, OutputError, exit_on_bad_input
from hacrl_exp.paths import take_follow_flag
from hacrl_exp.rehearsal import rehearse
from hacrl_exp.tasks.math import DataError
from hacrl_exp.trainer.validate import preflight


def experiment_of(overrides: list[str]) -> str:
    """The experiment preset named on the command line (the rehearsal folder's name), else 'default'."""
    named = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("experiment=")]
    return named[-1].split(",")[0] if named else "default"


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 when every stage ran, else one line and exit 2 (SystemExit)."""
    argv = take_follow_flag(sys.argv[1:] if argv is None else list(argv))  # --follow-symlinks: ours, not Hydra's
    with exit_on_bad_input(ConfigError, DataError, OutputError):
        overrides = overrides_of(argv)
        config = preflight(overrides + config_dirs_of(argv))
        command = " ".join(["python -m hacrl_exp.rehearse", *map(shlex.quote, argv)])
        findings, folder = rehearse(config, command, experiment_of(overrides))
    print(findings.markdown())
    print(f"rehearsal findings: {folder / 'rehearsal.md'}")
    if findings.error:
        print(f"error: {findings.error}", file=sys.stderr)
        sys.exit(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
