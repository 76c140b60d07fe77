"""The package graph is the architecture (STYLE.md P1): storage <- cleaner <- node <- cluster.

Walks every module's import statements (the source, so an import inside a function counts too)
and fails on any edge that points the wrong way, and on ray or pyspark below cluster/.
``ray.remote`` is applied in one module only (P10).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "storage": {"cleaner", "node", "cluster", "ray", "pyspark"},
    "cleaner": {"node", "cluster", "ray", "pyspark"},
    "node": {"cluster", "ray", "pyspark"},
}
REMOTE_MODULE = Path("cluster/actors.py")


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"{package}/ holds no module"
    wrong = {str(m.relative_to(ROOT)): sorted(imported_roots(m) & FORBIDDEN[package])
             for m in modules}
    assert {m: bad for m, bad in wrong.items() if bad} == {}


def test_ray_remote_is_applied_in_one_module_only() -> None:
    users = sorted(str(m.relative_to(ROOT)) for m in (ROOT / "cluster").rglob("*.py")
                   if "ray.remote" in m.read_text() or "@remote" in m.read_text())
    assert users in ([], [str(REMOTE_MODULE)])
