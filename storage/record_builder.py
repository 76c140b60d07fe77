"""Building record batches (Kafka's MemoryRecordsBuilder): ``build_batch`` from records,
``build_batch_columns`` from columns, transaction markers, and the in-place edits of a built
batch (base offset, partition leader epoch). Per-record encoding is in ``storage.kernels``."""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

import crc32c
import numpy as np

from storage import compression as compressors
from storage import kernels
from storage.kernel_twins import kernel_for
from storage.errors import InvalidRecordError
# the header layout and its offsets: storage.batch_layout (one definition)
from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_HEADER_OVERHEAD,
    MAX_RECORD_OVERHEAD,
    PARTITION_LEADER_EPOCH_OFFSET,
)
from storage.record_format import (
    Compression,
    CONTROL_MASK,
    ControlType,
    DELETE_HORIZON_MASK,
    INT32_MAX,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Record,
    TimestampType,
    TRANSACTIONAL_MASK,
    _INT32,
    _INT64,
    _UINT32,
    control_record,
    encode_varint,
)


def build_end_txn_marker(control_type: ControlType, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int, base_offset: int = 0) -> bytes:
    """A commit or abort marker as Kafka's transaction coordinator writes it
    (``MemoryRecords.withEndTransactionMarker``): one control record in a transactional control
    batch of the producer, without a sequence. Append it with ``origin="coordinator"``."""
    return build_batch([control_record(control_type, coordinator_epoch, timestamp)],
                       base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, is_transactional=True, is_control=True)


# ---- in-place edits ----------------------------------------------------------------------------
def _require_v2(buf: bytearray | memoryview, position: int) -> None:
    if len(buf) - position < HEADER_SIZE or buf[position + MAGIC_OFFSET] != MAGIC:
        raise InvalidRecordError(f"no v2 batch header at position {position}", position=position)


def set_base_offset(buf: bytearray | memoryview, base_offset: int, position: int = 0) -> None:
    """Rewrite the baseOffset of the v2 batch at ``position`` in place (outside the CRC)."""
    _require_v2(buf, position)
    _INT64.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int, position: int = 0) -> None:
    """Rewrite the partitionLeaderEpoch of the v2 batch at ``position`` in place (no CRC change)."""
    _require_v2(buf, position)
    _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


# ---- building ----------------------------------------------------------------------------------
def build_batch(records: Sequence[Record], *, base_offset: int = 0,
                compression: Compression = Compression.NONE,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                is_transactional: bool = False, is_control: bool = False,
                delete_horizon_ms: int | None = None, offset_deltas: Sequence[int] | None = None,
                last_offset_delta: int | None = None,
                max_timestamp: int | None = None) -> bytes:
    """Encode ``records`` as one v2 batch, as Kafka's ``MemoryRecordsBuilder`` does.

    Record i gets offsetDelta i unless ``offset_deltas`` is given (the cleaner keeps original
    offsets); lastOffsetDelta is the last offset delta unless ``last_offset_delta`` is given.
    baseTimestamp is the first record's timestamp, or ``delete_horizon_ms`` (attribute bit 6; the
    timestamp deltas are then negative). maxTimestamp is the largest record timestamp unless
    ``max_timestamp`` is given. No records build Kafka's empty batch: 61 bytes, count 0, no
    compression, baseTimestamp -1. Argument errors raise ``ValueError``.
    """
    keys = [r.key for r in records]
    values = [r.value for r in records]
    timestamps = [r.timestamp for r in records]
    header_blocks = [_encode_headers(r.headers) if r.headers else b"" for r in records]
    return _build(keys, values, timestamps, header_blocks, base_offset=base_offset,
                  codec=compression, timestamp_type=timestamp_type, producer_id=producer_id,
                  producer_epoch=producer_epoch, base_sequence=base_sequence,
                  partition_leader_epoch=partition_leader_epoch,
                  is_transactional=is_transactional, is_control=is_control,
                  delete_horizon_ms=delete_horizon_ms, offset_deltas=offset_deltas,
                  last_offset_delta=last_offset_delta, max_timestamp=max_timestamp)


def build_batch_columns(keys: Sequence[bytes | None], values: Sequence[bytes | None],
                        timestamps: Sequence[int] | np.ndarray, *, base_offset: int = 0,
                        compression: Compression = Compression.NONE,
                        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                        producer_id: int = NO_PRODUCER_ID,
                        producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                        is_transactional: bool = False, is_control: bool = False,
                        delete_horizon_ms: int | None = None,
                        offset_deltas: Sequence[int] | None = None,
                        last_offset_delta: int | None = None,
                        max_timestamp: int | None = None) -> bytes:
    """``build_batch`` from columns (no headers): the fast path for producers and Spark writers."""
    return _build(keys, values, timestamps, None, base_offset=base_offset, codec=compression,
                  timestamp_type=timestamp_type, producer_id=producer_id,
                  producer_epoch=producer_epoch, base_sequence=base_sequence,
                  partition_leader_epoch=partition_leader_epoch,
                  is_transactional=is_transactional, is_control=is_control,
                  delete_horizon_ms=delete_horizon_ms, offset_deltas=offset_deltas,
                  last_offset_delta=last_offset_delta, max_timestamp=max_timestamp)


