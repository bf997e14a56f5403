"""Command-line helpers shared by the Hydra entry points (run, evaluate, report): the arguments, read as Hydra reads
them, and the config files they bring in, checked before Hydra (or anything else) starts.

- `parse_arguments`: Hydra's own argument parser, so the overrides and flags the checks see are the ones Hydra will
  use; an argument Hydra would refuse (a flag between two overrides, an unknown flag) is one ConfigError line.
- `hydra_argv`: sys.argv as Hydra reads it, for an entry point's `main(argv)` called in a running process (tests).
- `check_config_files`: the YAML files of --config-dir / --config-path / hydra.searchpath folders are at most
  `MAX_CONFIG_BYTES` each, use at most `MAX_YAML_ALIASES` aliases and expand to at most `MAX_YAML_NODES` values (an
  "anchor bomb" of nested aliases expands to gigabytes while composing; a recursive alias never ends).
- `hydra_run_dir`: the folder Hydra will write a job's files to, as far as it is known before Hydra starts (run and
  evaluate check it with `paths.check_output`).
- `check_job_name`: `hydra.job.name` names Hydra's log file (<job folder>/<name>.log) and `hydra.sweeper.study_name`
  a sweep's folder (multirun/<study>) and best-α file, so each is one plain name (`paths.check_name`), never `../x`.

The entry points import these from here, never from each other (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hacrl_exp.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_ALIASES = 100


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """argv read by Hydra's parser (overrides, config_dir, config_path, multirun, cfg, ...); ConfigError when Hydra
    would refuse it."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def refuse(message: str) -> None:
        raise ConfigError(
            f"the arguments cannot be read: {message}; Hydra's flags (--config-dir, -m, --cfg, ...) go before or "
            "after all key=value overrides, not between them"
        )

    parser.error = refuse  # argparse would print its usage and exit
    return parser.parse_args(argv)


@contextmanager
def hydra_argv(program: str, argv: list[str]) -> Iterator[None]:
    """sys.argv = [program, *argv] inside, the caller's after: a @hydra.main function reads sys.argv itself, so an
    entry point's `main(argv)` runs the arguments it was given, in its own `python -m` process or in another one.
    `program` is the entry module's file (what `python -m` puts in argv[0]; MLflow's source tag reads it)."""
    saved = sys.argv
    sys.argv = [program, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def overrides_of(argv: list[str]) -> list[str]:
    """The key=value overrides of a Hydra command line, without its flags and their values."""
    return list(parse_arguments(argv).overrides or [])


def config_dirs_of(argv: list[str]) -> list[str]:
    """--config-dir folders as a hydra.searchpath override, so preflight finds their groups (e.g. best_alpha)."""
    folder = parse_arguments(argv).config_dir
    return [f"hydra.searchpath=[{repr(f'file://{Path(folder).resolve()}')}]"] if folder else []


def config_folders(argv: list[str]) -> list[Path]:
    """The folders of config files a command line brings in: --config-dir, --config-path and hydra.searchpath's
    file:// entries."""
    arguments = parse_arguments(argv)
    folders = [Path(f) for f in (arguments.config_dir, arguments.config_path) if f]
    for override in arguments.overrides or []:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "hydra.searchpath":
            folders += [Path(v.strip(" '\"")[len("file://") :]) for v in value.strip("[]").split(",") if "file://" in v]
    return folders


def check_job_name(argv: list[str]) -> None:
    """ConfigError naming hydra.job.name or hydra.sweeper.study_name when the command line sets it to anything but one
    plain file name (before anything is written; a study name from a sweep's YAML is checked when the sweep starts)."""
    from hacrl_exp.paths import check_name

    for override in parse_arguments(argv).overrides or []:
        key, _, value = override.lstrip("+~").partition("=")
        if key in ("hydra.job.name", "hydra.sweeper.study_name"):
            check_name(value.strip("'\""), key)


def hydra_run_dir(overrides: list[str], default: str, key: str = "hydra.run.dir") -> Path | None:
    """The folder Hydra writes its job files to (`key`: hydra.run.dir, or hydra.sweep.dir for -m; else the entry
    point's `default`, e.g. outputs/${now:%Y-%m-%d}), up to its first interpolation: a dated folder does not exist
    yet, so the folders above it are what is checked. None when it starts with an interpolation (${oc.env:...}: known
    only to Hydra)."""
    given = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{key}=")]
    value = given[-1] if given else default  # the last one wins, as in Hydra
    static, _, rest = value.partition("${")
    if not rest:
        return Path(value)
    return Path(static) / "job" if static else None


def check_config_files(argv: list[str]) -> None:
    """ConfigError naming the file when a YAML file of `config_folders(argv)` holds over MAX_CONFIG_BYTES, more than
    MAX_YAML_ALIASES aliases, a recursive alias, or expands to more than MAX_YAML_NODES nodes. YAML's composer builds
    the node graph with each alias shared, so nothing is expanded while checking."""
    for folder in config_folders(argv):
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            problem = yaml_file_problem(path)
            if problem:
                raise ConfigError(f"{path}: {problem}; write the values out, or split the file")


def yaml_file_problem(path: Path) -> str | None:
    """Why a config file is refused (module docstring), or None."""
    import yaml

    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        return f"{size} bytes, over the {MAX_CONFIG_BYTES} (1 MiB) a config file may hold"
    text = path.read_text(errors="replace")
    try:
        aliases = sum(isinstance(token, yaml.AliasToken) for token in yaml.scan(text))
        if aliases > MAX_YAML_ALIASES:
            return f"{aliases} YAML aliases (*name), over the {MAX_YAML_ALIASES} a config file may use"
        for document in yaml.compose_all(text):
            if document is not None and _expanded(document, {}, set()) > MAX_YAML_NODES:
                return f"its aliases expand to over {MAX_YAML_NODES} values"
    except yaml.YAMLError:
        return None  # a syntax error: composing names its line
    except (RecursionError, _Recursive) as exc:
        return "a recursive alias (an anchor used inside itself)" if isinstance(exc, _Recursive) else "nested too deep"
    return None


MAX_YAML_NODES = 100_000


class _Recursive(Exception):
    """An alias inside the node it names."""


def _expanded(node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Values `node` stands for once every alias is expanded (each shared node counted once, then reused)."""
    import yaml

    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise _Recursive
    open_nodes.add(key)
    total = 1
    if isinstance(node, yaml.MappingNode):
        for name, value in node.value:
            total += _expanded(name, sizes, open_nodes) + _expanded(value, sizes, open_nodes)
            if total > MAX_YAML_NODES:
                break
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _expanded(item, sizes, open_nodes)
            if total > MAX_YAML_NODES:
                break
    open_nodes.discard(key)
    sizes[key] = total
    return total
