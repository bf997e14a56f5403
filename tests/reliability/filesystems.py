"""Real file systems for the reliability tests: a small tmpfs that fills up (a full disk), a read-only one, and a
filler file that takes what is left.

Mounting needs root (CAP_SYS_ADMIN): where `mount -t tmpfs` is refused, the tests that need it skip.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(folder: Path, size_kib: int, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB mounted on `folder` (made if needed) for the block; skips the test when mounting is
    not allowed here."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); needs root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def make_read_only(folder: Path) -> None:
    """Bind-mount `folder` read-only over itself, as a disk turned read-only under a running job (undo with
    `umount(folder)`); skips the test when bind mounts are not allowed here."""
    done = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({done.stderr.strip()}); needs root")
    subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)


def umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Write a filler file into `folder` until its file system has less than `leave` + 4 KiB free (nothing, for
    leave=0); returns the filler, whose removal gives the space back."""
    filler = folder / "filler"
    with open(filler, "ab") as handle:
        while (room := free_bytes(folder) - leave) > 0:
            try:
                handle.write(b"\0" * max(4096, min(1 << 16, room // 4096 * 4096)))
                handle.flush()
            except OSError:  # the last bytes: full
                break
            if leave and room < 8192:
                break
    return filler


def free_bytes(folder: Path) -> int:
    info = os.statvfs(folder)
    return info.f_bavail * info.f_frsize
