"""The partition log (Kafka's UnifiedLog + LocalLog): an ordered set of segments with one active
segment at the end.

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The ``recovery_point`` is
the offset below which everything is flushed; after an unclean shutdown only data from there on is
re-validated. Appends stamp offsets into producer-encoded batches without re-encoding them (the base
offset is outside the CRC).

Thread-safety: one lock serialises appends, rolls, flushes' bookkeeping, truncation, retention and
segment swaps. Reads take a snapshot of the segment list and read without the lock; a read that races
a swap retries on the new segments, so it never sees a half-swapped log.

``Log`` owns the offsets, the lock and the lifecycle; it delegates to: ``log_segments`` (the
segments by base offset, Kafka's LogSegments), ``log_append`` (validation, offset assignment and
the write), ``log_roll`` (rolling and flushing), ``log_read`` (fetches and the record iterator),
``log_retention`` (which old segments go, the log start offset), ``log_truncation``, ``log_swap``
(cleaned segments in, crash-safely), ``log_files`` (closing, deleting segment files, renaming and
deleting the directory) and ``log_producers`` (the producer state after a load or a cut).
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Callable, Iterator, Sequence

from storage import files, log_roll
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import StorageError
from storage.loader import LoadResult, LogLoader
from storage.log_append import LogAppendInfo, append_batch
from storage.log_files import close_log, delete_log, delete_segment_files, rename_partition_dir
from storage.log_producers import rebuild_producer_state
from storage.log_read import (
    DEFAULT_FETCH_BYTES,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchData,
    fetch_offset_by_timestamp,
    read_raw,
    read_records,
)
from storage.log_retention import delete_old_segments, maybe_increment_log_start_offset
from storage.log_segments import INDEXED_SEGMENTS_KEPT, LogSegments
from storage.log_swap import replace_cleaned, replace_segments
from storage.log_truncation import truncate_fully_and_start_at, truncate_to
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ProducerEntry,
    ProducerStateManager,
)
from storage.records import Compression, ControlType, Record, build_batch, build_end_txn_marker
from storage.scheduler import Scheduler, default_scheduler
from storage.segment import LogSegment, RollParams, SegmentIdentity
from storage.txn_index import AbortedTxn, collect_aborted_transactions

__all__ = [   # the log's names, some defined in the modules it delegates to
    "DEFAULT_FETCH_BYTES", "EARLIEST_TIMESTAMP", "INDEXED_SEGMENTS_KEPT", "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP", "READ_COMMITTED", "READ_UNCOMMITTED",
    "FetchData", "Log", "LogAppendInfo",
]

TRUNCATED_IDENTITIES_KEPT = 1024   # truncations are rare: this covers any clean in flight


class Log:
    """One partition's log. Open with ``Log.open``; see the module docstring for the contract."""

    def __init__(self, directory: Path, config: LogConfig, load: LoadResult, *, clock: Clock,
                 scheduler: Scheduler | None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self._scheduler = scheduler
        self.topic_partition = files.topic_partition_of(directory)
        self._lock = threading.RLock()
        self._segments = LogSegments(load.segments)
        self._log_end_offset = load.log_end_offset
        self._recovery_point = load.recovery_point
        self._log_start_offset = 0
        self._update_log_start_offset(load.log_start_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.milliseconds()
        # what segments looked like before a truncation changed or removed them: a swap of
        # segments cleaned from one of these is refused (``replace_segments``)
        self._truncated: deque[SegmentIdentity] = deque(maxlen=TRUNCATED_IDENTITIES_KEPT)
        self.load_result = load
        self._closed = False
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        self.producer_state.remove_stray_snapshots(self._segments.bases())
        self._rebuild_producer_state()
        # called after every append that moved the log end (not under the log's lock, never
        # for a retry found to be a duplicate): a long-polling fetch waits on it
        self.on_offsets_changed: Callable[[Log], None] | None = None

    # ---- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str, config: LogConfig | None = None, *,
             recovery_point: int | None = None, log_start_offset: int = 0,
             had_clean_shutdown: bool = False, clock: Clock = SYSTEM_CLOCK,
             scheduler: Scheduler | None = None,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> Log:
        """Create the directory or load and recover what is in it.

        Without a ``recovery_point`` the last shutdown counts as unclean and every segment is
        re-validated; with one, only segments from it on are (and none after a clean shutdown).
        ``producer_id_expiration_ms`` is the broker's ``producer.id.expiration.ms``.
        """
        directory = Path(path)
        config = config or LogConfig()
        directory.mkdir(parents=True, exist_ok=True)
        is_delete = directory.name.endswith(files.DELETE_DIR_SUFFIX)
        loader = LogLoader(directory, config,
                           recovery_point=recovery_point if recovery_point is not None else 0,
                           log_start_offset=log_start_offset,
                           had_clean_shutdown=had_clean_shutdown and recovery_point is not None,
                           clock=clock, is_delete_dir=is_delete)
        return cls(directory, config, loader.load(), clock=clock, scheduler=scheduler,
                   producer_id_expiration_ms=producer_id_expiration_ms)

    # ---- offsets and sizes -------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """No replication here: every appended record is committed."""
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction (not below the log start offset),
        else the log end (Kafka's LSO, with the high watermark at the log end): a
        ``read_committed`` reader sees nothing at or above it."""
        with self._lock:
            first = self.producer_state.first_undecided_offset()
            if first is None:
                return self._log_end_offset
            return min(max(first, self._log_start_offset), self._log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments())

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def name(self) -> str:
        return self.dir.name

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments in offset order; the last one is the active segment."""
        with self._lock:
            return self._segments.all()

    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return self._segments.bases()

    @property
    def active_segment(self) -> LogSegment:
        with self._lock:
            return self._segments.active

    @property
    def number_of_segments(self) -> int:
        with self._lock:
            return len(self._segments)

    def segments_in_range(self, from_offset: int, to_offset: int,
                          limit: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments(from,
        to)); the first ``limit`` of them when given."""
        with self._lock:
            return self._segments.in_range(from_offset, to_offset, limit)

    # ---- append ------------------------------------------------------------------------------
    def append(self, records: Sequence[Record], *, compression: Compression = Compression.NONE,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               partition_leader_epoch: int = -1, is_transactional: bool = False) -> LogAppendInfo:
        """Encode ``records`` as one v2 batch and append it."""
        data = build_batch(records, compression=compression, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence,
                           partition_leader_epoch=partition_leader_epoch,
                           is_transactional=is_transactional)
        return self.append_batch(data)

    def append_end_txn_marker(self, control_type: ControlType, *, producer_id: int,
                              producer_epoch: int, coordinator_epoch: int = 0,
                              timestamp: int | None = None) -> LogAppendInfo:
        """Append a commit or abort marker for ``producer_id`` as the transaction coordinator."""
        ts = self.clock.milliseconds() if timestamp is None else timestamp
        return self.append_batch(build_end_txn_marker(
            control_type, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=ts), origin=ORIGIN_COORDINATOR)

    def append_batch(self, data: bytes | bytearray | memoryview,
                     origin: str = ORIGIN_CLIENT) -> LogAppendInfo:
        """Validate producer-encoded v2 batches (CRC, sizes, every record's structure, keys for a
        compacted topic, ``max.message.bytes``) and append them with offsets assigned here.

        ``origin`` is Kafka's AppendOrigin: ``"client"`` (a producer; control batches are refused
        with InvalidRecordError, sequences are checked) or ``"coordinator"`` (the transaction
        coordinator: may write commit/abort markers, whose producer and coordinator epochs are
        checked). The batches of one producer in one append are checked in order, each against
        the state the earlier ones left; a retry of batches already appended is a duplicate."""
        return append_batch(self, data, origin)

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's ``UnifiedLog.updateConfig``, a dynamic topic
        config): retention, cleaning, flushing and the next roll follow it. The active segment
        takes it for its roll decision (``segment.bytes``, ``segment.ms``) but keeps what its
        files were made with (``preallocate``, ``segment.index.bytes``,
        ``index.interval.bytes``), as a Kafka segment keeps its own index settings."""
        with self._lock:
            self._ensure_open()
            self.config = config
            self._segments.active.update_config(config)

    def _maybe_roll(self, params: RollParams) -> LogSegment:
        segment = self._segments.active
        if segment.should_roll(params):
            segment = self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Close the active segment and start a new one at the log end offset (an empty active
        segment at that offset is reused). The old segment is flushed in the background."""
        return log_roll.roll(self)

    def last_sequence(self, producer_id: int) -> int:
        """The last sequence the log holds of ``producer_id`` (Kafka's DescribeProducers
        ``lastSequence``), -1 when it holds none."""
        with self._lock:
            entry = self.producer_state.producers.get(producer_id)
            return entry.last_seq if entry is not None else -1

    def active_producers(self) -> list[ProducerEntry]:
        """A copy of the state of every producer the log holds, in producer id order (Kafka's
        ``UnifiedLog.activeProducers``, what DescribeProducers reports)."""
        with self._lock:
            return [entry.copy() for _, entry in sorted(self.producer_state.producers.items())]

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget the producers idle for ``producer.id.expiration.ms`` (Kafka's
        PeriodicProducerExpirationCheck); returns how many were removed."""
        with self._lock:
            if self._closed:
                return 0
            now = self.clock.milliseconds() if now_ms is None else now_ms
            return self.producer_state.remove_expired_producers(now)

    # ---- flush -------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """Make every batch below ``offset`` (default: the log end) durable and move the recovery
        point there."""
        log_roll.flush(self, offset)

    # ---- read --------------------------------------------------------------------------------
    def read_raw(self, start_offset: int, max_bytes: int = DEFAULT_FETCH_BYTES,
                 min_one_message: bool = True) -> FetchData | None:
        """Whole batches from the one holding ``start_offset`` (at least one if
        ``min_one_message``), from a single segment. None at the log end. An offset that is not
        an integer raises ``InvalidOffsetError``; one outside the log, ``OffsetOutOfRangeError``."""
        return read_raw(self, start_offset, max_bytes, min_one_message)

    def read(self, start_offset: int | None = None, max_offset: int | None = None,
             fetch_bytes: int = DEFAULT_FETCH_BYTES,
             isolation: str = READ_UNCOMMITTED) -> Iterator[Record]:
        """Every data record from ``start_offset`` (default: the log start) up to the log end at
        the time of the call (or ``max_offset``, exclusive), across segments and gaps left by
        compaction. Control records (transaction markers, KRaft control records) are skipped, as
        Kafka's consumer skips them: callers see data records only.

        ``isolation="read_committed"`` (Kafka's FetchIsolation.TXN_COMMITTED) stops at the last
        stable offset and skips the batches of aborted transactions, found from the
        ``.txnindex`` files; ``"read_uncommitted"`` (the default) returns everything. Offsets
        must be integers (``InvalidOffsetError``), ``max_offset`` not negative."""
        return read_records(self, start_offset, max_offset, fetch_bytes, isolation)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        ``.txnindex`` of the segment holding ``start_offset`` and of the later ones until an entry
        shows no later one can add to the range (Kafka's collectAbortedTransactions)."""
        for _ in range(3):
            with self._lock:
                removals = self._segments.removals
                segments = self._segments.in_range(start_offset, self._log_end_offset + 1)
            found = collect_aborted_transactions(segments, start_offset, upper_bound_offset)
            with self._lock:
                if self._segments.removals == removals:
                    return found
            # a segment left the log while its index was read (a swap renames the index it
            # replaces: read in between, it looked empty): read the new segments
        raise StorageError(f"{self.name}: segments kept changing while the aborted "
                           f"transactions from {start_offset} were read",
                           partition=self.name, offset=start_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``."""
        for segment in self.segments():
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                self._note_indexed(segment)
                if found is not None:
                    return found
        return None

    def fetch_offset_by_timestamp(self, timestamp: int, isolation: str = READ_UNCOMMITTED
                                  ) -> tuple[int, int] | None:
        """Kafka's ListOffsets for this partition: -2 earliest, -1 latest (the last stable offset
        for ``read_committed``), -3 the record with the largest timestamp (KIP-734), or a time in
        ms; ``(offset, timestamp)`` with -1 for none, or None (``storage.log_read``)."""
        return fetch_offset_by_timestamp(self, timestamp, isolation)

    def _note_indexed(self, segment: LogSegment) -> None:
        """Keep the indexes of at most INDEXED_SEGMENTS_KEPT closed segments loaded."""
        with self._lock:
            self._segments.note_indexed(segment)

    # ---- truncation --------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch with offsets >= ``target_offset``. Returns whether anything changed.
        A target that is not an integer >= 0 raises ``InvalidOffsetError`` and changes nothing."""
        return truncate_to(self, target_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (an integer >= 0, else
        ``InvalidOffsetError`` and nothing is deleted)."""
        truncate_fully_and_start_at(self, offset)

    # ---- retention ---------------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Retention: the log-start-offset rule, then ``retention.bytes``, then ``retention.ms``
        (the last two only when ``cleanup.policy`` includes delete; ``storage.log_retention``).
        Returns segments deleted."""
        return delete_old_segments(self)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); segments below it go at the next retention.
        ``offset`` must be an integer >= 0 (``InvalidOffsetError``)."""
        return maybe_increment_log_start_offset(self, offset)

    # ---- compaction support ------------------------------------------------------------------
    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A fresh ``<base>.log.cleaned`` segment (stale cleaner output of that name is removed)."""
        return LogSegment.create_cleaned(self.dir, base_offset, self.config, clock=self.clock)

    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment],
                         expected: Sequence[SegmentIdentity] | None = None) -> None:
        """Swap cleaned segments in, crash-safely (Kafka's order):

        1. rename each new segment ``.cleaned`` -> ``.swap``, highest offset first, and add it;
        2. remove each old segment (unless the first new one replaced it at the same base) and rename
           it ``.deleted`` for the async delete; the producer snapshots at the bases of the removed
           segments go too (Kafka's deleteProducerSnapshots);
        3. rename each new segment ``.swap`` -> final name, then fsync the directory.

        A crash anywhere leaves files from which the loader restores the log as before or as after.
        Old segments already gone (retention) are skipped, as Kafka does. ``expected`` holds the
        identities of the old segments as the cleaner read them: when one was truncated since, or
        is no longer that segment, the swap is refused with ``SegmentsChangedError`` and the new
        segments' files are deleted.
        """
        replace_segments(self, new_segments, old_segments, expected)

    def replace_cleaned(self, cleaned_base: int,
                        old_segments: Sequence[int | SegmentIdentity]) -> None:
        """Swap in a ``<cleaned_base>.log.cleaned`` segment written by a cleaner in another
        process, replacing the segments it was cleaned from: their identities as the cleaner read
        them (``SegmentIdentity``), or bare base offsets (matched by base alone). Refused, and the
        cleaned files deleted, when those segments are no longer exactly the log's: gone, active,
        or (for identities) truncated or otherwise changed since, even if regrown to the same size
        (``SegmentsChangedError``)."""
        replace_cleaned(self, cleaned_base, old_segments)

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush bookkeeping stays with the caller; close every segment's files."""
        close_log(self)

    def release_idle(self) -> None:
        """Drop descriptors and index maps of every closed segment."""
        with self._lock:
            self._segments.release_idle()

    def appends_held(self) -> threading.RLock:
        """The log's lock, for a caller that must see the log still (a directory move's switch):
        appends, rolls, flushes' bookkeeping, truncation, retention and swaps wait while it is
        held; reads do not."""
        return self._lock

    def rename_dir(self, name: str, *, sync: bool = True) -> None:
        """Rename the partition directory (used for the ``-delete`` rename). ``sync=False``
        leaves the fsync of the parent directory to the caller (one for a batch of renames)."""
        with self._lock:
            self.dir = rename_partition_dir(self.dir, name, self.segments(), sync=sync)
            self._closed = True

    def delete(self) -> None:
        """Delete every file and the directory itself."""
        delete_log(self)

    @property
    def is_closed(self) -> bool:
        return self._closed

    # ---- internals ---------------------------------------------------------------------------
    def _rebuild_producer_state(self, had_clean_shutdown: bool = False) -> None:
        """Bring the producer state in line with the segments (``log_producers``). The same
        after a clean shutdown as after any other (``had_clean_shutdown`` is accepted for the
        callers that pass it): its snapshots are checked against the log, and without one the
        log is replayed."""
        del had_clean_shutdown
        rebuild_producer_state(self.producer_state, self._log_start_offset,
                               self._log_end_offset, self.clock.milliseconds(),
                               self.segments_in_range)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.dir} is closed", partition=self.name)

    def _update_log_start_offset(self, offset: int) -> None:
        """Set the log start offset, and raise the recovery point to it when below (Kafka's
        ``UnifiedLog.updateLogStartOffset``): what lies below the log start is never recovered, so
        a power loss after a recovery point checkpoint below it cannot take the segments that
        hold the log start (and the producer state only they hold) as unflushed."""
        self._log_start_offset = offset
        if self._recovery_point < offset:
            self._recovery_point = offset

    def _delete_segment_files(self, segments: Sequence[LogSegment], sync: bool = False) -> None:
        """Rename to ``.deleted`` now; remove after ``file.delete.delay.ms`` (``log_files``)."""
        delete_segment_files(segments, self.config.file_delete_delay_ms, self._schedule,
                             sync=sync)

    def _schedule(self, name: str, fn: Callable[[], object], delay_ms: int) -> None:
        scheduler = self._scheduler or default_scheduler()
        scheduler.schedule(f"{name}:{self.name}", fn, delay_ms)

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._segments)})")