def build_batch_arrays(key_data: np.ndarray, key_lens: np.ndarray, value_data: np.ndarray,
                       value_lens: np.ndarray, timestamps: np.ndarray, *,
                       header_data: np.ndarray | None = None,
                       header_lens: np.ndarray | None = None,
                       compression: Compression = Compression.NONE,
                       producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                       base_sequence: int = NO_SEQUENCE, is_transactional: bool = False) -> bytes:
    """``build_batch_columns`` from buffers, for writers that hold their columns as Arrow does:
    ``key_data`` is the keys of the records back to back (a read-only ``uint8`` array, see
    ``kernels.as_input``), ``key_lens`` (int64) their lengths, -1 for a null key; the same for
    values, and for header blocks (each an encoded headerCount and headers as ``header_block``
    makes it; length 0 = no headers; absent = no record has headers). ``timestamps`` (int64)
    are the records' create times. At least one record; offset deltas 0..n-1, base offset 0.
    The bytes equal those of ``build_batch`` for the same records."""
    n = len(key_lens)
    if n == 0 or len(value_lens) != n or len(timestamps) != n:
        raise ValueError(f"columns differ in length or are empty: {n} keys, {len(value_lens)} "
                         f"values, {len(timestamps)} timestamps")
    ts = np.asarray(timestamps, dtype=np.int64)
    if header_lens is None or header_data is None:
        header_data = kernels.as_input(b"")
        header_lens = np.zeros(n, dtype=np.int64)
    if n - 1 > INT32_MAX:
        raise ValueError(f"{n} records do not fit the int32 offset deltas of one batch")
    attributes = (int(TimestampType.CREATE_TIME) << 3) | (TRANSACTIONAL_MASK if is_transactional
                                                           else 0)
    return _encode(kernels.as_input(key_data), key_lens, kernels.as_input(value_data),
                   value_lens, kernels.as_input(header_data), header_lens, ts,
                   np.arange(n, dtype=np.int64), attributes, base_offset=0, codec=compression,
                   producer_id=producer_id, producer_epoch=producer_epoch,
                   base_sequence=base_sequence, partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
                   delete_horizon_ms=None, last_delta=n - 1, max_timestamp=None)


class RecordSlices(NamedTuple):
    """Some records of a batch as slices of buffers: record i's key is
    ``key_data[key_starts[i]:key_starts[i] + key_lens[i]]`` (a length of -1: null), the same for
    values and header blocks (a length of 0: no headers); ``timestamps`` (int64) are their create
    times. Buffers are read-only ``uint8`` arrays (``kernels.as_input``), the rest int64."""

    key_data: np.ndarray
    key_starts: np.ndarray
    key_lens: np.ndarray
    value_data: np.ndarray
    value_starts: np.ndarray
    value_lens: np.ndarray
    header_data: np.ndarray
    header_starts: np.ndarray
    header_lens: np.ndarray
    timestamps: np.ndarray


def build_batch_slices(pieces: Sequence[RecordSlices], *,
                       compression: Compression = Compression.NONE,
                       producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                       base_sequence: int = NO_SEQUENCE, is_transactional: bool = False) -> bytes:
    """``build_batch_arrays`` of the records of ``pieces`` in order, read where they lie (no
    gathering copy: each record is encoded once, straight into the batch's one buffer). At
    least one record. The bytes equal those of ``build_batch`` for the same records."""
    n = sum(len(piece.key_lens) for piece in pieces)
    if n == 0:
        raise ValueError("a batch needs at least one record")
    if n - 1 > INT32_MAX:
        raise ValueError(f"{n} records do not fit the int32 offset deltas of one batch")
    low = min(int(piece.timestamps.min()) for piece in pieces if len(piece.timestamps))
    if low < NO_TIMESTAMP:
        raise ValueError(f"invalid negative timestamp {low}")
    first = next(piece for piece in pieces if len(piece.key_lens))
    base_timestamp = int(first.timestamps[0])
    max_ts = max(NO_TIMESTAMP, max(int(piece.timestamps.max()) for piece in pieces
                                   if len(piece.timestamps)))
    bound = HEADER_SIZE + kernels.MAX_RECORD_OVERHEAD * n + sum(
        int(np.maximum(piece.key_lens, 0).sum()) + int(np.maximum(piece.value_lens, 0).sum())
        + int(np.maximum(piece.header_lens, 0).sum()) for piece in pieces)
    out = np.empty(bound, dtype=np.uint8)
    end, delta = HEADER_SIZE, 0
    for piece in pieces:
        end = kernels.encode_records_at(out, end, piece.key_data, piece.key_starts,
                                        piece.key_lens, piece.value_data, piece.value_starts,
                                        piece.value_lens, piece.header_data, piece.header_starts,
                                        piece.header_lens, piece.timestamps - base_timestamp,
                                        delta)
        delta += len(piece.key_lens)
    attributes = (int(TimestampType.CREATE_TIME) << 3) | (TRANSACTIONAL_MASK if is_transactional
                                                           else 0)
    return _seal(out, end, n, attributes, codec=compression, base_offset=0,
                 partition_leader_epoch=NO_PARTITION_LEADER_EPOCH, last_delta=n - 1,
                 base_timestamp=base_timestamp, max_timestamp=max_ts, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=base_sequence)


