"""Kafka's ``LogValidator`` for a producer-encoded v2 batch, before the log appends it.

The checks, in Kafka's order: sizes, magic, ``max.message.bytes``, the CRC (CRC32C of attributes
to the end), the codec, the control flag (clients may not write control batches), the offset range
against the records count, a producer id without a sequence, then every record: its structure,
``offsetDelta`` equal to its index, and a key on every record of a compacted topic. An uncompressed
batch costs one ``crc32c`` call and one kernel call (``storage.kernels.validate_batch``); the
header fields come back from the kernel as status codes and are read again in Python only to word
a refusal. A refusal is a typed error naming the batch, its source and the position.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

import crc32c

from storage import compression as compressors
from storage import kernels
from storage.kernel_twins import kernel_for
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    StorageError,
)
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    MAGIC_OFFSET,
    MAX_DECOMPRESSED_BYTES,
    RECORD_ERRORS,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    byte_view,
)

_INT32 = struct.Struct(">i")


class AppendValidation(NamedTuple):
    """What ``validate_for_append`` learned about one batch (offset deltas are relative; a
    NamedTuple: one is built per appended batch, cheaper than a dataclass)."""

    records_count: int
    last_offset_delta: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int   # offset delta of the first record with max_timestamp
    has_null_key: bool
    size: int
    header: BatchHeader | None = None


_VALIDATION_ERRORS = {
    **RECORD_ERRORS,
    kernels.ERR_OFFSET_DELTA: "offset delta is not its index in the batch",
}


def validate_for_append(buf: memoryview, *, require_keys: bool, max_message_bytes: int,
                        path: Path | None = None,
                        max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
                        from_client: bool = True, where: str | None = None) -> AppendValidation:
    """Validate ONE producer-encoded v2 batch as Kafka's ``LogValidator`` does for the broker.

    ``CorruptRecordError``: damaged bytes (sizes, magic, CRC, a record's structure, a records count
    the bytes do not hold). ``InvalidRecordError``: a well-formed batch the log refuses (magic 0/1,
    a control batch, offset range vs records count, offsetDelta != index, a missing key when
    ``require_keys``, a producer id without sequence). ``RecordTooLargeError``: size above
    ``max_message_bytes``. An uncompressed batch is one CRC and one kernel call (header and
    records); a compressed one is decompressed and its records checked by a second call.
    ``from_client=False`` (an append by the transaction coordinator) accepts control batches and
    a producer id without a sequence, as Kafka does for a non-client origin. Errors name ``path``
    (the file the batch came from) or ``where`` (e.g. ``append to orders-0``) when given.
    """
    view = byte_view(buf)
    size = len(view)
    computed = crc32c.crc32c(view[ATTRIBUTES_OFFSET:]) if size > ATTRIBUTES_OFFSET else 0
    status, index, at, value, max_delta, offset_of_max, has_null_key = kernel_for(
        kernels.validate_batch, size)(kernels.as_input(view), computed, max_message_bytes,
                                      bool(require_keys), bool(from_client))
    records_bytes = size - HEADER_SIZE
    if status == kernels.COMPRESSED:
        codec = view[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
        try:
            raw = compressors.decompress(codec, view[HEADER_SIZE:],
                                         max_size=max_decompressed_bytes)
        except CorruptRecordError as err:
            raise CorruptRecordError(
                f"{_source(path, where)}batch of {size} bytes: {err.message}", path=path,
                position=HEADER_SIZE) from err
        records_bytes = len(raw)
        count = _INT32.unpack_from(view, RECORDS_COUNT_OFFSET)[0]
        if count > records_bytes // kernels.MIN_RECORD_SIZE:
            status = kernels.ERR_APPEND_COUNT_FIT
        else:
            status, index, at, value, max_delta, offset_of_max, has_null_key = \
                kernel_for(kernels.validate_records, records_bytes)(
                    kernels.as_input(raw), 0, records_bytes, count, bool(require_keys))
    if status != kernels.OK:
        raise _append_refusal(view, status, index, at, value, computed, records_bytes,
                              max_message_bytes, path, _source(path, where))
    header = BatchHeader(*BATCH_HEADER.unpack_from(view, 0))
    if header.attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp, offset_of_max = header.max_timestamp, 0
    else:
        max_timestamp = header.base_timestamp + max_delta
    return AppendValidation(header.records_count, header.last_offset_delta, max_timestamp,
                            offset_of_max, has_null_key, size, header)


def _source(path: Path | None, where: str | None) -> str:
    """The prefix naming where a refused batch came from: its file, or what was done with it."""
    if path is not None:
        return f"{path}: "
    return f"{where}: " if where else ""


def _append_refusal(view: memoryview, status: int, index: int, where: int, value: int,
                    computed_crc: int, records_bytes: int, max_message_bytes: int,
                    path: Path | None, source: str = "") -> StorageError:
    """The typed error, naming the batch and the position, for a refusal of ``validate_batch`` or
    ``validate_records``."""
    size = len(view)

    def corrupt(problem: str, **fields: object) -> CorruptRecordError:
        return CorruptRecordError(f"{source}batch of {size} bytes: {problem}", path=path,
                                  **fields)

    def invalid(problem: str, **fields: object) -> InvalidRecordError:
        return InvalidRecordError(f"{source}batch of {size} bytes: {problem}", path=path,
                                  **fields)

    if status == kernels.ERR_APPEND_SHORT:
        return corrupt(f"fewer than {HEADER_SIZE_UP_TO_MAGIC} bytes", position=0)
    if status == kernels.ERR_APPEND_LENGTH:
        return corrupt(f"batch length field {value} does not match the {size} bytes given",
                       position=SIZE_OFFSET)
    if status == kernels.ERR_APPEND_MAGIC:
        if value in (0, 1):
            return invalid(f"magic {value} batches cannot be appended, only magic 2")
        return corrupt(f"unknown magic {value}", position=MAGIC_OFFSET)
    if status == kernels.ERR_APPEND_HEADER:
        return corrupt(f"smaller than the {HEADER_SIZE}-byte v2 header", position=0)
    if status == kernels.ERR_APPEND_TOO_LARGE:
        return RecordTooLargeError(
            f"{source}the record batch of {size} bytes exceeds max.message.bytes="
            f"{max_message_bytes}", path=path, size=size, max_message_bytes=max_message_bytes)
    header = BatchHeader(*BATCH_HEADER.unpack_from(view, 0))
    if status == kernels.ERR_APPEND_CRC:
        return corrupt(f"record is corrupt (stored crc {header.crc:#010x}, computed crc "
                       f"{computed_crc:#010x})", stored_crc=header.crc, computed_crc=computed_crc,
                       position=CRC_OFFSET)
    if status == kernels.ERR_APPEND_CODEC:
        return corrupt(f"unknown compression codec {value}", position=ATTRIBUTES_OFFSET)
    if status == kernels.ERR_APPEND_CONTROL:
        return invalid("clients are not allowed to write control records")
    if status == kernels.ERR_APPEND_OFFSET_RANGE:
        return invalid(f"invalid offset range: last offset delta {header.last_offset_delta}")
    if status == kernels.ERR_APPEND_COUNT:
        return invalid(f"invalid reported count for record batch: {header.records_count}")
    if status == kernels.ERR_APPEND_COUNT_RANGE:
        return invalid(f"inconsistent batch offset range [0, {header.last_offset_delta}] and "
                       f"count of records {header.records_count}")
    if status == kernels.ERR_APPEND_SEQUENCE:
        return invalid(f"invalid sequence number {header.base_sequence} in record batch with "
                       f"producerId {header.producer_id}")
    if status == kernels.ERR_APPEND_COUNT_FIT:
        return corrupt(f"records count {header.records_count} cannot fit in {records_bytes} "
                       f"bytes")
    if status == kernels.ERR_NULL_KEY:
        return invalid(f"Compacted topic cannot accept message without key (record at offset "
                       f"delta {value})", offset_delta=value, record_index=index)
    if status == kernels.ERR_OFFSET_DELTA:
        return invalid(f"inner record {index} does not have incremental offsets: offset delta "
                       f"{value}, expected {index}", offset_delta=value, record_index=index)
    return corrupt(f"record {index} at byte {where}: {_VALIDATION_ERRORS[status]}",
                   record_index=index, position=where)
