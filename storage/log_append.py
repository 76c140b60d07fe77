"""The append path of a log (Kafka's ``UnifiedLog.append`` with ``analyzeAndValidateRecords`` and
the ``ProducerAppendInfo`` checks).

``Log.append_batch`` runs two steps before it writes an append to the active segment (rolling it
first when it must):

- ``validate_append`` (outside the log's lock): split producer-encoded bytes into v2 batches and
  validate each (``storage.validation``), with the sizes the topic allows;
- ``assign_offsets`` (under the lock): give the batches their offsets from the log end, check each
  producer's sequences and epochs against the producer state (a retry of appended batches is a
  duplicate and is dropped), stamp ``LogAppendTime`` when the topic asks for it, and return the
  byte pieces to write. Nothing is changed by this step: the log then writes the pieces, moves
  the log end, commits the producer updates and the transactions the markers close, and flushes
  when ``flush.messages`` are unflushed.

Assigning an offset rewrites the batch's first 8 bytes (``BaseOffset``), which lie outside the CRC;
``LogAppendTime`` rewrites the attributes and ``MaxTimestamp``, which lie inside it, so the CRC is
recomputed (``with_log_append_time``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from storage.batch_layout import CRC_OFFSET, MAX_TIMESTAMP_OFFSET, SIZE_OFFSET
from storage.config import LogConfig
from storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from storage.producer_state import (
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    SequenceCheck,
)
from storage.records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    ControlType,
    RecordBatch,
    byte_view,
    parse_control_record,
    scan_batches,
)
from storage.validation import AppendValidation, validate_for_append

_OFFSET = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_LOG_APPEND_TIME_FLAG = 0x08


class AssignedAppend(NamedTuple):
    """What ``assign_offsets`` decided for one append: the ``pieces`` to write (offset, then the
    batch after its offset field, per batch kept), the offsets ``[first_offset, next_offset)``
    they take, their largest timestamp and its offset, their records and bytes, the producers'
    updates and the transactions closed (to commit after the write), and the batches dropped as
    duplicates (all of them when ``pieces`` is empty)."""

    pieces: list[bytes | memoryview]
    first_offset: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records: int
    size: int
    producers: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]
    duplicates: list[SequenceCheck]


def validate_append(data: bytes | bytearray | memoryview, config: LogConfig, name: str, *,
                    from_client: bool) -> list[tuple[memoryview, AppendValidation]]:
    """Each batch of ``data`` with its validation (CRC, sizes, every record's structure, keys for a
    compacted topic, ``max.message.bytes``, and, ``from_client``, no control batch). Raises
    ``CorruptRecordError`` for bytes that are not whole batches, ``RecordTooLargeError`` for an
    append or a batch above ``segment.bytes``; ``name`` (the partition) goes in the messages."""
    view = byte_view(data)
    spans = _batch_spans(view)
    if spans is None:
        scan = scan_batches(view)
        if scan.error is not None or scan.valid_bytes != len(view) or len(scan.positions) == 0:
            at = scan.error_position if scan.error_position >= 0 else scan.valid_bytes
            raise CorruptRecordError(
                f"append to {name}: {scan.problem or 'incomplete batch'} at byte {at} "
                f"of {len(view)}", partition=name, position=at)
        spans = list(zip(scan.positions.tolist(), scan.sizes.tolist()))
    if len(view) > config.segment_bytes:
        # Kafka's UnifiedLog.append: the whole set must fit one segment, not only each batch
        raise RecordTooLargeError(
            f"append to {name}: {len(spans)} batches of {len(view)} bytes in all are "
            f"larger than segment.bytes={config.segment_bytes}", partition=name,
            size=len(view))
    checks = []
    require_keys, max_message_bytes = config.compact, config.max_message_bytes
    where = f"append to {name}"
    for pos, size in spans:
        batch = view if size == len(view) else view[pos:pos + size]
        if size > config.segment_bytes:
            raise RecordTooLargeError(
                f"{where}: batch of {size} bytes is larger than "
                f"segment.bytes={config.segment_bytes}", partition=name, size=size)
        checks.append((batch, validate_for_append(
            batch, require_keys=require_keys, max_message_bytes=max_message_bytes,
            from_client=from_client, where=where)))
    return checks


def assign_offsets(checks: list[tuple[memoryview, AppendValidation]], next_offset: int,
                   log_append_time: int, producer_state: ProducerStateManager, origin: str,
                   name: str) -> AssignedAppend:
    """Offsets from ``next_offset`` (the log end) for the validated batches ``checks``, each
    producer's batches checked in order against the state the earlier ones left
    (``InvalidRecordError`` and the producer errors of ``storage.producer_state``).
    ``log_append_time`` >= 0 stamps every batch with it. Changes nothing: call under the log's
    lock and commit the result's producer updates after the write."""
    pieces: list[bytes | memoryview] = []
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
                info = producers[header.producer_id] = producer_state.prepare_update(
                    header.producer_id, origin)
            if header.is_control:
                done = _check_marker(batch, header, info, next_offset, batch_max_ts, name)
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
            pieces.append(with_log_append_time(batch, log_append_time))
        elif header is not None and header.max_timestamp != check.max_timestamp:
            # Kafka's LogValidator re-stamps a CreateTime batch's max timestamp from its records
            # (setMaxTimestamp): a producer's wrong one (0, say) would hide the batch from
            # offsets-by-time and, once recovery rebuilt the time index from it, let retention
            # delete records written seconds earlier
            pieces.append(with_max_timestamp(batch, check.max_timestamp))
        else:
            pieces.append(batch[SIZE_OFFSET:])
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            offset_of_max_ts = next_offset + check.last_offset_delta
        next_offset += check.last_offset_delta + 1
        records += check.records_count
        size += check.size
    return AssignedAppend(pieces, first_offset, next_offset, max_ts, offset_of_max_ts, records,
                          size, producers, completed, duplicates)


