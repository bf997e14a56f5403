"""A Hydra config source that serves the repository's top-level `sweeps/` folder as two config groups.

conf/config.yaml puts `hacrl-sweeps://sweeps` on Hydra's search path; this source answers for it, so that
`+hparams_search=<name>` (the lightning-hydra-template group) and `+sweep=<name>` (its older name here) both read
`sweeps/<name>.yaml`, one file per study, with no copy of it under conf/. A relative path is taken from the
repository root (the folder that holds hydra_plugins/ and conf/).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf

from hacrl_exp.repo import REPO_ROOT

GROUPS = ("hparams_search", "sweep")
"""The config groups served from sweeps/; both hold the same studies."""


class SweepsConfigSource(ConfigSource):
    """`hacrl-sweeps://<folder>`: `<group>/<name>` → `<folder>/<name>.yaml` for each group in GROUPS."""

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self.folder = (REPO_ROOT / self.path).resolve()

    @staticmethod
    def scheme() -> str:
        return "hacrl-sweeps"

    def _file(self, config_path: str) -> Path | None:
        """The study file behind `<group>/<name>[.yaml]`, or None when the path is not in one of GROUPS."""
        group, _, name = config_path.strip("/").partition("/")
        if group not in GROUPS or not name or "/" in name:
            return None
        return self.folder / self._normalize_file_name(name)

    def load_config(self, config_path: str) -> ConfigResult:
        file = self._file(config_path)
        if file is None or not file.is_file():
            raise ConfigLoadError(f"Config not found : {config_path} (in {self.folder})")
        text = file.read_text(encoding="utf-8")
        return ConfigResult(
            config=OmegaConf.create(text),  # `# @package _global_` is read from the header below
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text[:512]),
        )

    def available(self) -> bool:
        return self.folder.is_dir()

    def is_group(self, config_path: str) -> bool:
        return config_path.strip("/") in ("", *GROUPS) and self.available()

    def is_config(self, config_path: str) -> bool:
        file = self._file(config_path)
        return file is not None and file.is_file()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        group = config_path.strip("/")
        if group == "":
            return list(GROUPS) if results_filter in (None, ObjectType.GROUP) else []
        if group not in GROUPS or results_filter == ObjectType.GROUP or not self.available():
            return []
        return sorted(p.stem for p in self.folder.glob("*.yaml") if not p.name.startswith("_") and os.path.isfile(p))
