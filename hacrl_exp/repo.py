"""Where this checkout is: the repository root, the folder that holds hacrl_exp/, conf/, evaluation/, sweeps/ and
reports/ (standard library only, so every layer may import it)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the folder above the hacrl_exp package."""
