"""Where numba keeps the compiled kernels: a directory per version of the sources they are
compiled from.

numba finds a cached kernel by the modification time and size of the one file that defines it.
A kernel compiles into itself the kernels it calls and the module constants it reads: a change to
one of those (a varint reader of ``storage.kernel_primitives``, a constant of
``storage.batch_layout``, the offset map's hash) would leave every kernel built on it running the
old machine code from the cache, in every process, until its own file changed. So the cache
directory carries a digest of ``KERNEL_SOURCES`` (every module that defines a cached kernel and
every project module a kernel compiles in; ``tests/test_kernel_cache.py`` holds the list to the
imports): a change to any of them gives a new directory, and every kernel compiles once again.

The directory is ``<base>/<digest>``: ``base`` is ``$NUMBA_CACHE_DIR`` when set, else
``$XDG_CACHE_HOME/strata/numba`` (``~/.cache/strata/numba``). Inside it numba keeps one
subdirectory per source directory, so two checkouts never share files. When a process is the
first to use a new directory, it removes the directories of earlier sources but the ``KEEP - 1``
most recently changed (a few MB each; another checkout's, or a process still running older code,
compiles into its directory again if it needs to: numba recreates it).

``use()`` sets ``numba.config.CACHE_DIR`` (numba reads it when a kernel is decorated):
``storage.jit`` calls it before it hands the storage kernels to numba, and every other kernel
module before its first ``@numba.njit(cache=True)``; only ``use()`` imports numba. When the
directory cannot be created, numba falls back to its own places (``__pycache__``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]

KERNEL_SOURCES = (
    "storage/batch_layout.py",
    "storage/kernel_primitives.py",
    "storage/kernel_encode.py",
    "storage/kernels.py",
    "cleaner/offset_map_kernels.py",
    "cleaner/kernels.py",
    "cluster/client/murmur.py",
    "cluster/client/partitioner.py",
    "cluster/spark/kernels.py",
)


def sources_digest(root: Path = PROJECT_ROOT, sources: tuple[str, ...] = KERNEL_SOURCES) -> str:
    """A digest of the contents of ``sources`` (paths under ``root``); a source that is missing
    counts as empty. (numba's version is not in it: numba's own index of a kernel's cache holds
    the version that wrote it, and a process of another version ignores it.)"""
    digest = hashlib.sha256()
    for name in sources:
        try:
            content = (root / name).read_bytes()
        except FileNotFoundError:
            content = b""
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:20]


def cache_base() -> Path:
    """``$NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/strata/numba`` (``~/.cache`` by default)."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given)
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "strata" / "numba"


def cache_dir(root: Path = PROJECT_ROOT, sources: tuple[str, ...] = KERNEL_SOURCES) -> Path:
    """The directory the kernels of the sources under ``root`` are cached in."""
    return cache_base() / sources_digest(root, sources)


CACHE_DIR = cache_dir()
KEEP = 3                                    # cache directories kept, the one in use among them
_DIGEST_NAME = re.compile(r"[0-9a-f]{20}")   # the name of a cache directory (sources_digest)


def use() -> None:
    """Cache the kernels decorated from now on in ``CACHE_DIR`` (pruning the earlier directories
    when it is new)."""
    import numba

    if not CACHE_DIR.exists():
        prune(CACHE_DIR)
    numba.config.CACHE_DIR = str(CACHE_DIR)


def prune(in_use: Path, keep: int = KEEP) -> list[Path]:
    """Remove the cache directories beside ``in_use`` (named as ``sources_digest`` names them;
    nothing else is touched) but the ``keep - 1`` most recently modified; returns those removed.
    Never raises: a directory that cannot be listed or removed is left."""
    try:
        others = [p for p in in_use.parent.iterdir()
                  if p != in_use and _DIGEST_NAME.fullmatch(p.name) and p.is_dir()]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    removed = others[max(keep - 1, 0):]
    for old in removed:
        shutil.rmtree(old, ignore_errors=True)
    return removed
