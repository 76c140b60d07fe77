"""The ``.log`` file of one segment (Kafka's ``FileRecords``): its size, its writer, its reads
through the process-wide descriptor cache, and cutting, renaming and deleting it.

Only the active segment keeps its ``.log`` open for appending, for its appends only. Every read
opens the file through ``HANDLES`` (``storage.segment_io``), a bounded process-wide cache of
read-only descriptors, so tens of thousands of segments stay far under the open-file limit. A read
holds its descriptor, which nothing closes under it, so the file stays readable while a reader
holds it, even once renamed or deleted. A cut waits for the reads in flight and counts itself in
``cuts``, so a reader that took the file before it can tell.

The byte layout of the file is that of its batches (``storage.records``); this class never looks
inside them.
"""

from __future__ import annotations

import itertools
import mmap
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from storage.segment_io import (HANDLES, fsync_file, start_writeback, truncate_to_size,
                                write_fully)

_FILE_KEYS = itertools.count()   # one key per file object for its cached read descriptor
# a write-behind file starts the disk writes of its appended bytes once this many are pending
WRITE_BEHIND_BYTES = 1 << 20


class FileRecords:
    """One ``.log`` file. Not thread-safe for writers (its segment's owner serialises them);
    reads may run concurrently with each other and with the writer."""

    def __init__(self, path: Path, *, size: int | None = None,
                 write_behind: bool = False) -> None:
        """The file at ``path``, its size taken from the file unless ``size`` is given (a new
        preallocated file is longer than its batches). A ``write_behind`` file (one written
        whole and then fsynced once, as a cleaned segment) starts the disk writes of its
        appends every ``WRITE_BEHIND_BYTES`` (``segment_io.start_writeback``), so that fsync
        waits only for the tail; nothing is durable before the fsync either way."""
        self._path = path
        self._write_behind = write_behind
        self._writeback_started = 0
        self.file_key = next(_FILE_KEYS)
        try:
            stat = os.stat(path)
            self._size, self._inode = stat.st_size, stat.st_ino
        except FileNotFoundError:
            self._size, self._inode = 0, None
        if size is not None:
            self._size = size
        self._write_fd: int | None = None
        self._cuts = 0

    @staticmethod
    def create_file(path: Path, *, preallocate_bytes: int = 0) -> None:
        """Create an empty file at ``path`` (open it with ``FileRecords(path, size=0)``); an
        existing file of that name is an error (``FileExistsError``). With
        ``preallocate_bytes`` the file is that long at once."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if preallocate_bytes:
                os.ftruncate(fd, preallocate_bytes)
        finally:
            os.close(fd)

    # ---- state -------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def size(self) -> int:
        """Bytes of batches in the file (excluding preallocated space)."""
        return self._size

    @property
    def cuts(self) -> int:
        """How many times the file was cut (recovered, truncated, emptied) since it opened."""
        return self._cuts

    @property
    def writeback_started(self) -> int:
        """How many bytes from the start of the file its appends have started writing to disk
        (always 0 for a file that is not ``write_behind``, or where the system cannot)."""
        return self._writeback_started

    @property
    def is_open_for_writes(self) -> bool:
        return self._write_fd is not None

    def mtime_ns(self) -> int:
        return self._path.stat().st_mtime_ns

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self._path, ns=(ms * 1_000_000, ms * 1_000_000))

    def size_to(self, size: int) -> None:
        """Take the first ``size`` bytes as the file's batches (the end of the last whole batch
        of a file another process preallocated)."""
        self._size = size

    # ---- writes ------------------------------------------------------------------------------
    def append(self, pieces: list[bytes | memoryview], size: int) -> None:
        """Write ``pieces`` (``size`` bytes in all) at the end, with one positional write."""
        write_fully(self._writer(), pieces, self._size, size)
        self._size += size
        if self._write_behind and self._size - self._writeback_started >= WRITE_BEHIND_BYTES:
            # whole pages only: a page written again by the next append would be written twice
            end = self._size - self._size % mmap.PAGESIZE
            if start_writeback(self._writer(), self._writeback_started,
                               end - self._writeback_started):
                self._writeback_started = end

    def _writer(self) -> int:
        if self._write_fd is None:
            self._write_fd = os.open(self._path, os.O_RDWR)
        return self._write_fd

    def flush(self) -> None:
        """fsync the file through a descriptor of its own, so a concurrent close of the writer
        cannot make it fail."""
        fsync_file(self._path)

    def trim(self, *, preallocated: bool) -> None:
        """Cut the file to its batches when it was ``preallocated`` or is open for writes (at the
        roll and the close of the active segment)."""
        if preallocated or self._write_fd is not None:
            truncate_to_size(self._writer(), self._size)

    def truncate_to(self, position: int, *, through_writer: bool = True) -> int:
        """Cut the file to ``position`` bytes once no read is in flight, counting the cut;
        returns the bytes removed. ``through_writer``: through the writer, opened when closed
        (the truncation of the active segment, which takes the next append); else by path, the
        writer left closed (recovery, emptying a segment), and only when the file is longer or
        shorter."""
        HANDLES.forget_when_unpinned(self.file_key)   # no read in flight sees the cut
        self._cuts += 1
        if through_writer:
            removed = self._size - position
            os.ftruncate(self._writer(), position)
        else:
            length = os.stat(self._path).st_size
            removed = length - position
            if length != position:
                os.truncate(self._path, position)
        self._size = position
        self._writeback_started = min(self._writeback_started, position)
        return removed

    # ---- reads -------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the file), read through the
        cached read descriptor (``FileNotFoundError`` when the file is gone and no reader holds
        it)."""
        if size <= 0:
            return b""
        return HANDLES.pread(self.file_key, self._path, self._inode, size, position)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the read descriptor for the body: every read inside reads the same file, even
        if it is renamed, deleted or swapped out meanwhile."""
        with HANDLES.borrow(self.file_key, self._path, self._inode):
            yield

    # ---- names and descriptors ---------------------------------------------------------------
    def rename_to(self, path: Path) -> None:
        """Rename the file to ``path`` (the writer and the cached descriptor are closed first)."""
        self.close()
        os.replace(self._path, path)
        self._path = path

    def follow(self, path: Path) -> None:
        """The file was moved to ``path`` with its directory: use that name from now on."""
        self.close()
        self._path = path

    def release(self) -> None:
        """Drop the cached read descriptor of an idle file; the next read reopens it."""
        HANDLES.forget(self.file_key)

    def close_writer(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        """Close the writer and the cached read descriptor (a reader holding it keeps it)."""
        self.close_writer()
        HANDLES.forget(self.file_key)

    def __repr__(self) -> str:
        return f"FileRecords({self._path}, size={self._size})"
