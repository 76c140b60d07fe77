"""What a clean keeps of one batch (Kafka's checkBatchRetention, filterTo and RETAIN_EMPTY): the
batch whole, the batch rebuilt with its kept records (a rewritten body, or re-encoded with a delete
horizon, or a legacy batch made v2), an empty batch that keeps an active producer's last record
or the round's last offset, or nothing. This module owns those rules and the byte-level rewrites of
a batch (its CRC recomputed). ``cleaner.cleaner.Cleaner`` hands the batches of a chunk to
``filter_plain_batches``, whose kernel applies the same rules to each run of plain batches (v2,
uncompressed, no transaction, see ``cleaner.kernels``), and every batch it stops at to
``filter_batch``; both write to the chunk's ``ChunkOutput``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import crc32c
import numpy as np

from cleaner.kernels import (R_INVALID, R_KEPT_RECORDS, R_LAST_OFFSET, R_MAX_TIMESTAMP,
                             R_MAX_TIMESTAMP_OFFSET, R_NEXT, R_OUT_END, R_READ_BYTES,
                             R_READ_RECORDS, R_REWRITTEN, R_STATUS, RESULT_FIELDS, filter_batches,
                             gather_records)
from cleaner.offset_map import MapLookup, OffsetMap
from cleaner.segment_reader import Records
from cleaner.stats import CleanerStats
from storage import compression
from storage.batch_layout import CRC_OFFSET, SIZE_OFFSET, V2_FIELD_INDEX
from storage.records import (ATTRIBUTES_OFFSET, BATCH_HEADER, HEADER_SIZE, LOG_OVERHEAD,
                             BatchHeader, BatchScan, Compression, RecordBatch, TimestampType,
                             build_batch)

INT64_MAX = 2**63 - 1     # a delete horizon past it saturates (Kafka's long would wrap)
_DELETE_HORIZON_FLAG = 0x40
_CRC = struct.Struct(">I")
_CRC_POSITION = CRC_OFFSET


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last record (Kafka's LastRecord): the last offset of its last data
    batch (None when a marker of a newer epoch follows it) and its epoch."""

    data_offset: int | None
    epoch: int


class LastBatches:
    """Producer id -> its last record, computed on the first question: only a batch that loses
    every record asks, so a clean of a log without such batches never pays the scan."""

    def __init__(self, compute: Callable[[], dict[int, LastRecord]]) -> None:
        self._compute = compute
        self._found: dict[int, LastRecord] | None = None

    def get(self, producer_id: int) -> LastRecord | None:
        if self._found is None:
            self._found = self._compute()
        return self._found.get(producer_id)


class ChunkOutput:
    """The batches kept of one chunk, in order: pieces for one ``writev`` (the runs a kernel
    wrote into ``buffer``, the batches of the per-batch path), with what the segment's append
    needs: the last offset written, and the largest max timestamp with the last offset of the
    first batch carrying it. Owned by the clean of one chunk."""

    def __init__(self, buffer: np.ndarray) -> None:
        self.buffer = buffer
        self.position = 0                   # where the next kernel run writes in ``buffer``
        self.pieces: list[bytes | bytearray | memoryview] = []
        self.size = 0
        self.last_offset = -1
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1

    def add(self, data: bytes | bytearray | memoryview, count: int, max_timestamp: int,
            last_offset: int, stats: CleanerStats, offset_of_max_timestamp: int | None = None
            ) -> None:
        """Append ``data`` (``count`` records kept, ending at ``last_offset``) and count it."""
        self.pieces.append(data)
        self.size += len(data)
        stats.recopy_messages(count, len(data))
        self.last_offset = last_offset
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = (last_offset if offset_of_max_timestamp is None
                                            else offset_of_max_timestamp)


@dataclass(frozen=True, slots=True)
class PlainRun:
    """How far ``filter_plain_batches`` went: the batch to go on from and ``kernels.DONE``,
    ``kernels.EMPTY`` (batch ``next`` was read and kept no record, and may stay as an empty
    batch: ``retain_empty`` decides) or ``kernels.PER_BATCH`` (batch ``next`` is left, uncounted,
    to ``filter_batch``)."""

    next: int
    status: int


