"""The partition log (Kafka's UnifiedLog + LocalLog): an ordered set of segments with one active
segment at the end.

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The ``recovery_point`` is
the offset below which everything is flushed; after an unclean shutdown only data from there on is
re-validated. Appends stamp offsets into producer-encoded batches without re-encoding them (the base
offset is outside the CRC).

Thread-safety: one lock serialises appends, rolls, flushes' bookkeeping, truncation, retention and
segment swaps. Reads take a snapshot of the segment list and read without the lock; a read that races
a swap retries on the new segments, so it never sees a half-swapped log.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import struct
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence

import crc32c

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import READ_COMMITTED, READ_UNCOMMITTED, LogConfig
from storage.durable import fsync_dir
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    SegmentsChangedError,
    StorageError,
)
from storage.loader import LogLoader, LoadResult
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    SequenceCheck,
)
from storage.batch_layout import CRC_OFFSET, MAX_TIMESTAMP_OFFSET, SIZE_OFFSET
from storage.records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    ControlType,
    Record,
    RecordBatch,
    build_batch,
    build_end_txn_marker,
    byte_view,
    parse_control_record,
    scan_batches,
)
from storage.scheduler import Scheduler, default_scheduler
from storage.segment import LogSegment, RollParams, SegmentIdentity, identity_or_none
from storage.txn_index import AbortedTxn, collect_aborted_transactions
from storage.validation import validate_for_append

log = logging.getLogger(__name__)

_OFFSET = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_POSITION = MAX_TIMESTAMP_OFFSET
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_CRC_POSITION = CRC_OFFSET
_LOG_APPEND_TIME_FLAG = 0x08
DEFAULT_FETCH_BYTES = 1024 * 1024
INDEXED_SEGMENTS_KEPT = 16
TRUNCATED_IDENTITIES_KEPT = 1024   # truncations are rare: this covers any clean in flight


class LogAppendInfo(NamedTuple):
    """What one append did (a NamedTuple: one is built per append, cheaper than a dataclass)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    batches: int
    valid_bytes: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False   # every batch was a retry of batches already appended


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches read from one segment: ``data`` starts at ``position`` of the file ``path``.

    The segment checked every batch's CRC and offsets when it read them; a decoder in another
    process checks the CRC again (``RecordBatch.records`` does), and its errors name ``path``."""

    segment_base_offset: int
    position: int
    data: bytes
    path: str | None = None

    def batches(self) -> Iterator[RecordBatch]:
        """The batches of ``data``, each knowing its file and position for error messages."""
        from storage.records import iter_batches
        path = None if self.path is None else Path(self.path)
        return iter_batches(self.data, path=path, base_position=self.position)


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
        self._segments: dict[int, LogSegment] = {s.base_offset: s for s in load.segments}
        self._bases: list[int] = sorted(self._segments)
        self._log_start_offset = load.log_start_offset
        self._log_end_offset = load.log_end_offset
        self._recovery_point = load.recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = clock.milliseconds()
        self._indexed: list[int] = []   # closed segments whose indexes are loaded, oldest first
        # what segments looked like before a truncation changed or removed them: a swap of
        # segments cleaned from one of these is refused (``replace_segments``)
        self._truncated: deque[SegmentIdentity] = deque(maxlen=TRUNCATED_IDENTITIES_KEPT)
        self.load_result = load
        self._closed = False
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        self.producer_state.remove_stray_snapshots(self._bases)
        self._rebuild_producer_state(had_clean_shutdown=load.clean_shutdown)
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
            return [self._segments[b] for b in self._bases]

    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._bases)

    @property
    def active_segment(self) -> LogSegment:
        with self._lock:
            return self._segments[self._bases[-1]]

    @property
    def number_of_segments(self) -> int:
        with self._lock:
            return len(self._bases)

    def segments_in_range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments(from, to))."""
        with self._lock:
            i = max(bisect.bisect_right(self._bases, from_offset) - 1, 0)
            return [self._segments[b] for b in self._bases[i:] if b < to_offset]

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
        if origin not in (ORIGIN_CLIENT, ORIGIN_COORDINATOR):
            raise InvalidRecordError(f"append to {self.name}: origin {origin!r} is not "
                                     f"{ORIGIN_CLIENT!r} or {ORIGIN_COORDINATOR!r}",
                                     partition=self.name, origin=origin)
        from_client = origin == ORIGIN_CLIENT
        view = byte_view(data)
        spans = _batch_spans(view)
        if spans is None:
            scan = scan_batches(view)
            if scan.error is not None or scan.valid_bytes != len(view) or len(scan.positions) == 0:
                at = scan.error_position if scan.error_position >= 0 else scan.valid_bytes
                raise CorruptRecordError(
                    f"append to {self.name}: {scan.problem or 'incomplete batch'} at byte {at} "
                    f"of {len(view)}", partition=self.name, position=at)
            spans = list(zip(scan.positions.tolist(), scan.sizes.tolist()))
        if len(view) > self.config.segment_bytes:
            # Kafka's UnifiedLog.append: the whole set must fit one segment, not only each batch
            raise RecordTooLargeError(
                f"append to {self.name}: {len(spans)} batches of {len(view)} bytes in all are "
                f"larger than segment.bytes={self.config.segment_bytes}", partition=self.name,
                size=len(view))
        checks = []
        require_keys = self.config.compact
        for pos, size in spans:
            batch = view[pos:pos + size]
            if size > self.config.segment_bytes:
                raise RecordTooLargeError(
                    f"append to {self.name}: batch of {size} bytes is larger than "
                    f"segment.bytes={self.config.segment_bytes}", partition=self.name, size=size)
            checks.append((batch, validate_for_append(
                batch, require_keys=require_keys,
                max_message_bytes=self.config.max_message_bytes, from_client=from_client,
                where=f"append to {self.name}")))
        log_append_time = (self.clock.milliseconds()
                           if self.config.message_timestamp_type == "LogAppendTime" else -1)
        with self._lock:
            self._ensure_open()
            pieces: list[bytes | memoryview] = []
            next_offset = self._log_end_offset
            first_offset = next_offset
            max_ts, offset_of_max_ts, records, size = -1, next_offset, 0, 0
            producers: dict[int, ProducerAppendInfo] = {}   # this append's state, per producer
            completed: list[CompletedTxn] = []
            duplicates: list[SequenceCheck] = []
            for batch, check in checks:
                header = check.header
                batch_max_ts = log_append_time if log_append_time >= 0 else check.max_timestamp
                if header is not None and (header.producer_id >= 0 or header.is_control):
                    info = producers.get(header.producer_id)
                    if info is None:
                        info = producers[header.producer_id] = self.producer_state.prepare_update(
                            header.producer_id, origin)
                    if header.is_control:
                        done = self._check_marker(batch, header, info, next_offset, batch_max_ts)
                        if done is not None:
                            completed.append(done)
                    else:
                        sequence = info.check_data_batch(header.producer_epoch,
                                                         header.base_sequence,
                                                         check.records_count, next_offset)
                        if sequence.duplicate:
                            duplicates.append(sequence)
                            continue
                        info.append_data_batch(
                            header.producer_epoch, header.base_sequence, header.last_sequence,
                            next_offset, next_offset + header.last_offset_delta, batch_max_ts,
                            header.is_transactional)
                pieces.append(_OFFSET.pack(next_offset))
                if log_append_time >= 0:
                    pieces.append(_with_log_append_time(batch, log_append_time))
                else:
                    pieces.append(batch[SIZE_OFFSET:])
                if batch_max_ts > max_ts:
                    max_ts = batch_max_ts
                    offset_of_max_ts = next_offset + check.last_offset_delta
                next_offset += check.last_offset_delta + 1
                records += check.records_count
                size += check.size
            if not pieces:
                first = duplicates[0]
                return LogAppendInfo(first.first_offset, duplicates[-1].last_offset, -1, -1, 0, 0,
                                     0, log_append_time, self._log_start_offset, duplicate=True)
            last_offset = next_offset - 1
            segment = self._maybe_roll(RollParams(max_ts, last_offset, size,
                                                  self.clock.milliseconds()))
            segment.append(last_offset, max_ts, offset_of_max_ts, pieces, size)
            self._log_end_offset = next_offset
            state = self.producer_state
            for info in producers.values():
                state.commit(info)
            for txn in completed:
                self._complete_txn(segment, txn)
            state.map_end_offset = max(state.map_end_offset, next_offset)
            self._unflushed_messages += records
            info = LogAppendInfo(first_offset, last_offset, max_ts, offset_of_max_ts, records,
                                 len(pieces) // 2, size, log_append_time, self._log_start_offset)
            if self._unflushed_messages >= self.config.flush_messages:
                self.flush()
        return info

    def _check_marker(self, batch: memoryview, header: BatchHeader, info: ProducerAppendInfo,
                      offset: int, timestamp: int) -> CompletedTxn | None:
        """Check a control batch the coordinator appends at ``offset``: one commit or abort marker
        of a producer, within its epochs; returns the transaction it closes."""
        records = RecordBatch(bytes(batch)).records()
        marker = parse_control_record(records[0]) if records else None
        if header.producer_id < 0 or marker is None or marker[0] not in (ControlType.ABORT,
                                                                          ControlType.COMMIT):
            raise InvalidRecordError(
                f"append to {self.name}: the control batch at offset {offset} is not a commit or "
                f"abort marker of a producer", partition=self.name, offset=offset)
        return info.append_end_txn_marker(marker[0], marker[1], header.producer_epoch, offset,
                                          timestamp)

    def _complete_txn(self, segment: LogSegment, txn: CompletedTxn) -> None:
        """Close a transaction whose marker is in ``segment`` (Kafka: the LSO after it goes into
        the aborted transaction's index entry, then the transaction completes)."""
        segment.update_txn_index(txn, self.producer_state.last_stable_offset_after(txn))
        self.producer_state.complete_txn(txn)

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's ``UnifiedLog.updateConfig``, a dynamic topic
        config): retention, cleaning, flushing and the next roll follow it. The active segment
        takes it for its roll decision (``segment.bytes``, ``segment.ms``) but keeps what its
        files were made with (``preallocate``, ``segment.index.bytes``,
        ``index.interval.bytes``), as a Kafka segment keeps its own index settings."""
        with self._lock:
            self._ensure_open()
            self.config = config
            active = self._segments[self._bases[-1]]
            made = active.config
            active.config = dataclasses.replace(
                config, preallocate=made.preallocate, segment_index_bytes=made.segment_index_bytes,
                index_interval_bytes=made.index_interval_bytes)

    def _maybe_roll(self, params: RollParams) -> LogSegment:
        segment = self._segments[self._bases[-1]]
        if segment.should_roll(params):
            segment = self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Close the active segment and start a new one at the log end offset (an empty active
        segment at that offset is reused). The old segment is flushed in the background."""
        with self._lock:
            self._ensure_open()
            new_base = self._log_end_offset
            active = self._segments[self._bases[-1]]
            if active.base_offset == new_base and active.size == 0:
                return active
            if new_base in self._segments:
                raise StorageError(f"{self.name}: a segment with base offset {new_base} exists",
                                   partition=self.name, offset=new_base)
            stale = files.log_file(self.dir, new_base)
            if stale.exists():
                log.warning("deleting stale segment file %s before rolling", stale)
                stale.unlink()
            for index in (files.index_file(self.dir, new_base),
                          files.time_index_file(self.dir, new_base),
                          files.txn_index_file(self.dir, new_base)):
                index.unlink(missing_ok=True)
            active.on_become_inactive()
            segment = LogSegment.create(self.dir, new_base, self.config, clock=self.clock,
                                        rolling_jitter_ms=self.config.random_segment_jitter())
            self._add_segment(segment)
            self.producer_state.take_snapshot(new_base)
            self._schedule("flush-log", lambda: self.flush(new_base), 0)
            return segment

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
        if offset is not None:
            offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            if self._closed:
                return
            target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
            if target <= self._recovery_point:
                return
            to_flush = self.segments_in_range(self._recovery_point, target)
            unflushed_at_start = self._unflushed_messages
        for segment in to_flush:
            try:
                segment.flush()
            except FileNotFoundError:
                pass   # swapped out or deleted meanwhile; its replacement was flushed by its writer
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = target
            if target >= self._log_end_offset:
                self._unflushed_messages = max(0, self._unflushed_messages - unflushed_at_start)
            self._last_flush_ms = self.clock.milliseconds()

    # ---- read --------------------------------------------------------------------------------
    def read_raw(self, start_offset: int, max_bytes: int = DEFAULT_FETCH_BYTES,
                 min_one_message: bool = True) -> FetchData | None:
        """Whole batches from the one holding ``start_offset`` (at least one if
        ``min_one_message``), from a single segment. None at the log end. An offset that is not
        an integer raises ``InvalidOffsetError``; one outside the log, ``OffsetOutOfRangeError``."""
        start_offset = files.validate_offset(start_offset, "start_offset", partition=self.name,
                                             minimum=None)
        for _ in range(3):
            with self._lock:
                end = self._log_end_offset
                start = self._log_start_offset
                if start_offset < start or start_offset > end:
                    raise OffsetOutOfRangeError(
                        f"{self.name}: offset {start_offset} is outside [{start}, {end}]",
                        partition=self.name, offset=start_offset, log_start_offset=start,
                        log_end_offset=end)
                if start_offset == end:
                    return None
                candidates = self.segments_in_range(start_offset, end)
                active = self._segments[self._bases[-1]]
                active_size = active.size
            try:
                for i, segment in enumerate(candidates):
                    limit = active_size if segment is active else None
                    # offsets a batch may hold: below the next segment's base, and below the
                    # log end offset in the active (or last) segment
                    next_base = candidates[i + 1].base_offset if i + 1 < len(candidates) else end
                    result = segment.read(start_offset, max_bytes, limit, min_one_message,
                                          next_base_offset=next_base)
                    self._note_indexed(segment)
                    if result is not None:
                        return FetchData(segment.base_offset, result[0], result[1],
                                         str(segment.log_path))
                return None
            except FileNotFoundError:
                continue   # raced a swap or a retention delete: retry on the new segment list
        raise StorageError(f"{self.name}: segments kept changing under a read at {start_offset}",
                           partition=self.name, offset=start_offset)

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
        if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise StorageError(f"{self.name}: isolation {isolation!r} is not "
                               f"{READ_UNCOMMITTED!r} or {READ_COMMITTED!r}",
                               partition=self.name, isolation=isolation)
        committed = isolation == READ_COMMITTED
        if start_offset is not None:
            start_offset = files.validate_offset(start_offset, "start_offset",
                                                 partition=self.name, minimum=None)
        if max_offset is not None:
            max_offset = files.validate_offset(max_offset, "max_offset", partition=self.name)
        offset = self._log_start_offset if start_offset is None else start_offset
        upper = self.last_stable_offset if committed else self._log_end_offset
        stop = upper if max_offset is None else min(max_offset, upper)
        aborted = _AbortedFilter(self.collect_aborted_transactions(offset, stop)
                                 if committed and offset < stop else [])
        while offset < stop:
            fetch = self.read_raw(offset, fetch_bytes)
            if fetch is None:
                return
            progressed = False
            for batch in fetch.batches():
                if batch.last_offset < offset:
                    continue
                if not (aborted.skips(batch) or batch.is_control):
                    for record in batch.records():
                        if offset <= record.offset < stop:
                            yield record
                offset = max(offset, batch.next_offset)
                progressed = True
                if offset >= stop:
                    return
            if not progressed:
                return

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        ``.txnindex`` of the segment holding ``start_offset`` and of the later ones until an entry
        shows no later one can add to the range (Kafka's collectAbortedTransactions)."""
        return collect_aborted_transactions(
            self.segments_in_range(start_offset, self._log_end_offset + 1), start_offset,
            upper_bound_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``."""
        for segment in self.segments():
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                self._note_indexed(segment)
                if found is not None:
                    return found
        return None

    def _note_indexed(self, segment: LogSegment) -> None:
        """Keep the indexes of at most INDEXED_SEGMENTS_KEPT closed segments loaded."""
        with self._lock:
            if segment.base_offset == self._bases[-1]:
                return
            if segment.base_offset in self._indexed:
                self._indexed.remove(segment.base_offset)
            self._indexed.append(segment.base_offset)
            while len(self._indexed) > INDEXED_SEGMENTS_KEPT:
                old = self._segments.get(self._indexed.pop(0))
                if old is not None and old.base_offset != self._bases[-1]:
                    old.release()

    # ---- truncation --------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch with offsets >= ``target_offset``. Returns whether anything changed.
        A target that is not an integer >= 0 raises ``InvalidOffsetError`` and changes nothing."""
        target_offset = files.validate_offset(target_offset, "target_offset", partition=self.name)
        with self._lock:
            self._ensure_open()
            if target_offset >= self._log_end_offset:
                return False
            if self._bases[0] > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [self._segments[b] for b in self._bases if b > target_offset]
            self._remember_truncated(doomed)
            for segment in doomed:
                self._remove_segment(segment.base_offset)
            self._delete_segment_files(doomed)
            active = self._segments[self._bases[-1]]
            before = identity_or_none(active)
            if not active.is_open_for_writes:
                active.make_writable()
            if active.truncate_to(target_offset) and before is not None:
                self._truncated.append(before)
            active.size_indexes_for_appends()
            self._log_end_offset = active.read_next_offset()
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self.producer_state.delete_snapshots_above(self._log_end_offset)
            self._rebuild_producer_state(had_clean_shutdown=False)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (an integer >= 0, else
        ``InvalidOffsetError`` and nothing is deleted)."""
        offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            self._ensure_open()
            doomed = self.segments()
            self._remember_truncated(doomed)
            for segment in doomed:
                self._remove_segment(segment.base_offset)
            self._delete_segment_files(doomed, sync=True)
            segment = LogSegment.create(self.dir, offset, self.config, clock=self.clock,
                                        rolling_jitter_ms=self.config.random_segment_jitter())
            self._add_segment(segment)
            self._log_end_offset = offset
            self._log_start_offset = offset
            self._recovery_point = offset
            self._unflushed_messages = 0
            self.producer_state.delete_snapshots_above(-1)
            self._rebuild_producer_state(had_clean_shutdown=False)

    # ---- retention ---------------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Retention: the log-start-offset rule, then ``retention.bytes``, then ``retention.ms``
        (the last two only when ``cleanup.policy`` includes delete). Returns segments deleted."""
        deleted = self._delete_segments_while(self._below_log_start, "log start offset")
        if self.config.delete:
            deleted += self._delete_retention_size_breached()
            deleted += self._delete_retention_ms_breached()
        return deleted

    def _below_log_start(self, segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= self._log_start_offset

    def _delete_retention_ms_breached(self) -> int:
        if self.config.retention_ms < 0:
            return 0
        now = self.clock.milliseconds()
        return self._delete_segments_while(
            lambda s, _n: now - s.largest_timestamp > self.config.retention_ms, "retention.ms")

    def _delete_retention_size_breached(self) -> int:
        if self.config.retention_bytes < 0:
            return 0
        diff = self.size_in_bytes - self.config.retention_bytes
        if diff <= 0:
            return 0
        remaining = [diff]

        def over(segment: LogSegment, _next: LogSegment | None) -> bool:
            if remaining[0] - segment.size >= 0:
                remaining[0] -= segment.size
                return True
            return False
        return self._delete_segments_while(over, "retention.bytes")

    def _delete_segments_while(self, predicate: Callable[[LogSegment, LogSegment | None], bool],
                               reason: str) -> int:
        with self._lock:
            self._ensure_open()
            segments = self.segments()
            doomed: list[LogSegment] = []
            for i, segment in enumerate(segments):
                following = segments[i + 1] if i + 1 < len(segments) else None
                upper = following.base_offset if following else self._log_end_offset
                if self.high_watermark < upper:
                    break
                if following is None and segment.size == 0:
                    break
                if not predicate(segment, following):
                    break
                doomed.append(segment)
            if not doomed:
                return 0
            if len(doomed) == len(segments):
                self.roll()
            for segment in doomed:
                self._remove_segment(segment.base_offset)
            self._delete_segment_files(doomed)
            self._log_start_offset = max(self._log_start_offset, self._bases[0])
            self.producer_state.delete_snapshots_below(self._bases[0])
            log.info("%s: deleted %d segments by %s; log start offset is now %d", self.name,
                     len(doomed), reason, self._log_start_offset)
            return len(doomed)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); segments below it go at the next retention.
        ``offset`` must be an integer >= 0 (``InvalidOffsetError``)."""
        offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{self.name}: log start offset {offset} is above the log end "
                    f"{self._log_end_offset}", partition=self.name, offset=offset)
            if offset <= self._log_start_offset:
                return False
            self._log_start_offset = offset
            return True

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
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        with self._lock:
            self._ensure_open()
            if expected is not None:
                self._refuse_changed(expected, new_sorted, require_all=False)
            live = [s for s in old_segments if self._segments.get(s.base_offset) is s]
            active_base = self._bases[-1]
            if any(s.base_offset == active_base for s in live):
                raise StorageError(f"{self.name}: the active segment cannot be replaced",
                                   partition=self.name)
            for segment in reversed(new_sorted):
                segment.change_file_suffixes(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
            fsync_dir(self.dir)
            first_new = new_sorted[0].base_offset if new_sorted else None
            for segment in live:
                if segment.base_offset != first_new:
                    self._remove_segment(segment.base_offset)
            for segment in reversed(new_sorted):
                segment.make_read_only()
                self._segments[segment.base_offset] = segment
                if segment.base_offset not in self._bases:
                    bisect.insort(self._bases, segment.base_offset)
            self._delete_segment_files(live)
            for segment in live:
                if segment.base_offset != first_new:
                    self.producer_state.delete_snapshot(segment.base_offset)
            for segment in new_sorted:
                segment.change_file_suffixes(files.SWAP_SUFFIX, "")
            fsync_dir(self.dir)

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
        identities = [o for o in old_segments if isinstance(o, tuple)]
        old_bases = [o.base_offset if isinstance(o, tuple) else o for o in old_segments]
        with self._lock:
            self._ensure_open()
            old = [self._segments.get(base) for base in old_bases]
            active_base = self._bases[-1]
            if (not cleaned.log_path.exists() or any(s is None for s in old)
                    or active_base in old_bases or not old_bases
                    or cleaned_base != min(old_bases)):
                cleaned.delete_files()
                raise SegmentsChangedError(
                    f"{self.name}: cannot swap cleaned segment {cleaned_base} for {old_bases}"
                    f": the log changed meanwhile", partition=self.name, offset=cleaned_base,
                    changed=[b for b, s in zip(old_bases, old) if s is None])
            self._refuse_changed([SegmentIdentity(*i) for i in identities], [cleaned],
                                 require_all=True)
            self.replace_segments([cleaned], [s for s in old if s is not None])

    def _refuse_changed(self, expected: Sequence[SegmentIdentity],
                        new_segments: Sequence[LogSegment], *, require_all: bool) -> None:
        """Raise ``SegmentsChangedError`` (after deleting ``new_segments``' files) when a segment
        of ``expected`` was truncated since it was read, or is now different; a segment that is
        gone counts only with ``require_all``. Call under the lock."""
        truncated = set(self._truncated)
        changed = []
        for seen in expected:
            current = self._segments.get(seen.base_offset)
            if seen in truncated or (current is None and require_all) or (
                    current is not None and current.identity != seen):
                changed.append(seen.base_offset)
        if changed:
            for segment in new_segments:
                segment.delete_files()
            base = min(s.base_offset for s in new_segments) if new_segments else -1
            raise SegmentsChangedError(
                f"{self.name}: cannot swap cleaned segment {base} in: segments {changed} were "
                f"truncated or changed after the cleaner read them (the log changed meanwhile)",
                partition=self.name, offset=base, changed=changed)

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush bookkeeping stays with the caller; close every segment's files."""
        with self._lock:
            if self._closed:
                return
            try:
                self.producer_state.take_snapshot(self._log_end_offset)
            finally:
                for segment in self.segments():
                    segment.close()
                self._closed = True

    def release_idle(self) -> None:
        """Drop descriptors and index maps of every closed segment."""
        with self._lock:
            for base in self._bases[:-1]:
                self._segments[base].release()
            self._indexed.clear()

    def appends_held(self) -> threading.RLock:
        """The log's lock, for a caller that must see the log still (a directory move's switch):
        appends, rolls, flushes' bookkeeping, truncation, retention and swaps wait while it is
        held; reads do not."""
        return self._lock

    def rename_dir(self, name: str, *, sync: bool = True) -> None:
        """Rename the partition directory (used for the ``-delete`` rename). ``sync=False``
        leaves the fsync of the parent directory to the caller (one for a batch of renames)."""
        with self._lock:
            for segment in self.segments():
                segment.close()
            target = self.dir.parent / name
            os.replace(self.dir, target)
            if sync:
                fsync_dir(self.dir.parent)
            self.dir = target
            for segment in self.segments():
                segment.rename_dir(target)
            self._closed = True

    def delete(self) -> None:
        """Delete every file and the directory itself."""
        with self._lock:
            for segment in self.segments():
                segment.close()
            self._closed = True
            for path in sorted(self.dir.iterdir(), reverse=True):
                if path.is_dir():
                    for sub in path.iterdir():
                        sub.unlink()
                    path.rmdir()
                else:
                    path.unlink()
            self.dir.rmdir()

    @property
    def is_closed(self) -> bool:
        return self._closed

    # ---- internals ---------------------------------------------------------------------------
    def _rebuild_producer_state(self, had_clean_shutdown: bool) -> None:
        """Load the newest snapshot at or below the log end and replay the batches after it
        (Kafka's rebuildProducerState). A clean shutdown without any snapshot replays nothing,
        unless the load cut something (the snapshots past the cut are gone, not missing)."""
        state = self.producer_state
        end = self._log_end_offset
        snapshots = state.delete_snapshots_above(end)   # e.g. left by batches recovery truncated
        cut = self.load_result.truncated_bytes > 0 or bool(self.load_result.quarantined)
        if had_clean_shutdown and not snapshots and not cut:
            state.map_end_offset = end
            return
        start = state.load_latest_snapshot(end, self.clock.milliseconds(), snapshots)
        for segment in self.segments_in_range(start, end):
            segment.replay_producer_state(state, start)
        state.map_end_offset = end

    def _remember_truncated(self, segments: Sequence[LogSegment]) -> None:
        self._truncated.extend(i for s in segments if (i := identity_or_none(s)) is not None)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.dir} is closed", partition=self.name)

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments[segment.base_offset] = segment
        bisect.insort(self._bases, segment.base_offset)

    def _remove_segment(self, base: int) -> None:
        self._segments.pop(base, None)
        i = bisect.bisect_left(self._bases, base)
        if i < len(self._bases) and self._bases[i] == base:
            del self._bases[i]
        if base in self._indexed:
            self._indexed.remove(base)

    def _delete_segment_files(self, segments: Sequence[LogSegment], sync: bool = False) -> None:
        """Rename to ``.deleted`` now; remove after ``file.delete.delay.ms``."""
        if not segments:
            return
        for segment in segments:
            segment.close()
            segment.change_file_suffixes("", files.DELETED_SUFFIX)
        delay = self.config.file_delete_delay_ms
        doomed = list(segments)

        def delete() -> None:
            for segment in doomed:
                segment.delete_files()
        if sync or delay == 0:
            delete()
        else:
            self._schedule("delete-file", delete, delay)

    def _schedule(self, name: str, fn: Callable[[], object], delay_ms: int) -> None:
        scheduler = self._scheduler or default_scheduler()
        scheduler.schedule(f"{name}:{self.name}", fn, delay_ms)

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._bases)})")


