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

``LogSegment`` owns what it knows of its batches (next offset, largest timestamp, roll time, bytes
since the last index entry), its append, its roll decision, its recovery and truncation, and its
files' names. Its parts own theirs: ``FileRecords`` the ``.log`` (size, writer, reads, cuts),
``SegmentIndexes`` the offset and time index, ``TransactionIndex`` the ``.txnindex``. Reads of
batches are ``segment_read`` (the verified walk, reads by offset and timestamp), what recovery
keeps of a ``.log`` is ``segment_recovery``, the producer-state replay ``segment_txns``, and
``RollParams`` ``segment_roll``: each takes the segment through the narrow interface it needs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterator, NamedTuple

from storage import files, segment_read, segment_txns
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import CorruptIndexError, InvalidOffsetError, StorageError
from storage.file_records import FileRecords
from storage.index_checks import check_index_files
from storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from storage.records import INT32_MAX, BatchHeader
from storage.segment_files import remove_segment_files, segment_paths
from storage.segment_indexes import SegmentIndexes
from storage.segment_io import HANDLES, HandleCache
from storage.segment_read import SCAN_CHUNK_BYTES, BatchEntry, walk_batches
from storage.segment_roll import RollParams
from storage.segment_recovery import (
    RECOVERY_CHUNK_BYTES,
    CheckedBatch,
    RecoveryIndexer,
    RecoveryPlan,
    checked_batches,
    plan_recovery,
    scan_file,
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
# hands out each segment's lock of its deferred index check (_checked_indexes), made at the first
# use that needs one: a clean open of thousands of segments makes none
_INDEX_CHECK_LOCKS = threading.Lock()


class SegmentIdentity(NamedTuple):
    """What a cleaner saw of a segment it read, for the owner to check at the swap: the base
    offset, the byte size and the ``.log`` file's mtime in nanoseconds. The owner also keeps the
    identities of segments it truncated, so a segment truncated and regrown to the same size and
    mtime still does not match."""

    base_offset: int
    size: int
    mtime_ns: int


class LogSegment:
    """One segment's files. See the module docstring for ownership and handle rules.

    ``empty``: the segment was just created, so its size is 0 whatever its file's length (a
    preallocated ``.log``) and its offsets and timestamps are known without a read.
    ``write_behind``: the ``.log`` is written whole, then fsynced once (a cleaned segment), so its
    appends start their disk writes as they go (``FileRecords``)."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *,
                 suffix: str = "", created_ms: int | None = None, rolling_jitter_ms: int = 0,
                 writable: bool = False, clock: Clock = SYSTEM_CLOCK,
                 empty: bool = False, write_behind: bool = False) -> None:
        self._dir = directory
        self.base_offset = base_offset
        self._config = config
        self._suffix = suffix
        self.clock = clock
        self.rolling_jitter_ms = rolling_jitter_ms
        path = files.log_file(directory, base_offset, suffix)
        self._log = FileRecords(path, size=0 if empty else None, write_behind=write_behind)
        self._indexes = SegmentIndexes(directory, base_offset, suffix,
                                       config.segment_index_bytes, writable=writable)
        self._txn_index: TransactionIndex | None = None   # made at its first use
        self._created_ms = created_ms if created_ms is not None else clock.milliseconds()
        self._bytes_since_last_index_entry = 0
        # loaded lazily from the time index, but known at once for a new segment
        self._max_timestamp_and_offset: TimestampOffset | None = (
            TimestampOffset(-1, base_offset) if empty else None)
        self._rolling_based_timestamp: int | None = None
        self._next_offset: int | None = base_offset if empty else None
        self._indexes_sized = True
        # the next segment's base offset while the check of the indexes waits for their first use
        self._index_check_end: int | None = None
        self._index_check_lock: threading.RLock | None = None
        self._indexes_rebuilt_at_first_use = False
        # the producer batches the last recovery kept, while the file is as it left it
        self._recovered_producer_batches: _RecoveredProducerBatches | None = None

    # ---- creation ----------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, *, suffix: str = "",
               clock: Clock = SYSTEM_CLOCK, rolling_jitter_ms: int = 0,
               write_behind: bool = False) -> LogSegment:
        """A new empty writable segment; an existing ``.log`` of that name is an error. With
        ``preallocate`` (and no suffix) its ``.log`` is ``segment.bytes`` long at once; with
        ``write_behind`` its appends start their disk writes as they go."""
        FileRecords.create_file(files.log_file(directory, base_offset, suffix),
                                preallocate_bytes=config.segment_bytes
                                if config.preallocate and not suffix else 0)
        return cls(directory, base_offset, config, suffix=suffix, writable=True, clock=clock,
                   rolling_jitter_ms=rolling_jitter_ms, empty=True, write_behind=write_behind)

    @classmethod
    def create_cleaned(cls, directory: Path, base_offset: int, config: LogConfig, *,
                       clock: Clock = SYSTEM_CLOCK) -> LogSegment:
        """A fresh ``<base>.log.cleaned`` segment; stale cleaner output of that name is removed.
        It is written whole and fsynced once before its swap, so its appends start their disk
        writes as they go (``write_behind``): that fsync waits for the tail only."""
        remove_segment_files(directory, base_offset, files.CLEANED_SUFFIX)
        return cls.create(directory, base_offset, config, suffix=files.CLEANED_SUFFIX,
                          clock=clock, write_behind=True)

    # ---- parts -------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def suffix(self) -> str:
        """The files' temporary suffix (``.cleaned``, ``.swap``, ``.deleted``), or ``""``."""
        return self._suffix

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_path(self) -> Path:
        return self._log.path

    @property
    def writeback_started(self) -> int:
        """Bytes from the start of the ``.log`` whose disk writes its appends have started (a
        ``write_behind`` segment's, every ``WRITE_BEHIND_BYTES``; 0 for any other)."""
        return self._log.writeback_started

    @property
    def file_key(self) -> int:
        """The key of the ``.log``'s cached read descriptor in ``HANDLES``."""
        return self._log.file_key

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, checked against the ``.log`` first if its check is deferred."""
        return self._checked_indexes().offset_index

    @property
    def time_index(self) -> TimeIndex:
        """The time index, checked against the ``.log`` first if its check is deferred."""
        return self._checked_indexes().time_index

    @property
    def txn_index(self) -> TransactionIndex:
        txn_index = self._txn_index
        if txn_index is None:
            txn_index = self._txn_index = TransactionIndex(
                files.txn_index_file(self._dir, self.base_offset, self._suffix), self.base_offset)
        return txn_index

    def update_config(self, config: LogConfig) -> None:
        """Take ``config`` for the roll decision (``segment.bytes``, ``segment.ms``) and what
        follows from it, keeping what the files were made with (``preallocate``,
        ``segment.index.bytes``, ``index.interval.bytes``), as a Kafka segment keeps its own
        index settings."""
        made = self._config
        self._config = replace(config, preallocate=made.preallocate,
                               segment_index_bytes=made.segment_index_bytes,
                               index_interval_bytes=made.index_interval_bytes)

    # ---- sizes and offsets -------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` (excluding preallocated space)."""
        return self._log.size

    @property
    def identity(self) -> SegmentIdentity:
        """Base offset, size and the ``.log`` file's mtime (one ``stat``)."""
        return SegmentIdentity(self.base_offset, self._log.size, self._log.mtime_ns())

    def size_to_written_batches(self) -> int:
        """Take ``size`` as the end of the last whole batch instead of the file's length, for a
        read-only view of an active segment that its owner preallocated (``preallocate=true``:
        ``segment.bytes`` long, zeros after the batches). Walks the batch headers from the last
        offset index entry; stops at the first bytes that are no batch. Returns the new size."""
        self._log.size_to(segment_read.written_size(self,
                                                    self._checked_indexes()
                                                    .last_indexed_position()))
        return self._log.size

    @property
    def last_modified_ms(self) -> int:
        return self._log.mtime_ns() // 1_000_000

    def set_last_modified_ms(self, ms: int) -> None:
        self._log.set_last_modified_ms(ms)

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
            for entry in self.batches(self._checked_indexes().last_indexed_position()):
                next_offset = entry.last_offset + 1
            self._next_offset = next_offset
        return self._next_offset

    # ---- append ------------------------------------------------------------------------------
    def should_roll(self, params: RollParams) -> bool:
        """Kafka's shouldRoll: the append would take the segment past ``segment.bytes``; it has
        waited ``segment.ms`` (less its jitter) since its first batch's timestamp, or since its
        creation when it has none; either index is full; or the append's last offset does not
        fit the segment's 32-bit relative offsets."""
        if not self._indexes_sized:
            self.size_indexes_for_appends()
        size, config = self._log.size, self._config
        return (
            size > config.segment_bytes - params.bytes_in_append
            or (size > 0
                and self._time_waited_for_roll(params.now_ms, params.max_timestamp_in_append)
                > config.max_segment_ms - self.rolling_jitter_ms)
            or self._checked_indexes().is_full()
            or not 0 <= params.max_offset_in_append - self.base_offset <= INT32_MAX
        )

    def _time_waited_for_roll(self, now_ms: int, max_timestamp_in_append: int) -> int:
        """How long the segment has waited: from its first batch's timestamp to the append's
        largest, or from its creation to ``now_ms`` when it has no timestamp (Kafka's
        timeWaitedForRoll)."""
        if self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = self.first_batch_timestamp() if self.size else -1
        if self._rolling_based_timestamp >= 0:
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
        position = self._log.size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        max_ts = self._max_ts()
        if largest_timestamp > max_ts.timestamp:
            self._max_timestamp_and_offset = max_ts = TimestampOffset(largest_timestamp,
                                                                      offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self._config.index_interval_bytes:
            self._checked_indexes().append(largest_offset, position, max_ts)
            self._bytes_since_last_index_entry = 0
        self._log.append(pieces, size)
        self._bytes_since_last_index_entry += size
        self._next_offset = largest_offset + 1

    def flush(self) -> None:
        """fsync the ``.log`` and flush the indexes.

        Safe to call from a thread other than the writer's (the log flushes outside its lock): the
        fsync goes through a descriptor of its own, so a concurrent roll closing the writer cannot
        make it fail, and an index closed meanwhile was trimmed and written by its closer."""
        self._log.flush()
        self._indexes.flush()
        self.txn_index.flush()

    def on_become_inactive(self) -> None:
        """At roll: final time-index entry, trim indexes and a preallocated file, stop writing."""
        self._checked_indexes().append_final_time_entry(self._max_ts())
        self._indexes.trim()
        self._log.trim(preallocated=self._config.preallocate)
        self.make_read_only()

    def make_read_only(self) -> None:
        """Close the writer and reopen the indexes read-only (lazily)."""
        self._log.close_writer()
        self._indexes.reopen(writable=False)

    def make_writable(self) -> None:
        """Reopen the indexes writable (the active segment after load)."""
        self._indexes.reopen(writable=True)
        self._indexes_sized = False   # grown to the maximum at the first append, not at load

    def size_indexes_for_appends(self) -> None:
        if not self._indexes_sized:
            self._checked_indexes().size_for_appends()
            self._indexes_sized = True

    # ---- read --------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the file), read through the
        segment's cached read descriptor (``FileNotFoundError`` when the file is gone and no
        reader holds it)."""
        return self._log.read_bytes(position, size)

    def reading(self) -> ContextManager[None]:
        """Hold the segment's read descriptor for the body: every read inside reads the same
        file, even if the segment is renamed, deleted or swapped out meanwhile."""
        return self._log.reading()

    @property
    def cuts(self) -> int:
        """How many times the segment was truncated (recovered, cut, emptied) since it opened."""
        return self._log.cuts

    def batches(self, start_position: int = 0, end_position: int | None = None,
                chunk_bytes: int = SCAN_CHUNK_BYTES, *, verify: bool = False,
                next_base_offset: int | None = None, target_offset: int | None = None,
                torn_tail_ok: bool = False,
                index_entry_offset: int | None = None) -> Iterator[BatchEntry]:
        """Walk the batch headers from ``start_position``; stops at the first incomplete batch.
        With ``verify`` (every read path) each batch's CRC and offsets are checked before it is
        yielded; see ``segment_read.walk_batches`` for the checks, the ``CorruptRecordError``
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
        self.make_writable()
        self._index_check_end = None     # rebuilt here: nothing left to check
        self._indexes.reset()
        indexer = RecoveryIndexer(self._indexes, self.log_path, self.base_offset,
                                  self._config.index_interval_bytes)
        plan = scan_file(self.log_path, self.base_offset, next_base_offset, indexer,
                         producer_headers=True)
        valid = plan.valid_bytes
        if plan.file_size > valid and keep_cut is not None:
            keep_cut(valid)
        truncated = self._log.truncate_to(valid, through_writer=False)
        self._recovered_producer_batches = _RecoveredProducerBatches(
            self._log.cuts, valid, tuple(indexer.producer_batches))
        max_ts, max_ts_offset = indexer.max_timestamp, indexer.offset_of_max_timestamp
        self._next_offset = plan.next_offset
        self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = valid - indexer.last_index_position if valid else 0
        self.offset_index.trim_to_valid_size()
        self._indexes.append_final_time_entry(self._max_timestamp_and_offset)
        self.time_index.trim_to_valid_size()
        return truncated

    def plan_recovery(self, next_base_offset: int | None = None) -> RecoveryPlan:
        """What ``recover`` would keep, read-only: the same checks, no index or file written
        (the loader's dry run). ``SegmentOffsetOverflowError`` as ``recover`` raises it."""
        return plan_recovery(self.log_path, self.base_offset, next_base_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset``; return the bytes removed."""
        entry = self.translate_offset(offset)
        if entry is None:
            return 0
        self._checked_indexes().truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self._log.truncate_to(entry.position)
        self._next_offset = None
        self._max_timestamp_and_offset = self._load_largest_timestamp()
        self._bytes_since_last_index_entry = 0
        if self._log.size == 0:
            self._created_ms = self.clock.milliseconds()
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
        self._index_check_end = None
        self._indexes.reset()
        self.txn_index.reset()
        removed = self._log.truncate_to(0, through_writer=False)
        self._next_offset = self.base_offset
        self._max_timestamp_and_offset = TimestampOffset(-1, self.base_offset)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self._created_ms = self.clock.milliseconds()
        return removed

    def sanity_check(self) -> None:
        """Kafka's load-time check: the offset index must exist (its content is checked by the
        recovery that follows an unclean shutdown). Raises FileNotFoundError otherwise."""
        self._indexes.require_offset_index()

    def check_indexes_at_first_use(self, next_base_offset: int) -> None:
        """Defer the check of this closed segment's offset and time index against its ``.log``
        (``storage.index_checks``; ``next_base_offset`` bounds its offsets) to the first use of
        either index, as Kafka's ``LazyIndex`` defers loading an index: a clean open then reads
        no index of its closed segments. Indexes that fail the check are rebuilt from the
        ``.log`` before they answer (``indexes_rebuilt_at_first_use``), never served."""
        self._index_check_end = next_base_offset

    @property
    def indexes_rebuilt_at_first_use(self) -> bool:
        """Whether the deferred check found the indexes doubtful and rebuilt them."""
        return self._indexes_rebuilt_at_first_use

    def _checked_indexes(self) -> SegmentIndexes:
        """The index pair, after its deferred check (``check_indexes_at_first_use``) if one is
        pending. The check, and a rebuild, run once, under this segment's lock, so no reader
        sees the indexes half checked or half rebuilt, and a rebuild (a scan of the whole
        ``.log``) holds up the readers of this segment only."""
        if self._index_check_end is not None:
            with self._index_check_guard():
                end = self._index_check_end
                if end is not None:
                    try:
                        check_index_files(self.log_path, self._log.size, self.base_offset,
                                          self._indexes.offset_index,
                                          self._indexes.time_index, end, release=False)
                    except CorruptIndexError as err:
                        log.warning("%s; rebuilding the indexes of %s from it", err,
                                    self.log_path)
                        self._rebuild_indexes(end)
                    self._index_check_end = None
        return self._indexes

    def _index_check_guard(self) -> threading.RLock:
        lock = self._index_check_lock
        if lock is None:
            with _INDEX_CHECK_LOCKS:
                if self._index_check_lock is None:
                    self._index_check_lock = threading.RLock()
                lock = self._index_check_lock
        return lock

    def _rebuild_indexes(self, next_base_offset: int) -> None:
        """Rebuild both indexes of this closed segment from its ``.log`` (every batch checked as
        recovery checks it, ``segment_recovery``), without cutting the ``.log``: only a load
        truncates a segment. Batches after the first invalid one are not indexed; the verified
        reads report them (``CorruptRecordError``), as they would with any index."""
        writable = self._indexes.offset_index.writable
        self._indexes.reopen(writable=True)
        self._indexes.reset()
        indexer = RecoveryIndexer(self._indexes, self.log_path, self.base_offset,
                                  self._config.index_interval_bytes)
        plan = scan_file(self.log_path, self.base_offset, next_base_offset, indexer)
        if plan.valid_bytes < self._log.size:
            log.warning("%s: no valid batch at position %d; its batches from there are not "
                        "indexed", self.log_path, plan.valid_bytes)
        self._indexes.append_final_time_entry(
            TimestampOffset(indexer.max_timestamp, indexer.offset_of_max_timestamp))
        self._indexes.trim()
        self._indexes.flush()
        self._indexes.reopen(writable=writable)
        self._indexes_sized = not writable   # a writable pair grows again at its next append
        self._max_timestamp_and_offset = None
        self._next_offset = None
        self._indexes_rebuilt_at_first_use = True

    def check_indexes(self) -> None:
        """Full sanity check of the offset, time and transaction indexes; raises
        CorruptIndexError."""
        self._checked_indexes().sanity_check()
        self.txn_index.sanity_check()

    # ---- transactions ------------------------------------------------------------------------
    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Record a transaction closed by a marker in this segment: an aborted one gets an entry
        in the ``.txnindex`` (Kafka's updateTxnIndex); a committed one needs none."""
        segment_txns.update_txn_index(self.txn_index, completed, last_stable_offset)

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
        this segment's base offset and is left at its end. Right after ``recover`` (the file
        neither cut nor grown since) the producer batches it checked are replayed without a
        second read of the ``.log``; a marker's batch is still read, for its control record."""
        kept, self._recovered_producer_batches = self._recovered_producer_batches, None
        batches = None
        if kept is not None and kept.cuts == self._log.cuts and kept.size == self._log.size:
            batches = kept.batches
        segment_txns.rebuild_txn_index(self, state, batches)

    # ---- files -------------------------------------------------------------------------------
    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of this segment from one temporary suffix to another (``""`` = none)
        (Kafka's ``changeFileSuffixes``)."""
        del old_suffix
        log_path, _index, _time_index, txn_index = segment_paths(self._dir, self.base_offset,
                                                                 new_suffix)
        self._log.rename_to(log_path)
        self._indexes.rename_suffix(new_suffix)
        self.txn_index.rename_to(txn_index)
        self._suffix = new_suffix

    def rename_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory (async delete of a partition; Kafka's
        ``updateParentDir``)."""
        self._log.follow(files.log_file(directory, self.base_offset, self._suffix))
        self._indexes.follow_dir(directory)
        if self._txn_index is not None:     # (else it is made in the new directory)
            self._txn_index.update_parent_dir(directory)
        self._dir = directory

    def delete_files(self) -> None:
        """Release the segment's descriptors and maps, then remove its files (those missing are
        skipped; Kafka's ``deleteIfExists``). Nothing is written to files about to go (no final
        time-index entry, no trim), so a full disk cannot stop the deletion nor leave a
        descriptor open; every file is tried, and the first error is raised after the others
        were removed."""
        self._log.close()
        self._indexes.release()
        failure: OSError | None = None
        indexes = self._indexes
        for path in (self.log_path, indexes.offset_index.path, indexes.time_index.path,
                     self.txn_index.path):
            try:
                path.unlink(missing_ok=True)
            except OSError as err:
                failure = failure or err
        if failure is not None:
            raise failure

    def release(self) -> None:
        """Drop open descriptors and maps of an idle closed segment; they reopen on next use
        (a reader in the middle of a read keeps what it holds)."""
        self._log.release()
        self._indexes.release()

    def close(self) -> None:
        """Kafka's ``LogSegment.close``: a segment still writing gets its final time-index entry
        and, when preallocated, its ``.log`` cut to its batches; then the writer, the cached read
        descriptor and the index pair are closed. Reads reopen them."""
        if self._log.is_open_for_writes:
            self._checked_indexes().append_final_time_entry(self._max_ts())
            if self._config.preallocate:
                self._log.trim(preallocated=True)
        self._log.close()
        self._indexes.close()

    @property
    def is_open_for_writes(self) -> bool:
        return self._log.is_open_for_writes

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"


class _RecoveredProducerBatches(NamedTuple):
    """The (position, size, header) of the producer batches a recovery kept, valid while the
    ``.log`` has the ``size`` and the count of ``cuts`` the recovery left it with."""

    cuts: int
    size: int
    batches: tuple[tuple[int, int, BatchHeader], ...]


def identity_or_none(segment: LogSegment) -> SegmentIdentity | None:
    """The segment's identity, or None when its file cannot be read (swapped or deleted)."""
    try:
        return segment.identity
    except OSError:
        return None


class SegmentError(StorageError):
    """A segment that cannot be opened or created (an existing file in the way, a bad name)."""