def filter_plain_batches(lookup: MapLookup, data: np.ndarray, scan: BatchScan, first: int,
                         last: int, now_ms: int, upper_bound: int, written: ChunkOutput,
                         stats: CleanerStats) -> PlainRun:
    """Filter the batches ``first..last-1`` of ``scan`` (over the chunk ``data``) with
    ``kernels.filter_batches``, ``filter_batch``'s rules for plain batches, into ``written``; the
    CRC of every rewritten batch is computed here. Stops early as ``PlainRun`` says."""
    result = np.empty(RESULT_FIELDS, dtype=np.int64)
    rewritten = np.empty(last - first, dtype=np.int64)
    out = written.buffer
    start = written.position
    filter_batches(lookup.table, lookup.table_slots, lookup.k0, lookup.k1, lookup.latest_offset,
                   data, scan.positions, scan.sizes, scan.last_offsets, first, last, now_ms,
                   upper_bound, out, start, rewritten, result)
    end = int(result[R_OUT_END])
    view = memoryview(out)
    for at in rewritten[:int(result[R_REWRITTEN])].tolist():
        size = int.from_bytes(view[at + SIZE_OFFSET:at + LOG_OVERHEAD], "big") + LOG_OVERHEAD
        _CRC.pack_into(view, at + _CRC_POSITION,
                       crc32c.crc32c(view[at + ATTRIBUTES_OFFSET:at + size]))
    stats.read_messages(int(result[R_READ_RECORDS]), int(result[R_READ_BYTES]))
    stats.invalid_messages(int(result[R_INVALID]))
    if end > start:
        written.position = end
        written.add(view[start:end], int(result[R_KEPT_RECORDS]), int(result[R_MAX_TIMESTAMP]),
                    int(result[R_LAST_OFFSET]), stats, int(result[R_MAX_TIMESTAMP_OFFSET]))
    return PlainRun(int(result[R_NEXT]), int(result[R_STATUS]))


def filter_batch(offset_map: OffsetMap, chunk: bytes, pos: int, size: int, header: BatchHeader,
                 records: Records | None, now_ms: int, stats: CleanerStats,
                 retain_legacy_deletes: bool, delete_retention: int, upper_bound: int,
                 last_batch_of_producer: LastBatches, can_discard: bool = False
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
        if retain_empty(header, upper_bound, last_batch_of_producer):
            return empty_batch(header), 0, header.max_timestamp
        return None
    if records is None:
        if can_discard and header.magic >= 2 and header.delete_horizon_ms is None:
            return rebuild(raw, header, None, None, min(now_ms + delete_retention, INT64_MAX))
        return raw, max(header.records_count, 0), header.max_timestamp
    offsets = records.offsets()
    latest = offset_map.latest_offset
    mapped = offset_map.get_batch(records.buf, records.key_start, records.key_len)
    has_key = records.key_len >= 0
    has_value = records.value_len >= 0
    if header.magic >= 2:
        horizon = header.delete_horizon_ms
        retain_deletes = horizon is None or now_ms < horizon
    else:
        retain_deletes = retain_legacy_deletes
    keep = (offsets > latest) | (has_key & (offsets >= mapped) & (has_value | retain_deletes))
    stats.invalid_messages(int(np.count_nonzero(~has_key & (offsets <= latest))))
    kept = int(np.count_nonzero(keep))
    if kept == 0:
        if retain_empty(header, upper_bound, last_batch_of_producer):
            return empty_batch(header), 0, header.max_timestamp
        return None
    tombstones = bool(np.any(keep & ~has_value))
    needs_horizon = header.magic >= 2 and tombstones and header.delete_horizon_ms is None
    if kept == records.count and not needs_horizon and header.magic >= 2:
        return raw, kept, header.max_timestamp
    if needs_horizon or header.magic < 2:
        return rebuild(raw, header, keep, offsets, min(now_ms + delete_retention, INT64_MAX)
                       if needs_horizon else None)
    body = np.empty(int(records.rec_end[-1] - records.rec_start[0]), dtype=np.uint8)
    n = gather_records(records.buf, records.rec_start, records.rec_end, keep, body)
    max_ts = header.max_timestamp if header.timestamp_type == 1 else int(
        header.base_timestamp + records.ts_delta[keep].max())
    data = rewrite_batch(raw, header, memoryview(body)[:n], kept, max_ts)
    return data, kept, max_ts


def retain_empty(header: BatchHeader, upper_bound: int,
                 last_batch_of_producer: LastBatches) -> bool:
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


def rebuild(raw: memoryview, header: BatchHeader, keep: np.ndarray | None,
            offsets: np.ndarray | None, delete_horizon_ms: int | None) -> tuple[bytes, int, int]:
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


def rewrite_batch(raw: memoryview, header: BatchHeader, body: memoryview, count: int,
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


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's empty batch: header only, count 0, base timestamp -1, no compression, keeping the
    base and last offset, producer fields and max timestamp."""
    fields = [header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
              header.attributes & ~0x07 & ~_DELETE_HORIZON_FLAG, header.last_offset_delta, -1,
              header.max_timestamp, header.producer_id, header.producer_epoch,
              header.base_sequence, 0]
    out = bytearray(BATCH_HEADER.pack(*fields))
    _CRC.pack_into(out, _CRC_POSITION, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


__all__ = ["INT64_MAX", "ChunkOutput", "LastBatches", "LastRecord", "PlainRun", "empty_batch",
           "filter_batch", "filter_plain_batches", "rebuild", "retain_empty", "rewrite_batch"]
