"""Checkpoint manifests: the size and SHA-256 of every file of a checkpoint, written when it is saved and checked
before it is used, so a truncated or damaged file is named instead of failing deep inside a loader.

A checkpoint without `manifest.json` (written before manifests existed) is taken as it is. It lives beside the agents
it covers so that both the trainer (which writes checkpoints) and the evaluation harness (which reads them) can use it
without either importing the other.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

MANIFEST = "manifest.json"
log = logging.getLogger(__name__)
_verified: dict[tuple[str, int], str | None] = {}  # (folder, manifest mtime) -> problem: hashing GBs once per process


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> None:
    """Record every file under `folder` (relative path -> size, sha256) in folder/manifest.json."""
    files = {
        str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1))


def checkpoint_problem(folder: Path) -> str | None:
    """None when every file the manifest lists is there with its size and hash; else which file is damaged."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None if (folder / "state.json").is_file() else f"{folder / 'state.json'} is missing"
    key = (str(folder.resolve()), manifest.stat().st_mtime_ns)
    if key not in _verified:
        _verified[key] = _problem(folder, manifest)
    return _verified[key]


def _problem(folder: Path, manifest: Path) -> str | None:
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return f"{manifest} is damaged (not the JSON written at save)"
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != expected["size"]:
            return f"{path} is truncated or altered ({size} bytes, {expected['size']} written)"
        if _sha256(path) != expected["sha256"]:
            return f"{path} does not match the SHA-256 recorded at save"
    return None
