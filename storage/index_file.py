"""What the offset and time indexes share (Kafka's AbstractIndex and LazyIndex): a file of
fixed-width big-endian entries, no header, no checksum, read lazily, mapped with ``mmap`` when
writable, preallocated and trimmed; see ``storage.index`` for the contract and the two layouts."""

from __future__ import annotations

import bisect
import errno
import mmap
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from storage.durable import fsync_file_if_exists
from storage.errors import CorruptIndexError, InvalidOffsetError, StorageError


_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_INT32_MAX = 2**31 - 1
_SMALL_INDEX_ENTRIES = 64   # check_entries loops in Python up to here, in numpy above
_BACKING_STEP = 64 * 1024   # bytes of index file allocated ahead of the entries
_PROBE_MIN_BYTES = 64 * 1024   # a read-only index file this large is searched in place ...
_PROBE_LOOKUPS = 8             # ... by this many lookups, before it is read whole
# opening, releasing and resizing an index file: one lock for all of them (a lock per index cost
# a fifth of a load of many segments; these are short and never wait on one another)
_LIFECYCLE = threading.RLock()


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
        self, buf: mmap.mmap | bytes | int, field: struct.Struct, stride: int, at: int,
        count: int
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


class _FileColumn(_Column):
    """One field of every entry of an index file, read from the file (its ``_buf`` is an open
    file descriptor) with one ``pread`` per item: a sequence for ``bisect`` that reads about
    log2(entries) entries, not the file."""

    __slots__ = ()

    def __getitem__(self, slot: int) -> int:
        assert isinstance(self._buf, int)
        raw = os.pread(self._buf, self._field.size, slot * self._stride + self._at)
        if len(raw) < self._field.size:
            raise IndexError(f"slot {slot} lies beyond the end of the index file")
        value: int = self._field.unpack_from(raw)[0]
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
        self._closed = False   # closed by its segment: a later use never creates the file
        # opening, releasing and resizing the file: readers open an index lazily while its owner
        # may trim or reopen it (a roll), so these never interleave
        self._lifecycle = _LIFECYCLE
        self._probes = 0   # lookups answered from the file without reading it whole

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
        self._data()
        return self._entries >= self._max_entries

    def exists(self) -> bool:
        return self._path.exists()

    # -- lifecycle --------------------------------------------------------------------------

    def _data(self) -> mmap.mmap | bytes:
        buf = self._buf
        if buf is None:
            with self._lifecycle:
                if self._buf is None:
                    self._open()
                buf = self._buf
        assert buf is not None
        return buf

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
            if self._closed:
                # a reader still holding an index its segment closed (a roll reopened the
                # indexes; a delete renamed the file): never create a file for it
                return b"", 0, False
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
        """Give back the mapping; the next use reopens the file.

        The entry count is kept, so a released writable index that is still preallocated reopens
        with the same entries (nothing is trimmed). The map is not closed here but dropped: a
        reader in another thread may be searching it (a roll trims and reopens the active
        segment's indexes while reads go on), and the map is unmapped when the last reference to
        it goes, which for an idle index is at once."""
        with self._lifecycle:
            if self._buf is None:
                return
            self._kept_entries = self._entries
            self._buf = None

    def close(self) -> None:
        """Trim the file to its entries (Kafka's close) and release it. A later use reopens it."""
        with self._lifecycle:
            if self._buf is None and (self._kept_entries is None or not self.exists()):
                self._kept_entries = None  # never opened, or its file is gone: nothing to trim
                self._closed = True
                return
            if self._writable:
                self.trim_to_valid_size()
            self.release()
            self._kept_entries = None
            self._closed = True

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
        with self._lifecycle:
            target = Path(path)
            try:
                os.replace(self._path, target)
            except FileNotFoundError:
                if self._path.exists():
                    raise
            finally:
                self._path = target

    def delete_if_exists(self) -> bool:
        with self._lifecycle:
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
        with self._lifecycle:
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
            # drop our map before shrinking (touching a page past EOF is SIGBUS); a map a reader
            # still holds is searched only up to the entries it counted, which the file keeps
            self.release()
            os.truncate(self._path, rounded)
            self._open()
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries, so reopening counts the same entries."""
        self.resize(self.entries * self.ENTRY.size)

    def reset(self) -> None:
        """Remove every entry and preallocate the file to ``max_index_size`` (Kafka's reset)."""
        with self._lifecycle:
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

    def _probe(self, key: int) -> tuple[int, tuple[int, ...] | None] | None:
        """``(slot, entry fields)`` of the last entry whose key field is ``<= key`` (slot -1 and
        None when there is none), found by a binary search over the file itself: about
        log2(entries) reads of one entry each, instead of reading the whole file.

        Only a read-only index not yet read, whose file is at least ``_PROBE_MIN_BYTES`` (an
        active segment's index is preallocated to ``segment.index.bytes``, 10 MiB by default),
        is searched so, and only by its first ``_PROBE_LOOKUPS`` lookups (a reader that opens a
        segment for one read then never reads the file); None otherwise, and the caller reads
        the file whole. The entries are the file's whole entries, as ``_open`` counts them
        (a preallocated tail included), so the answer is the one the whole file would give."""
        if (self._buf is not None or self._writable or self._kept_entries is not None
                or self._probes >= _PROBE_LOOKUPS):
            return None
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            length = os.fstat(fd).st_size
            if length < _PROBE_MIN_BYTES:
                return None
            self._probes += 1
            size = self.ENTRY.size
            keys = _FileColumn(fd, self._KEY, size, self._KEY_AT, length // size)
            values = _FileColumn(fd, self._VALUE, size, self._VALUE_AT, length // size)
            slot = bisect.bisect_right(keys, key, 0, self._searched(keys, values)) - 1
            if slot < 0:
                return -1, None
            return slot, self.ENTRY.unpack(os.pread(fd, size, slot * size))
        finally:
            os.close(fd)

    def _searched(self, keys: Sequence[int], values: Sequence[int]) -> int:
        """How many leading entries a lookup searches: every entry, except in a read-only index
        whose file a live owner preallocated. Its zeroed tail holds no entries yet (the owner
        counts its entries in memory; the file is trimmed only when the segment is closed), so a
        lookup that bisected into it answered with the segment's start, and a read from inside
        the active segment walked it from its first byte. The tail is the zeroed slots after the
        first: any later entry's key is above the first's, so only the tail has key and value
        both zero there. Two reads when the last slot is no zero entry; log2(slots) otherwise."""
        count = len(keys)
        if self._writable or count < 2 or keys[count - 1] or values[count - 1]:
            return count
        low, high = 1, count - 1               # the tail's first slot is in [low, high]
        while low < high:
            middle = (low + high) // 2
            if keys[middle] or values[middle]:
                low = middle + 1
            else:
                high = middle
        return low

    def _lookup_slot(self, key: int) -> int:
        """The slot of the last entry whose key is ``<= key`` (-1 when none) among the entries
        a lookup searches (``_searched``)."""
        keys = self._keys()
        return bisect.bisect_right(keys, key, 0, self._searched(keys, self._values())) - 1

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
