"""``Cleaner``: one clean of one log (Kafka's Cleaner in LogCleaner.scala).

1. Build the offset map over the dirty section ``[first_dirty, first_uncleanable)``: key hash ->
   latest offset, stopping when the map is full (a partly mapped segment is fine, KAFKA-3894).
   ``end_offset = map.latest_offset + 1`` is where the next clean starts. The batches of aborted
   transactions (from the ``.txnindex`` files) never enter the map, and the dirty section never
   reaches past the segment holding the last stable offset.
2. Group every segment below ``end_offset`` (the clean section too) into runs that fit one segment
   (``segment.bytes``, ``segment.index.bytes``, a 32-bit offset span).
3. Clean each group into one ``<first base>.log.cleaned`` segment, keeping a record when it is past
   the map, or is the latest of its key and is not a tombstone past its delete horizon; unkeyed
   records are dropped and counted. Batches keep their base offset, so every kept record keeps its
   offset; a batch left without records (or already empty) stays, as an empty batch, only while it
   is an active producer's last batch or the last batch of the round (its next offset is the first
   uncleanable offset), and is dropped by the first clean after that. Tombstones get a delete horizon
   (``now + delete.retention.ms``) the first time a clean keeps them (KIP-534). Transactions follow
   Kafka's CleanedTransactionMetadata (cleaner/txn_metadata.py): an aborted transaction's batches
   are dropped; an abort marker stays while a batch of its transaction remains (and its entry is
   written to the cleaned segment's ``.txnindex``), a commit marker while its transaction's data
   does; a marker no longer needed gets a delete horizon and goes in a clean after it.
4. Swap each group in with ``Log.replace_segments`` (the crash-safe rename order).

``check_done`` runs at every chunk; when it raises (an abort), the ``.cleaned`` files are deleted and
the log is exactly as before. Memory: the offset map plus read/write buffers that grow only up to
``max.message.bytes`` for one oversized batch.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import crc32c
import numpy as np

from cleaner.config import CleanerConfig
from cleaner.errors import CorruptSegmentError
from cleaner.kernels import gather_records
from cleaner.offset_map import OffsetMap
from cleaner.stats import CleanerStats, CleanerStatsSnapshot
from cleaner.throttler import Throttler
from cleaner.txn_metadata import CleanedTransactionMetadata
from storage import compression, kernels
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import CorruptRecordError
from storage.files import TopicPartition
from storage.log import Log
from storage.batch_layout import CRC_OFFSET, SIZE_OFFSET, V2_FIELD_INDEX
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_DECOMPRESSED_BYTES,
    BatchHeader,
    Compression,
    RecordBatch,
    TimestampType,
    build_batch,
    max_records_in,
    parse_control_record,
    scan_batches,
)
from storage.segment import LogSegment, SegmentIdentity

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1     # a delete horizon past it saturates (Kafka's long would wrap)
_DELETE_HORIZON_FLAG = 0x40
_CRC = struct.Struct(">I")
_CRC_POSITION = CRC_OFFSET
_CONTROL_FLAG = 0x20


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one clean did. ``next_dirty_offset`` is the new cleaner checkpoint."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    next_dirty_offset: int
    stats: CleanerStatsSnapshot
    groups: int


class Cleaner:
    """The cleaning algorithm. Owns one offset map; one clean at a time (not thread-safe)."""

    def __init__(self, config: CleanerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 throttler: Throttler | None = None, offset_map: OffsetMap | None = None,
                 check_done: Callable[[TopicPartition], None] | None = None,
                 cleaner_id: int = 0) -> None:
        self.config = config or CleanerConfig()
        self.clock = clock
        self.cleaner_id = cleaner_id
        self.offset_map = offset_map or OffsetMap(self.config.map_memory_per_cleaner,
                                                  self.config.dedupe_buffer_load_factor)
        self.throttler = throttler or Throttler(self.config.max_io_bytes_per_second, clock=clock)
        self.check_done = check_done or (lambda _tp: None)
        self.io_buffer_size = max(self.config.io_buffer_per_cleaner, HEADER_SIZE)

    # ---- entry point -------------------------------------------------------------------------
    def clean(self, log: Log, first_dirty_offset: int, now_ms: int | None = None,
              first_uncleanable_offset: int | None = None) -> CleanResult:
        """Clean ``log`` from ``first_dirty_offset`` up to ``first_uncleanable_offset`` (default:
        the active segment's base offset, or the base of the segment holding the log's last
        stable offset when that is lower). Raises LogCleaningAbortedError when ``check_done``
        does."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        tp = log.topic_partition
        end = log.active_segment.base_offset if first_uncleanable_offset is None else min(
            first_uncleanable_offset, log.active_segment.base_offset)
        stable = getattr(log, "last_stable_offset", end)
        if first_uncleanable_offset is None and stable < end:
            # never past the first unstable offset (an open transaction may still abort): stop
            # at the base of the segment holding it, as Kafka's calculateCleanableBytes does
            end = log.segments_in_range(stable, stable + 1)[0].base_offset
        stats = CleanerStats(self.clock)
        legacy_horizon = self._legacy_delete_horizon(log, first_dirty_offset)
        # what the segments are before anything is read: the swap is refused if one changes
        seen = {s.base_offset: s.identity for s in log.segments_in_range(0, end)}
        self.build_offset_map(log, first_dirty_offset, end, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        groups = group_segments_by_size(log.segments_in_range(0, end_offset),
                                        log.config.segment_bytes, log.config.segment_index_bytes,
                                        end_offset)
        producers = _LastBatches(lambda: self._last_batches_of_producers(
            log, self.clock.milliseconds()))
        txns = CleanedTransactionMetadata()    # carried from group to group, as in Kafka
        for i, group in enumerate(groups):
            next_base = groups[i + 1][0].base_offset if i + 1 < len(groups) else end
            self.clean_segments(log, group, now, stats, legacy_horizon, end, producers, seen,
                                next_base, txns)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return CleanResult(tp, first_dirty_offset, end, end_offset, stats.snapshot(), len(groups))

    def _legacy_delete_horizon(self, log: Log, first_dirty: int) -> int:
        before = [s for s in log.segments() if s.base_offset < first_dirty]
        if not before:
            return 0
        return before[-1].last_modified_ms - log.config.delete_retention_ms

    # ---- offset map --------------------------------------------------------------------------
    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """Map key -> latest offset over [start, end), stopping when the map is full."""
        self.offset_map.clear()
        dirty = log.segments_in_range(start, end)
        txns = CleanedTransactionMetadata()
        txns.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            self.check_done(log.topic_partition)
            if self._map_segment(log, segment, start, next_start, stats, txns):
                logger.debug("offset map of %s full: %d segments fully mapped, segment %d partly",
                          log.name, i, segment.base_offset)
                return

    def _map_segment(self, log: Log, segment: LogSegment, start: int, next_start: int,
                     stats: CleanerStats, txns: CleanedTransactionMetadata) -> bool:
        """Returns True when the map filled up inside this segment. The batches of aborted
        transactions (``txns``) are read but never enter the map (Kafka's
        buildOffsetMapForSegment)."""
        position = segment.offset_index.lookup(start).position
        for chunk_position, chunk, scan in self._chunks(log, segment, position):
            for pos, size, magic in zip(scan.positions.tolist(), scan.sizes.tolist(),
                                        scan.magics.tolist()):
                header = _header(chunk, pos, size, magic, log, segment, chunk_position + pos)
                if header.is_control:
                    txns.on_control_batch_read(header.producer_id, header.last_offset,
                                               _control_type(chunk, pos, size, header))
                    stats.index_messages_read(1)
                elif txns.on_batch_read(header.producer_id, header.last_offset,
                                        header.is_transactional):
                    stats.index_messages_read(max(header.records_count, 0))
                else:
                    batch = _Records.read(chunk, pos, size, header, log, segment,
                                          chunk_position + pos)
                    n = batch.count
                    offsets = batch.offsets()
                    lengths = np.where(offsets >= start, batch.key_len, -1)
                    consumed = self.offset_map.put_batch(batch.buf, batch.key_start, lengths,
                                                         offsets)
                    stats.index_messages_read(consumed)
                    if consumed < n:
                        return True
                if header.last_offset >= start:
                    self.offset_map.update_latest_offset(header.last_offset)
            stats.index_bytes_read(scan.valid_bytes)
        self.offset_map.update_latest_offset(next_start - 1)
        return False

    def _chunks(self, log: Log, segment: LogSegment, position: int, *, check_crc: bool = True):
        """Read ``segment`` from ``position`` in I/O-buffer-sized chunks of whole batches, growing
        the buffer for a batch larger than it (up to max.message.bytes, then to the batch).

        With ``check_crc`` (every pass that uses records) each batch's CRC is verified before it is
        yielded; a batch that fails it, or an impossible batch, raises ``CorruptSegmentError``."""
        buffer_size = self.io_buffer_size
        max_size = max(log.config.max_message_bytes, self.config.max_message_size)
        end = segment.size
        while position < end:
            self.check_done(log.topic_partition)
            wanted = min(buffer_size, end - position)
            chunk = segment.read_bytes(position, wanted)
            if len(chunk) < wanted:
                raise _corrupt(log, segment, position, _claimed_offset(chunk, 0),
                               f"the file ends at byte {position + len(chunk)}, before the "
                               f"segment's {end} bytes")
            self.throttler.maybe_throttle(len(chunk))
            scan = scan_batches(chunk, check_crc=check_crc)
            if scan.error is not None and len(scan.positions) == 0:
                bad = max(scan.error_position, 0)
                raise _corrupt(log, segment, position + bad, _claimed_offset(chunk, bad),
                               scan.error.replace(f"at position {scan.error_position}",
                                                  "").strip())
            if len(scan.positions) == 0:
                if len(chunk) < LOG_OVERHEAD:
                    return
                batch_size = int.from_bytes(chunk[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                if position + batch_size > end:
                    raise _corrupt(log, segment, position, _claimed_offset(chunk, 0),
                                   f"the batch claims {batch_size} bytes but only "
                                   f"{end - position} remain in the segment")
                if buffer_size >= batch_size:      # cannot happen after a full read
                    raise _corrupt(log, segment, position, _claimed_offset(chunk, 0),
                                   f"a batch of {batch_size} bytes is not whole in "
                                   f"{len(chunk)} bytes read")
                # Kafka's growBuffersOrFail: double up to max.message.bytes, then fit the batch
                buffer_size = min(buffer_size * 2, max_size) if buffer_size < max_size else batch_size
                continue
            yield position, chunk, scan
            position += scan.valid_bytes

    # ---- cleaning ----------------------------------------------------------------------------
    def clean_segments(self, log: Log, group: Sequence[LogSegment], now_ms: int,
                       stats: CleanerStats, legacy_horizon: int, upper_bound: int,
                       last_batch_of_producer: _LastBatches,
                       seen: Mapping[int, SegmentIdentity] | None = None,
                       next_base: int | None = None,
                       txns: CleanedTransactionMetadata | None = None) -> None:
        """Clean one group into one ``.cleaned`` segment and swap it in. ``seen`` holds the
        segments' identities from before the clean read them; the swap is refused
        (``SegmentsChangedError``) when one of them changed since. ``next_base`` (default
        ``upper_bound``) is where the segments after the group begin.

        Transactions follow Kafka's cleanSegments: the aborted transactions overlapping each
        source segment are read from the ``.txnindex`` files, batches of aborted transactions are
        dropped, markers are kept or given a delete horizon (``CleanedTransactionMetadata``), and
        every aborted transaction whose marker stays is written to the cleaned segment's
        ``.txnindex``, which is swapped in with it. ``txns`` is the transaction state carried over
        from the previous groups of this clean (default: none)."""
        cleaned = log.create_cleaned_segment(group[0].base_offset)
        txns = txns or CleanedTransactionMetadata()
        txns.cleaned_index = cleaned.txn_index
        next_base = upper_bound if next_base is None else next_base
        try:
            for i, source in enumerate(group):
                source_end = group[i + 1].base_offset if i + 1 < len(group) else next_base
                txns.add_aborted_transactions(
                    log.collect_aborted_transactions(source.base_offset, source_end))
                retain_legacy_deletes = source.last_modified_ms > legacy_horizon
                self._clean_into(log, source, cleaned, now_ms, stats, retain_legacy_deletes,
                                 upper_bound, last_batch_of_producer, txns)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
            self.check_done(log.topic_partition)
            expected = None if seen is None else [seen.get(s.base_offset, s.identity)
                                                  for s in group]
            log.replace_segments([cleaned], list(group), expected)
        except BaseException:
            cleaned.delete_files()
            raise

    def _last_batches_of_producers(self, log: Log, now_ms: int) -> dict[int, _LastRecord]:
        """Active producer id -> its last record (Kafka's lastRecordsOfActiveProducers): the
        last offset of its last data batch, and its epoch. A marker with a newer epoch than the
        data before it clears the data offset (the epoch bump resets the producer's batches), so
        that marker is the producer's last record. That batch keeps its place (as an empty batch
        if need be) so the producer's sequence and epoch survive the clean. A producer whose last
        batch is ``producer.id.expiration.ms`` older than ``now_ms`` (the clock, as Kafka's
        producer state expires by wall time, not by the clean's ``currentTime``) is no longer
        active."""
        last: dict[int, tuple[int | None, int, int]] = {}
        for segment in log.segments():
            for _position, _chunk, scan in self._chunks(log, segment, 0, check_crc=False):
                with_producer = np.flatnonzero(scan.producer_ids >= 0)
                for pid, offset, timestamp, epoch, attributes in zip(
                        scan.producer_ids[with_producer].tolist(),
                        scan.last_offsets[with_producer].tolist(),
                        scan.max_timestamps[with_producer].tolist(),
                        scan.producer_epochs[with_producer].tolist(),
                        scan.attributes[with_producer].tolist()):
                    if not attributes & _CONTROL_FLAG:
                        last[pid] = (offset, epoch, timestamp)
                    else:
                        data_offset, last_epoch, _ = last.get(pid, (None, epoch, timestamp))
                        last[pid] = (data_offset if epoch == last_epoch else None, epoch,
                                     timestamp)
        expiration = self.config.producer_id_expiration_ms
        return {pid: _LastRecord(offset, epoch) for pid, (offset, epoch, timestamp) in last.items()
                if now_ms - timestamp < expiration}

    def _clean_into(self, log: Log, source: LogSegment, dest: LogSegment, now_ms: int,
                    stats: CleanerStats, retain_legacy_deletes: bool, upper_bound: int,
                    last_batch_of_producer: _LastBatches,
                    txns: CleanedTransactionMetadata | None = None) -> None:
        txns = txns or CleanedTransactionMetadata()
        delete_retention = log.config.delete_retention_ms
        for chunk_position, chunk, scan in self._chunks(log, source, 0):
            pieces: list[bytes | bytearray | memoryview] = []
            max_ts, max_ts_offset, last_offset = -1, -1, -1
            for pos, size, magic in zip(scan.positions.tolist(), scan.sizes.tolist(),
                                        scan.magics.tolist()):
                header = _header(chunk, pos, size, magic, log, source, chunk_position + pos)
                stats.read_messages(max(header.records_count, 0), size)
                records = None if header.is_control else _Records.read(
                    chunk, pos, size, header, log, source, chunk_position + pos)
                if header.is_control:
                    can_discard = txns.on_control_batch_read(
                        header.producer_id, header.last_offset,
                        _control_type(chunk, pos, size, header))
                else:
                    can_discard = header.magic >= 2 and txns.on_batch_read(
                        header.producer_id, header.last_offset, header.is_transactional)
                out = self._filter_batch(log, chunk, pos, size, header, records, now_ms, stats,
                                         retain_legacy_deletes, delete_retention, upper_bound,
                                         last_batch_of_producer, can_discard)
                if out is None:
                    continue
                data, count, batch_max_ts = out
                pieces.append(data)
                stats.recopy_messages(count, len(data))
                last_offset = header.last_offset
                if batch_max_ts > max_ts:
                    max_ts, max_ts_offset = batch_max_ts, header.last_offset
            if pieces:
                dest.append(last_offset, max_ts, max_ts_offset, pieces)
                self.throttler.maybe_throttle(sum(len(p) for p in pieces))

    def _filter_batch(self, log: Log, chunk: bytes, pos: int, size: int, header: BatchHeader,
                      records: _Records | None, now_ms: int, stats: CleanerStats,
                      retain_legacy_deletes: bool, delete_retention: int, upper_bound: int,
                      last_batch_of_producer: _LastBatches, can_discard: bool = False
                      ) -> tuple[bytes | bytearray | memoryview, int, int] | None:
        """The retained form of one batch: (bytes, records kept, max timestamp), or None.
        ``records`` is the batch decoded (None for a control batch). ``can_discard``: the
        transaction metadata allows discarding it (an aborted transaction's batch, or a marker
        whose transaction left no batch behind).

        Kafka's checkBatchRetention and filterTo: a discardable data batch loses its records; a
        discardable marker first gets a delete horizon (``now + delete.retention.ms``) and loses
        its record in a clean after that horizon. A batch left without records stays, as an empty
        batch, only while it is its producer's last record or the round's last batch."""
        raw = memoryview(chunk)[pos:pos + size]   # no copy: pieces are written with writev
        if header.is_control:
            horizon = header.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= now_ms
        else:
            discard_records = can_discard
        if discard_records or (records is None and header.records_count <= 0):
            if self._retain_empty(header, upper_bound, last_batch_of_producer):
                return _empty_batch(header), 0, header.max_timestamp
            return None
        if records is None:
            if can_discard and header.magic >= 2 and header.delete_horizon_ms is None:
                return self._rebuild(raw, header, None, None,
                                     min(now_ms + delete_retention, INT64_MAX))
            return raw, max(header.records_count, 0), header.max_timestamp
        offsets = records.offsets()
        latest = self.offset_map.latest_offset
        mapped = self.offset_map.get_batch(records.buf, records.key_start, records.key_len)
        has_key = records.key_len >= 0
        has_value = records.value_len >= 0
        if header.magic >= 2:
            horizon = header.delete_horizon_ms
            retain_deletes = horizon is None or now_ms < horizon
        else:
            retain_deletes = retain_legacy_deletes
        keep = (offsets > latest) | (has_key & (offsets >= mapped) & (has_value | retain_deletes))
        invalid = int(np.count_nonzero(~has_key & (offsets <= latest)))
        for _ in range(invalid):
            stats.invalid_message()
        kept = int(np.count_nonzero(keep))
        if kept == 0:
            if self._retain_empty(header, upper_bound, last_batch_of_producer):
                return _empty_batch(header), 0, header.max_timestamp
            return None
        tombstones = bool(np.any(keep & ~has_value))
        needs_horizon = header.magic >= 2 and tombstones and header.delete_horizon_ms is None
        if kept == records.count and not needs_horizon and header.magic >= 2:
            return raw, kept, header.max_timestamp
        if needs_horizon or header.magic < 2:
            return self._rebuild(raw, header, keep, offsets, min(now_ms + delete_retention,
                                                                 INT64_MAX)
                                 if needs_horizon else None)
        body = np.empty(int(records.rec_end[-1] - records.rec_start[0]), dtype=np.uint8)
        n = gather_records(records.buf, records.rec_start, records.rec_end, keep, body)
        max_ts = header.max_timestamp if header.timestamp_type == 1 else int(
            header.base_timestamp + records.ts_delta[keep].max())
        data = _rewrite_batch(raw, header, memoryview(body)[:n], kept, max_ts)
        return data, kept, max_ts

    @staticmethod
    def _retain_empty(header: BatchHeader, upper_bound: int,
                      last_batch_of_producer: _LastBatches) -> bool:
        """Kafka's RETAIN_EMPTY: a batch left without records stays (as an empty batch) while
        it is its active producer's last record (its last data batch, or a marker of its current
        epoch when no data follows the epoch), or the last batch of this round."""
        if header.producer_id >= 0:
            last = last_batch_of_producer.get(header.producer_id)
            if last is not None and (header.last_offset == last.data_offset
                                     if last.data_offset is not None else
                                     header.is_control and header.producer_epoch == last.epoch):
                return True
        return header.next_offset == upper_bound

    def _rebuild(self, raw: memoryview, header: BatchHeader, keep: np.ndarray | None,
                 offsets: np.ndarray | None, delete_horizon_ms: int | None
                 ) -> tuple[bytes, int, int]:
        """Re-encode the kept records (all of them when ``keep`` is None: a marker given its
        delete horizon; a tombstone horizon; or a legacy batch becoming v2). The timestamp type
        stays; under LogAppendTime so does the batch's max timestamp (the append time every
        record reads back), as Kafka's buildRetainedRecordsInto keeps them."""
        kept = RecordBatch(raw).records()
        if keep is not None and offsets is not None:
            keep_offsets = set(offsets[keep].tolist())
            kept = [r for r in kept if r.offset in keep_offsets]
        base = header.base_offset
        log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        data = build_batch(
            kept, base_offset=base,
            timestamp_type=header.timestamp_type,
            max_timestamp=header.max_timestamp if log_append_time else None,
            compression=Compression(header.compression) if header.magic >= 2 else Compression.NONE,
            producer_id=header.producer_id if header.magic >= 2 else -1,
            producer_epoch=header.producer_epoch if header.magic >= 2 else -1,
            base_sequence=header.base_sequence if header.magic >= 2 else -1,
            partition_leader_epoch=header.partition_leader_epoch if header.magic >= 2 else -1,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            delete_horizon_ms=delete_horizon_ms,
            offset_deltas=[r.offset - base for r in kept],
            last_offset_delta=header.last_offset - base)
        max_ts = header.max_timestamp if log_append_time else max(r.timestamp for r in kept)
        return data, len(kept), max_ts


@dataclass(frozen=True, slots=True)
class _LastRecord:
    """An active producer's last record (Kafka's LastRecord): the last offset of its last data
    batch (None when a marker of a newer epoch follows it) and its epoch."""

    data_offset: int | None
    epoch: int


class _LastBatches:
    """Producer id -> its last record, computed on the first question: only a batch that loses
    every record asks, so a clean of a log without such batches never pays the scan."""

    def __init__(self, compute: Callable[[], dict[int, _LastRecord]]) -> None:
        self._compute = compute
        self._found: dict[int, _LastRecord] | None = None

    def get(self, producer_id: int) -> _LastRecord | None:
        if self._found is None:
            self._found = self._compute()
        return self._found.get(producer_id)


@dataclass(slots=True)
class _Records:
    """The per-record arrays of one batch (decompressed when needed)."""

    buf: np.ndarray
    count: int
    base_offset: int
    rec_start: np.ndarray
    rec_end: np.ndarray
    ts_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_len: np.ndarray

    def offsets(self) -> np.ndarray:
        return self.base_offset + self.offset_delta

    @classmethod
    def read(cls, chunk: bytes, pos: int, size: int, header: BatchHeader, log: Log,
             segment: LogSegment, file_position: int) -> _Records:
        """Decode the batch at ``chunk[pos:pos + size]`` (at ``file_position`` of ``segment``)
        within the read path's limits: at most ``MAX_DECOMPRESSED_BYTES`` decompressed, a records
        count no larger than its bytes can hold. Any failure is a ``CorruptSegmentError``."""
        try:
            return cls._decode(chunk, pos, size, header)
        except CorruptRecordError as err:
            raise _corrupt(log, segment, file_position, header.base_offset, err.message) from err

    @classmethod
    def _decode(cls, chunk: bytes, pos: int, size: int, header: BatchHeader) -> _Records:
        if header.magic < 2:
            return cls._legacy(chunk[pos:pos + size])
        count = header.records_count
        if header.compression == Compression.NONE:
            buf = np.frombuffer(chunk, dtype=np.uint8)
            start, end = pos + HEADER_SIZE, pos + size
        else:
            body = compression.decompress(Compression(header.compression),
                                          chunk[pos + HEADER_SIZE:pos + size],
                                          max_size=MAX_DECOMPRESSED_BYTES)
            buf = np.frombuffer(body, dtype=np.uint8)
            start, end = 0, len(body)
        if not 0 <= count <= max_records_in(end - start):
            raise CorruptRecordError(f"records count {count} cannot fit in the batch's "
                                     f"{end - start} bytes of records")
        table = np.empty((kernels.RECORD_ROWS, count), dtype=np.int64)
        read, status, where = kernels.walk_records(buf, start, end, table)
        if status != kernels.OK:
            raise CorruptRecordError(
                f"malformed record {read} at byte {where - start} of the records")
        return cls(buf, count, header.base_offset, table[kernels.REC_START],
                   table[kernels.REC_END], table[kernels.REC_TIMESTAMP_DELTA],
                   table[kernels.REC_OFFSET_DELTA], table[kernels.REC_KEY_POS],
                   table[kernels.REC_KEY_LEN], table[kernels.REC_VALUE_LEN])

    @classmethod
    def _legacy(cls, raw: bytes) -> _Records:
        """Legacy (magic 0/1) entries: decode through the reader into contiguous key arrays."""
        records = RecordBatch(raw).records()
        keys = [r.key or b"" for r in records]
        buf = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8)
        lengths = np.array([len(r.key) if r.key is not None else -1 for r in records], np.int64)
        starts = np.concatenate([[0], np.cumsum([len(k) for k in keys])[:-1]]).astype(np.int64) \
            if records else np.zeros(0, np.int64)
        offsets = np.array([r.offset for r in records], dtype=np.int64)
        base = int(offsets[0]) if records else 0
        values = np.array([len(r.value) if r.value is not None else -1 for r in records], np.int64)
        zeros = np.zeros(len(records), dtype=np.int64)
        return cls(buf, len(records), base, zeros, zeros, zeros, offsets - base, starts, lengths,
                   values)


def _control_type(chunk: bytes, pos: int, size: int, header: BatchHeader) -> int | None:
    """The type of a control batch's first record (``ControlType.ABORT``/``COMMIT`` or another
    int), or None for an empty control batch."""
    if header.records_count <= 0:
        return None
    records = RecordBatch(chunk[pos:pos + size]).records()
    return parse_control_record(records[0])[0] if records else None


def _claimed_offset(chunk: bytes, pos: int) -> int:
    """The base offset a (possibly damaged) batch header at ``chunk[pos:]`` claims, or -1."""
    return int.from_bytes(chunk[pos:pos + 8], "big", signed=True) if len(chunk) >= pos + 8 else -1


def _corrupt(log: Log, segment: LogSegment, position: int, offset: int,
             problem: str) -> CorruptSegmentError:
    return CorruptSegmentError(
        f"{segment.log_path}: corrupt batch at position {position} (offset {offset}) of "
        f"partition {log.name}: {problem}; the clean stops and the segment is left as it is",
        path=str(segment.log_path), position=position, offset=offset, partition=log.name)


def _header(chunk: bytes, pos: int, size: int, magic: int, log: Log, segment: LogSegment,
            file_position: int) -> BatchHeader:
    """The batch's header; a legacy entry's is read through its (bounded) wrapper, and a wrapper
    that cannot be read is a ``CorruptSegmentError``."""
    if magic >= 2:
        return BatchHeader.parse(chunk, pos)
    try:
        return RecordBatch(chunk[pos:pos + size], file_position, segment.log_path).header
    except CorruptRecordError as err:
        raise _corrupt(log, segment, file_position, _claimed_offset(chunk, pos),
                       err.message) from err


def _rewrite_batch(raw: memoryview, header: BatchHeader, body: memoryview, count: int,
                   max_ts: int) -> bytearray:
    """The batch with a new record body, count and max timestamp; offsets, producer fields and the
    base timestamp unchanged; compressed again with its codec. One copy of the body."""
    if header.compression != Compression.NONE:
        body = memoryview(compression.compress(Compression(header.compression), bytes(body)))
    fields = list(BATCH_HEADER.unpack_from(raw, 0))
    fields[V2_FIELD_INDEX["batch_length"]] = HEADER_SIZE - LOG_OVERHEAD + len(body)
    fields[V2_FIELD_INDEX["crc"]] = 0                       # set below
    fields[V2_FIELD_INDEX["max_timestamp"]] = max_ts
    fields[V2_FIELD_INDEX["records_count"]] = count
    out = bytearray(HEADER_SIZE + len(body))
    BATCH_HEADER.pack_into(out, 0, *fields)
    out[HEADER_SIZE:] = body
    _CRC.pack_into(out, _CRC_POSITION, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def _empty_batch(header: BatchHeader) -> bytes:
    """Kafka's empty batch: header only, count 0, base timestamp -1, no compression, keeping the
    base and last offset, producer fields and max timestamp."""
    fields = [header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
              header.attributes & ~0x07 & ~_DELETE_HORIZON_FLAG, header.last_offset_delta, -1,
              header.max_timestamp, header.producer_id, header.producer_epoch,
              header.base_sequence, 0]
    out = bytearray(BATCH_HEADER.pack(*fields))
    _CRC.pack_into(out, _CRC_POSITION, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive runs whose log bytes fit ``segment.bytes``, whose
    offset and time index bytes each fit ``segment.index.bytes``, and whose offsets span at most
    2^31-1 from the group's *first* base offset (so every offset fits the cleaned segment's 32-bit
    relative offsets). A segment's last offset is bounded by the next segment's base - 1 (or
    ``first_uncleanable_offset - 1`` for the last one); an empty segment always joins."""
    groups: list[list[LogSegment]] = []
    remaining = list(segments)
    while remaining:
        first = remaining.pop(0)
        group = [first]
        log_size = first.size
        index_size = _index_bytes(first.offset_index.path)
        time_index_size = _index_bytes(first.time_index.path)
        while remaining:
            candidate = remaining[0]
            next_last = (remaining[1].base_offset - 1 if len(remaining) > 1
                         else first_uncleanable_offset - 1)
            if (log_size + candidate.size > max_size
                    or index_size + _index_bytes(candidate.offset_index.path) > max_index_size
                    or time_index_size + _index_bytes(candidate.time_index.path) > max_index_size
                    or (candidate.size > 0 and next_last - group[0].base_offset > INT32_MAX)):
                break
            group.append(remaining.pop(0))
            log_size += candidate.size
            index_size += _index_bytes(candidate.offset_index.path)
            time_index_size += _index_bytes(candidate.time_index.path)
        groups.append(group)
    return groups


def _index_bytes(path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
