"""The numba cache is keyed by every source a kernel is compiled from (``storage.kernel_cache``):
a change to a kernel another kernel calls, or to a constant it reads, must not leave the cached
machine code of the caller running the old one."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


from storage import kernel_cache

ROOT = kernel_cache.PROJECT_ROOT
PACKAGES = ("storage", "cleaner", "node", "cluster", "ops")
NOT_COMPILED_IN = {"storage/kernel_cache.py",   # keys the cache, compiled into nothing
                   "storage/jit.py"}            # hands kernels to numba, compiled into nothing
CACHED_KERNEL = re.compile(r"^@(numba|jit)\.njit\(.*cache=True", re.MULTILINE)


def _module_file(module: str) -> str | None:
    """The source file of a project module, relative to the root (None for other modules)."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = ROOT / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return str(candidate.relative_to(ROOT))
    return None


def _project_imports(source: str) -> set[str]:
    """The project modules ``source`` imports (``from pkg import module`` counts the module)."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / source).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            path = _module_file(name)
            if path is not None and not path.endswith("__init__.py"):
                found.add(path)
    return found


def test_every_module_that_caches_a_kernel_is_a_kernel_source() -> None:
    cached = {str(path.relative_to(ROOT)) for package in PACKAGES
              for path in (ROOT / package).rglob("*.py")
              if CACHED_KERNEL.search(path.read_text())}
    assert len(cached) >= 7
    assert cached - NOT_COMPILED_IN <= set(kernel_cache.KERNEL_SOURCES)


def test_every_project_module_a_kernel_source_imports_is_a_kernel_source() -> None:
    listed = set(kernel_cache.KERNEL_SOURCES)
    for source in listed:
        missing = _project_imports(source) - listed - NOT_COMPILED_IN
        assert not missing, f"{source} imports {sorted(missing)}: add them to KERNEL_SOURCES"


def test_a_change_to_any_kernel_source_gives_another_cache_directory(tmp_path: Path) -> None:
    for source in kernel_cache.KERNEL_SOURCES:
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / source, tmp_path / source)
    before = kernel_cache.cache_dir(tmp_path)
    assert before == kernel_cache.CACHE_DIR          # the same sources, the same directory
    for source in kernel_cache.KERNEL_SOURCES:
        original = (tmp_path / source).read_bytes()
        (tmp_path / source).write_bytes(original.replace(b"\n", b"\n\n", 1))
        assert kernel_cache.cache_dir(tmp_path) != before, source
        (tmp_path / source).write_bytes(original)
    assert kernel_cache.cache_dir(tmp_path) == before


def test_the_cache_directory_follows_numba_cache_dir_when_it_is_set(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert kernel_cache.cache_dir().parent == tmp_path / "numba"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_dir().parent == tmp_path / "xdg" / "strata" / "numba"


_CACHE_PATHS = """
import importlib, sys
module = importlib.import_module(sys.argv[1])
from storage import jit
jit.load()      # the storage kernels are handed to numba at their first use
import numba.core.dispatcher
for value in vars(module).values():
    if isinstance(value, numba.core.dispatcher.Dispatcher) and value._cache.cache_path:
        print(value.py_func.__name__, value._cache.cache_path)
"""


def test_every_cached_kernel_is_kept_in_the_directory_of_its_sources() -> None:
    """Each kernel module imported first in a fresh process (as a Spark or Ray worker may)."""
    kernels = 0
    for source in kernel_cache.KERNEL_SOURCES:
        module = source[:-3].replace("/", ".")
        out = subprocess.run([sys.executable, "-c", _CACHE_PATHS, module], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            name, path = line.split(" ", 1)
            kernels += 1
            assert Path(path).is_relative_to(kernel_cache.CACHE_DIR), \
                f"{module}.{name} is cached in {path}"
    assert kernels >= 30


def test_a_new_cache_directory_prunes_all_but_the_most_recent_earlier_ones(
        tmp_path: Path) -> None:
    base = tmp_path / "numba"
    earlier = []
    for i in range(5):           # five earlier versions of the sources, oldest first
        old = base / f"{i:020x}"
        (old / "src").mkdir(parents=True)
        (old / "src" / "kernel.nbi").write_bytes(b"index")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
        earlier.append(old)
    unrelated = [base / "notes", base / "ABCDEF0123456789ABCD", base / f"{7:021x}"]
    for path in unrelated:
        path.mkdir()
    new = base / ("f" * 20)

    removed = kernel_cache.prune(new, keep=3)

    assert sorted(removed) == earlier[:3]              # the three oldest digests
    assert [p.exists() for p in earlier] == [False, False, False, True, True]
    assert all(p.exists() for p in unrelated)          # not named as a digest: never touched


def test_pruning_a_base_that_cannot_be_listed_removes_nothing(tmp_path: Path) -> None:
    assert kernel_cache.prune(tmp_path / "missing" / ("0" * 20)) == []


_NEW_DIRECTORY = """
import sys
from pathlib import Path
from storage import kernel_cache
kernel_cache.use()
print(sorted(p.name for p in Path(sys.argv[1]).iterdir()))
"""


def test_the_first_process_of_new_sources_prunes_the_earlier_directories(tmp_path: Path) -> None:
    base = tmp_path / "numba"
    for i in range(4):
        (base / f"{i:020x}").mkdir(parents=True)
        os.utime(base / f"{i:020x}", (1_000_000 + i, 1_000_000 + i))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(base)}
    out = subprocess.run([sys.executable, "-c", _NEW_DIRECTORY, str(base)], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True).stdout
    assert eval(out) == [f"{2:020x}", f"{3:020x}"]     # KEEP - 1 = 2 earlier ones kept