def _check_marker(batch: memoryview, header: BatchHeader, info: ProducerAppendInfo,
                  offset: int, timestamp: int, name: str) -> CompletedTxn | None:
    """Check a control batch the coordinator appends at ``offset``: one commit or abort marker
    of a producer, within its epochs; returns the transaction it closes."""
    records = RecordBatch(bytes(batch)).records()
    marker = parse_control_record(records[0]) if records else None
    if header.producer_id < 0 or marker is None or marker[0] not in (ControlType.ABORT,
                                                                      ControlType.COMMIT):
        raise InvalidRecordError(
            f"append to {name}: the control batch at offset {offset} is not a commit or "
            f"abort marker of a producer", partition=name, offset=offset)
    return info.append_end_txn_marker(marker[0], marker[1], header.producer_epoch, offset,
                                      timestamp)


def _batch_spans(view: memoryview) -> list[tuple[int, int]] | None:
    """[(0, size)] when ``view`` is exactly one batch by its length field (the common case of a
    producer's append), else None and the caller scans."""
    size = len(view)
    if size >= LOG_OVERHEAD and _BATCH_LENGTH.unpack_from(view, SIZE_OFFSET)[0] + LOG_OVERHEAD == size:
        return [(0, size)]
    return None


def with_max_timestamp(batch: memoryview, max_timestamp: int) -> bytes:
    """The batch after offset 8 with its max timestamp set to ``max_timestamp``, CRC recomputed
    (the field is inside the CRC)."""
    buf = bytearray(batch)
    _MAX_TIMESTAMP.pack_into(buf, MAX_TIMESTAMP_OFFSET, max_timestamp)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(memoryview(buf)[SIZE_OFFSET:])


def with_log_append_time(batch: memoryview, now_ms: int) -> bytes:
    """The batch after offset 8 with LogAppendTime stamped: attribute bit 3, max timestamp = now,
    CRC recomputed (both fields are inside the CRC)."""
    buf = bytearray(batch)
    attributes = _ATTRIBUTES.unpack_from(buf, ATTRIBUTES_OFFSET)[0] | _LOG_APPEND_TIME_FLAG
    _ATTRIBUTES.pack_into(buf, ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(buf, MAX_TIMESTAMP_OFFSET, now_ms)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(memoryview(buf)[SIZE_OFFSET:])
