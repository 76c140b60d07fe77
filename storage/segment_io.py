"""File descriptors of segment files: the process-wide cache of read-only descriptors and the
positional write of an append.

Only the active segment keeps its ``.log`` open for appending. A closed segment opens its file for
the length of one read through ``HANDLES``, a bounded LRU shared by every segment of the process,
so tens of thousands of segments stay far under the open-file limit.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class HandleCache:
    """A bounded LRU of read-only file descriptors shared by every closed segment of a process.

    ``borrow`` pins a descriptor for the length of one read; only unpinned descriptors are closed on
    eviction, so a reader never sees its descriptor closed or reused under it. Thread-safe.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._fds: OrderedDict[str, list[int]] = OrderedDict()   # path -> [fd, pins]
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self, path: Path) -> Iterator[int]:
        key = str(path)
        with self._lock:
            entry = self._fds.get(key)
            if entry is None:
                entry = [os.open(key, os.O_RDONLY), 0]
                self._fds[key] = entry
            self._fds.move_to_end(key)
            entry[1] += 1
            self._evict_locked()
        try:
            yield entry[0]
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0 and self._fds.get(key) is not entry:
                    os.close(entry[0])

    def forget(self, path: Path) -> None:
        """Close the descriptor of a file being renamed or deleted (after its pins are gone)."""
        with self._lock:
            entry = self._fds.pop(str(path), None)
            if entry is not None and entry[1] == 0:
                os.close(entry[0])

    def _evict_locked(self) -> None:
        while len(self._fds) > self.capacity:
            for key, entry in self._fds.items():
                if entry[1] == 0:
                    del self._fds[key]
                    os.close(entry[0])
                    break
            else:
                return

    def __len__(self) -> int:
        with self._lock:
            return len(self._fds)


HANDLES = HandleCache()


def write_fully(fd: int, pieces: list[bytes | memoryview], position: int, size: int) -> None:
    """Write every piece at ``position``; a short write is retried so a full disk surfaces as
    the real OSError (ENOSPC) rather than a silent partial append."""
    written = os.pwritev(fd, pieces, position) if len(pieces) > 1 else os.pwrite(fd, pieces[0],
                                                                                 position)
    if written == size:
        return
    rest = memoryview(b"".join(bytes(p) for p in pieces))[written:]
    while rest:
        n = os.pwrite(fd, rest, position + written)
        if n <= 0:
            raise OSError(errno.ENOSPC, f"no progress writing at position {position + written}")
        written += n
        rest = rest[n:]


def fsync_file(path: Path) -> None:
    """fsync ``path`` through a descriptor of its own (safe while another thread closes the
    segment's writer)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def truncate_to_size(fd: int, size: int) -> None:
    """Cut the file behind ``fd`` to ``size`` bytes when it is longer or shorter (a preallocated
    ``.log`` at its roll or close)."""
    if os.fstat(fd).st_size != size:
        os.ftruncate(fd, size)
