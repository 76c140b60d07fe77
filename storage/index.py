"""Offset and time indexes of a segment (Kafka's AbstractIndex, OffsetIndex, TimeIndex, LazyIndex).

Both are arrays of fixed-width big-endian entries with no header and no checksum; a damaged index
is rebuilt from its segment, never repaired.

Offset index (``.index``), sparse, sorted by offset, positions non-decreasing::

    Entry => RelativeOffset: int32 (offset - base_offset) | Position: int32 (byte position in .log)

    base offset 1000, offset 1005 at position 4096:  00000005 00001000

Time index (``.timeindex``), timestamps strictly increasing, offsets non-decreasing::

    Entry => Timestamp: int64 (ms) | RelativeOffset: int32 (offset - base_offset)

    timestamp 1700000000000 at relative offset 5:   0000018bcfe56800 00000005

The entry count is the file length divided by the entry size. A new writable index is therefore
preallocated to ``floor(max_index_size / entry_size)`` zeroed slots and must be trimmed
(``trim_to_valid_size``, which ``close`` does) before anyone reopens its file; the active segment
grows it back with ``resize(max_index_size)`` after loading. The time index keeps its last slot free
for the entry a segment writes when it becomes inactive
(``maybe_append(..., skip_full_check=True)``).

Both classes are lazy like Kafka's LazyIndex: constructing, renaming or deleting never creates the
file; the first call that needs the entries opens it. A writable index maps its file with ``mmap``
(one file descriptor per open index); a read-only index reads the file into memory and holds no
descriptor. ``release`` gives back the mapping and the descriptor and keeps the entry count, so an
index can be reopened on next use without trimming.
"""

from __future__ import annotations

import bisect
import errno
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from storage.durable import fsync_file_if_exists
from storage.errors import CorruptIndexError, InvalidOffsetError, StorageError

OFFSET_ENTRY = struct.Struct(">ii")  # relative_offset, position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative_offset
# the same layouts as numpy records, for reading a whole file at once (``strata dump-log``)
OFFSET_ENTRY_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_ENTRY_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
assert OFFSET_ENTRY_DTYPE.itemsize == OFFSET_ENTRY.size
assert TIME_ENTRY_DTYPE.itemsize == TIME_ENTRY.size
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TIME_RELATIVE_OFFSET_AT = struct.calcsize(">q")
_POSITION_AT = struct.calcsize(">i")

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size
_TIME_ENTRY_SIZE = TIME_ENTRY.size


_SMALL_INDEX_ENTRIES = 64   # check_entries loops in Python up to here, in numpy above
_BACKING_STEP = 64 * 1024   # bytes of index file allocated ahead of the entries

class IndexFullError(StorageError):
    """An append to an index with no free slot. A segment checks ``is_full()`` and rolls before
    this can happen; unlike ``InvalidOffsetError`` the entry itself is fine, the file is not.
    """


class ReadOnlyIndexError(StorageError):
    """A change (append, truncate, resize) asked of an index opened with ``writable=False``.
    A programming error of the caller, unlike ``IndexFullError`` which is a normal roll signal.
    """


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


