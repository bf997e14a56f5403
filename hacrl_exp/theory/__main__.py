"""`python -m hacrl_exp.theory`: print every theory check as a table; exit 0 when all identities hold, else 1."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from hacrl_exp.config.flags import check_number
from hacrl_exp.config.schema import SEED_MAX
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.theory import run_checks
from hacrl_exp.theory.results import render, render_summary

PIPE_WIDTH = 160
"""Console width when stdout is not a terminal (rich would otherwise assume 80 and squeeze the tables)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hacrl_exp.theory",
        description="Numerical checks of HACPO's theory (hacpo-spec §6.4) against hacrl_exp.algo.",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the Monte-Carlo check (default 0)")
    parser.add_argument("--quick", action="store_true", help="fewer Monte-Carlo replicates (for tests)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with exit_on_bad_input(ConfigError):
        check_number("--seed", args.seed, 0, SEED_MAX)
    console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
    start = time.perf_counter()
    results = run_checks(seed=args.seed, quick=args.quick)
    for result in results:
        render(console, result)
    render_summary(console, results)
    console.print(
        f"[dim]seed {args.seed}, {'quick' if args.quick else 'full'} mode, {time.perf_counter() - start:.1f} s"
    )
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