def header_block(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    """The encoded headers of one record (headerCount, then each header), as ``build_batch``
    writes them; the header column of ``build_batch_arrays``. No headers: b"" (count 0)."""
    return _encode_headers(headers) if headers else b""


def max_record_size(record: Record) -> int:
    """An upper bound of the bytes ``record`` takes in a v2 batch (before compression), by the
    bounds the batch builder sizes its buffer with: ``MAX_RECORD_OVERHEAD`` plus the key and
    value, and per header its UTF-8 key, value and ``MAX_HEADER_OVERHEAD`` (plus the header
    count's varint). A client sizing batches by it never builds one above its limit."""
    size = MAX_RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    if record.headers:
        size += len(encode_varint(len(record.headers))) + sum(
            MAX_HEADER_OVERHEAD + len(key.encode("utf-8", "surrogateescape")) + len(value or b"")
            for key, value in record.headers)
    return size


def _encode_headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        raw = key.encode("utf-8", "surrogateescape")
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(encode_varint(-1))
        else:
            parts.append(encode_varint(len(value)))
            parts.append(bytes(value))
    return b"".join(parts)


def _column(items: Sequence[bytes | None], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated bytes (read-only array) and lengths (-1 = null) of one column."""
    try:
        data = b"".join(items)  # type: ignore[arg-type]
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    except TypeError:                       # a None among the items: the slower path
        lengths = np.fromiter((-1 if item is None else len(item) for item in items),
                              dtype=np.int64, count=n)
        data = b"".join([item for item in items if item is not None])
    return kernels.as_input(data), lengths


def _build(keys: Sequence[bytes | None], values: Sequence[bytes | None],
           timestamps: Sequence[int] | np.ndarray, header_blocks: list[bytes] | None, *,
           base_offset: int, codec: Compression, timestamp_type: TimestampType, producer_id: int,
           producer_epoch: int, base_sequence: int, partition_leader_epoch: int,
           is_transactional: bool, is_control: bool, delete_horizon_ms: int | None,
           offset_deltas: Sequence[int] | None, last_offset_delta: int | None,
           max_timestamp: int | None) -> bytes:
    n = len(keys)
    if len(values) != n or len(timestamps) != n:
        raise ValueError(f"columns differ in length: {n} keys, {len(values)} values, "
                         f"{len(timestamps)} timestamps")
    attributes = ((int(timestamp_type) << 3) | (TRANSACTIONAL_MASK if is_transactional else 0)
                  | (CONTROL_MASK if is_control else 0)
                  | (DELETE_HORIZON_MASK if delete_horizon_ms is not None else 0))
    if n == 0:
        out = bytearray(HEADER_SIZE)
        base_timestamp = NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
        max_ts = NO_TIMESTAMP if max_timestamp is None else max_timestamp
        _write_header(out, HEADER_SIZE, base_offset, partition_leader_epoch, attributes,
                      last_offset_delta or 0, base_timestamp, max_ts, producer_id,
                      producer_epoch, base_sequence, 0)
        return bytes(out)
    ts = np.array(timestamps, dtype=np.int64)
    deltas = _offset_deltas(offset_deltas, n)
    last_delta = int(deltas[-1]) if last_offset_delta is None else last_offset_delta
    if last_delta < deltas[-1] or last_delta > INT32_MAX:
        raise ValueError(f"last offset delta {last_delta} is below the last record's "
                         f"{int(deltas[-1])} or above int32")
    key_data, key_lens = _column(keys, n)
    value_data, value_lens = _column(values, n)
    if header_blocks is not None and any(header_blocks):
        header_data = kernels.as_input(b"".join(header_blocks))
        header_lens = np.fromiter(map(len, header_blocks), dtype=np.int64, count=n)
    else:
        header_data = kernels.as_input(b"")
        header_lens = np.zeros(n, dtype=np.int64)
    return _encode(key_data, key_lens, value_data, value_lens, header_data, header_lens, ts,
                   deltas, attributes, base_offset=base_offset, codec=codec,
                   producer_id=producer_id, producer_epoch=producer_epoch,
                   base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch,
                   delete_horizon_ms=delete_horizon_ms, last_delta=last_delta,
                   max_timestamp=max_timestamp)


def _encode(key_data: np.ndarray, key_lens: np.ndarray, value_data: np.ndarray,
            value_lens: np.ndarray, header_data: np.ndarray, header_lens: np.ndarray,
            ts: np.ndarray, deltas: np.ndarray, attributes: int, *, base_offset: int,
            codec: Compression, producer_id: int, producer_epoch: int, base_sequence: int,
            partition_leader_epoch: int, delete_horizon_ms: int | None, last_delta: int,
            max_timestamp: int | None) -> bytes:
    """The batch of ``n >= 1`` records from checked columns (the kernel's input conventions)."""
    n = len(key_lens)
    if (ts < NO_TIMESTAMP).any():
        raise ValueError(f"invalid negative timestamp {int(ts.min())}")
    base_timestamp = int(ts[0]) if delete_horizon_ms is None else delete_horizon_ms
    max_ts = max(NO_TIMESTAMP, int(ts.max())) if max_timestamp is None else max_timestamp
    bound = (HEADER_SIZE + kernels.MAX_RECORD_OVERHEAD * n + len(key_data) + len(value_data)
             + len(header_data))
    out = np.empty(bound, dtype=np.uint8)
    end = kernel_for(kernels.encode_records, bound)(
        out, HEADER_SIZE, key_data, key_lens, value_data, value_lens, header_data, header_lens,
        ts - base_timestamp, deltas)
    return _seal(out, end, n, attributes, codec=codec, base_offset=base_offset,
                 partition_leader_epoch=partition_leader_epoch, last_delta=last_delta,
                 base_timestamp=base_timestamp, max_timestamp=max_ts, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=base_sequence)


def _seal(out: np.ndarray, end: int, n: int, attributes: int, *, codec: Compression,
          base_offset: int, partition_leader_epoch: int, last_delta: int, base_timestamp: int,
          max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """The batch whose ``n`` records ``out[HEADER_SIZE:end]`` holds: compressed by ``codec``,
    its header written and its CRC computed."""
    max_ts = max_timestamp
    if codec != Compression.NONE:
        payload = compressors.compress(codec, memoryview(out)[HEADER_SIZE:end])
        target = bytearray(HEADER_SIZE + len(payload))
        target[HEADER_SIZE:] = payload
        total = len(target)
    else:
        target = out                                             # type: ignore[assignment]
        total = end
    _write_header(target, total, base_offset, partition_leader_epoch, attributes | int(codec),
                  last_delta, base_timestamp, max_ts, producer_id, producer_epoch, base_sequence, n)
    return bytes(target) if codec != Compression.NONE else out[:total].tobytes()


def _offset_deltas(offset_deltas: Sequence[int] | None, n: int) -> np.ndarray:
    if offset_deltas is None:
        return np.arange(n, dtype=np.int64)
    deltas = np.array(offset_deltas, dtype=np.int64)
    if len(deltas) != n:
        raise ValueError(f"{len(deltas)} offset deltas for {n} records")
    if deltas[0] < 0 or deltas[-1] > INT32_MAX or (n > 1 and (np.diff(deltas) <= 0).any()):
        raise ValueError("offset deltas must be non-negative int32s, strictly increasing")
    return deltas


def _write_header(target: bytearray | np.ndarray, total: int, base_offset: int,
                  partition_leader_epoch: int, attributes: int, last_offset_delta: int,
                  base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
                  base_sequence: int, count: int) -> None:
    try:
        BATCH_HEADER.pack_into(target, 0, base_offset, total - LOG_OVERHEAD,
                               partition_leader_epoch, MAGIC, 0, attributes, last_offset_delta,
                               base_timestamp, max_timestamp, producer_id, producer_epoch,
                               base_sequence, count)
    except struct.error as err:
        raise ValueError(f"a batch header field is out of range: {err}") from err
    crc = crc32c.crc32c(memoryview(target)[ATTRIBUTES_OFFSET:total])
    _UINT32.pack_into(target, CRC_OFFSET, crc)
