"""Where a report is written, checked before any run is read, and how it replaces the folder it wrote before.

<output_root>/<name>/ is replaced only when this command made it: every report folder holds a marker file (`MARKER`),
and a folder without it is refused in one line, unless it holds an older report's files and nothing else (reports
written before the marker existed). So `name`, a grid tag or an experiment can never select a folder of someone
else's to delete (the name itself is one plain name: `paths.check_name`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hacrl_exp.config.report_schema import ReportConfig, name_setting, report_name
from hacrl_exp.errors import ConfigError, OutputError
from hacrl_exp.paths import check_free_space, check_output, output_error

MARKER = ".hacrl_report"
"""Written into every folder a report creates; only such a folder is replaced by the next report of that name."""
REPORT_ENTRIES = {"report.md", "report.html", "headline.md", "plots", "tables", "rederived_claims.md",
                  "superseded.json", MARKER}  # fmt: skip
"""What a report folder holds (rederived_claims.md: `python -m hacrl_exp.report.rederive --write`; superseded.json:
`python -m hacrl_exp.report.relayout --superseded-by`)."""
MIN_FREE = 1 << 20
"""Bytes a report needs at least (its plots and tables: a few hundred KiB); less is refused before any run is read."""


def check_target(config: ReportConfig) -> Path:
    """<output_root>/<name>, checked before anything is read or written: output_root a writable folder (not a symlink
    unless --follow-symlinks), the name one plain name, an existing folder replaced only when a report made it, and
    1 MiB free. ConfigError / OutputError naming the setting otherwise."""
    name, key = report_name(config), name_setting(config)[1]
    root = check_output(config.output_root, "output_root")
    target = check_output(root / name, key)
    if target.exists():
        check_replaceable(target, key)
    check_free_space(root, MIN_FREE, "a report", "free space or give another output_root")
    return target


def check_replaceable(target: Path, key: str) -> None:
    """ConfigError unless `target` is a report folder (module docstring)."""
    entries = {p.name for p in target.iterdir()}
    if MARKER in entries or ("report.md" in entries and entries <= REPORT_ENTRIES):
        return
    raise ConfigError(
        f"{key}: {target} exists and is not a report folder (no {MARKER} in it); a report replaces only a folder it "
        f"made: give another {key} or output_root"
    )


def write_folder(target: Path, write: Callable[[Path], object]) -> object:
    """write(folder) into a new folder beside `target`, then swap it in (the old report is removed only once the new
    one is in place); a failed write leaves the old report as it was. A full disk or a denied path is one
    OutputError naming the file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (work / MARKER).write_text("written by python -m hacrl_exp.report; the next report of this name replaces it\n")
        written = write(work)
        _swap(work, target)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise _one_line(exc, work, target) from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return written


def _one_line(exc: OSError, work: Path, target: Path) -> OSError | OutputError:
    """The OutputError line naming the file as it would have been in the report folder (the temporary folder it was
    written to is gone by the time the line is read)."""
    if exc.filename and Path(exc.filename).is_relative_to(work):
        exc.filename = str(target / Path(exc.filename).relative_to(work))
    return output_error(exc, target, "then run the report again (the old report is as it was)") or exc


def _swap(work: Path, target: Path) -> None:
    """Replace `target` by `work`. Checked again here (the folder may have appeared since `check_target`)."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        check_replaceable(target, "name")
        target.rename(old)
    work.rename(target)
    shutil.rmtree(old, ignore_errors=True)