def _batch_spans(view: memoryview) -> list[tuple[int, int]] | None:
    """[(0, size)] when ``view`` is exactly one batch by its length field (the common case of a
    producer's append), else None and the caller scans."""
    size = len(view)
    if size >= LOG_OVERHEAD and _BATCH_LENGTH.unpack_from(view, SIZE_OFFSET)[0] + LOG_OVERHEAD == size:
        return [(0, size)]
    return None


def _with_log_append_time(batch: memoryview, now_ms: int) -> bytes:
    """The batch after offset 8 with LogAppendTime stamped: attribute bit 3, max timestamp = now,
    CRC recomputed (both fields are inside the CRC)."""
    buf = bytearray(batch)
    attributes = _ATTRIBUTES.unpack_from(buf, ATTRIBUTES_OFFSET)[0] | _LOG_APPEND_TIME_FLAG
    _ATTRIBUTES.pack_into(buf, ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(buf, _MAX_TIMESTAMP_POSITION, now_ms)
    _CRC.pack_into(buf, _CRC_POSITION, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(memoryview(buf)[SIZE_OFFSET:])


class _AbortedFilter:
    """A read_committed reader's view of aborted transactions (Kafka's consumer, CompletedFetch):
    a producer's transactional batches are skipped from the first offset of its aborted
    transaction until its abort marker."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)
        self._producers: set[int] = set()

    def skips(self, batch: RecordBatch) -> bool:
        """Whether ``batch`` belongs to an aborted transaction (its abort marker included)."""
        if not self._pending and not self._producers:
            return False
        if batch.producer_id < 0:
            return False
        while self._pending and self._pending[-1].first_offset <= batch.last_offset:
            self._producers.add(self._pending.pop().producer_id)
        producer_id = batch.producer_id
        if producer_id not in self._producers:
            return False
        if batch.is_control:
            records = batch.records()
            if records and parse_control_record(records[0])[0] == ControlType.ABORT:
                self._producers.discard(producer_id)
            return True
        return batch.is_transactional
