"""File descriptors of segment files: the process-wide cache of read-only descriptors and the
positional write of an append.

Only the active segment keeps its ``.log`` open for appending, and only its appends use that
descriptor (a cleaned segment too, while the cleaner writes it: its appends start the disk writes
behind them, ``start_writeback``, so the one fsync before its swap finds little left to write).
Every read, of any segment, goes through ``HANDLES``, a bounded LRU of read-only descriptors
shared by every segment of the process, so tens of thousands of segments stay far under the
open-file limit and a roll or delete never closes a descriptor under a reader.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


class HandleCache:
    """A bounded LRU of read-only file descriptors shared by every segment of a process.

    A descriptor is cached under its segment's key (``LogSegment.file_key``), not its path: a
    segment's file keeps its inode through renames (``.deleted``, a directory rename) and stays
    readable after it is unlinked, so a descriptor is valid for as long as the segment object
    lives, whatever happens to the name. ``borrow`` pins it for the length of one read
    (``pread`` for one ``os.pread``);
    ``forget`` (a segment closed, released, deleted or cut) closes it at once when no reader
    holds it, else retires it: the readers that hold it, and any borrow under the same key
    meanwhile, keep reading the same file, and the last one out closes it. A descriptor is
    therefore never closed, nor its number reused, under a reader.

    A descriptor is opened by path only when none is cached; the file found there must be the
    segment's own (its inode, ``expected_inode``), else ``FileNotFoundError``: the segment's file
    is gone and a new file took its name (a clean swapped in at the same base offset), so the
    caller retries on the new segment list as it does when the name is gone. Thread-safe.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._fds: OrderedDict[object, _Handle] = OrderedDict()
        self._lock = threading.Lock()
        self._unpinned = threading.Condition(self._lock)
        self._waiting = 0   # threads in forget_when_unpinned: an unpin wakes them, else no one

    @contextmanager
    def borrow(self, key: object, path: Path | str,
               expected_inode: int | None = None) -> Iterator[int]:
        handle = self._pin(key, path, expected_inode)
        try:
            yield handle.fd
        finally:
            self._unpin(key, handle)

    def pread(self, key: object, path: Path | str, expected_inode: int | None, size: int,
              position: int) -> bytes:
        """``os.pread`` of ``size`` bytes at ``position`` through the descriptor cached under
        ``key``, pinned for that read alone: one ``borrow`` without its context manager, for a
        reader that reads a file in many chunks (a clean)."""
        handle = self._pin(key, path, expected_inode)
        try:
            return os.pread(handle.fd, size, position)
        finally:
            self._unpin(key, handle)

    def _pin(self, key: object, path: Path | str, expected_inode: int | None) -> _Handle:
        with self._lock:
            handle = self._fds.get(key)
            if handle is None:
                handle = _Handle(_open_expected(path, expected_inode))
                self._fds[key] = handle
            else:
                self._fds.move_to_end(key)
            handle.pins += 1              # pinned before the eviction, which spares it
            self._evict_locked()
            return handle

    def _unpin(self, key: object, handle: _Handle) -> None:
        with self._lock:
            handle.pins -= 1
            if handle.pins == 0:
                if handle.retired:
                    self._close_locked(key, handle)
                if self._waiting:
                    self._unpinned.notify_all()

    def forget(self, key: object) -> None:
        """Close the descriptor cached under ``key`` (its segment is closed, released, deleted or
        renamed): now when no reader holds it, else when the last one is done."""
        with self._lock:
            handle = self._fds.get(key)
            if handle is None:
                return
            if handle.pins == 0:
                self._close_locked(key, handle)
            else:
                handle.retired = True

    def forget_when_unpinned(self, key: object) -> None:
        """Wait until no reader holds the descriptor cached under ``key``, then close it: for a
        change to the file that a reader in the middle of a read must not see (a truncation).
        The caller holds the segment's owner lock, so no new read of the segment begins."""
        with self._lock:
            while (handle := self._fds.get(key)) is not None and handle.pins:
                self._waiting += 1
                try:
                    self._unpinned.wait()
                finally:
                    self._waiting -= 1
            if handle is not None:
                self._close_locked(key, handle)

    def _close_locked(self, key: object, handle: _Handle) -> None:
        if self._fds.get(key) is handle:
            del self._fds[key]
        os.close(handle.fd)

    def _evict_locked(self) -> None:
        while len(self._fds) > self.capacity:
            for key, handle in self._fds.items():
                if handle.pins == 0:
                    self._close_locked(key, handle)
                    break
            else:
                return

    def __len__(self) -> int:
        with self._lock:
            return len(self._fds)


class _Handle:
    """One cached descriptor: how many reads hold it, and whether it is closed at the last."""

    __slots__ = ("fd", "pins", "retired")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0
        self.retired = False


def _open_expected(path: Path | str, expected_inode: int | None) -> int:
    """A read-only descriptor of ``path``, which must be the file with ``expected_inode``."""
    fd = os.open(path, os.O_RDONLY)
    if expected_inode is not None and os.fstat(fd).st_ino != expected_inode:
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "the segment's file was replaced", str(path))
    return fd


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


_SYNC_FILE_RANGE_WRITE = 2   # <linux/fs.h>: start writing the range's dirty pages, do not wait


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux only; None elsewhere or when libc lacks it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()


def start_writeback(fd: int, position: int, size: int) -> bool:
    """Start writing the dirty pages of ``[position, position + size)`` of ``fd`` to disk without
    waiting for them (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``), so a later fsync of the
    file waits only for what is still in flight. It makes nothing durable: the fsync is still
    needed. Returns False where the call does not exist (then it does nothing) or fails (a
    file system that cannot: the fsync does the whole write, as without it)."""
    if _SYNC_FILE_RANGE is None or size <= 0:
        return False
    return _SYNC_FILE_RANGE(fd, position, size, _SYNC_FILE_RANGE_WRITE) == 0


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
