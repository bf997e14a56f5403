"""The package layers of docs/architecture.md hold: the import-linter contracts of pyproject.toml are kept.

CI runs only pytest, so this test runs `lint-imports` and fails with its report when a contract breaks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hacrl_exp

ROOT = Path(__file__).resolve().parents[1]
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
)


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason='import-linter is in the dev extra: pip install -e ".[dev]"')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", LINT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"an import contract is broken (docs/architecture.md):\n{done.stdout}\n{done.stderr}"


def test_every_top_level_module_has_a_layer():
    """A new package or top-level module must be placed in the layers contract, else nothing checks it."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+")
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    package = Path(hacrl_exp.__file__).parent
    present = {f"hacrl_exp.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    present |= {f"hacrl_exp.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert present == placed, f"not in a layer: {sorted(present - placed)}; gone: {sorted(placed - present)}"


DESIGN_CARD = ("pyproject.toml", "hacrl_exp", "conf", "sweeps", "evaluation", "reports", "tests")
"""The repository's top level as the design card names it."""


def test_the_design_cards_top_level_entries_exist():
    missing = [name for name in DESIGN_CARD if not (ROOT / name).exists()]
    assert not missing, f"the design card's top-level entries are missing: {missing}"


def test_tracking_is_one_package():
    """MLflow tracking lives in hacrl_exp/tracking/, not in top-level tracking_* modules."""
    package = Path(hacrl_exp.__file__).parent
    assert (package / "tracking" / "__init__.py").is_file()
    assert not sorted(p.name for p in package.glob("tracking_*"))


BUDGETS = [("trainer/loop.py", "_train", 90), ("trainer/step.py", "update", 60)]
"""Issue 35's line budgets (signature and docstring included)."""


@pytest.mark.parametrize(("path", "name", "budget"), BUDGETS)
def test_the_loop_and_the_update_stay_readable(path, name, budget):
    """The training loop reads top to bottom (rollout, share, learn, evaluate, checkpoint) and the update's
    micro-batch body and optimizer step live in their own functions."""
    import ast

    tree = ast.parse((Path(hacrl_exp.__file__).parent / path).read_text())
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert function.end_lineno - function.lineno + 1 <= budget, f"{path}:{name} is over {budget} lines; split it"
