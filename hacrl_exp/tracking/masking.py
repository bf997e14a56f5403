"""Secrets are masked (`***`) everywhere a config is written: MLflow params, tags, run names, descriptions and the
`command` tag, config.json, checkpoints' state.json, summary.json and Hydra's saved `.hydra/*.yaml`.

Two kinds of value are secret:
- the value of a key that looks secret (`is_secret`, the one pattern: token, password, passwd, secret(s), api_key,
  apikey, credential(s), auth, authorization, private_key as a word of the key: `extra.api_token`, `hf_password`,
  `HF_TOKEN`, but not `max_new_tokens` or `tokenizer`);
- a value read from the environment through `${oc.env:NAME}` (anywhere in the composed config, under any key).

Config trees are masked by key (`mask_tree`), command-line overrides by their key (`mask_override`), and free text
(run names, tags, descriptions, Hydra's YAML) by value: `remember_secrets` records the secret values of the config
being run, and `mask_text` replaces each of at least `MIN_MASKED` characters (a shorter one would mask unrelated
text; it is still masked wherever its key is seen).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from hacrl_exp.errors import ConfigError
from hacrl_exp.paths import replace_atomic

MASK = "***"
MIN_MASKED = 4
SECRET_KEY = re.compile(
    r"(token|passw(?:or)?d|secrets?|api_?key|credentials?|auth|authorization|private_?key)(?=$|[^a-z0-9])"
)
"""A secret word at the end of a key's word (`api_token`, `hftoken`, `oauth`); `tokens`, `tokenizer` and `author`
are not."""
ENV_READ = re.compile(r"\$\{oc\.env:([^,}]+)")
URL_PASSWORD = re.compile(r"(?<=://)([^/@\s:]*):[^/@\s]*@")
_secret_values: set[str] = set()
"""The secret values of the config being run (`remember_secrets`), masked in any text written."""


def is_secret(key: str) -> bool:
    """A config key (dotted or not) whose value must never be written: a part of it names a token, password, ..."""
    return SECRET_KEY.search(key.lower()) is not None


def remember_secrets(raw: Any, resolved: Any, key: str = "") -> None:
    """Record the secret values of a composed config: `raw` its tree with interpolations unresolved, `resolved` the
    same tree resolved. Call with the root (key ""): the record is replaced, so it holds the config being run."""
    if not key:
        _secret_values.clear()
    if isinstance(raw, dict) and isinstance(resolved, dict):
        for name, value in raw.items():
            remember_secrets(value, resolved.get(name), f"{key}.{name}")
        return
    if isinstance(raw, list) and isinstance(resolved, list):
        for index, (value, done) in enumerate(zip(raw, resolved)):
            remember_secrets(value, done, f"{key}.{index}")
        return
    read = ENV_READ.findall(raw) if isinstance(raw, str) else []
    found = [os.environ.get(name.strip(), "") for name in read]
    if read or is_secret(key):
        found.append("" if resolved is None else str(resolved))
    _secret_values.update(value for value in found if len(value) >= MIN_MASKED)


def remember_config_secrets(cfg) -> None:
    """`remember_secrets` of an OmegaConf config (Hydra's composed DictConfig)."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    remember_secrets(raw, OmegaConf.to_container(cfg, resolve=True))


def mask_text(text: str) -> str:
    """`text` with every remembered secret value and a URL's password (`user:***@host`) masked."""
    for value in sorted(_secret_values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return URL_PASSWORD.sub(rf"\1:{MASK}@", text)


def refuse_secret_name(key: str, name: str) -> None:
    """A name that is a store's key (an MLflow experiment's) holding a secret value is refused: masked, two secrets
    would give one name, their runs mixed; in clear, the secret is in the store."""
    if mask_text(name) != name:
        raise ConfigError(
            f"{key}={mask_text(name)} holds a secret value (read through ${{oc.env:...}} or from a secret key): the "
            "name is written to the store as it is; give a name without it"
        )


def mask_tree(tree: Any) -> Any:
    """A copy of a config tree with the values of secret keys, remembered secret values and URL passwords masked."""
    if isinstance(tree, dict):
        return {k: MASK if is_secret(str(k)) else mask_tree(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [mask_tree(v) for v in tree]
    return mask_text(tree) if isinstance(tree, str) else tree


def mask_override(override: str) -> str:
    """A Hydra override `key=value` with its value masked when the key is secret; else its secret text masked."""
    key, equals, _ = override.partition("=")
    if equals and is_secret(key.lstrip("+~")):
        return f"{key}={MASK}"
    return mask_text(override)


def mask_tags(tags: dict[str, str]) -> dict[str, str]:
    """MLflow tags with their secrets masked: a secret key's value, remembered values, URL passwords."""
    return {key: MASK if is_secret(key) else mask_text(str(value)) for key, value in tags.items()}


def mask_hydra_files(folder: Path) -> None:
    """Mask the secrets in the YAML files Hydra saved for a job (`.hydra/config.yaml`, `overrides.yaml`,
    `hydra.yaml`) or a multirun (`multirun.yaml`): Hydra writes them before the job's function runs, with the
    command line's values in clear. Interpolations stay as written (`${oc.env:NAME}` names a variable, not a value)."""
    from omegaconf import OmegaConf

    for path in [folder / name for name in ("config.yaml", "hydra.yaml", "overrides.yaml", "multirun.yaml")]:
        if not path.is_file():
            continue
        tree = mask_tree(OmegaConf.to_container(OmegaConf.load(path), resolve=False))
        if isinstance(tree, list):  # overrides.yaml
            tree = [mask_override(str(o)) for o in tree]
        hydra = tree.get("hydra", {}) if isinstance(tree, dict) else {}
        if isinstance(hydra.get("overrides", {}).get("task"), list):
            hydra["overrides"]["task"] = [mask_override(str(o)) for o in hydra["overrides"]["task"]]
        if isinstance(hydra.get("job", {}).get("override_dirname"), str):  # key=value,key=value
            parts = hydra["job"]["override_dirname"].split(",")
            hydra["job"]["override_dirname"] = ",".join(mask_override(p) for p in parts)
        text = OmegaConf.to_yaml(OmegaConf.create(tree))
        replace_atomic(path, lambda tmp, text=text: tmp.write_text(text))


def mask_saved_config(hydra) -> None:
    """Hydra saved the job's config and overrides (and a multirun's) before the job ran: mask their secrets. `hydra`:
    the job's HydraConfig."""
    if hydra.output_subdir is not None:
        mask_hydra_files(Path(hydra.runtime.output_dir) / hydra.output_subdir)
    if hydra.mode is not None and hydra.mode.name == "MULTIRUN":
        mask_hydra_files(Path(hydra.sweep.dir))
