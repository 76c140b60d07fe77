"""One log segment: a ``.log`` file of record batches with a lazy ``.index`` and ``.timeindex``
(Kafka's LogSegment).

A segment covers offsets from ``base_offset`` up to the next segment's base offset. Its offset index
maps (offset -> file position) every ``index.interval.bytes``; its time index maps (max timestamp so
far -> offset) at the same points. Both are hints rebuilt by ``recover``; the ``.log`` is the truth.

File handles: only the active segment keeps its ``.log`` open for appending. A closed segment opens
its file for the length of one read through ``HANDLES``, a bounded process-wide cache, and its indexes
only when a lookup needs them; ``release()`` drops them again. Tens of thousands of segments therefore
stay far under the open-file limit.

Not thread-safe: a segment is owned by one ``Log``, which serialises writers. Reads of a closed
segment may run concurrently with each other.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import zlib
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

import crc32c
import numpy as np

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    SegmentOffsetOverflowError,
    StorageError,
)
from storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from storage.kernels import LEGACY_CRC_OFFSET, LEGACY_TIMESTAMP_OFFSET
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    SIZE_OFFSET,
    BatchHeader,
    BatchScan,
    RecordBatch,
    batch_crc,
    batch_location,
    scan_batches,
)
from storage.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

if TYPE_CHECKING:
    from storage.producer_state import CompletedTxn, ProducerStateManager

INT32_MAX = 2**31 - 1
SCAN_CHUNK_BYTES = 256 * 1024
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024
HOP_BATCH_BYTES = 16 * 1024   # producer-state replay reads only the header of a batch this large
REPLAY_CHUNK_BYTES = 1024 * 1024   # and scans smaller ones this many bytes at a time
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

log = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """Where one batch sits in a segment file, with the header fields readers need."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int
    records_count: int


class SegmentIdentity(NamedTuple):
    """What a cleaner saw of a segment it read, for the owner to check at the swap: the base
    offset, the byte size and the ``.log`` file's mtime in nanoseconds. The owner also keeps the
    identities of segments it truncated, so a segment truncated and regrown to the same size and
    mtime still does not match."""

    base_offset: int
    size: int
    mtime_ns: int


class RollParams(NamedTuple):
    """What an append brings that decides whether the active segment must roll first.

    A NamedTuple, like every value built on each append: it costs a fifth of a frozen dataclass."""

    max_timestamp_in_append: int
    max_offset_in_append: int
    bytes_in_append: int
    now_ms: int


def _write_fully(fd: int, pieces: list[bytes | memoryview], position: int, size: int) -> None:
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


class RecoveryPlan(NamedTuple):
    """What ``LogSegment.plan_recovery`` found: recovery keeps ``valid_bytes`` of ``file_size``."""

    file_size: int
    valid_bytes: int
    next_offset: int


