"""Command-line helpers shared by the Hydra entry points (run, evaluate, report): which arguments are overrides.

The entry points import these from here, never from each other (docs/architecture.md).
"""

from __future__ import annotations

from pathlib import Path

# Hydra flags that take a value as the next argument (the value is not an override)
FLAGS_WITH_VALUE = {
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-name",
    "-cn",
    "--config-path",
    "-cp",
    "--config-dir",
    "-cd",
    "--info",
    "-i",
    "--experimental-rerun",
}


def overrides_of(argv: list[str]) -> list[str]:
    """The key=value overrides of a Hydra command line, without its flags and their values."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in FLAGS_WITH_VALUE
        else:
            out.append(arg)
    return out


def config_dirs_of(argv: list[str]) -> list[str]:
    """--config-dir folders as a hydra.searchpath override, so preflight finds their groups (e.g. best_alpha)."""
    dirs = [b for a, b in zip(argv, argv[1:]) if a in ("--config-dir", "-cd")]
    dirs += [a.split("=", 1)[1] for a in argv if a.startswith(("--config-dir=", "-cd="))]
    return [f"hydra.searchpath=[{','.join(repr(f'file://{Path(d).resolve()}') for d in dirs)}]"] if dirs else []
