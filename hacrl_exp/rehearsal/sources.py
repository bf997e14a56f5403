"""Where a rehearsal takes each pretrained agent's files from, before anything is built.

For an agent whose model.path (tokenizer.path) names a checkpoint:
- config.json and generation_config.json: the checkpoint's own (a local folder, or the hub / local Hugging Face
  cache when reachable), else the table of hub checkpoints (agents.hub_checkpoints.KNOWN_CHECKPOINTS: sizes, class
  and special tokens);
- the tokenizer: the checkpoint's own files, else `rehearsal.tokenizers/<org>/<name>/`, else
  `rehearsal.tokenizers/<family>/` (tokenizer.json or tokenizer.json.gz, tokenizer_config.json) with the checkpoint's
  eos, pad and bos from KNOWN_CHECKPOINTS written over the family file's.
Nothing here loads a model; a missing source is one ConfigError line naming the key and the fix.
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from hacrl_exp.agents.hub_checkpoints import KNOWN_CHECKPOINTS, TOKENIZER_FAMILIES, HubCheckpoint
from hacrl_exp.config.schema import AgentConfig, Config
from hacrl_exp.config.validate import looks_like_local_path
from hacrl_exp.errors import ConfigError

MODEL_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json")  # fmt: skip


@dataclass
class AgentSource:
    """One pretrained agent's checkpoint and where the rehearsal reads its files."""

    name: str
    checkpoint: str
    """model.path as the preset writes it."""
    config: dict
    """The checkpoint's config.json keys (its own, or the table of hub checkpoints')."""
    config_from: str
    tokenizer_dir: Path
    tokenizer_from: str
    facts: HubCheckpoint | None
    """The table's row for the checkpoint (None: not in it)."""
    special_tokens: dict[str, str | None] = field(default_factory=dict)
    """eos_token / pad_token / bos_token written over a family file's tokenizer_config (empty: its own files)."""
    stops: tuple[int, ...] = ()
    """Every id the checkpoint's generation_config stops at (its own file's, else the table's)."""
    generation: dict = field(default_factory=dict)
    """The checkpoint's generation_config.json (its own, else the table's special tokens and sampling defaults)."""
    notes: list[str] = field(default_factory=list)
    """Warnings about the sources: what differs from the real checkpoint's files."""

    @property
    def key(self) -> str:
        return f"agents.members.{self.name}"


def own_files(path: str, wanted: tuple[str, ...]) -> Path | None:
    """A folder holding the checkpoint's own files: `path` itself when it is a folder, else a hub snapshot of `wanted`
    (only the local Hugging Face cache when the hub is out of reach or HF_HUB_OFFLINE=1); None when neither has them."""
    local = Path(path).expanduser()
    if local.is_dir():
        return local
    if looks_like_local_path(path):
        return None
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(path, allow_patterns=list(wanted), local_files_only=not hub_reachable())
    except Exception:  # not cached, gated, or no such repository: the fallbacks decide
        return None
    folder = Path(folder)
    return folder if any((folder / name).is_file() for name in wanted) else None


@functools.cache
def hub_reachable() -> bool:
    """The hub answers a TCP connection within 3 s (asked once per process); False when HF_HUB_OFFLINE=1."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    host = urlsplit(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


def read_json(path: Path) -> dict | None:
    """A JSON file's object, or None when it is absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def resolve_sources(config: Config, tokenizers: str | None) -> list[AgentSource]:
    """The sources of every pretrained agent, in declared order; ConfigError when one has none."""
    return [
        resolve_agent(name, agent, tokenizers)
        for name, agent in config.agents.members.items()
        if agent.model.source == "pretrained"
    ]


def resolve_agent(name: str, agent: AgentConfig, tokenizers: str | None) -> AgentSource:
    """Where one agent's config and tokenizer come from (module docstring)."""
    key, path = f"agents.members.{name}", agent.model.path or ""
    tokenizer_id = agent.tokenizer.path or path
    facts = KNOWN_CHECKPOINTS.get(tokenizer_id) or KNOWN_CHECKPOINTS.get(path)
    config, folder = checkpoint_config(key, path)
    config_from = str(folder) if folder else "built-in table"
    generation = read_json(folder / "generation_config.json") if folder else None
    own = own_files(tokenizer_id, TOKENIZER_FILES)
    if own is not None and (own / "tokenizer_config.json").is_file():
        source = AgentSource(name, path, config, config_from, own, f"{own} (its own files)", facts)
    else:
        source = family_source(key, name, path, tokenizer_id, config, config_from, facts, tokenizers)
    if generation is not None:
        ids = generation.get("eos_token_id")
        source.stops = tuple(ids if isinstance(ids, list) else [ids] if ids is not None else [])
        source.generation = generation
    elif facts is not None:
        source.stops = facts.stops
        source.generation = dict(facts.generation)
    return source


