"""Checkpoint manifests and content checks: a truncated, missing or damaged file is named before a checkpoint is used,
instead of failing deep inside a loader.

- The manifest (`manifest.json`, written at save) records the size and SHA-256 of every file; a checkpoint written
  before manifests existed has none.
- Whatever the manifest says (it may be missing, or regenerated after the damage), every file is checked by content:
  a safetensors file's header must parse and describe exactly the bytes the file holds (each tensor's dtype × shape
  its byte range, the ranges ending at the file's end); a torch file must be a complete zip archive; JSON must parse;
  and each agent the checkpoint's config names must have its weights (and, unless frozen, its optimizer state).

It lives beside the agents it covers so that both the trainer (which writes checkpoints) and the evaluation harness
(which reads them) can use it without either importing the other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import zipfile
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
    """None when the checkpoint's files match the manifest (if any) and pass the content checks; else which file is
    damaged, and how."""
    manifest = folder / MANIFEST
    if not (folder / "state.json").is_file():
        return f"{folder / 'state.json'} is missing"
    if manifest.is_file():
        key = (str(folder.resolve()), manifest.stat().st_mtime_ns)
        if key not in _verified:
            _verified[key] = _problem(folder, manifest)
        if _verified[key]:
            return _verified[key]
    return _missing_part(folder) or next(filter(None, map(content_problem, sorted(folder.rglob("*")))), None)


def model_folder_problem(folder: Path) -> str | None:
    """A save_pretrained folder's weights and JSON files checked by content (`content_problem`)."""
    return next(filter(None, map(content_problem, sorted(folder.iterdir()))), None)


def _missing_part(folder: Path) -> str | None:
    """A file every checkpoint of its config holds (rng.pt; each agent's weights and, unless frozen, its optimizer
    state), when absent, or a state.json that is not what a save writes (`state_problem`). A state.json written before
    it recorded the config names no agents."""
    try:
        state = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return f"{folder / 'state.json'} is damaged (not the JSON written at save)"
    invalid = state_problem(folder, state)
    if invalid is not None:
        return f"{folder / 'state.json'} is invalid ({invalid})"
    members = _members(state)
    if not (folder / "rng.pt").is_file():
        return f"{folder / 'rng.pt'} is missing"
    for name, agent in members.items():
        if not any((folder / "agents" / name).glob("*.safetensors")):
            return f"{folder / 'agents' / name} holds no *.safetensors weights"
        optim = folder / "optim" / f"{name}.pt"
        sharded = optim.with_suffix(".dcp").is_dir()  # a sharded agent's AdamW state (trainer.sharded_checkpoint)
        if not (agent or {}).get("frozen") and not optim.is_file() and not sharded:
            return f"{optim} is missing"
    return None


STEP_FOLDER = re.compile(r"step_(\d+)")
STATE_TYPES = {  # key -> (types it may hold, required): what RunState.save writes and a resume reads
    "step": (int, True),
    "counters": (dict, True),
    "run_ids": (dict, True),
    "capability": (dict, True),
    "costs": (dict, False),
    "process_seconds": ((int, float), False),
    "config": (dict, False),
    "config_hash": (str, False),
    "tracking_uri": ((str, type(None)), False),
    "run_id": (str, False),
}
"""Keys that are not required are absent from checkpoints written before they existed."""


def state_problem(folder: Path, state: object) -> str | None:
    """What makes a parsed state.json unusable for a resume, or None. Its manifest may have been regenerated (or
    deleted) after an edit, so the values are checked themselves: a step that is not a non-negative int equal to the
    folder's step_N would cut metrics.jsonl back to a step that never was."""
    if not isinstance(state, dict):
        return f"a JSON {type(state).__name__}, not an object"
    for key, (types, required) in STATE_TYPES.items():
        if key not in state:
            if required:
                return f"no {key!r}"
            continue
        if not isinstance(state[key], types) or isinstance(state[key], bool):
            return f"{key!r} is {json.dumps(state[key])[:40]}, not {_type_names(types)}"
    step, named = state["step"], STEP_FOLDER.fullmatch(folder.name)
    if step < 0:
        return f"'step' is {step}, not a non-negative int"
    if named and int(named.group(1)) != step:
        return f"'step' is {step}, but the folder is {folder.name}"
    return _counters_problem(state)


def _members(state: dict) -> dict:
    """The agents the checkpoint's recorded config names ({} when it records none)."""
    members = state.get("config", {}).get("agents", {})
    members = members.get("members", {}) if isinstance(members, dict) else {}
    return members if isinstance(members, dict) else {}


def _type_names(types: type | tuple[type, ...]) -> str:
    names = {"int": "an int", "float": "a number", "dict": "an object", "str": "a string", "NoneType": "null"}
    return " or ".join(names.get(t.__name__, t.__name__) for t in (types if isinstance(types, tuple) else (types,)))


def _counters_problem(state: dict) -> str | None:
    """Each agent's counters (rollouts, tokens), finite numbers, for every agent the recorded config names."""
    members = _members(state)
    for name in [*members, *state["counters"]]:
        counters = state["counters"].get(name)
        if not isinstance(counters, dict):
            return f"'counters' has no object for agent {name!r}"
        values = counters.values()
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            return f"'counters' of agent {name!r} are not finite numbers"
    capability = state["capability"]
    if not all(isinstance(capability.get(key), dict) for key in ("batch", "by_category")):
        return "'capability' lacks its 'batch' and 'by_category' objects"
    return None


SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
                     "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}  # fmt: skip
MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


def content_problem(path: Path) -> str | None:
    """What is wrong with one file by its content (safetensors, torch zip, JSON), or None; other files pass."""
    if not path.is_file():
        return None
    try:
        if path.suffix == ".safetensors":
            return _safetensors_problem(path)
        if path.suffix == ".pt":
            return _torch_file_problem(path)
        if path.suffix == ".json":
            json.loads(path.read_bytes())
    except ValueError:
        return f"{path} is damaged (not valid JSON)"
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    return None


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if length < 2 or length > min(size - 8, MAX_HEADER):
            return f"{path} is truncated or not safetensors ({size} bytes; its header length reads {length})"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return f"{path} is damaged (its safetensors header is not JSON)"
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = info["data_offsets"]
            width = SAFETENSORS_BYTES.get(info["dtype"])
            expected = math.prod(info["shape"]) * width if width else stop - start
        except (KeyError, TypeError, ValueError):
            return f"{path} is damaged (tensor {name!r} has no valid dtype, shape and offsets)"
        if not 0 <= start <= stop or stop - start != expected:
            return f"{path} is damaged (tensor {name!r}: bytes {start}..{stop} for {expected})"
        end = max(end, stop)
    if 8 + length + end != size:
        return f"{path} is truncated or altered ({size} bytes, its header describes {8 + length + end})"
    return None


def _torch_file_problem(path: Path) -> str | None:
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.header_offset + info.compress_size > size:
                    return f"{path} is truncated (member {info.filename} runs past its {size} bytes)"
    except (zipfile.BadZipFile, ValueError):
        return f"{path} is truncated or not a torch file ({size} bytes, no complete zip archive)"
    return None


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
