"""The package graph is the architecture (STYLE.md P1): storage <- cleaner <- node <- cluster <- ops.

Walks every module of every package and fails on any edge that points the wrong way, and on ray or
pyspark below cluster/. An edge is an import statement anywhere in the module (inside a function
too), and also a dynamic import: a call of ``importlib.import_module``/``__import__`` with a
constant name, and any string constant that names one of our modules (the command table of
``ops.cli.main``, dump-log's decoder table, storage's lazy exports), since such a string is only
ever there to be imported. ``ray.remote`` is applied in one module only (P10).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("storage", "cleaner", "node", "cluster", "ops")
THIRD_PARTY_ABOVE = {"ray": "cluster", "pyspark": "cluster"}   # the lowest layer that may use it
FORBIDDEN = {
    package: {upper for upper in LAYERS[i + 1:]}
    | {lib for lib, lowest in THIRD_PARTY_ABOVE.items() if LAYERS.index(lowest) > i}
    for i, package in enumerate(LAYERS)
}
REMOTE_MODULE = Path("cluster/runtime/actors.py")
MODULE_NAME = re.compile(rf"^(?:{'|'.join(LAYERS)})(?:\.\w+)+$")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_roots(path: Path) -> set[str]:
    """The top-level packages ``path`` imports, statically or by name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and _is_import_call(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                roots.add(node.args[0].value.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and MODULE_NAME.match(node.value) and _is_module(node.value):
            roots.add(node.value.split(".")[0])
    return roots


def _is_import_call(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


@pytest.mark.parametrize("package", LAYERS[:-1])
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"{package}/ holds no module"
    wrong = {str(m.relative_to(ROOT)): sorted(imported_roots(m) & FORBIDDEN[package])
             for m in modules}
    assert {m: bad for m, bad in wrong.items() if bad} == {}


def test_every_package_is_a_layer() -> None:
    """A new package gets a place in the layers (tests and benchmarks sit above them all)."""
    packages = sorted(p.name for p in ROOT.iterdir()
                      if (p / "__init__.py").is_file() and p.name not in ("tests", "benchmarks"))
    assert packages == sorted(LAYERS)


def test_the_layer_check_sees_imports_by_name(tmp_path: Path) -> None:
    """A command table or an ``import_module`` call is an edge like an import statement."""
    module = tmp_path / "m.py"
    module.write_text('import importlib\n'
                      'COMMANDS = ("ops.cli.topics",)\n'
                      'def load():\n'
                      '    return importlib.import_module("cluster.whatever")\n'
                      'NOT_A_MODULE = "storage.no_such_module"\n')
    assert imported_roots(module) == {"importlib", "ops", "cluster"}


def test_ray_remote_is_applied_in_one_module_only() -> None:
    users = sorted(str(m.relative_to(ROOT)) for m in (ROOT / "cluster").rglob("*.py")
                   if "ray.remote" in m.read_text() or "@remote" in m.read_text())
    assert users in ([], [str(REMOTE_MODULE)])