def _read_whole(path: Path) -> bytes:
    """The bytes of ``path`` (b"" when it does not exist: a read-only index never creates its
    file), with plain system calls: loading opens every closed segment's indexes."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        pieces = []
        while size > 0:
            piece = os.read(fd, size)
            if not piece:
                break
            pieces.append(piece)
            size -= len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)
    finally:
        os.close(fd)


class _Column:
    """One field of every entry, as a read-only sequence for ``bisect`` (O(log n) unpacks)."""

    __slots__ = ("_buf", "_field", "_stride", "_at", "_count")

    def __init__(
        self, buf: mmap.mmap | bytes, field: struct.Struct, stride: int, at: int, count: int
    ) -> None:
        self._buf = buf
        self._field = field
        self._stride = stride
        self._at = at
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, slot: int) -> int:
        value: int = self._field.unpack_from(self._buf, slot * self._stride + self._at)[0]
        return value


class _Index:
    """What the offset and time index share: the lazy file, its mapping, the entry count.

    Invariant while open: ``entries <= max_entries`` and the first ``entries`` slots of the buffer
    are the entries. Not thread-safe; owned by one segment, whose callers lock.
    """

    ENTRY: ClassVar[struct.Struct]
    _TABLE_DTYPE: ClassVar[np.dtype]   # the entry layout as a numpy record (for check_entries)
    _KEY: ClassVar[struct.Struct]  # the field lookup() searches
    _KEY_AT: ClassVar[int]
    _VALUE: ClassVar[struct.Struct]  # the other field
    _VALUE_AT: ClassVar[int]
    _RELATIVE_OFFSET_AT: ClassVar[int]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        self._path = path if isinstance(path, Path) else Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._buf: mmap.mmap | bytes | None = None
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        self._kept_entries: int | None = None  # entry count kept across release()

    def __repr__(self) -> str:
        state = f"{self._entries} entries" if self._buf is not None else "not open"
        name = type(self).__name__
        return f"{name}({str(self._path)!r}, base_offset={self._base_offset}, {state})"

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def entry_size(self) -> int:
        return self.ENTRY.size

    @property
    def is_open(self) -> bool:
        return self._buf is not None

    @property
    def entries(self) -> int:
        self._data()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._data()
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY.size

    @property
    def length(self) -> int:
        """The file length in bytes (the preallocated size while writable and untrimmed)."""
        self._data()
        return self._length

    def is_full(self) -> bool:
        if self._buf is None:
            self._open()
        return self._entries >= self._max_entries

    def exists(self) -> bool:
        return self._path.exists()

    # -- lifecycle --------------------------------------------------------------------------

    def _data(self) -> mmap.mmap | bytes:
        if self._buf is None:
            self._open()
        assert self._buf is not None
        return self._buf

    def _open(self) -> None:
        size = self.ENTRY.size
        if self._writable:
            self._buf, self._length, created = self._map()
            fresh_entries = 0 if created else self._length // size
        else:
            created = False
            self._buf = _read_whole(self._path)
            self._length = len(self._buf)
            fresh_entries = self._length // size
        self._max_entries = self._length // size
        kept = self._kept_entries
        if kept is None or created:  # a file created anew has no entries, whatever was kept
            self._entries = fresh_entries
        else:
            self._entries = min(kept, self._max_entries)
        self._backed = self._entries * size   # bytes known to be on disk, not a hole

    def _ensure_backed(self, end: int) -> None:
        """Back the mapped bytes with written pages before writing ``[.., end)``.

        The preallocated file is sparse; a write through the map into a hole on a full disk would
        raise SIGBUS and kill the process. Writing zeros ahead in 64 KiB steps with ``pwrite``
        turns a full disk into an ``OSError`` (ENOSPC) here, which the log directory handles by
        going offline. Zeros written through the page cache, rather than ``fallocate``'s unwritten
        extents, also keep the first store into each page cheap: on ext4 the write fault on an
        unwritten extent waits on the journal (milliseconds), a fault on a dirty page does not.
        """
        if end <= self._backed:
            return
        start = self._backed
        stop = min(max(end, start + _BACKING_STEP), self._length)
        fd = os.open(self._path, os.O_RDWR)
        try:
            zeros = bytes(stop - start)
            written = 0
            while written < len(zeros):
                n = os.pwrite(fd, memoryview(zeros)[written:], start + written)
                if n <= 0:
                    raise OSError(errno.ENOSPC, f"no progress backing {self._path}",
                                  str(self._path))
                written += n
        finally:
            os.close(fd)
        self._backed = stop

    def _map(self) -> tuple[mmap.mmap | bytes, int, bool]:
        size = self.ENTRY.size
        preallocated = self._max_index_size // size * size
        created = False
        try:
            fd = os.open(self._path, os.O_RDWR)
        except FileNotFoundError:
            if preallocated < size:
                raise ValueError(
                    f"invalid max index size {self._max_index_size} for {self._path}"
                ) from None
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        try:
            if created:
                os.ftruncate(fd, preallocated)  # sparse: the zeros cost no disk until written
            length = os.fstat(fd).st_size
            buf: mmap.mmap | bytes = (
                mmap.mmap(fd, length, access=mmap.ACCESS_WRITE) if length else b""
            )
            return buf, length, created
        finally:
            os.close(fd)

    def release(self) -> None:
        """Give back the mapping and its file descriptor; the next use reopens the file.

        The entry count is kept, so a released writable index that is still preallocated reopens
        with the same entries (nothing is trimmed)."""
        if self._buf is None:
            return
        self._kept_entries = self._entries
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = None

    def close(self) -> None:
        """Trim the file to its entries (Kafka's close) and release it. A later use reopens it."""
        if self._buf is None and (self._kept_entries is None or not self.exists()):
            self._kept_entries = None  # never opened, or its file is gone: nothing to trim
            return
        if self._writable:
            self.trim_to_valid_size()
        self.release()
        self._kept_entries = None

    def flush(self) -> None:
        """Make the entries durable (Kafka's AbstractIndex.flush), called whenever the segment's
        ``.log`` is flushed: ``msync`` of a writable mapping, else an ``fsync`` of the file, which
        a roll trimmed and reopened read-only without ever syncing it. An index whose file does
        not exist (never written, or removed meanwhile) has nothing to flush."""
        if isinstance(self._buf, mmap.mmap):
            self._buf.flush()
            return
        fsync_file_if_exists(self._path)

    def rename_to(self, path: Path) -> None:
        """Rename the file if it exists; an index never opened stays without a file. When the
        file is already gone (its directory was renamed) only the path changes.

        Like Kafka, the directory is not fsynced: whoever renames a segment's files fsyncs once."""
        target = Path(path)
        try:
            os.replace(self._path, target)
        except FileNotFoundError:
            if self._path.exists():
                raise
        finally:
            self._path = target

    def delete_if_exists(self) -> bool:
        self.release()
        self._kept_entries = None
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    # -- size -------------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; True if it changed.

        Used to grow the active segment's index back to ``max_index_size`` after loading."""
        self._data()
        size = self.ENTRY.size
        rounded = new_size // size * size
        if rounded == self._length:
            return False
        self._check_writable("resize")
        if rounded < self._entries * size:
            raise ValueError(
                f"cannot resize {self._path} to {rounded} bytes: it holds {self._entries} entries"
            )
        self.release()  # unmap before shrinking: touching a page past EOF is SIGBUS
        os.truncate(self._path, rounded)
        self._open()
        return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries, so reopening counts the same entries."""
        self.resize(self.entries * self.ENTRY.size)

    def reset(self) -> None:
        """Remove every entry and preallocate the file to ``max_index_size`` (Kafka's reset)."""
        self._check_writable("reset")
        self._data()
        self._entries = 0
        self._backed = 0
        self.resize(self._max_index_size)

    # -- shared helpers ---------------------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        if not self._writable:
            message = f"cannot {action} read-only index {self._path}"
            raise ReadOnlyIndexError(message, path=self._path)

    def _check_slot_free(self) -> None:
        if self._entries >= self._max_entries:
            raise IndexFullError(
                f"attempt to append to a full index {self._path} (size = {self._entries})",
                path=self._path,
                entries=self._entries,
            )

    def _relative(self, offset: int) -> int:
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} does not fit in an int32 relative to base offset "
                f"{self._base_offset} of {self._path}",
                path=self._path,
                offset=offset,
                base_offset=self._base_offset,
            )
        return relative

    def _keys(self) -> _Column:
        return _Column(self._data(), self._KEY, self.ENTRY.size, self._KEY_AT, self._entries)

    def _values(self) -> _Column:
        return _Column(self._data(), self._VALUE, self.ENTRY.size, self._VALUE_AT, self._entries)

    def _relative_offsets(self) -> _Column:
        buf = self._data()
        return _Column(buf, _INT32, self.ENTRY.size, self._RELATIVE_OFFSET_AT, self._entries)

    def _check_entry(self, n: int) -> None:
        if not 0 <= n < self.entries:
            raise IndexError(f"entry {n} of index {self._path}, which has {self._entries} entries")

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        self._check_writable("truncate")
        relative = offset - self._base_offset
        self._entries = bisect.bisect_left(self._relative_offsets(), relative)
        self._backed = min(self._backed, self._entries * self.ENTRY.size)

    def _columns(self) -> tuple[Sequence[int], Sequence[int]]:
        """Both fields of every entry (key field first), copied out of the file so that no view
        keeps a mapping open: lists for a few entries, int64 arrays for many."""
        n = self.entries
        raw = bytes(self._data()[: n * self.ENTRY.size])
        if n <= _SMALL_INDEX_ENTRIES:
            pairs = list(self.ENTRY.iter_unpack(raw))
            return [k for k, _ in pairs], [v for _, v in pairs]
        table = np.frombuffer(raw, dtype=self._TABLE_DTYPE, count=n)
        return table["key"].astype(np.int64), table["value"].astype(np.int64)

    def _corrupt(self, slot: int, why: str) -> CorruptIndexError:
        return CorruptIndexError(
            f"index file {self._path} is corrupt: entry {slot} {why}",
            path=self._path, entry=slot)

    @staticmethod
    def _first_bad(column: Sequence[int], *, strictly: bool) -> int | None:
        """The first slot whose value does not increase (strictly or not) on the previous one."""
        if isinstance(column, np.ndarray):
            steps = np.diff(column)
            bad = np.flatnonzero(steps <= 0 if strictly else steps < 0)
            return int(bad[0]) + 1 if len(bad) else None
        for slot in range(1, len(column)):
            step = column[slot] - column[slot - 1]
            if step < 0 or (strictly and step == 0):
                return slot
        return None

    def _check_length(self) -> None:
        if self._length % self.ENTRY.size:
            raise CorruptIndexError(
                f"index file {self._path} is corrupt: {self._length} bytes is not a multiple of "
                f"{self.ENTRY.size}",
                path=self._path,
                length=self._length,
                entry_size=self.ENTRY.size,
            )

    def _check_last_offset(self, last_offset: int) -> None:
        if self._entries and last_offset < self._base_offset:
            raise CorruptIndexError(
                f"index file {self._path} is corrupt: last offset {last_offset} is below the base "
                f"offset {self._base_offset}",
                path=self._path,
                last_offset=last_offset,
                base_offset=self._base_offset,
            )