def checkpoint_config(key: str, path: str) -> tuple[dict, Path | None]:
    """(config.json keys, the folder they came from): the checkpoint's own file, else the table of hub
    checkpoints (None)."""
    own = own_files(path, MODEL_FILES)
    config = read_json(own / "config.json") if own is not None else None
    if config is not None:
        return config, own
    if path in KNOWN_CHECKPOINTS:
        return dict(KNOWN_CHECKPOINTS[path].config), None
    raise ConfigError(
        f"{key}.model.path={path!r}: no config.json (not a folder, not on the hub or in the Hugging Face cache) and "
        f"not in the table of hub checkpoints {sorted(KNOWN_CHECKPOINTS)}; give a folder holding the checkpoint's "
        "config.json"
    )


def family_source(
    key: str,
    name: str,
    path: str,
    tokenizer_id: str,
    config: dict,
    config_from: str,
    facts: HubCheckpoint | None,
    tokenizers: str | None,
) -> AgentSource:
    """The tokenizer from rehearsal.tokenizers: the checkpoint's own folder there, else its family's."""
    model_type = config.get("model_type", "")
    family = facts.family if facts else TOKENIZER_FAMILIES.get(model_type, model_type)
    if tokenizers is None:
        raise ConfigError(
            f"{key}: {tokenizer_id}'s tokenizer is not on the hub or in the Hugging Face cache; set "
            f"rehearsal.tokenizers to a folder with a {family}/ tokenizer folder (e.g. ../shared/tokenizers)"
        )
    root = Path(tokenizers).expanduser()
    own = root / tokenizer_id
    if (own / "tokenizer_config.json").is_file() and has_vocabulary(own):
        return AgentSource(name, path, config, config_from, own, f"{own} (its own files)", facts)
    folder = root / family
    if not ((folder / "tokenizer_config.json").is_file() and has_vocabulary(folder)):
        raise ConfigError(
            f"{key}: no tokenizer for {tokenizer_id}: not on the hub or in the Hugging Face cache, and "
            f"rehearsal.tokenizers={tokenizers} has no {family}/ folder with tokenizer.json[.gz] and "
            "tokenizer_config.json; point rehearsal.tokenizers at one (e.g. ../shared/tokenizers)"
        )
    source = AgentSource(name, path, config, config_from, folder, f"{folder} (the {family} family's files)", facts)
    if facts is None:
        source.notes.append(
            f"{key}: {tokenizer_id} is not in the table of hub checkpoints: its eos/pad are the {family} family "
            "file's, which may not be the checkpoint's; check them"
        )
        return source
    source.tokenizer_from += f" with {tokenizer_id}'s eos/pad/bos (hacrl_exp.agents.hub_checkpoints)"
    source.special_tokens = {"eos_token": facts.eos, "pad_token": facts.pad, "bos_token": facts.bos}
    if facts.template_note:
        source.notes.append(
            f"{key}: the chat template is the {family} family file's, not {tokenizer_id}'s: {facts.template_note}"
        )
    return source


def has_vocabulary(folder: Path) -> bool:
    """A tokenizer folder holds its vocabulary: tokenizer.json (or .gz), or a slow tokenizer's files."""
    return any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer.json.gz", "vocab.json",
                                                       "tokenizer.model"))  # fmt: skip


def write_tokenizer(source: AgentSource, folder: Path) -> None:
    """The agent's tokenizer files in `folder`, as the run's AutoTokenizer reads them: tokenizer.json unzipped, and
    the family file's tokenizer_config.json with the checkpoint's special tokens written over it."""
    folder.mkdir(parents=True, exist_ok=True)
    packed = source.tokenizer_dir / "tokenizer.json.gz"
    if packed.is_file() and not (source.tokenizer_dir / "tokenizer.json").is_file():
        with gzip.open(packed, "rb") as src, open(folder / "tokenizer.json", "wb") as dst:
            shutil.copyfileobj(src, dst)
    for name in TOKENIZER_FILES:
        if (source.tokenizer_dir / name).is_file():
            shutil.copyfile(source.tokenizer_dir / name, folder / name)
    if source.special_tokens:
        settings = json.loads((folder / "tokenizer_config.json").read_text())
        for token, value in source.special_tokens.items():
            if value is None:
                settings.pop(token, None)
            else:
                settings[token] = value
        (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2, ensure_ascii=False))
