"""One log segment: a ``.log`` file of record batches with a lazy ``.index`` and ``.timeindex``
(Kafka's LogSegment).

A segment covers offsets from ``base_offset`` up to the next segment's base offset. Its offset index
maps (offset -> file position) every ``index.interval.bytes``; its time index maps (max timestamp so
far -> offset) at the same points. Both are hints rebuilt by ``recover``; the ``.log`` is the truth.

File handles: only the active segment keeps its ``.log`` open for appending, for its appends only.
Every read opens the file through ``HANDLES``, a bounded process-wide cache of read-only
descriptors, and its indexes only when a lookup needs them; ``release()`` drops them again. Tens of
thousands of segments therefore stay far under the open-file limit.

Not thread-safe for writers: a segment is owned by one ``Log``, which serialises them. Reads may run
concurrently with each other and with the owner's appends, rolls, renames, closes and deletes: a
read (``read``, ``translate_offset``, ``find_offset_by_timestamp``, or any walk inside ``reading()``)
holds the segment's descriptor, which nothing closes under it (``segment_io.HandleCache``), so the
segment stays readable while a reader holds it, even once deleted. A truncation waits for the reads
in flight and counts itself in ``cuts``, so a reader that took the segment before it can tell.

``LogSegment`` owns the segment's state (size, next offset, largest timestamp, roll time), its
append and its writer; it delegates to ``segment_read`` (the verified batch walk, reads by offset
and timestamp), ``segment_recovery`` (what recovery keeps of a ``.log``), ``segment_truncation``
(cutting the file and resetting the state: recovery, truncation), ``segment_indexes`` (the index
pair's lifecycle), ``segment_roll`` (``RollParams`` and the roll decision), ``segment_txns``
(producer-state replay, ``.txnindex`` rebuild), ``segment_files`` (creating, renaming and deleting
its files) and ``segment_io`` (the descriptor cache ``HANDLES``, the positional write, fsync).
"""

from __future__ import annotations

import itertools
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from storage import files, segment_files, segment_indexes, segment_read, segment_truncation
from storage import segment_txns
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import InvalidOffsetError, StorageError
from storage.index import OffsetPosition, TimestampOffset
from storage.records import INT32_MAX
from storage.segment_io import HANDLES, HandleCache, fsync_file, truncate_to_size, write_fully
from storage.segment_files import create_log_file, remove_segment_files
from storage.segment_indexes import last_indexed_position
from storage.segment_read import SCAN_CHUNK_BYTES, BatchEntry, walk_batches
from storage.segment_roll import RollParams, should_roll
from storage.segment_recovery import (
    RECOVERY_CHUNK_BYTES,
    CheckedBatch,
    RecoveryPlan,
    checked_batches,
    plan_recovery,
)
from storage.txn_index import TransactionIndex, TxnIndexSearchResult

if TYPE_CHECKING:
    from storage.producer_state import CompletedTxn, ProducerStateManager

__all__ = [   # the segment's names, some defined in the modules it delegates to
    "HANDLES", "INT32_MAX", "RECOVERY_CHUNK_BYTES", "SCAN_CHUNK_BYTES", "BatchEntry",
    "CheckedBatch", "HandleCache", "LogSegment", "RecoveryPlan", "RollParams", "SegmentError",
    "SegmentIdentity", "checked_batches", "identity_or_none",
]

log = logging.getLogger(__name__)
_FILE_KEYS = itertools.count()   # one key per segment object for its cached read descriptor


