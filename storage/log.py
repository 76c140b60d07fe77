"""The partition log (Kafka's UnifiedLog): one partition's offsets and policies above its
segments (``LocalLog``).

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The ``recovery_point`` is
the offset below which everything is flushed; after an unclean shutdown only data from there on is
re-validated. Appends stamp offsets into producer-encoded batches without re-encoding them (the base
offset is outside the CRC).

Thread-safety: one lock serialises appends, rolls, flushes' bookkeeping, truncation, retention and
segment swaps. Reads take a snapshot of the segment list and read without the lock; a read that races
a swap retries on the new segments, so it never sees a half-swapped log.

``Log`` owns the lock, the log start offset, the producer state (``ProducerStateManager``) and
the policies: what an append may write (``log_append``: validation, offset assignment, producer
checks) and when it flushes, which offsets a fetch may read (``log_read``), which old segments
retention deletes (``log_retention``), and what truncations and swaps do to the producer state.
``LocalLog`` owns the segments (``log_segments``, Kafka's LogSegments), the log end offset, the
recovery point, rolling, flushing, truncation, the crash-safe swap (``log_swap``) and the
directory's files (``log_files``); ``LogLoader`` (``loader``) builds what it starts from.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable, Iterator, Sequence

from storage import files
from storage.append_info import LogAppendInfo
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import InvalidRecordError, OffsetOutOfRangeError
from storage.loader import LoadResult, LogLoader
from storage.local_log import LocalLog
from storage.log_append import assign_offsets, validate_append
from storage.log_producers import complete_txn, rebuild_producer_state
from storage.log_read import (
    DEFAULT_FETCH_BYTES,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchData,
    fetch_offset_by_timestamp,
    read_records,
)
from storage.log_retention import (
    Predicate,
    below_log_start,
    deletable_segments,
    older_than_retention_ms,
    over_retention_bytes,
)
from storage.log_segments import INDEXED_SEGMENTS_KEPT
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ProducerEntry,
    ProducerStateManager,
)
from storage.records import Compression, ControlType, Record, build_batch, build_end_txn_marker
from storage.scheduler import Scheduler
from storage.segment import LogSegment, RollParams, SegmentIdentity
from storage.txn_index import AbortedTxn

__all__ = [   # the log's names, some defined in the modules it delegates to
    "DEFAULT_FETCH_BYTES", "EARLIEST_TIMESTAMP", "INDEXED_SEGMENTS_KEPT", "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP", "READ_COMMITTED", "READ_UNCOMMITTED",
    "FetchData", "Log", "LogAppendInfo",
]

_log = logging.getLogger(__name__)


class Log:
    """One partition's log. Open with ``Log.open``; see the module docstring for the contract."""

    def __init__(self, directory: Path, config: LogConfig, load: LoadResult, *, clock: Clock,
                 scheduler: Scheduler | None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.clock = clock
        self.topic_partition = files.topic_partition_of(directory)
        self._lock = threading.RLock()
        self._local = LocalLog(directory, config, load.segments,
                               log_end_offset=load.log_end_offset,
                               recovery_point=load.recovery_point, lock=self._lock, clock=clock,
                               scheduler=scheduler)
        self._log_start_offset = 0
        self._update_log_start_offset(load.log_start_offset)
        self.load_result = load
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        self.producer_state.remove_stray_snapshots(self._local.segment_base_offsets())
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
    def dir(self) -> Path:
        return self._local.dir

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        """No replication here: every appended record is committed."""
        return self._local.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction (not below the log start offset),
        else the log end (Kafka's LSO, with the high watermark at the log end): a
        ``read_committed`` reader sees nothing at or above it."""
        with self._lock:
            first = self.producer_state.first_undecided_offset()
            end = self._local.log_end_offset
            if first is None:
                return end
            return min(max(first, self._log_start_offset), end)

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def unflushed_messages(self) -> int:
        return self._local.unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._local.last_flush_ms

    @property
    def name(self) -> str:
        return self._local.name

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments in offset order; the last one is the active segment."""
        return self._local.segments()

    def segment_base_offsets(self) -> list[int]:
        return self._local.segment_base_offsets()

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def number_of_segments(self) -> int:
        return self._local.number_of_segments

    def segments_in_range(self, from_offset: int, to_offset: int,
                          limit: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments(from,
        to)); the first ``limit`` of them when given."""
        return self._local.segments_in_range(from_offset, to_offset, limit)

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
        the state the earlier ones left; a retry of batches already appended is a duplicate.

        Validation runs outside the lock (``log_append.validate_append``); offsets are assigned,
        the active segment rolled when it must, the batches written and the producer state
        committed under it."""
        name = self.name
        if origin not in (ORIGIN_CLIENT, ORIGIN_COORDINATOR):
            raise InvalidRecordError(f"append to {name}: origin {origin!r} is not "
                                     f"{ORIGIN_CLIENT!r} or {ORIGIN_COORDINATOR!r}",
                                     partition=name, origin=origin)
        config, clock = self.config, self.clock
        checks = validate_append(data, config, name, from_client=origin == ORIGIN_CLIENT)
        log_append_time = (clock.milliseconds()
                           if config.message_timestamp_type == "LogAppendTime" else -1)
        with self._lock:
            local = self._local
            local.ensure_open()
            assigned = assign_offsets(checks, local.log_end_offset, log_append_time,
                                      self.producer_state, origin, name)
            if not assigned.pieces:
                first = assigned.duplicates[0]
                return LogAppendInfo(first.first_offset, assigned.duplicates[-1].last_offset,
                                     -1, -1, 0, 0, 0, log_append_time, self._log_start_offset,
                                     duplicate=True)
            next_offset, max_ts = assigned.next_offset, assigned.max_timestamp
            last_offset = next_offset - 1
            self._maybe_roll(RollParams(max_ts, last_offset, assigned.size, clock.milliseconds()))
            segment = local.append(last_offset, max_ts, assigned.offset_of_max_timestamp,
                                   assigned.pieces, assigned.size, assigned.records)
            state = self.producer_state
            for info in assigned.producers.values():
                state.commit(info)
            for txn in assigned.completed:
                complete_txn(state, segment, txn)
            state.advance_map_end_offset(next_offset)
            result = LogAppendInfo(assigned.first_offset, last_offset, max_ts,
                                   assigned.offset_of_max_timestamp, assigned.records,
                                   len(assigned.pieces) // 2, assigned.size, log_append_time,
                                   self._log_start_offset)
            if local.unflushed_messages >= self.config.flush_messages:
                self.flush()
        listener = self.on_offsets_changed
        if listener is not None:
            listener(self)   # outside the lock: a listener may read the log
        return result

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's ``UnifiedLog.updateConfig``, a dynamic topic
        config): retention, cleaning, flushing and the next roll follow it. The active segment
        takes it for its roll decision (``segment.bytes``, ``segment.ms``) but keeps what its
        files were made with (``preallocate``, ``segment.index.bytes``,
        ``index.interval.bytes``), as a Kafka segment keeps its own index settings."""
        self._local.update_config(config)

    def _maybe_roll(self, params: RollParams) -> LogSegment:
        segment = self._local.active_segment
        if segment.should_roll(params):
            segment = self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Close the active segment and start a new one at the log end offset (an empty active
        segment at that offset is reused). The producer state is snapshotted at the new base and
        the old segment flushed in the background."""
        with self._lock:
            before = self._local.active_segment
            segment = self._local.roll()
            if segment is not before:
                new_base = segment.base_offset
                # unsynced under the lock; made durable by the background flush, before the
                # segments below it move the recovery point (Kafka's UnifiedLog.roll)
                snapshot = self.producer_state.take_snapshot(new_base, sync=False)
                self._local.schedule("flush-log",
                                     lambda: self._flush_rolled(snapshot, new_base), 0)
            return segment

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
            if self._local.is_closed:
                return 0
            now = self.clock.milliseconds() if now_ms is None else now_ms
            return self.producer_state.remove_expired_producers(now)

    # ---- flush -------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """Make every batch below ``offset`` (default: the log end) durable and move the recovery
        point there."""
        self._local.flush(offset)

    def _flush_rolled(self, snapshot: Path, new_base: int) -> None:
        """The background flush after a roll: the producer snapshot written at ``new_base``, then
        every segment below it. A snapshot that cannot be made durable raises before the recovery
        point moves (Kafka's testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure)."""
        self.producer_state.flush_snapshot(snapshot)
        self.flush(new_base)

    # ---- read --------------------------------------------------------------------------------
    def read_raw(self, start_offset: int, max_bytes: int = DEFAULT_FETCH_BYTES,
                 min_one_message: bool = True) -> FetchData | None:
        """Whole batches from the one holding ``start_offset`` (at least one if
        ``min_one_message``), from a single segment. None at the log end. An offset that is not
        an integer raises ``InvalidOffsetError``; one outside the log, ``OffsetOutOfRangeError``."""
        start_offset = files.validate_offset(start_offset, "start_offset", partition=self.name,
                                             minimum=None)
        return self._local.read(start_offset, max_bytes, min_one_message,
                                log_start_offset=lambda: self._log_start_offset)

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
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``."""
        for segment in self._local.segments():
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                self._local.note_indexed(segment)
                if found is not None:
                    return found
        return None

    def fetch_offset_by_timestamp(self, timestamp: int, isolation: str = READ_UNCOMMITTED
                                  ) -> tuple[int, int] | None:
        """Kafka's ListOffsets for this partition: -2 earliest, -1 latest (the last stable offset
        for ``read_committed``), -3 the record with the largest timestamp (KIP-734), or a time in
        ms; ``(offset, timestamp)`` with -1 for none, or None (``storage.log_read``)."""
        return fetch_offset_by_timestamp(self, timestamp, isolation)

    # ---- truncation --------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch with offsets >= ``target_offset``. Returns whether anything changed.
        A target that is not an integer >= 0 raises ``InvalidOffsetError`` and changes nothing.
        The log start offset follows the target down; the producer state is rebuilt."""
        target_offset = files.validate_offset(target_offset, "target_offset",
                                              partition=self.name)
        with self._lock:
            local = self._local
            local.ensure_open()
            if target_offset >= local.log_end_offset:
                return False
            if local.first_segment_base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            local.truncate_to(target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self.producer_state.delete_snapshots_above(local.log_end_offset)
            self._rebuild_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (an integer >= 0, else
        ``InvalidOffsetError`` and nothing is deleted)."""
        offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            self._local.truncate_fully_and_start_at(offset)
            self._log_start_offset = offset
            self.producer_state.delete_snapshots_above(-1)
            self._rebuild_producer_state()

    # ---- retention ---------------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Retention: the log-start-offset rule, then ``retention.bytes``, then ``retention.ms``
        (the last two only when ``cleanup.policy`` includes delete; ``storage.log_retention``).
        Returns segments deleted."""
        with self._lock:   # the log start offset as the deletion sees it
            deleted = self._delete_segments_while(below_log_start(self._log_start_offset),
                                                  "log start offset")
        config = self.config
        if config.delete:
            by_size = over_retention_bytes(self.size_in_bytes, config.retention_bytes)
            if by_size is not None:
                deleted += self._delete_segments_while(by_size, "retention.bytes")
            by_time = older_than_retention_ms(self.clock.milliseconds(), config.retention_ms)
            if by_time is not None:
                deleted += self._delete_segments_while(by_time, "retention.ms")
        return deleted

    def _delete_segments_while(self, predicate: Predicate, reason: str) -> int:
        """Delete the oldest segments while ``predicate(segment, next segment or None)`` holds
        (``deletable_segments``), rolling first when that is every segment, and raise the log
        start offset to the first segment left. Returns how many went."""
        with self._lock:
            local = self._local
            local.ensure_open()
            segments = local.segments()
            doomed = deletable_segments(segments, local.log_end_offset, self.high_watermark,
                                        predicate)
            if not doomed:
                return 0
            if len(doomed) == len(segments):
                self.roll()
            local.remove_and_delete_segments(doomed)
            first_base = local.first_segment_base_offset
            self._update_log_start_offset(max(self._log_start_offset, first_base))
            self.producer_state.delete_snapshots_below(first_base)
            _log.info("%s: deleted %d segments by %s; log start offset is now %d", self.name,
                      len(doomed), reason, self._log_start_offset)
            return len(doomed)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); segments below it go at the next retention.
        ``offset`` must be an integer >= 0 (``InvalidOffsetError``)."""
        offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            end = self._local.log_end_offset
            if offset > end:
                raise OffsetOutOfRangeError(
                    f"{self.name}: log start offset {offset} is above the log end {end}",
                    partition=self.name, offset=offset)
            if offset <= self._log_start_offset:
                return False
            self._update_log_start_offset(offset)
            return True

    # ---- compaction support ------------------------------------------------------------------
    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A fresh ``<base>.log.cleaned`` segment (stale cleaner output of that name is removed)."""
        return LogSegment.create_cleaned(self.dir, base_offset, self.config, clock=self.clock)

    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment],
                         expected: Sequence[SegmentIdentity] | None = None) -> None:
        """Swap cleaned segments in, crash-safely (Kafka's order, ``storage.log_swap``):

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
        self._local.replace_segments(new_segments, old_segments, expected,
                                     on_removed=self._delete_producer_snapshots)

    def _delete_producer_snapshots(self, segments: list[LogSegment]) -> None:
        for segment in segments:
            self.producer_state.delete_snapshot(segment.base_offset)

    def replace_cleaned(self, cleaned_base: int,
                        old_segments: Sequence[int | SegmentIdentity]) -> None:
        """Swap in a ``<cleaned_base>.log.cleaned`` segment written by a cleaner in another
        process, replacing the segments it was cleaned from: their identities as the cleaner read
        them (``SegmentIdentity``), or bare base offsets (matched by base alone). Refused, and the
        cleaned files deleted, when those segments are no longer exactly the log's: gone, active,
        or (for identities) truncated or otherwise changed since, even if regrown to the same size
        (``SegmentsChangedError``)."""
        cleaned = LogSegment(self.dir, cleaned_base, self.config, suffix=files.CLEANED_SUFFIX,
                             clock=self.clock)
        with self._lock:
            old = self._local.segments_cleaned_into(cleaned, old_segments)
            self.replace_segments([cleaned], old)

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Snapshot the producer state at the log end, close every segment's files and mark the
        log closed (even when the snapshot fails). A second close does nothing. Flush
        bookkeeping stays with the caller."""
        with self._lock:
            if self._local.is_closed:
                return
            try:
                self.producer_state.take_snapshot(self._local.log_end_offset)
            finally:
                self._local.close()

    def close_handlers(self) -> None:
        """Close every segment's files and mark the log closed, writing nothing (Kafka's
        ``closeHandlers``, for a log whose directory failed: no snapshot to a disk that is gone).
        A log closed already stays as it is."""
        self._local.close()

    def release_idle(self) -> None:
        """Drop descriptors and index maps of every closed segment."""
        self._local.release_idle()

    def appends_held(self) -> threading.RLock:
        """The log's lock, for a caller that must see the log still (a directory move's switch):
        appends, rolls, flushes' bookkeeping, truncation, retention and swaps wait while it is
        held; reads do not."""
        return self._lock

    def rename_dir(self, name: str, *, sync: bool = True) -> None:
        """Rename the partition directory (used for the ``-delete`` rename). ``sync=False``
        leaves the fsync of the parent directory to the caller (one for a batch of renames)."""
        self._local.rename_dir(name, sync=sync)

    def delete(self) -> None:
        """Delete every file and the directory itself."""
        self._local.delete()

    @property
    def is_closed(self) -> bool:
        return self._local.is_closed

    # ---- internals ---------------------------------------------------------------------------
    def _rebuild_producer_state(self) -> None:
        """Bring the producer state in line with the segments (``log_producers``): its snapshots
        are checked against the log, and without one the log is replayed, after a clean shutdown
        as after any other."""
        rebuild_producer_state(self.producer_state, self._log_start_offset,
                               self._local.log_end_offset, self.clock.milliseconds(),
                               self._local.segments_in_range)

    def _update_log_start_offset(self, offset: int) -> None:
        """Set the log start offset, and raise the recovery point to it when below (Kafka's
        ``UnifiedLog.updateLogStartOffset``): what lies below the log start is never recovered, so
        a power loss after a recovery point checkpoint below it cannot take the segments that
        hold the log start (and the producer state only they hold) as unflushed."""
        self._log_start_offset = offset
        self._local.raise_recovery_point(offset)

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, "
                f"end={self._local.log_end_offset}, segments={self._local.number_of_segments})")