class OffsetIndex(_Index):
    """Offset -> byte position in the segment's ``.log``, one entry per ``index.interval.bytes``.

    Offsets strictly increase from entry to entry. Not thread-safe; owned by one segment.
    """

    ENTRY = OFFSET_ENTRY
    _TABLE_DTYPE = np.dtype([("key", ">i4"), ("value", ">i4")])
    _KEY = _INT32
    _KEY_AT = 0
    _VALUE = _INT32
    _VALUE_AT = _POSITION_AT
    _RELATIVE_OFFSET_AT = 0

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when the index is empty."""
        return self.entry(self._entries - 1).offset if self.entries else self._base_offset

    def entry(self, n: int) -> OffsetPosition:
        self._check_entry(n)
        relative, position = OFFSET_ENTRY.unpack_from(self._data(), n * OFFSET_ENTRY.size)
        return OffsetPosition(self._base_offset + relative, position)

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``. Raises ``IndexFullError`` when full, ``InvalidOffsetError``
        when ``offset`` is not above the last offset or does not fit in an int32 relative offset.

        Called on every append of the active segment: one combined guard, and the precise error
        from ``_refuse_append`` only when it fails."""
        buf = self._buf if self._buf is not None else self._data()
        n = self._entries
        relative = offset - self._base_offset
        if (not self._writable or n >= self._max_entries
                or not 0 <= relative <= _INT32_MAX or not 0 <= position <= _INT32_MAX
                or (n and relative <= _INT32.unpack_from(buf, (n - 1) * _OFFSET_ENTRY_SIZE)[0])):
            self._refuse_append(offset, position)
        end = (n + 1) * _OFFSET_ENTRY_SIZE
        if end > self._backed:
            self._ensure_backed(end)
        OFFSET_ENTRY.pack_into(buf, n * _OFFSET_ENTRY_SIZE, relative, position)
        self._entries = n + 1

    def _refuse_append(self, offset: int, position: int) -> None:
        self._check_writable("append to")
        self._check_slot_free()
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"attempt to append an offset {offset} to position {self._entries} no larger than "
                f"the last offset appended ({self.last_offset}) to {self._path}",
                path=self._path,
                offset=offset,
                last_offset=self.last_offset,
            )
        if not 0 <= position <= _INT32_MAX:
            raise ValueError(f"position {position} does not fit in an int32 ({self._path})")
        self._relative(offset)
        raise AssertionError(f"append of {offset} -> {position} to {self._path} refused")

    def last_entry_or_none(self) -> OffsetPosition | None:
        """The last entry, or None when the index is empty."""
        return self.entry(self._entries - 1) if self.entries else None

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset ``<= target_offset``, else ``(base_offset, 0)``."""
        slot = bisect.bisect_right(self._keys(), target_offset - self._base_offset) - 1
        return self.entry(slot) if slot >= 0 else OffsetPosition(self._base_offset, 0)

    def fetch_upper_bound_offset(
        self, fetch_position: int, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry whose position is ``>= fetch_position + fetch_size``, else None."""
        slot = bisect.bisect_left(self._values(), fetch_position + fetch_size)
        return self.entry(slot) if slot < self._entries else None

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` naming the file when its length is not whole entries or the
        last offset is below the base offset."""
        self._data()
        self._check_last_offset(self.last_offset)
        self._check_length()

    def check_entries(self, log_size: int, end_offset: int) -> None:
        """Full check on open against the segment (``log_size`` bytes of ``.log``, offsets below
        ``end_offset``): offsets and positions strictly increase, the first relative offset and
        position are not negative, the last position is inside the ``.log`` and the last offset
        below ``end_offset``. ``CorruptIndexError`` naming the file and the first bad entry."""
        self._check_length()
        if not self.entries:
            return
        relative, positions = self._columns()
        if relative[0] < 0 or positions[0] < 0:
            raise self._corrupt(0, f"has relative offset {relative[0]} and position "
                                   f"{positions[0]}; neither may be negative")
        for column, name in ((relative, "offset"), (positions, "position")):
            slot = self._first_bad(column, strictly=True)
            if slot is not None:
                raise self._corrupt(slot, f"has {name} {int(column[slot])}, not above the "
                                          f"previous entry's {int(column[slot - 1])}")
        last = len(relative) - 1
        if positions[last] >= log_size:
            raise self._corrupt(last, f"has position {int(positions[last])}, beyond the "
                                      f"{log_size} bytes of the segment")
        if self._base_offset + int(relative[last]) >= end_offset:
            raise self._corrupt(last, f"has offset {self._base_offset + int(relative[last])}, "
                                      f"not below the segment's end offset {end_offset}")


class TimeIndex(_Index):
    """Timestamp -> first offset at or after it, one entry per new maximum timestamp.

    Timestamps strictly increase and offsets never decrease from entry to entry. The last slot is
    reserved (``is_full`` is one early) for the entry a segment adds when it becomes inactive.
    Not thread-safe; owned by one segment.
    """

    ENTRY = TIME_ENTRY
    _TABLE_DTYPE = np.dtype([("key", ">i8"), ("value", ">i4")])
    _KEY = _INT64
    _KEY_AT = 0
    _VALUE = _INT32
    _VALUE_AT = _TIME_RELATIVE_OFFSET_AT
    _RELATIVE_OFFSET_AT = _TIME_RELATIVE_OFFSET_AT

    def is_full(self) -> bool:
        if self._buf is None:
            self._open()
        return self._entries >= self._max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        self._check_entry(n)
        timestamp, relative = TIME_ENTRY.unpack_from(self._data(), n * TIME_ENTRY.size)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return self.entry(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add ``timestamp -> offset`` if ``timestamp`` is above the last entry's, else do nothing.

        Raises ``IndexFullError`` when full (the reserved slot counts as free with
        ``skip_full_check``) and ``InvalidOffsetError`` when ``offset`` is below the last offset.
        Like ``OffsetIndex.append``: one combined guard, the precise error only when it fails."""
        buf = self._buf if self._buf is not None else self._data()
        n = self._entries
        relative = offset - self._base_offset
        if n:
            last_timestamp, last_relative = TIME_ENTRY.unpack_from(buf, (n - 1) * _TIME_ENTRY_SIZE)
        else:
            last_timestamp, last_relative = NO_TIMESTAMP, 0
        if (not self._writable or (not skip_full_check and n >= self._max_entries - 1)
                or (n and relative < last_relative)):
            self._refuse_append(timestamp, offset, skip_full_check)
        if timestamp <= last_timestamp:
            return
        if n >= self._max_entries or not 0 <= relative <= _INT32_MAX:
            self._refuse_append(timestamp, offset, True)
        end = (n + 1) * _TIME_ENTRY_SIZE
        if end > self._backed:
            self._ensure_backed(end)
        TIME_ENTRY.pack_into(buf, n * _TIME_ENTRY_SIZE, timestamp, relative)
        self._entries = n + 1

    def _refuse_append(self, timestamp: int, offset: int, skip_full_check: bool) -> None:
        self._check_writable("append to")
        if not skip_full_check and self.is_full():
            raise IndexFullError(
                f"attempt to append to a full time index {self._path} (size = {self._entries})",
                path=self._path,
                entries=self._entries,
            )
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                f"the last offset appended ({last.offset}) to {self._path}",
                path=self._path,
                offset=offset,
                last_offset=last.offset,
            )
        self._check_slot_free()
        self._relative(offset)
        raise AssertionError(f"append of {timestamp} -> {offset} to {self._path} refused")

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp ``<= target_timestamp``, else
        ``(-1, base_offset)``."""
        slot = bisect.bisect_right(self._keys(), target_timestamp) - 1
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self._base_offset)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` naming the file when the last timestamp is below the first,
        the last offset is below the base offset, or the length is not whole entries."""
        self._data()
        if self._entries:
            first, last = self.entry(0), self.last_entry()
            if last.timestamp < first.timestamp:
                raise CorruptIndexError(
                    f"time index file {self._path} is corrupt: last timestamp {last.timestamp} is "
                    f"below the first timestamp {first.timestamp}",
                    path=self._path,
                    last_timestamp=last.timestamp,
                    first_timestamp=first.timestamp,
                )
            self._check_last_offset(last.offset)
        self._check_length()

    def check_entries(self, end_offset: int) -> None:
        """Full check on open against the segment (offsets below ``end_offset``): timestamps
        strictly increase (an index zeroed by a lost write fails here), relative offsets never
        decrease and are not negative, the last offset is below ``end_offset``.
        ``CorruptIndexError`` naming the file and the first bad entry."""
        self._check_length()
        if not self.entries:
            return
        timestamps, relative = self._columns()
        if relative[0] < 0:
            raise self._corrupt(0, f"has a negative relative offset {int(relative[0])}")
        slot = self._first_bad(timestamps, strictly=True)
        if slot is not None:
            raise self._corrupt(slot, f"has timestamp {int(timestamps[slot])}, not above the "
                                      f"previous entry's {int(timestamps[slot - 1])}")
        slot = self._first_bad(relative, strictly=False)
        if slot is not None:
            raise self._corrupt(slot, f"has relative offset {int(relative[slot])}, below the "
                                      f"previous entry's {int(relative[slot - 1])}")
        last_offset = self._base_offset + int(relative[-1])
        if last_offset >= end_offset:
            raise self._corrupt(len(relative) - 1, f"has offset {last_offset}, not below the "
                                                   f"segment's end offset {end_offset}")
