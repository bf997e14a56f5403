"""A Hydra config source that serves the repository's top-level `sweeps/` folder as the config group `hparams_search`.

conf/config.yaml puts `hacrl-sweeps://sweeps` on Hydra's search path; this source answers for it, so that
`+hparams_search=<name>` (the lightning-hydra-template group) reads `sweeps/<name>.yaml`, one file per study, with no
copy of it under conf/ (`+sweep=<name>`, the group's old name, is refused in one line by hacrl_exp.config.preflight).
A relative path is taken from the repository root (the folder that holds hydra_plugins/ and conf/).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf

from hacrl_exp.repo import REPO_ROOT

GROUP = "hparams_search"
"""The config group served from sweeps/ (hacrl_exp.config.preflight.SWEEPS_GROUP; a test holds them equal)."""


class SweepsConfigSource(ConfigSource):
    """`hacrl-sweeps://<folder>`: `hparams_search/<name>` → `<folder>/<name>.yaml`."""

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self.folder = (REPO_ROOT / self.path).resolve()

    @staticmethod
    def scheme() -> str:
        return "hacrl-sweeps"

    def _file(self, config_path: str) -> Path | None:
        """The study file behind `hparams_search/<name>[.yaml]`, or None when the path is not in that group."""
        group, _, name = config_path.strip("/").partition("/")
        if group != GROUP or not name or "/" in name:
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
        return config_path.strip("/") in ("", GROUP) and self.available()

    def is_config(self, config_path: str) -> bool:
        file = self._file(config_path)
        return file is not None and file.is_file()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        group = config_path.strip("/")
        if group == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) else []
        if group != GROUP or results_filter == ObjectType.GROUP or not self.available():
            return []
        return sorted(p.stem for p in self.folder.glob("*.yaml") if not p.name.startswith("_") and os.path.isfile(p))