class CheckedBatch(NamedTuple):
    """A batch that passed its structure and CRC checks: where it is and its offsets."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int = MAGIC


def checked_batches(fd: int, start: int, end: int) -> Iterator[CheckedBatch]:
    """The batches of file ``fd`` from ``start`` whose structure and CRC are valid, in order;
    stops at the first incomplete or invalid one (the caller compares the last position reached
    with ``end`` to know whether anything was left). Offsets are not checked here.

    Memory is bounded by ``RECOVERY_CHUNK_BYTES``: batches are scanned in chunks of that size, and
    a batch larger than a chunk (v2, or a legacy magic 0/1 message) is checked streaming (its
    header, then its checksum chained over pieces read with ``os.pread``), never read whole."""
    position = start
    while position + HEADER_SIZE_UP_TO_MAGIC <= end:
        data = os.pread(fd, min(RECOVERY_CHUNK_BYTES, end - position), position)
        scan = scan_batches(data, check_crc=True)
        if len(scan.positions):
            for pos, size, base, last, max_ts, magic in zip(
                    scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                    scan.last_offsets.tolist(), scan.max_timestamps.tolist(),
                    scan.magics.tolist()):
                yield CheckedBatch(position + pos, size, base, last, max_ts, magic)
            position += scan.valid_bytes
            if scan.error is not None:
                return
            continue
        if scan.error is not None:
            return
        batch_size = int.from_bytes(data[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) \
            + LOG_OVERHEAD
        if batch_size <= len(data) or position + batch_size > end:
            return   # incomplete at the end of the file
        batch = _check_large_batch(fd, position, batch_size)
        if batch is None:
            return
        yield batch
        position += batch_size


def _check_large_batch(fd: int, position: int, size: int) -> CheckedBatch | None:
    """Check the batch of ``size`` bytes at ``position`` (larger than a recovery chunk) without
    holding it in memory: its header's structure, then its checksum streamed over
    ``RECOVERY_CHUNK_BYTES`` pieces (v2: CRC32C from the attributes to the end; a legacy magic 0/1
    message: CRC32 from the magic byte to the end). None when it is not a valid batch."""
    header = os.pread(fd, HEADER_SIZE, position)
    magic = header[MAGIC_OFFSET] if len(header) > MAGIC_OFFSET else -1
    if magic == MAGIC and len(header) == HEADER_SIZE:
        (base, _length, _epoch, _magic, crc, _attributes, last_delta, _base_ts, max_ts, _pid,
         _pepoch, _seq, _count) = BATCH_HEADER.unpack(header)
        if _streamed_checksum(fd, position + ATTRIBUTES_OFFSET, position + size,
                              crc32c.crc32c) != crc:
            return None
        return CheckedBatch(position, size, base, base + last_delta, max_ts)
    if magic in (0, 1) and len(header) >= LEGACY_TIMESTAMP_OFFSET + 8:
        offset = _INT64.unpack_from(header, 0)[0]
        crc = _UINT32.unpack_from(header, LEGACY_CRC_OFFSET)[0]
        max_ts = _INT64.unpack_from(header, LEGACY_TIMESTAMP_OFFSET)[0] if magic == 1 else -1
        if _streamed_checksum(fd, position + MAGIC_OFFSET, position + size, zlib.crc32) != crc:
            return None
        return CheckedBatch(position, size, offset, offset, max_ts, magic)
    return None


def _streamed_checksum(fd: int, start: int, stop: int,
                       update: Callable[..., int]) -> int | None:
    """``update`` (crc32c.crc32c or zlib.crc32) chained over ``[start, stop)`` of ``fd``, read
    in ``RECOVERY_CHUNK_BYTES`` pieces; None when the file ends early."""
    value = 0
    while start < stop:
        piece = os.pread(fd, min(RECOVERY_CHUNK_BYTES, stop - start), start)
        if not piece:
            return None
        value = update(piece, value)
        start += len(piece)
    return value


class LogSegment:
    """One segment's files. See the module docstring for ownership and handle rules."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *,
                 suffix: str = "", created_ms: int | None = None, rolling_jitter_ms: int = 0,
                 writable: bool = False, clock: Clock = SYSTEM_CLOCK) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.suffix = suffix
        self.clock = clock
        self.rolling_jitter_ms = rolling_jitter_ms
        self.log_path = files.log_file(directory, base_offset, suffix)
        self._open_indexes(writable)
        self.txn_index = TransactionIndex(files.txn_index_file(directory, base_offset, suffix),
                                          base_offset)
        self._write_fd: int | None = None
        try:
            self._size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            self._size = 0
        self._created_ms = created_ms if created_ms is not None else clock.milliseconds()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset: TimestampOffset | None = None   # loaded lazily
        self._rolling_based_timestamp: int | None = None
        self._next_offset: int | None = None
        self._indexes_sized = True

    # ---- creation ----------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, *, suffix: str = "",
               clock: Clock = SYSTEM_CLOCK, rolling_jitter_ms: int = 0) -> LogSegment:
        """A new empty writable segment; an existing ``.log`` of that name is an error."""
        path = files.log_file(directory, base_offset, suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        if config.preallocate and not suffix:
            os.ftruncate(fd, config.segment_bytes)
        os.close(fd)
        segment = cls(directory, base_offset, config, suffix=suffix, writable=True, clock=clock,
                      rolling_jitter_ms=rolling_jitter_ms)
        segment._size = 0
        segment._max_timestamp_and_offset = TimestampOffset(-1, base_offset)
        segment._next_offset = base_offset
        return segment

    @classmethod
    def create_cleaned(cls, directory: Path, base_offset: int, config: LogConfig, *,
                       clock: Clock = SYSTEM_CLOCK) -> LogSegment:
        """A fresh ``<base>.log.cleaned`` segment; stale cleaner output of that name is removed."""
        suffix = files.CLEANED_SUFFIX
        for path in (files.log_file(directory, base_offset, suffix),
                     files.index_file(directory, base_offset, suffix),
                     files.time_index_file(directory, base_offset, suffix),
                     files.txn_index_file(directory, base_offset, suffix)):
            path.unlink(missing_ok=True)
        return cls.create(directory, base_offset, config, suffix=suffix, clock=clock)

    # ---- sizes and offsets -------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` (excluding preallocated space)."""
        return self._size

    @property
    def identity(self) -> SegmentIdentity:
        """Base offset, size and the ``.log`` file's mtime (one ``stat``)."""
        return SegmentIdentity(self.base_offset, self._size, self.log_path.stat().st_mtime_ns)

    def size_to_written_batches(self) -> int:
        """Take ``size`` as the end of the last whole batch instead of the file's length, for a
        read-only view of an active segment that its owner preallocated (``preallocate=true``:
        ``segment.bytes`` long, zeros after the batches). Walks the batch headers from the last
        offset index entry; stops at the first bytes that are no batch. Returns the new size."""
        start = self.offset_index.lookup(2**63 - 1).position if self.offset_index.exists() else 0
        end = start = min(start, self._size)
        try:
            for entry in self.batches(start):
                end = entry.position + entry.size
        except CorruptRecordError:
            pass                    # the zeroed tail of the preallocated file
        self._size = end
        return end

    @property
    def last_modified_ms(self) -> int:
        return self.log_path.stat().st_mtime_ns // 1_000_000

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts().offset

    def _max_ts(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry()
        return self._max_timestamp_and_offset

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime when there is none (retention)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, or -1 for an empty segment."""
        for entry in self.batches():
            return entry.max_timestamp
        return -1

    def read_next_offset(self) -> int:
        """The offset after the last batch: scan from the last offset index entry to the end."""
        if self._next_offset is None:
            start = self.offset_index.lookup(2**63 - 1).position if self.offset_index.exists() else 0
            next_offset = self.base_offset
            for entry in self.batches(start):
                next_offset = entry.last_offset + 1
            self._next_offset = next_offset
        return self._next_offset

    # ---- append ------------------------------------------------------------------------------
    def should_roll(self, params: RollParams) -> bool:
        """Kafka's shouldRoll: size, time (with jitter), full index, or relative offset overflow."""
        if not self._indexes_sized:
            self.size_indexes_for_appends()
        config = self.config
        return (
            self._size > config.segment_bytes - params.bytes_in_append
            or (self._size > 0
                and self._time_waited_for_roll(params.now_ms, params.max_timestamp_in_append)
                > config.max_segment_ms - self.rolling_jitter_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not 0 <= params.max_offset_in_append - self.base_offset <= INT32_MAX
        )

    def _time_waited_for_roll(self, now_ms: int, max_timestamp_in_append: int) -> int:
        if self._rolling_based_timestamp is None:
            first = self.first_batch_timestamp() if self._size else -1
            self._rolling_based_timestamp = first
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return max_timestamp_in_append - self._rolling_based_timestamp
        return now_ms - self._created_ms

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               pieces: list[bytes | memoryview], size: int | None = None) -> None:
        """Append already-validated batches (given as byte pieces written with one ``writev``;
        ``size`` is their total length when the caller knows it).

        The sparse index entry points at where this append starts, and is added *before* the bytes
        once more than ``index.interval.bytes`` were appended since the last entry.
        """
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise InvalidOffsetError(
                f"offset {largest_offset} does not fit segment {self.log_path}",
                path=str(self.log_path), offset=largest_offset)
        if size is None:
            size = sum(len(p) for p in pieces)
        if size == 0:
            return
        if not self._indexes_sized:
            self.size_indexes_for_appends()
        position = self._size
        if self._size == 0:
            self._rolling_based_timestamp = largest_timestamp
        max_ts = self._max_ts()
        if largest_timestamp > max_ts.timestamp:
            self._max_timestamp_and_offset = max_ts = TimestampOffset(largest_timestamp,
                                                                      offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
            self._bytes_since_last_index_entry = 0
        _write_fully(self._writer(), pieces, position, size)
        self._size += size
        self._bytes_since_last_index_entry += size
        self._next_offset = largest_offset + 1

    def _writer(self) -> int:
        if self._write_fd is None:
            self._write_fd = os.open(self.log_path, os.O_RDWR)
        return self._write_fd

    def flush(self) -> None:
        """fsync the ``.log`` and flush the indexes.

        Safe to call from a thread other than the writer's (the log flushes outside its lock): the
        fsync goes through a descriptor of its own, so a concurrent roll closing the writer cannot
        make it fail, and an index closed meanwhile was trimmed and written by its closer."""
        fd = os.open(self.log_path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for index in (self.offset_index, self.time_index):
            try:
                index.flush()
            except ValueError:
                pass   # its map was closed by a concurrent roll or close
        self.txn_index.flush()

    def on_become_inactive(self) -> None:
        """At roll: final time-index entry, trim indexes and a preallocated file, stop writing."""
        max_ts = self._max_ts()
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if self.config.preallocate or self._write_fd is not None:
            fd = self._writer()
            if os.fstat(fd).st_size != self._size:
                os.ftruncate(fd, self._size)
        self.make_read_only()

    def _open_indexes(self, writable: bool) -> None:
        """(Re)create the lazy index objects for the current directory and suffix."""
        size = self.config.segment_index_bytes
        self.offset_index = OffsetIndex(files.index_file(self.dir, self.base_offset, self.suffix),
                                        self.base_offset, size, writable=writable)
        self.time_index = TimeIndex(files.time_index_file(self.dir, self.base_offset, self.suffix),
                                    self.base_offset, size, writable=writable)

    def make_read_only(self) -> None:
        """Close the writer and reopen the indexes read-only (lazily)."""
        self._close_writer()
        self.offset_index.close()
        self.time_index.close()
        self._open_indexes(writable=False)

    def make_writable(self) -> None:
        """Reopen the indexes writable (the active segment after load)."""
        self.offset_index.close()
        self.time_index.close()
        self._open_indexes(writable=True)
        self._indexes_sized = False   # grown to the maximum at the first append, not at load

    def size_indexes_for_appends(self) -> None:
        if not self._indexes_sized:
            self.offset_index.resize(self.config.segment_index_bytes)
            self.time_index.resize(self.config.segment_index_bytes)
            self._indexes_sized = True

    # ---- read --------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if self._write_fd is not None:
            return os.pread(self._write_fd, size, position)
        with HANDLES.borrow(self.log_path) as fd:
            return os.pread(fd, size, position)

    def batches(self, start_position: int = 0, end_position: int | None = None,
                chunk_bytes: int = SCAN_CHUNK_BYTES, *, verify: bool = False,
                next_base_offset: int | None = None, target_offset: int | None = None,
                torn_tail_ok: bool = False,
                index_entry_offset: int | None = None) -> Iterator[BatchEntry]:
        """Walk the batch headers from ``start_position``; stops at the first incomplete batch.

        Raises CorruptRecordError (with file and position) for an impossible batch size.

        With ``verify`` (every read path) each batch is checked before it is yielded, so that a
        reader never positions itself by, nor is served, a damaged batch:

        - its CRC: one crc32c call per batch over a view of the chunk already read;
        - its offsets, which lie outside the CRC: the base offset must lie above the previous
          batch's last offset (the segment's base offset - 1 for the first), the last offset must
          lie below the next batch's base offset, below ``next_base_offset`` (the next segment's
          base offset or, for the active segment, the log end offset) and within the segment's
          32-bit relative offsets. A batch is therefore yielded only once the batch after it (or
          the end of the walk) has been read;
        - the end: every byte up to ``end_position`` (default: the segment's size) must belong
          to a complete batch, unless ``torn_tail_ok`` (a file another process is appending to).

        A failure raises ``CorruptRecordError`` naming the file, the batch's position and its base
        offset, after every batch before it was yielded. One exception: a batch that fails its CRC
        is skipped when ``target_offset`` is given and the next batch, intact, starts at or below
        it: the damaged batch then provably holds no offset the caller wants (its own header cannot
        be trusted to say so), and reads from offsets after a damaged batch keep working.

        ``index_entry_offset`` is the offset of the offset-index entry ``start_position`` came
        from: the first batch there must end at or below it (an entry is the last offset of the
        append that starts at its position). If it does not, the entry is wrong, and the walk
        starts over from the segment's first byte rather than skip what lies before.
        """
        end = self._size if end_position is None else min(end_position, self._size)
        chunks = self._chunks(start_position, end, chunk_bytes,
                              torn_tail_ok=torn_tail_ok or not verify)
        if not verify:
            for position, scan, _view in chunks:
                for pos, size, base, last, max_ts, magic, n in zip(
                        scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                        scan.last_offsets.tolist(), scan.max_timestamps.tolist(),
                        scan.magics.tolist(), scan.records_counts.tolist()):
                    yield BatchEntry(position + pos, size, base, last, max_ts, magic, n)
            return
        upper = self.base_offset + INT32_MAX
        if next_base_offset is not None:
            upper = min(upper, next_base_offset - 1)
        first_last = index_entry_offset if start_position > 0 else None
        try:
            yield from self._verified(chunks, upper, target_offset, first_last)
        except _IndexEntryMismatch as mismatch:
            log.warning("%s: %s; reading from the start of the segment instead",
                        self.offset_index.path, mismatch)
            chunks = self._chunks(0, end, chunk_bytes, torn_tail_ok=torn_tail_ok)
            yield from self._verified(chunks, upper, target_offset, None)

    def _chunks(self, start: int, end: int, chunk_bytes: int, *,
                torn_tail_ok: bool) -> Iterator[tuple[int, BatchScan, memoryview]]:
        """``(file position, scan, bytes)`` of each chunk of complete batches in ``[start, end)``;
        a chunk's problem is raised after the chunk, so its good batches come first."""
        position = start
        while position + HEADER_SIZE_UP_TO_MAGIC <= end:
            wanted = min(chunk_bytes, end - position)
            data = self.read_bytes(position, wanted)
            scan = scan_batches(data)
            if len(scan.positions) == 0:
                if scan.problem is not None:
                    raise self._corrupt_at(position + max(scan.error_position, 0), scan.problem)
                if len(data) < wanted:
                    break    # the file ends before the segment's size: reported below
                batch_size = int.from_bytes(data[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                if batch_size <= len(data) or position + batch_size > end:
                    break    # incomplete batch at the end of the file
                chunk_bytes = batch_size
                continue
            yield position, scan, memoryview(data)
            if scan.problem is not None:
                raise self._corrupt_at(position + scan.error_position, scan.problem)
            position += scan.valid_bytes
        if position < end and not torn_tail_ok:
            raise self._corrupt_at(position, f"the {end - position} bytes from here to position "
                                             f"{end} are not a complete batch")

    def _verified(self, chunks: Iterator[tuple[int, BatchScan, memoryview]], upper: int,
                  target_offset: int | None, first_last: int | None) -> Iterator[BatchEntry]:
        """The checks of ``batches(verify=True)`` over the chunks of ``_chunks``; raises
        ``_IndexEntryMismatch``, before yielding anything, when the first batch is not a batch,
        fails its CRC or ends above ``first_last`` (the walk then starts again from the
        segment's first byte, where a damaged index cannot mislead it)."""
        previous_last = self.base_offset - 1
        held: BatchEntry | None = None         # yielded once the batch after it fits behind it
        damaged: CorruptRecordError | None = None    # a CRC failure that may yet be skipped
        while True:
            try:
                position, scan, view = next(chunks)
            except StopIteration:
                break
            except CorruptRecordError as err:
                if first_last is not None and held is None and damaged is None:
                    raise _IndexEntryMismatch(f"no batch at position {err.position}, where the "
                                              f"index entry for offset {first_last} points")
                if held is not None:
                    yield held                  # intact: the damage lies after it
                raise damaged or err
            for pos, size, base, last, max_ts, magic, n, stored in zip(
                    scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                    scan.last_offsets.tolist(), scan.max_timestamps.tolist(), scan.magics.tolist(),
                    scan.records_counts.tolist(), scan.crcs.tolist()):
                entry = BatchEntry(position + pos, size, base, last, max_ts, magic, n)
                computed = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) if magic == MAGIC \
                    else batch_crc(view, pos, size, magic)
                if computed != stored:
                    if first_last is not None and held is None and damaged is None:
                        raise _IndexEntryMismatch(
                            f"the batch at position {entry.position}, where the index entry for "
                            f"offset {first_last} points, fails its CRC")
                    if held is not None:
                        yield held              # intact: the damage lies in the batch after it
                        held = None
                    error = self._crc_mismatch(entry, stored, computed)
                    if damaged is not None or target_offset is None:
                        raise damaged or error
                    damaged = error
                    continue
                if first_last is not None:
                    if last > first_last and held is None and damaged is None:
                        raise _IndexEntryMismatch(f"the index entry for offset {first_last} at "
                                                  f"position {entry.position} points at a batch "
                                                  f"ending at offset {last}")
                    first_last = None
                if base <= previous_last or last < base or last > upper:
                    raise damaged or self._offsets_out_of_place(entry, previous_last, upper)
                if damaged is not None:
                    if target_offset is None or base > target_offset:
                        raise damaged
                    damaged = None
                if held is not None:
                    yield held
                held, previous_last = entry, last
        if held is not None:
            yield held
        if damaged is not None:
            raise damaged

    def _corrupt_at(self, position: int, problem: str, **fields: object) -> CorruptRecordError:
        return CorruptRecordError(f"{batch_location(self.log_path, position)}: {problem}",
                                  path=str(self.log_path), position=position, **fields)

    def _crc_mismatch(self, entry: BatchEntry, stored: int, computed: int) -> CorruptRecordError:
        return self._corrupt_at(
            entry.position, f"CRC mismatch for the batch at offsets {entry.base_offset}.."
                            f"{entry.last_offset} (stored crc {stored:#010x}, computed crc "
                            f"{computed:#010x})", base_offset=entry.base_offset,
            offset=entry.last_offset, stored_crc=stored, computed_crc=computed)

    def _offsets_out_of_place(self, entry: BatchEntry, previous_last: int,
                              upper: int) -> CorruptRecordError:
        base, last = entry.base_offset, entry.last_offset
        if base <= previous_last:
            why = f"its base offset is not above {previous_last}, where the batches before it end"
        elif last < base:
            why = "its last offset is below its base offset"
        else:
            why = f"its last offset is beyond {upper}, the last offset this segment may hold"
        return self._corrupt_at(entry.position, f"the batch at offsets {base}..{last} is out of "
                                                f"place: {why}", base_offset=base, offset=last)

    def walk_start(self, offset: int) -> OffsetPosition:
        """Where a verified walk for ``offset`` starts: the offset-index entry *before* the one at
        or below ``offset`` (``(base offset, 0)`` when there is none). Starting one entry early
        costs about ``index.interval.bytes`` of walk, and gives the first batch a reader may want
        a predecessor to check its base offset against."""
        entry = self.offset_index.lookup(offset)
        if entry.position == 0:
            return entry
        return self.offset_index.lookup(entry.offset - 1)

    def translate_offset(self, offset: int, start_position: int = 0, *,
                         next_base_offset: int | None = None) -> BatchEntry | None:
        """The first batch whose last offset is >= ``offset`` (the batch holding it, or the next
        batch after a gap), searching from the index entry at or below it. Every batch walked is
        verified (``batches(verify=True)``)."""
        entry = self.walk_start(offset)
        for batch in self.batches(max(entry.position, start_position), verify=True,
                                  next_base_offset=next_base_offset, target_offset=offset,
                                  index_entry_offset=entry.offset
                                  if entry.position >= start_position else None):
            if batch.last_offset >= offset:
                return batch
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True, *,
             next_base_offset: int | None = None) -> tuple[int, bytes] | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes (at least
        one batch if ``min_one_message``). Returns (file position, bytes) or None past the end.

        Every batch returned, and every batch walked to find the first, passed
        ``batches(verify=True)``: its CRC and its offsets (below ``next_base_offset`` when given:
        the next segment's base offset, or the log end offset for the active segment). A damaged
        batch ends the bytes returned before it; ``CorruptRecordError`` is raised when it would be
        the first batch returned."""
        limit = self._size if max_position is None else max_position
        entry = self.walk_start(start_offset)
        first: BatchEntry | None = None
        end = budget = 0
        walk = self.batches(entry.position, limit, verify=True, next_base_offset=next_base_offset,
                            target_offset=start_offset, index_entry_offset=entry.offset)
        try:
            for batch in walk:
                if first is None:
                    if batch.last_offset < start_offset:
                        continue
                    first = batch
                    budget = max(max_size, first.size) if min_one_message else max_size
                    end = first.position
                if batch.position + batch.size - first.position > budget:
                    break
                end = batch.position + batch.size
        except CorruptRecordError:
            if first is None or end == first.position:
                raise
        finally:
            walk.close()
        if first is None or end == first.position:
            return None
        return first.position, self.read_bytes(first.position, end - first.position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` at or after
        ``start_offset``, or None."""
        ts_entry = self.time_index.lookup(timestamp)
        index_entry = self.walk_start(max(ts_entry.offset, start_offset))
        for entry in self.batches(index_entry.position, verify=True, target_offset=start_offset,
                                  index_entry_offset=index_entry.offset):
            if entry.max_timestamp < timestamp or entry.last_offset < start_offset:
                continue
            batch = RecordBatch(self.read_bytes(entry.position, entry.size), entry.position,
                                self.log_path)
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    # ---- recovery and truncation -------------------------------------------------------------
    def recover(self, max_message_bytes: int | None = None, *,
                keep_cut: Callable[[int], None] | None = None,
                next_base_offset: int | None = None) -> int:
        """Rebuild both indexes from the ``.log``, checking every batch's structure, CRC and
        offsets, and truncate at the first invalid byte. Returns the number of bytes truncated.
        ``keep_cut(position)``, if given, is called before truncating at ``position``, while the
        bytes are still in the file (the loader copies them to quarantine).

        ``max_message_bytes`` is accepted for old callers and ignored: like Kafka, recovery judges a
        batch by its structure and CRC, never by the topic's current size limit (which may have been
        lowered after larger batches were written). Memory stays bounded all the same: a batch
        larger than ``RECOVERY_CHUNK_BYTES`` is checked piece by piece (see ``checked_batches``).

        Offsets lie outside the CRC, so a batch is kept only when its offsets fit between its
        neighbours: above the batch before it, below the batch after it and below
        ``next_base_offset`` (the next segment's base, when there is one). When a batch and the
        batch after it disagree, the one out of place is cut: the later one if the earlier one
        follows its predecessor exactly, else the earlier one (a flipped base offset). A batch
        overflowing the segment's 32-bit relative offsets (an old broker's segment) raises
        ``SegmentOffsetOverflowError`` only once its neighbours agree with it, so a flipped
        base offset is cut, never taken for an overflow to split. In a log that is not compacted,
        the very last v2 batch (no ``next_base_offset``, nothing after it) must follow the batch
        before it exactly, as every append does (a legacy compressed message carries only its last
        offset)."""
        del max_message_bytes
        self.make_writable()
        self.offset_index.reset()
        self.time_index.reset()
        fd = os.open(self.log_path, os.O_RDWR)
        try:
            file_size = os.fstat(fd).st_size
            self._recovered_max = (-1, self.base_offset)
            self._recovered_index_position = 0
            valid, prev_last = self._recovery_scan(fd, file_size, next_base_offset,
                                                   self._accept_recovered)
            max_ts, max_ts_offset = self._recovered_max
            last_index_entry = self._recovered_index_position
            truncated = file_size - valid
            if truncated:
                if keep_cut is not None:
                    keep_cut(valid)
                os.ftruncate(fd, valid)
        finally:
            os.close(fd)
        HANDLES.forget(self.log_path)
        self._size = valid
        self._next_offset = prev_last + 1
        self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = valid - last_index_entry if valid else 0
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def plan_recovery(self, next_base_offset: int | None = None) -> RecoveryPlan:
        """What ``recover`` would keep, read-only: the same checks, no index or file written
        (the loader's dry run). ``SegmentOffsetOverflowError`` as ``recover`` raises it."""
        fd = os.open(self.log_path, os.O_RDONLY)
        try:
            file_size = os.fstat(fd).st_size
            valid, prev_last = self._recovery_scan(fd, file_size, next_base_offset,
                                                   self._check_relative_offset)
        finally:
            os.close(fd)
        return RecoveryPlan(file_size, valid, prev_last + 1)

    def _recovery_scan(self, fd: int, file_size: int, next_base_offset: int | None,
                       accept: Callable[[CheckedBatch, int], None]) -> tuple[int, int]:
        """The batches ``recover`` keeps (see its docstring), each passed to ``accept(batch,
        position)``; returns (bytes kept, last offset kept or base - 1)."""
        valid = 0
        prev_last = self.base_offset - 1
        held: CheckedBatch | None = None     # accepted once the batch after it agrees
        for batch in checked_batches(fd, 0, file_size):
            if held is not None:
                if batch.base_offset > held.last_offset:
                    accept(held, valid)
                elif held.base_offset == prev_last + 1:
                    # the next batch's offsets are out of place, not the held one's (which
                    # follows its predecessor exactly): keep the held batch, cut here
                    accept(held, valid)
                    valid += held.size
                    prev_last = held.last_offset
                    held = None
                    break
                else:
                    held = None              # out of place itself (a flipped base offset)
                    break
                valid += held.size
                prev_last = held.last_offset
            if batch.base_offset <= prev_last or batch.last_offset < batch.base_offset or (
                    next_base_offset is not None and batch.last_offset >= next_base_offset):
                held = None
                break
            held = batch
        if held is not None and next_base_offset is None and held.magic == MAGIC \
                and held.base_offset != prev_last + 1 and not self.config.compact:
            # the log's last batch has no neighbour after it to vouch for its base offset;
            # a log that is not compacted has no gaps (appends follow the batch before), so
            # a gap there can only be a damaged base offset (a compacted log's last segment
            # may be a cleaned one brought back by a truncation: gaps are normal there)
            held = None
        if held is not None:                 # the last batch: nothing after it to disagree
            accept(held, valid)
            valid += held.size
            prev_last = held.last_offset
        return valid, prev_last

    def _check_relative_offset(self, batch: CheckedBatch, position: int) -> None:
        if not self.can_convert_to_relative_offset(batch.last_offset):
            raise SegmentOffsetOverflowError(
                f"{self.log_path}: the batch at position {position} ends at offset "
                f"{batch.last_offset}, beyond the segment's base {self.base_offset} + 2^31 - 1",
                path=str(self.log_path), position=position, offset=batch.last_offset)

    def _accept_recovered(self, batch: CheckedBatch, position: int) -> None:
        """Index one batch that recovery keeps, at ``position`` (the bytes kept before it)."""
        self._check_relative_offset(batch, position)
        max_ts, _ = self._recovered_max
        if batch.max_timestamp > max_ts:
            self._recovered_max = (batch.max_timestamp, batch.last_offset)
        if position - self._recovered_index_position > self.config.index_interval_bytes:
            self.offset_index.append(batch.last_offset, position)
            self.time_index.maybe_append(*self._recovered_max)
            self._recovered_index_position = position

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset``; return the bytes removed."""
        entry = self.translate_offset(offset)
        if entry is None:
            return 0
        removed = self._size - entry.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        fd = self._writer()
        os.ftruncate(fd, entry.position)
        HANDLES.forget(self.log_path)
        self._size = entry.position
        self._next_offset = None
        self._max_timestamp_and_offset = self._load_largest_timestamp()
        self._bytes_since_last_index_entry = 0
        if self._size == 0:
            self._created_ms = self.clock.milliseconds()
            self._rolling_based_timestamp = None
        else:
            self._rolling_based_timestamp = None
        return removed

    def _load_largest_timestamp(self) -> TimestampOffset:
        """The largest timestamp and its offset: the time index's last entry, raised by any batch
        after it (Kafka's loadLargestTimestamp; the index only samples every interval)."""
        largest = self.time_index.last_entry()
        start = self.offset_index.lookup(largest.offset).position
        for batch in self.batches(start):
            if batch.max_timestamp > largest.timestamp:
                largest = TimestampOffset(batch.max_timestamp, batch.last_offset)
        return largest

    def truncate_fully(self) -> int:
        """Remove every batch (an unreadable segment found by recovery); return the bytes removed."""
        removed = self.log_path.stat().st_size
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        os.truncate(self.log_path, 0)
        HANDLES.forget(self.log_path)
        self._size = 0
        self._next_offset = self.base_offset
        self._max_timestamp_and_offset = TimestampOffset(-1, self.base_offset)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self._created_ms = self.clock.milliseconds()
        return removed

    def sanity_check(self) -> None:
        """Kafka's load-time check: the offset index must exist (its content is checked by the
        recovery that follows an unclean shutdown). Raises FileNotFoundError otherwise."""
        if not self.offset_index.exists():
            raise FileNotFoundError(self.offset_index.path)

    def check_indexes(self) -> None:
        """Full sanity check of the offset, time and transaction indexes; raises
        CorruptIndexError."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    # ---- transactions ------------------------------------------------------------------------
    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Record a transaction closed by a marker in this segment: an aborted one gets an entry
        in the ``.txnindex`` (Kafka's updateTxnIndex); a committed one needs none."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                             completed.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def replay_producer_state(self, state: ProducerStateManager, from_offset: int | None = None,
                              *, write_txn_index: bool = False) -> None:
        """Replay this segment's v2 batches (those at or after ``from_offset``) into ``state``,
        closing each transaction whose marker is here. With ``write_txn_index`` each aborted one
        is written to this segment's ``.txnindex`` with the LSO after it (recovery, Kafka's
        ``LogSegment.recover`` with a producer state manager)."""
        position = 0
        if from_offset is not None and from_offset > self.base_offset:
            position = self.offset_index.lookup(from_offset).position
        for batch_position, size, header in self._producer_batch_headers(position):
            if from_offset is not None and header.last_offset < from_offset:
                continue
            completed = state.replay_batch(header, partial(self.read_bytes, batch_position, size))
            if completed is not None:
                if write_txn_index:
                    self.update_txn_index(completed, state.last_stable_offset_after(completed))
                state.complete_txn(completed)
        state.map_end_offset = max(state.map_end_offset, self.read_next_offset())

    def _producer_batch_headers(self, start_position: int
                                ) -> Iterator[tuple[int, int, BatchHeader]]:
        """(position, size, header) of every v2 batch with a producer id from ``start_position``
        on. Small batches are scanned a chunk at a time and only those with a producer parsed, so
        plain batches cost no Python; a large batch is hopped over after reading its header, so
        its bytes are not read again. Stops at an incomplete batch; raises CorruptRecordError
        (file, position) at an impossible one."""
        position, end = start_position, self._size
        while position + HEADER_SIZE <= end:
            head = self.read_bytes(position, HEADER_SIZE)
            size = int.from_bytes(head[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
            if size >= HOP_BATCH_BYTES:
                if position + size > end:
                    return   # incomplete batch at the end of the file
                if head[MAGIC_OFFSET] >= 2:
                    header = BatchHeader.parse(head)
                    if header.producer_id >= 0:
                        yield position, size, header
                position += size
                continue
            data = self.read_bytes(position, min(REPLAY_CHUNK_BYTES, end - position))
            scan = scan_batches(data)
            for i in np.flatnonzero((scan.magics >= 2) & (scan.producer_ids >= 0)).tolist():
                at = int(scan.positions[i])
                yield position + at, int(scan.sizes[i]), BatchHeader.parse(data, at)
            position += scan.valid_bytes
            if scan.error is not None:
                raise CorruptRecordError(
                    f"{self.log_path}: {scan.error} at position {position}",
                    path=str(self.log_path), position=position)
            if len(scan.positions) == 0:
                return   # incomplete batch at the end of the file

    def rebuild_txn_index(self, state: ProducerStateManager) -> None:
        """Rebuild the ``.txnindex`` from the ``.log``; ``state`` must hold the producer state as of
        this segment's base offset and is left at its end."""
        self.txn_index.reset()
        self.replay_producer_state(state, write_txn_index=True)

    # ---- files -------------------------------------------------------------------------------
    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of this segment from one temporary suffix to another (``""`` = none)."""
        self._close_writer()
        HANDLES.forget(self.log_path)
        target = files.log_file(self.dir, self.base_offset, new_suffix)
        os.replace(self.log_path, target)
        self.log_path = target
        self.offset_index.rename_to(files.index_file(self.dir, self.base_offset, new_suffix))
        self.time_index.rename_to(files.time_index_file(self.dir, self.base_offset, new_suffix))
        self.txn_index.rename_to(files.txn_index_file(self.dir, self.base_offset, new_suffix))
        self.suffix = new_suffix
        del old_suffix

    def rename_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory (async delete of a partition)."""
        self._close_writer()
        HANDLES.forget(self.log_path)
        self.release()
        self.dir = directory
        self.log_path = files.log_file(directory, self.base_offset, self.suffix)
        self._open_indexes(writable=False)
        self.txn_index.update_parent_dir(directory)

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def release(self) -> None:
        """Drop open descriptors and maps of an idle closed segment; they reopen on next use."""
        HANDLES.forget(self.log_path)
        self.offset_index.release()
        self.time_index.release()

    def _close_writer(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        if self._write_fd is not None:
            max_ts = self._max_ts()
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
            if self.config.preallocate and os.fstat(self._write_fd).st_size != self._size:
                os.ftruncate(self._write_fd, self._size)
        self._close_writer()
        HANDLES.forget(self.log_path)
        self.offset_index.close()
        self.time_index.close()

    @property
    def is_open_for_writes(self) -> bool:
        return self._write_fd is not None

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self._size})"


def identity_or_none(segment: LogSegment) -> SegmentIdentity | None:
    """The segment's identity, or None when its file cannot be read (swapped or deleted)."""
    try:
        return segment.identity
    except OSError:
        return None


class _IndexEntryMismatch(Exception):
    """An offset-index entry that does not match the batch at its position (never escapes
    ``LogSegment.batches``, which then walks the segment from its start)."""


class SegmentError(StorageError):
    """A segment that cannot be opened or created (an existing file in the way, a bad name)."""
