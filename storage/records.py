"""Record batches: byte for byte Kafka's RecordBatch v2 (magic 2), plus read-only magic 0 and 1.

RecordBatch v2, big-endian, positions within the batch::

     0 baseOffset            int64
     8 batchLength           int32   bytes after this field (batch size - 12)
    12 partitionLeaderEpoch  int32   -1 = none; outside the CRC, so the broker can stamp it
    16 magic                 int8    2
    17 crc                   uint32  CRC32C (Castagnoli) of attributes..end
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                     6 delete horizon set (KIP-534: baseTimestamp is the horizon)
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64   -1 = none
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records               compressed as one stream when the codec is not 0

Record::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) + key | valueLength varint (-1 = null, a tombstone) + value |
    headerCount varint | headers: keyLength varint + UTF-8 key,
                                  valueLength varint (-1 = null) + value

Varints are zig-zag: ``(n << 1) ^ (n >> 31)`` (``>> 63`` for varlongs) in 7-bit little-endian
groups, so -1 is ``01``, 1 is ``02``, 64 is ``8001``, 300 is ``d804``.

The format lives in ``storage.batch_layout`` (the header layout), ``storage.record_format`` (types,
varints, the parsed header), ``storage.record_reader`` (reading and scanning) and
``storage.record_builder`` (building); this module re-exports their names. The per-record and
per-batch loops are numba kernels in ``storage.kernels``.
Legacy message sets are parsed by ``storage.legacy`` and exposed through the same ``RecordBatch``.
"""

from __future__ import annotations

# the format in four modules; every name stays importable from here
from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_HEADER,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_HEADER_OVERHEAD,
    MAX_RECORD_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
)
from storage.record_format import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    INT32_MAX,
    LEGACY_RECORD_OVERHEAD_V0,
    MAGIC,
    MAX_DECOMPRESSED_BYTES,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Compression,
    ControlType,
    Record,
    TimestampType,
    batch_location,
    byte_view,
    control_record,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    parse_control_record,
)
from storage.record_reader import (
    RECORD_ERRORS,
    BatchScan,
    RecordBatch,
    batch_crc,
    decode_headers,
    iter_batches,
    max_records_in,
    scan_batches,
)
from storage.record_builder import (
    build_batch,
    build_batch_columns,
    build_end_txn_marker,
    max_record_size,
    set_base_offset,
    set_partition_leader_epoch,
)

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER",
    "BatchHeader",
    "BatchScan",
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "CRC_OFFSET",
    "Compression",
    "ControlType",
    "DELETE_HORIZON_MASK",
    "HEADER_SIZE",
    "HEADER_SIZE_UP_TO_MAGIC",
    "INT32_MAX",
    "LAST_OFFSET_DELTA_OFFSET",
    "LEGACY_RECORD_OVERHEAD_V0",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_HEADER_OVERHEAD",
    "MAX_RECORD_OVERHEAD",
    "MAX_TIMESTAMP_OFFSET",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "RECORD_ERRORS",
    "Record",
    "RecordBatch",
    "SIZE_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "TimestampType",
    "batch_crc",
    "batch_location",
    "build_batch",
    "build_batch_columns",
    "build_end_txn_marker",
    "byte_view",
    "control_record",
    "decode_headers",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "iter_batches",
    "max_record_size",
    "max_records_in",
    "parse_control_record",
    "scan_batches",
    "set_base_offset",
    "set_partition_leader_epoch",
]