class SegmentIdentity(NamedTuple):
    """What a cleaner saw of a segment it read, for the owner to check at the swap: the base
    offset, the byte size and the ``.log`` file's mtime in nanoseconds. The owner also keeps the
    identities of segments it truncated, so a segment truncated and regrown to the same size and
    mtime still does not match."""

    base_offset: int
    size: int
    mtime_ns: int


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
        self.file_key = next(_FILE_KEYS)
        try:
            stat = os.stat(self.log_path)
            self._size, self._inode = stat.st_size, stat.st_ino
        except FileNotFoundError:
            self._size, self._inode = 0, None
        self._cuts = 0   # truncations so far: a reader compares it before and after a read
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
        create_log_file(directory, base_offset, config, suffix)
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
        remove_segment_files(directory, base_offset, files.CLEANED_SUFFIX)
        return cls.create(directory, base_offset, config, suffix=files.CLEANED_SUFFIX,
                          clock=clock)

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
        self._size = segment_read.written_size(self)
        return self._size

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
            next_offset = self.base_offset
            for entry in self.batches(last_indexed_position(self)):
                next_offset = entry.last_offset + 1
            self._next_offset = next_offset
        return self._next_offset

    # ---- append ------------------------------------------------------------------------------
    def should_roll(self, params: RollParams) -> bool:
        """Kafka's shouldRoll: size, time (with jitter), full index, or relative offset overflow."""
        if not self._indexes_sized:
            self.size_indexes_for_appends()
        return should_roll(self, params)

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
        write_fully(self._writer(), pieces, position, size)
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
        fsync_file(self.log_path)
        segment_indexes.flush_indexes(self)

    def on_become_inactive(self) -> None:
        """At roll: final time-index entry, trim indexes and a preallocated file, stop writing."""
        segment_indexes.append_final_time_entry(self)
        segment_indexes.trim_indexes(self)
        if self.config.preallocate or self._write_fd is not None:
            truncate_to_size(self._writer(), self._size)
        self.make_read_only()

    def _open_indexes(self, writable: bool) -> None:
        """(Re)create the lazy index objects for the current directory and suffix."""
        segment_indexes.open_indexes(self, writable)

    def make_read_only(self) -> None:
        """Close the writer and reopen the indexes read-only (lazily)."""
        self._close_writer()
        segment_indexes.reopen_indexes(self, writable=False)

    def make_writable(self) -> None:
        """Reopen the indexes writable (the active segment after load)."""
        segment_indexes.reopen_indexes(self, writable=True)
        self._indexes_sized = False   # grown to the maximum at the first append, not at load

    def size_indexes_for_appends(self) -> None:
        if not self._indexes_sized:
            segment_indexes.size_for_appends(self)
            self._indexes_sized = True

    # ---- read --------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the file), read through the
        segment's cached read descriptor (``FileNotFoundError`` when the file is gone and no
        reader holds it)."""
        if size <= 0:
            return b""
        with HANDLES.borrow(self.file_key, self.log_path, self._inode) as fd:
            return os.pread(fd, size, position)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the segment's read descriptor for the body: every read inside reads the same
        file, even if the segment is renamed, deleted or swapped out meanwhile."""
        with HANDLES.borrow(self.file_key, self.log_path, self._inode):
            yield

    @property
    def cuts(self) -> int:
        """How many times the segment was truncated (recovered, cut, emptied) since it opened."""
        return self._cuts

    def batches(self, start_position: int = 0, end_position: int | None = None,
                chunk_bytes: int = SCAN_CHUNK_BYTES, *, verify: bool = False,
                next_base_offset: int | None = None, target_offset: int | None = None,
                torn_tail_ok: bool = False,
                index_entry_offset: int | None = None) -> Iterator[BatchEntry]:
        """Walk the batch headers from ``start_position``; stops at the first incomplete batch.
        With ``verify`` (every read path) each batch's CRC and offsets are checked before it is
        yielded; see ``segment_walk.walk_batches`` for the checks, the ``CorruptRecordError``
        raised and the meaning of ``target_offset``, ``torn_tail_ok`` and
        ``index_entry_offset``."""
        return walk_batches(self, start_position, end_position, chunk_bytes, verify=verify,
                            next_base_offset=next_base_offset, target_offset=target_offset,
                            torn_tail_ok=torn_tail_ok, index_entry_offset=index_entry_offset)

    def walk_start(self, offset: int) -> OffsetPosition:
        """Where a verified walk for ``offset`` starts (``segment_read.walk_start``)."""
        return segment_read.walk_start(self, offset)

    def translate_offset(self, offset: int, start_position: int = 0, *,
                         next_base_offset: int | None = None) -> BatchEntry | None:
        """The first batch whose last offset is >= ``offset``, every batch walked verified
        (``segment_read.translate_offset``)."""
        with self.reading():
            return segment_read.translate_offset(self, offset, start_position,
                                                 next_base_offset=next_base_offset)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True, *,
             next_base_offset: int | None = None) -> tuple[int, bytes] | None:
        """Whole verified batches from the one holding ``start_offset``, at most ``max_size``
        bytes: (file position, bytes) or None past the end (``segment_read.read``)."""
        with self.reading():
            return segment_read.read(self, start_offset, max_size, max_position,
                                     min_one_message, next_base_offset=next_base_offset)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` at or after
        ``start_offset``, or None (``segment_read.find_offset_by_timestamp``)."""
        with self.reading():
            return segment_read.find_offset_by_timestamp(self, timestamp, start_offset)

    # ---- recovery and truncation -------------------------------------------------------------
    def recover(self, max_message_bytes: int | None = None, *,
                keep_cut: Callable[[int], None] | None = None,
                next_base_offset: int | None = None) -> int:
        """Rebuild both indexes from the ``.log``, checking every batch's structure, CRC and
        offsets, and truncate at the first invalid byte. Returns the number of bytes truncated.
        ``keep_cut(position)``, if given, is called before truncating at ``position``, while the
        bytes are still in the file (the loader copies them to quarantine). What is kept, and why
        ``max_message_bytes`` is ignored (accepted for old callers): ``storage.segment_recovery``.
        ``SegmentOffsetOverflowError`` for a batch beyond the segment's 32-bit relative offsets
        (the loader then splits the segment)."""
        del max_message_bytes
        return segment_truncation.recover(self, keep_cut, next_base_offset)

    def plan_recovery(self, next_base_offset: int | None = None) -> RecoveryPlan:
        """What ``recover`` would keep, read-only: the same checks, no index or file written
        (the loader's dry run). ``SegmentOffsetOverflowError`` as ``recover`` raises it."""
        return plan_recovery(self, next_base_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset``; return the bytes removed."""
        return segment_truncation.truncate_to(self, offset)

    def truncate_fully(self) -> int:
        """Remove every batch (an unreadable segment found by recovery); return the bytes removed."""
        return segment_truncation.truncate_fully(self)

    def sanity_check(self) -> None:
        """Kafka's load-time check: the offset index must exist (its content is checked by the
        recovery that follows an unclean shutdown). Raises FileNotFoundError otherwise."""
        segment_indexes.require_offset_index(self)

    def check_indexes(self) -> None:
        """Full sanity check of the offset, time and transaction indexes; raises
        CorruptIndexError."""
        segment_indexes.check_indexes(self)

    # ---- transactions ------------------------------------------------------------------------
    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Record a transaction closed by a marker in this segment: an aborted one gets an entry
        in the ``.txnindex`` (Kafka's updateTxnIndex); a committed one needs none."""
        segment_txns.update_txn_index(self, completed, last_stable_offset)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def replay_producer_state(self, state: ProducerStateManager, from_offset: int | None = None,
                              *, write_txn_index: bool = False) -> None:
        """Replay this segment's v2 batches (those at or after ``from_offset``) into ``state``,
        closing each transaction whose marker is here. With ``write_txn_index`` each aborted one
        is written to this segment's ``.txnindex`` with the LSO after it (recovery, Kafka's
        ``LogSegment.recover`` with a producer state manager)."""
        segment_txns.replay_producer_state(self, state, from_offset,
                                           write_txn_index=write_txn_index)

    def rebuild_txn_index(self, state: ProducerStateManager) -> None:
        """Rebuild the ``.txnindex`` from the ``.log``; ``state`` must hold the producer state as of
        this segment's base offset and is left at its end."""
        segment_txns.rebuild_txn_index(self, state)

    # ---- files -------------------------------------------------------------------------------
    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of this segment from one temporary suffix to another (``""`` = none)."""
        del old_suffix
        segment_files.change_file_suffixes(self, new_suffix)

    def rename_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory (async delete of a partition)."""
        segment_files.follow_dir(self, directory)

    def delete_files(self) -> None:
        """Close the segment and remove its files (``segment_files.delete_files``)."""
        segment_files.delete_files(self)

    def release(self) -> None:
        """Drop open descriptors and maps of an idle closed segment; they reopen on next use
        (a reader in the middle of a read keeps what it holds)."""
        HANDLES.forget(self.file_key)
        segment_indexes.release_indexes(self)

    def _close_writer(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        """Close the writer and the indexes (``segment_files.close``); reads reopen them."""
        segment_files.close(self)

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


class SegmentError(StorageError):
    """A segment that cannot be opened or created (an existing file in the way, a bad name)."""
