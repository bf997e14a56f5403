"""The benchmarks measure through the front door: no benchmark imports the tests, and none replaces another
module's attributes at run time (benchmarks/harness.py once swapped the trainer's functions to time phases, and a
new parameter broke benchmarks/trl_gspo.py). They read what the loop logs (metrics.jsonl) or call public functions.

The check parses every benchmarks/*.py with `ast` (nothing is imported or run) and reports, per file and line:
  - `import tests...` / `from tests... import ...` / `importlib.import_module("tests...")`;
  - an assignment or deletion whose target is an attribute of an imported name (`step.update = f`,
    `torch.Tensor.backward = f`, `del loop.train`), or a subscript of its `__dict__`;
  - `setattr(...)` / `delattr(...)` on an imported name, and any `<x>.setattr(...)` / `.delattr(...)` call
    (pytest's MonkeyPatch) or `mock.patch(...)` / `patch.object(...)`.
Attributes of objects a benchmark builds itself (a tracker, a TRL trainer instance) are its own to set, and
`sys.argv` is the argument vector benchmarks.smoke hands each entry point. A module reached through an alias
assigned at run time (`m = step; m.update = f`) is not followed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
ALLOWED = {"sys.argv"}
"""The argument vector `python -m` gives a module: benchmarks.smoke runs each entry point with its own."""
PATCHERS = {"setattr", "delattr"}
MOCK_PATCH = {"patch", "object", "multiple", "dict"}  # unittest.mock.patch and patch.object / .multiple / .dict


def imported_names(tree: ast.AST) -> set[str]:
    """Every name an import binds anywhere in the module (module level or inside a function)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def root_name(node: ast.AST) -> str | None:
    """`a` of `a.b.c`, `a.b[0].c` or `a().b`; None for anything else."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def is_tests_module(name: str | None) -> bool:
    return name is not None and (name == "tests" or name.startswith("tests."))


def swapped(target: ast.AST, imported: set[str]) -> list[str]:
    """The parts of an assignment (or del) target that are attributes of an imported name."""
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in swapped(element, imported)]
    if isinstance(target, ast.Starred):
        return swapped(target.value, imported)
    if isinstance(target, ast.Attribute) and ast.unparse(target) not in ALLOWED:
        return [ast.unparse(target)] if root_name(target.value) in imported else []
    if isinstance(target, ast.Subscript):  # module.__dict__["name"] = ...
        value = target.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__" and root_name(value) in imported:
            return [ast.unparse(target)]
    return []


def call_back_door(node: ast.Call, imported: set[str]) -> str | None:
    """What a call does around the front door: setattr on a module, a monkeypatch, a mock patch, importing tests."""
    func, args = node.func, node.args
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if isinstance(func, ast.Name) and name in PATCHERS and args and root_name(args[0]) in imported:
        return f"{name}({ast.unparse(args[0])}, ...) on an imported module"
    if isinstance(func, ast.Attribute) and name in PATCHERS:
        return f"{ast.unparse(func)}(...), a monkeypatch-style swap"
    if name in MOCK_PATCH and root_name(func) in {"mock", "patch", "unittest"} & imported:
        return f"{ast.unparse(func)}(...), a mock patch"
    if name in ("import_module", "__import__") and args and isinstance(args[0], ast.Constant):
        if isinstance(args[0].value, str) and is_tests_module(args[0].value):
            return f"imports the tests ({args[0].value})"
    return None


def back_doors(source: str) -> list[str]:
    """'line N: what' for each import of the tests and each swap of an imported module's attribute in `source`."""
    tree = ast.parse(source)
    imported = imported_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(is_tests_module(a.name) for a in node.names):
            found.append(f"line {line}: imports the tests ({', '.join(a.name for a in node.names)})")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_tests_module(node.module):
            found.append(f"line {line}: imports from the tests ({node.module})")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for name in swapped(target, imported):
                    found.append(f"line {line}: assigns {name}, an attribute of an imported module")
        elif isinstance(node, ast.Call) and (what := call_back_door(node, imported)):
            found.append(f"line {line}: {what}")
    return found


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_measures_through_the_front_door(path):
    found = back_doors(path.read_text())
    assert not found, f"{path.relative_to(ROOT)} goes around the front door:\n" + "\n".join(found)


PLANTED = {
    "import tests.e2e.tiny": "imports the tests",
    "from tests.reliability.test_resources import long_run": "imports from the tests",
    "import importlib\nimportlib.import_module('tests.e2e.tiny')": "imports the tests",
    "from hacrl_exp.trainer import step\nstep.update = len": "assigns step.update",
    "import hacrl_exp.trainer.step\nhacrl_exp.trainer.step.update = len": "assigns hacrl_exp.trainer.step.update",
    "import torch\ntorch.Tensor.backward = len": "assigns torch.Tensor.backward",
    "from hacrl_exp.trainer import loop as L\nL.train, x = len, 1": "assigns L.train",
    "from hacrl_exp.trainer import loop\ndef f():\n    loop.train = len": "assigns loop.train",
    "def f():\n    from hacrl_exp.trainer import step\n    step.update = len": "assigns step.update",
    "from hacrl_exp.trainer import step\nstep.update += 1": "assigns step.update",
    "from hacrl_exp.trainer import step\ndel step.update": "assigns step.update",
    "from hacrl_exp.trainer import step\nstep.__dict__['update'] = len": "assigns step.__dict__['update']",
    "from hacrl_exp.trainer import step\nsetattr(step, 'update', len)": "setattr(step, ...)",
    "import pytest\nwith pytest.MonkeyPatch.context() as mp:\n    mp.setattr('a.b', 1)": "mp.setattr(...)",
    "from unittest import mock\nmock.patch('hacrl_exp.trainer.step.update')": "mock.patch(...)",
    "from unittest.mock import patch\npatch.object(object, 'x', 1)": "patch.object(...)",
}


@pytest.mark.parametrize("source", PLANTED, ids=lambda s: s.splitlines()[-1].strip())
def test_the_detector_finds_a_planted_back_door(source):
    found = back_doors(source)
    assert found and PLANTED[source] in found[0], found


def test_the_detector_lets_own_objects_and_data_paths_be():
    source = """
import os
import sys
import time
from pathlib import Path
from hacrl_exp.trainer.loop import train

ROOT = Path(__file__).parents[1] / "tests" / "rewards" / "data"
os.environ["HACRL_CACHE_DIR"] = "/tmp/cache"  # a mapping's item, not a module attribute
sys.argv = ["benchmarks/step_time.py", "--steps", "2"]  # python -m's argument vector
class Watch:
    def __init__(self):
        self.started = time.perf_counter()
trainer = object.__new__(Watch)
trainer._generate = len  # an instance this script built
result = {}
result["x"] = train
"""
    assert back_doors(source) == []
