"""House rules of the code (STYLE.md P9): no import circle between the project's modules, and no
write to another object's ``_private`` attribute.

Import circles. The graph's nodes are the project's modules (a package is its ``__init__``); an
edge is an import statement anywhere in a module (inside a function, and under ``if
TYPE_CHECKING:`` too: a circle of knowledge is still a circle), a call of
``importlib.import_module``/``__import__`` with a constant name, and a string constant naming one
of our modules (a lazy export, a command table), except a logger's name. ``import a.b`` and ``from
a.b import c`` point at ``a.b.c`` when that is a module, else at ``a.b``; ``import a`` and ``from
a import name`` point at the package ``a``. A violation is an edge that lies on a circle: its
target reaches its source again.

Private writes. An assignment, augmented or annotated assignment, ``del`` or ``setattr`` call
whose target is ``x._name`` (not a dunder) where ``x`` is not ``self`` or ``cls``: the module that
does it holds a class cut in two.

Every package keeps both rules. The two lists below are the ratchet they were reached by: an
exception would be named there (one line each), a new one fails, and one that is gone must be
deleted, so the lists only shrink; both are empty.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage", "cleaner", "node", "cluster", "ops")
STRICT = PACKAGES

# edges that lie on an import circle today, outside the strict packages: "importer -> imported"
KNOWN_CIRCLE_EDGES: frozenset[str] = frozenset()

# writes to another object's private attribute today, outside the strict packages:
# "path::function: target" (a write repeated in one function is listed once per write)
KNOWN_PRIVATE_WRITES: tuple[str, ...] = ()


# ---- the import graph ----------------------------------------------------------------------
def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages by dotted name."""
    return {module_name(path): path
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module ``name`` names, or the closest package above it that is one."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_import_call(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _is_logger_call(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "getLogger" or (
        isinstance(func, ast.Name) and func.id == "getLogger")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules the module ``name`` (at ``path``) imports (see the module docstring)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    logger_names = {id(arg) for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and _is_logger_call(node.func)
                    for arg in node.args}
    targets: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(_resolve(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, name, path.name == "__init__.py")
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else _resolve(source, modules))
        elif isinstance(node, ast.Call) and _is_import_call(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                targets.add(_resolve(node.args[0].value, modules))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in modules and "." in node.value \
                and id(node) not in logger_names:
            targets.add(node.value)
    targets.discard(None)
    targets.discard(name)
    return {t for t in targets if t is not None}


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def circle_edges(graph: dict[str, set[str]]) -> set[str]:
    """Every edge ``a -> b`` of ``graph`` whose target reaches its source again."""
    reach = {name: _reachable(graph, name) for name in graph}
    return {f"{a} -> {b}" for a, targets in graph.items() for b in targets if a in reach[b]}


# ---- private writes ------------------------------------------------------------------------
def _is_private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def _owner_is_self(value: ast.expr) -> bool:
    return isinstance(value, ast.Name) and value.id in ("self", "cls")


class _PrivateWrites(ast.NodeVisitor):
    """Collects ``path::function: target`` for each write to another object's private field."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.scope: list[str] = []
        self.found: list[str] = []

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

    def _note(self, target: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._note(element)
        elif isinstance(target, ast.Starred):
            self._note(target.value)
        elif isinstance(target, ast.Attribute) and _is_private(target.attr) \
                and not _owner_is_self(target.value):
            self.found.append(f"{self.where}::{'.'.join(self.scope) or '<module>'}: "
                              f"{ast.unparse(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._note(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._note(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._note(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._note(target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._note(node.target)
        self.generic_visit(node)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._note(item.optional_vars)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and _is_private(node.args[1].value) \
                and not _owner_is_self(node.args[0]):
            self.found.append(f"{self.where}::{'.'.join(self.scope) or '<module>'}: "
                              f"{ast.unparse(node.args[0])}.{node.args[1].value}")
        self.generic_visit(node)


def private_writes_in(path: Path, where: str | None = None) -> list[str]:
    """The private writes of the module at ``path``, named ``where`` (its path in the project)."""
    visitor = _PrivateWrites(where or str(path.relative_to(ROOT)))
    visitor.visit(ast.parse(path.read_text(), filename=str(path)))
    return visitor.found


def private_writes() -> list[str]:
    return [write for path in project_modules().values() for write in private_writes_in(path)]


# ---- the rules -----------------------------------------------------------------------------
def _strict(module_or_path: str) -> bool:
    return module_or_path.replace("/", ".").split(".")[0] in STRICT


def test_storage_has_no_import_circle() -> None:
    """No circle passes through a module of a strict package, and none may be recorded."""
    edges = circle_edges(import_graph()) | KNOWN_CIRCLE_EDGES
    assert sorted(e for e in edges if any(_strict(m) for m in e.split(" -> "))) == []


def test_storage_writes_no_other_objects_private_attribute() -> None:
    """No module of a strict package writes another object's private field, and none may be
    recorded."""
    writes = private_writes() + list(KNOWN_PRIVATE_WRITES)
    assert sorted(w for w in writes if _strict(w.split("::")[0])) == []


def test_no_new_import_circle() -> None:
    """An edge on a circle that is not in ``KNOWN_CIRCLE_EDGES`` is a new circle."""
    assert sorted(circle_edges(import_graph()) - KNOWN_CIRCLE_EDGES) == []


def test_known_import_circles_are_still_there() -> None:
    """A recorded circle edge that is gone is deleted from ``KNOWN_CIRCLE_EDGES``."""
    assert sorted(KNOWN_CIRCLE_EDGES - circle_edges(import_graph())) == []


def test_no_new_private_write() -> None:
    """A write to another object's private attribute not in ``KNOWN_PRIVATE_WRITES`` is new."""
    assert sorted((Counter(private_writes()) - Counter(KNOWN_PRIVATE_WRITES)).elements()) == []


def test_known_private_writes_are_still_there() -> None:
    """A recorded private write that is gone is deleted from ``KNOWN_PRIVATE_WRITES``."""
    assert sorted((Counter(KNOWN_PRIVATE_WRITES) - Counter(private_writes())).elements()) == []


def _role(module: str) -> str:
    """The role of a module of ``cluster``: its subpackage (``cluster.client``), or the module
    itself on the shared floor (``cluster.errors``)."""
    return ".".join(module.split(".")[:2])


def test_the_roles_of_cluster_import_one_way() -> None:
    """No circle between the subpackages of ``cluster`` either (a module of the floor counts as
    a role of its own): a role never imports one that imports it, so what each ``__init__``
    says it may call reads in one direction."""
    roles: dict[str, set[str]] = {}
    for importer, imported in import_graph().items():
        if importer.split(".")[0] == "cluster":
            roles.setdefault(_role(importer), set()).update(
                _role(m) for m in imported if m.split(".")[0] == "cluster")
    for role, targets in roles.items():
        targets.discard(role)
    assert sorted(circle_edges(roles)) == []


def test_the_checks_see_type_checking_imports_and_private_writes(tmp_path: Path) -> None:
    """An import under ``TYPE_CHECKING`` closes a circle; a free function setting a field of its
    argument, a tuple target, an augmented assignment and ``setattr`` are private writes, and a
    method setting its own field is not."""
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n"
                     "    from pkg.second import Thing\n")
    second.write_text("import logging\n"
                      "from pkg import first\n"
                      "log = logging.getLogger('pkg.first')\n"
                      "class Thing:\n"
                      "    def move(self, other):\n"
                      "        self._end = 1\n"
                      "        other._end, self._start = 2, 3\n"
                      "def grow(thing):\n"
                      "    thing._end += 1\n"
                      "    thing.__dict__ = {}\n"
                      "    setattr(thing, '_start', 0)\n")
    modules = {"pkg": tmp_path, "pkg.first": first, "pkg.second": second}
    graph = {name: imports_of(name, path, modules)
             for name, path in modules.items() if name != "pkg"}
    assert graph == {"pkg.first": {"pkg.second"}, "pkg.second": {"pkg.first"}}
    assert circle_edges(graph) == {"pkg.first -> pkg.second", "pkg.second -> pkg.first"}
    assert private_writes_in(second, "second.py") == [
        "second.py::Thing.move: other._end", "second.py::grow: thing._end",
        "second.py::grow: thing._start"]
