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

The per-record and per-batch loops are numba kernels in ``storage.kernels``; this module holds
the types, the checks that turn kernel status codes into typed errors, and the plain-Python glue.
Legacy message sets are parsed by ``storage.legacy`` and exposed through the same ``RecordBatch``.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

import crc32c
import numpy as np

from storage import compression as compressors
from storage import kernels, legacy
from storage.errors import CorruptRecordError, InvalidRecordError


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(enum.IntEnum):
    """Known control record types; others (KRaft's 2 = LeaderChange, 3, 4, ...) stay plain ints."""

    ABORT = 0
    COMMIT = 1


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1
MAGIC = 2

# the header layout and its offsets: storage.batch_layout (one definition, re-exported here)
from storage.batch_layout import (  # noqa: E402
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

RECORD_BATCH_OVERHEAD = HEADER_SIZE
LEGACY_RECORD_OVERHEAD_V0 = legacy.RECORD_OVERHEAD_V0             # 14: the smallest batchLength

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

INT32_MAX = 2**31 - 1
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024      # bound on one batch's decompressed records, for
                                                # every reader (read path, cleaner), any topic config

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")             # version, type
_CONTROL_VALUE = struct.Struct(">hi")           # version, coordinatorEpoch
_SCAN_CHUNK = 1 << 16                           # batches per scan kernel call
_MIN_BATCH_SIZE = LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0


# ---- records -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``value=None`` is a tombstone; ``offset`` is set when read back from a batch."""

    key: bytes | None = None
    value: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int = -1

    def __post_init__(self) -> None:
        headers = self.headers
        if headers and (type(headers) is not tuple
                        or any(type(h) is not tuple or len(h) != 2 for h in headers)):
            object.__setattr__(self, "headers", tuple((k, v) for k, v in headers))


def control_record(control_type: int, coordinator_epoch: int, timestamp: int) -> Record:
    """A transaction marker: key ``int16 version 0, int16 type``; value ``int16 version 0, int32
    coordinatorEpoch``. Build it into a batch with ``is_control=True``."""
    return Record(key=_CONTROL_KEY.pack(0, control_type),
                  value=_CONTROL_VALUE.pack(0, coordinator_epoch), timestamp=timestamp)


def parse_control_record(record: Record) -> tuple[int, int]:
    """``(type, coordinator_epoch)`` of a control record. The type is a ``ControlType`` when known
    and the raw int otherwise (KRaft's LeaderChange and snapshot markers), whose value is not a
    transaction marker: its coordinator epoch is reported as -1."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset} has a key of "
                                 f"{0 if key is None else len(key)} bytes, fewer than 4",
                                 offset=record.offset)
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record at offset {record.offset} has key version "
                                 f"{version}", offset=record.offset)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return control_type, -1
    value = record.value
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise CorruptRecordError(f"transaction marker at offset {record.offset} has a value of "
                                 f"{0 if value is None else len(value)} bytes, fewer than 6",
                                 offset=record.offset)
    _, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    return ControlType(control_type), coordinator_epoch


def build_end_txn_marker(control_type: ControlType, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int, base_offset: int = 0) -> bytes:
    """A commit or abort marker as Kafka's transaction coordinator writes it
    (``MemoryRecords.withEndTransactionMarker``): one control record in a transactional control
    batch of the producer, without a sequence. Append it with ``origin="coordinator"``."""
    return build_batch([control_record(control_type, coordinator_epoch, timestamp)],
                       base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, is_transactional=True, is_control=True)


# ---- varints (plain Python; the kernels have their own) ----------------------------------------
def encode_varint(value: int) -> bytes:
    """``value`` (an int32) as a zig-zag varint."""
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """``value`` (an int64) as a zig-zag varlong."""
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _encode_unsigned(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def decode_varint(buf: bytes | memoryview, position: int = 0) -> tuple[int, int]:
    """``(value, next_position)`` of the zig-zag varint at ``position`` (at most 5 bytes)."""
    return _decode(buf, position, 5, 0xFFFFFFFF)


def decode_varlong(buf: bytes | memoryview, position: int = 0) -> tuple[int, int]:
    """``(value, next_position)`` of the zig-zag varlong at ``position`` (at most 10 bytes)."""
    return _decode(buf, position, 10, 0xFFFFFFFFFFFFFFFF)


def _decode(buf: bytes | memoryview, pos: int, max_bytes: int, mask: int) -> tuple[int, int]:
    raw = 0
    for i in range(max_bytes):
        if pos >= len(buf):
            raise CorruptRecordError(f"varint runs past the end of {len(buf)} bytes", position=pos)
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            raw &= mask
            return (raw >> 1) ^ -(raw & 1), pos
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos)


# ---- batch header ------------------------------------------------------------------------------
class BatchHeader(NamedTuple):
    """The 13 header fields of a v2 batch, in order (synthesized for a magic 0/1 entry).

    A NamedTuple: one is built per batch appended or scanned, at a sixth of a dataclass's cost."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        """The header of the batch at ``position``. A v2 header needs only its 61 bytes; a legacy
        entry must be complete (a compressed wrapper is decompressed for its base offset)."""
        view = byte_view(buf)
        if len(view) - position < HEADER_SIZE_UP_TO_MAGIC:
            raise CorruptRecordError(f"{len(view) - position} bytes at position {position} are "
                                     f"fewer than a batch header", position=position)
        magic = view[position + MAGIC_OFFSET]
        if magic == MAGIC:
            if len(view) - position < HEADER_SIZE:
                raise CorruptRecordError(f"{len(view) - position} bytes at position {position} "
                                         f"are fewer than a v2 header", position=position)
            return cls(*BATCH_HEADER.unpack_from(view, position))
        (length,) = _INT32.unpack_from(view, position + SIZE_OFFSET)
        return RecordBatch(view[position:position + LOG_OVERHEAD + max(length, 0)],
                           position).header

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> Compression:
        return _compression(self.attributes, self.base_offset)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK \
            else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record; sequences wrap from INT32_MAX to 0 (Kafka)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        if self.base_sequence > INT32_MAX - self.last_offset_delta:
            return self.last_offset_delta - (INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + self.last_offset_delta


def _compression(attributes: int, base_offset: int) -> Compression:
    codec = attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise CorruptRecordError(f"batch at base offset {base_offset} has unknown compression "
                                 f"codec {codec}", base_offset=base_offset, codec=codec)
    return Compression(codec)


def byte_view(buf: object) -> memoryview:
    """A flat unsigned-byte view of any buffer, without copying."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)  # type: ignore[arg-type]
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def batch_location(path: Path | str | None, position: int) -> str:
    """How every read-path error names a batch: ``<file>: batch at position <n>`` (the file and
    the position are left out when unknown, e.g. bytes fetched from another process)."""
    where = "record batch" if position < 0 else f"record batch at position {position}"
    return where if path is None else f"{path}: {where}"


# ---- reading one batch -------------------------------------------------------------------------
class RecordBatch:
    """One batch over a slice of a buffer, not copied.

    For magic 0/1 (legacy, read-only) the same interface with a synthesized header: its
    ``base_offset`` and ``records_count`` decompress a wrapper (as Kafka's legacy batches do), while
    ``last_offset``, ``max_timestamp``, ``compression`` and ``size`` read the entry alone.
    May be shared between threads: its only mutable state is that lazily computed legacy header.
    """

    __slots__ = ("_buffer", "_position", "_path", "_header", "_message")

    def __init__(self, buffer: memoryview | bytes, position: int = -1,
                 path: Path | None = None) -> None:
        view = byte_view(buffer)
        self._position = position
        self._path = path
        self._message: legacy.LegacyMessage | None = None
        self._header: BatchHeader | None = None
        if len(view) < HEADER_SIZE_UP_TO_MAGIC:
            raise self._corrupt(f"only {len(view)} bytes, fewer than {HEADER_SIZE_UP_TO_MAGIC}")
        (length,) = _INT32.unpack_from(view, SIZE_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise self._corrupt(f"batch length {length} is below the minimum "
                                f"{LEGACY_RECORD_OVERHEAD_V0}")
        size = length + LOG_OVERHEAD
        if size > len(view):
            raise self._corrupt(f"batch of {size} bytes is truncated to {len(view)}")
        self._buffer = view[:size]
        magic = view[MAGIC_OFFSET]
        if magic == MAGIC:
            if size < HEADER_SIZE:
                raise self._corrupt(f"v2 batch of {size} bytes is smaller than its "
                                    f"{HEADER_SIZE}-byte header")
            self._header = BatchHeader(*BATCH_HEADER.unpack_from(view, 0))
        elif magic in (0, 1):
            self._message = legacy.read_message(self._buffer, 0, path=path,
                                                base_position=max(position, 0))
        else:
            raise self._corrupt(f"unknown magic {magic}")

    def _corrupt(self, problem: str, **fields: object) -> CorruptRecordError:
        return CorruptRecordError(f"{batch_location(self._path, self._position)}: {problem}",
                                  path=self._path, position=self._position, **fields)

    # -- header fields --
    @property
    def header(self) -> BatchHeader:
        if self._header is None:
            self._header = self._legacy_header()
        return self._header

    def _legacy_header(self) -> BatchHeader:
        message = self._message
        assert message is not None
        base, count = legacy.span(message, max_decompressed_bytes=MAX_DECOMPRESSED_BYTES,
                                  path=self._path, position=self._position)
        attributes = message.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK
                                           if message.magic > 0 else COMPRESSION_MASK)
        return BatchHeader(base, message.size - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH,
                           message.magic, message.crc, attributes, message.offset - base,
                           message.timestamp, message.timestamp, NO_PRODUCER_ID,
                           NO_PRODUCER_EPOCH, NO_SEQUENCE, count)

    @property
    def magic(self) -> int:
        return self._buffer[MAGIC_OFFSET]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        if self._message is not None:
            return self._message.offset
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size(self) -> int:
        return len(self._buffer)

    @property
    def max_timestamp(self) -> int:
        if self._message is not None:
            return self._message.timestamp
        return self.header.max_timestamp

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def compression(self) -> Compression:
        if self._message is not None:
            return _compression(self._message.codec, self._message.offset)
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        if self._message is not None:
            return TimestampType(self._message.timestamp_type)
        return self.header.timestamp_type

    @property
    def is_control(self) -> bool:
        return self._message is None and self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self._message is None and self.header.is_transactional

    @property
    def producer_id(self) -> int:
        return NO_PRODUCER_ID if self._message is not None else self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH if self._message is not None else self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return NO_SEQUENCE if self._message is not None else self.header.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        if self._message is not None:
            return NO_PARTITION_LEADER_EPOCH
        return self.header.partition_leader_epoch

    @property
    def delete_horizon_ms(self) -> int | None:
        return None if self._message is not None else self.header.delete_horizon_ms

    @property
    def position(self) -> int:
        return self._position

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def buffer(self) -> memoryview:
        return self._buffer

    # -- checks --
    def stored_crc(self) -> int:
        return self._message.crc if self._message is not None else self.header.crc

    def compute_crc(self) -> int:
        """CRC32C of attributes..end for v2; zlib CRC32 of magic..end for magic 0/1."""
        if self._message is not None:
            return zlib.crc32(self._buffer[MAGIC_OFFSET:])
        return crc32c.crc32c(self._buffer[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.stored_crc()

    def ensure_valid(self) -> None:
        """Raise ``CorruptRecordError`` on a CRC mismatch. Its fields: ``path``, ``position`` (of
        the batch in its file), ``base_offset`` and ``offset`` (the batch's last offset) as the
        header claims them, ``stored_crc`` and ``computed_crc``. One CRC call over a view, no
        copy."""
        stored, computed = self.stored_crc(), self.compute_crc()
        if stored != computed:
            base = self._header.base_offset if self._header is not None else self.last_offset
            raise self._corrupt(
                f"CRC mismatch for the batch at offsets {base}..{self.last_offset} (stored crc "
                f"{stored:#010x}, computed crc {computed:#010x})", base_offset=base,
                offset=self.last_offset, stored_crc=stored, computed_crc=computed)

    # -- records --
    def records(self, *, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
                check_crc: bool = True) -> list[Record]:
        """Every record, decompressed, with absolute offsets, effective timestamps (the batch's
        maxTimestamp under LogAppendTime) and decoded headers. Control records come back raw.

        The batch's CRC is checked first (``ensure_valid``), as Kafka's consumers do with
        ``check.crcs=true``: a damaged batch raises ``CorruptRecordError``, never altered records.
        ``check_crc=False`` is for tools that report damage themselves (``dump-log``)."""
        if check_crc:
            self.ensure_valid()
        if self._message is not None:
            return [Record(key, value, timestamp, (), offset) for offset, timestamp, key, value
                    in legacy.decode(self._message, max_decompressed_bytes=max_decompressed_bytes,
                                     path=self._path, position=self._position)]
        header = self.header
        data = self._records_section(header, max_decompressed_bytes)
        count = header.records_count
        if count == 0 and not data:
            return []
        fields = self._walk(data, count)
        return _materialize(data, fields, header)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def check_records(self, *, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> None:
        """Decode the records as ``records`` does (decompressing, walking every record's fields)
        without building them: raises the ``CorruptRecordError`` a reader would meet. About 40
        times faster than ``records`` for a check that keeps nothing."""
        if self._message is not None:
            self.records(max_decompressed_bytes=max_decompressed_bytes)
            return
        header = self.header
        data = self._records_section(header, max_decompressed_bytes)
        if header.records_count or data:
            self._walk(data, header.records_count)

    def _records_section(self, header: BatchHeader, max_decompressed_bytes: int) -> bytes:
        count = header.records_count
        if count < 0:
            raise self._corrupt(f"negative records count {count}", base_offset=header.base_offset)
        body = self._buffer[HEADER_SIZE:]
        codec = _compression(header.attributes, header.base_offset)
        if codec == Compression.NONE or (count == 0 and not body):
            return bytes(body)
        try:
            return compressors.decompress(codec, body, max_size=max_decompressed_bytes)
        except CorruptRecordError as err:
            raise self._corrupt(f"base offset {header.base_offset}: {err.message}",
                                base_offset=header.base_offset) from err

    def _walk(self, data: bytes, count: int) -> np.ndarray:
        if count > max_records_in(len(data)):
            raise self._corrupt(f"records count {count} cannot fit in {len(data)} bytes",
                                base_offset=self.header.base_offset)
        fields = np.empty((kernels.RECORD_ROWS, count), dtype=np.int64)
        read, status, where = kernels.walk_records(kernels.as_input(data), 0, len(data), fields)
        if status != kernels.OK:
            raise self._corrupt(
                f"base offset {self.header.base_offset}, record {read} at byte {where} of the "
                f"records: {RECORD_ERRORS[status]}", base_offset=self.header.base_offset,
                record_index=read)
        return fields

    def __repr__(self) -> str:
        return (f"RecordBatch(magic={self.magic}, last_offset={self.last_offset}, "
                f"size={self.size}, position={self._position})")


def max_records_in(size: int) -> int:
    """The most v2 records ``size`` bytes of records can hold (each takes at least
    ``kernels.MIN_RECORD_SIZE`` bytes): every reader checks a batch's records count against it
    before allocating per-record tables, so a forged count cannot claim memory."""
    return max(size, 0) // kernels.MIN_RECORD_SIZE


RECORD_ERRORS = {
    kernels.ERR_RECORD_LENGTH: "record length is unreadable, negative or past the end",
    kernels.ERR_VARINT: "a varint is longer than allowed",
    kernels.ERR_RECORD_OVERFLOW: "a field runs past the record's length",
    kernels.ERR_KEY_LENGTH: "key length is below -1",
    kernels.ERR_VALUE_LENGTH: "value length is below -1",
    kernels.ERR_HEADER_COUNT: "header count is negative or larger than the bytes left",
    kernels.ERR_HEADER_KEY_LENGTH: "header key length is negative",
    kernels.ERR_HEADER_VALUE_LENGTH: "header value length is below -1",
    kernels.ERR_RECORD_SIZE: "record fields do not add up to the record length",
    kernels.ERR_TRAILING_BYTES: "bytes remain after the declared number of records",
}


def _materialize(data: bytes, fields: np.ndarray, header: BatchHeader) -> list[Record]:
    (offset_deltas, ts_deltas, key_pos, key_len, value_pos, value_len, headers_pos,
     header_count) = fields[:kernels.REC_START].tolist()
    base_offset = header.base_offset
    if header.attributes & TIMESTAMP_TYPE_MASK:
        timestamps = [header.max_timestamp] * len(offset_deltas)
    else:
        base_timestamp = header.base_timestamp
        timestamps = [base_timestamp + d for d in ts_deltas]
    return [
        Record(None if kl < 0 else data[kp:kp + kl], None if vl < 0 else data[vp:vp + vl], ts,
               decode_headers(data, hp, hc) if hc else (), base_offset + od)
        for od, ts, kp, kl, vp, vl, hp, hc in zip(offset_deltas, timestamps, key_pos, key_len,
                                                  value_pos, value_len, headers_pos, header_count)
    ]


def decode_headers(data: bytes, pos: int, count: int, errors: str = "surrogateescape"
                   ) -> tuple[tuple[str, bytes | None], ...]:
    """``count`` record headers at ``pos``, already bounds-checked by the kernel. Keys decode with
    ``surrogateescape`` by default so that any bytes round-trip through a rebuild unchanged
    (``errors="replace"`` for display and Arrow columns)."""
    headers = []
    for _ in range(count):
        key_len, pos = decode_varint(data, pos)
        key = data[pos:pos + key_len].decode("utf-8", errors)
        pos += key_len
        value_len, pos = decode_varint(data, pos)
        if value_len < 0:
            headers.append((key, None))
        else:
            headers.append((key, data[pos:pos + value_len]))
            pos += value_len
    return tuple(headers)


# ---- walking a buffer of batches ---------------------------------------------------------------
def iter_batches(buf: bytes | memoryview, start: int = 0, *, path: Path | None = None,
                 base_position: int = 0) -> Iterator[RecordBatch]:
    """The batches of ``buf[start:]`` by Kafka's ``FileLogInputStream`` rules: stop, without error,
    when at most 17 bytes remain or the next batch is incomplete; raise ``CorruptRecordError``
    (naming ``path`` and ``base_position + pos``) when a batchLength is below 14, or a complete
    batch is not a batch (unknown magic, v2 smaller than its header)."""
    view = byte_view(buf)
    end = len(view)
    pos = start
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        (length,) = _INT32.unpack_from(view, pos + SIZE_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            where = base_position + pos
            raise CorruptRecordError(
                f"{batch_location(path, where)}: batch length {length} is below the minimum "
                f"{LEGACY_RECORD_OVERHEAD_V0}", path=path, position=where)
        size = length + LOG_OVERHEAD
        if size > end - pos:
            return
        yield RecordBatch(view[pos:pos + size], base_position + pos, path)
        pos += size


@dataclass(frozen=True, eq=False)
class BatchScan:
    """Header fields of every complete batch found by ``scan_batches``, one array element per batch.

    ``positions`` and ``error_position`` are indices into the scanned buffer; ``valid_bytes`` counts
    from ``start`` to the end of the last complete batch. ``error`` says why the scan stopped before
    the data ran out (an impossible batch, or a CRC mismatch with ``check_crc``), else ``None``.
    Legacy entries report their offset field as base and last offset and -1 records for a
    compressed wrapper. ``crcs``, ``partition_leader_epochs`` and the producer fields are extras.
    """

    positions: np.ndarray
    sizes: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    magics: np.ndarray
    records_counts: np.ndarray
    attributes: np.ndarray
    valid_bytes: int
    error: str | None
    error_position: int
    crcs: np.ndarray
    partition_leader_epochs: np.ndarray
    producer_ids: np.ndarray
    producer_epochs: np.ndarray
    base_sequences: np.ndarray
    problem: str | None = None      # ``error`` without its position, for callers that add their own

    def __len__(self) -> int:
        return len(self.positions)


_SCAN_MESSAGES = {
    kernels.ERR_BATCH_SIZE: "batch length below the minimum record overhead of 14",
    kernels.ERR_MAGIC: "unknown magic byte",
    kernels.ERR_V2_SIZE: "v2 batch smaller than its 61-byte header",
    kernels.ERR_LEGACY_SIZE: "magic 1 message smaller than its 22-byte overhead",
}
_SCAN_DTYPES = (
    (kernels.ROW_POSITION, np.int64), (kernels.ROW_SIZE, np.int64),
    (kernels.ROW_BASE_OFFSET, np.int64), (kernels.ROW_LAST_OFFSET, np.int64),
    (kernels.ROW_MAX_TIMESTAMP, np.int64), (kernels.ROW_MAGIC, np.int8),
    (kernels.ROW_RECORDS_COUNT, np.int32), (kernels.ROW_ATTRIBUTES, np.int16),
    (kernels.ROW_CRC, np.uint32), (kernels.ROW_LEADER_EPOCH, np.int32),
    (kernels.ROW_PRODUCER_ID, np.int64), (kernels.ROW_PRODUCER_EPOCH, np.int16),
    (kernels.ROW_BASE_SEQUENCE, np.int32),
)


def scan_batches(buf: np.ndarray | bytes | memoryview, start: int = 0, end: int | None = None, *,
                 check_crc: bool = False) -> BatchScan:
    """Walk the batch headers of ``buf[start:end]`` in a numba kernel (recovery, index rebuild,
    segment reads). Stops at the first incomplete batch (no error) or impossible batch (``error``
    set, never raised); with ``check_crc`` also at the first batch whose CRC does not match."""
    data = kernels.as_input(buf)
    end = len(data) if end is None else end
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"scan range [{start}, {end}) is outside the buffer of {len(data)} bytes")
    capacity = max(1, min((end - start) // _MIN_BATCH_SIZE + 1, _SCAN_CHUNK))
    tables = []
    pos = start
    while True:
        table = np.empty((kernels.SCAN_ROWS, capacity), dtype=np.int64)
        count, pos, status = kernels.scan_batch_headers(data, pos, end, table)
        tables.append(table[:, :count])
        if status != kernels.FULL:
            break
    table = tables[0] if len(tables) == 1 else np.concatenate(tables, axis=1)
    problem = None if status == kernels.OK else _SCAN_MESSAGES[status]
    error_position = -1 if status == kernels.OK else pos
    if check_crc and table.shape[1]:
        bad = _first_bad_crc(data, table)
        if bad is not None:
            index, stored, computed = bad
            error_position = int(table[kernels.ROW_POSITION, index])
            problem = (f"CRC mismatch for the batch at base offset "
                       f"{int(table[kernels.ROW_BASE_OFFSET, index])} (stored crc {stored:#010x}, "
                       f"computed crc {computed:#010x})")
            table = table[:, :index]
    error = None if problem is None else f"{problem} at position {error_position}"
    # int64 row views of the kernel's table: no copy per column (this runs once per read chunk)
    columns = [table[row] for row, _dtype in _SCAN_DTYPES]
    count = table.shape[1]
    valid_bytes = 0 if count == 0 else int(table[kernels.ROW_POSITION, count - 1]
                                           + table[kernels.ROW_SIZE, count - 1]) - start
    (positions, sizes, base_offsets, last_offsets, max_timestamps, magics, records_counts,
     attributes, crcs, leader_epochs, producer_ids, producer_epochs, base_sequences) = columns
    return BatchScan(positions, sizes, base_offsets, last_offsets, max_timestamps, magics,
                     records_counts, attributes, valid_bytes, error, error_position, crcs,
                     leader_epochs, producer_ids, producer_epochs, base_sequences, problem)


def _first_bad_crc(data: np.ndarray, table: np.ndarray) -> tuple[int, int, int] | None:
    view = memoryview(data)
    rows = zip(table[kernels.ROW_POSITION].tolist(), table[kernels.ROW_SIZE].tolist(),
               table[kernels.ROW_MAGIC].tolist(), table[kernels.ROW_CRC].tolist())
    for index, (pos, size, magic, stored) in enumerate(rows):
        computed = batch_crc(view, pos, size, magic)
        if computed != stored:
            return index, stored, computed
    return None


def batch_crc(view: memoryview, position: int, size: int, magic: int) -> int:
    """The CRC the batch of ``size`` bytes at ``position`` of ``view`` should store: CRC32C of
    attributes..end for v2, zlib CRC32 of magic..end for magic 0/1. One call over a view, no
    copy."""
    if magic == MAGIC:
        return crc32c.crc32c(view[position + ATTRIBUTES_OFFSET:position + size])
    return zlib.crc32(view[position + MAGIC_OFFSET:position + size])


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
    if (ts < NO_TIMESTAMP).any():
        raise ValueError(f"invalid negative timestamp {int(ts.min())}")
    deltas = _offset_deltas(offset_deltas, n)
    last_delta = int(deltas[-1]) if last_offset_delta is None else last_offset_delta
    if last_delta < deltas[-1] or last_delta > INT32_MAX:
        raise ValueError(f"last offset delta {last_delta} is below the last record's "
                         f"{int(deltas[-1])} or above int32")
    base_timestamp = int(ts[0]) if delete_horizon_ms is None else delete_horizon_ms
    max_ts = max(NO_TIMESTAMP, int(ts.max())) if max_timestamp is None else max_timestamp
    key_data, key_lens = _column(keys, n)
    value_data, value_lens = _column(values, n)
    if header_blocks is not None and any(header_blocks):
        header_data = kernels.as_input(b"".join(header_blocks))
        header_lens = np.fromiter(map(len, header_blocks), dtype=np.int64, count=n)
    else:
        header_data = kernels.as_input(b"")
        header_lens = np.zeros(n, dtype=np.int64)
    bound = (HEADER_SIZE + kernels.MAX_RECORD_OVERHEAD * n + len(key_data) + len(value_data)
             + len(header_data))
    out = np.empty(bound, dtype=np.uint8)
    end = kernels.encode_records(out, HEADER_SIZE, key_data, key_lens, value_data, value_lens,
                                 header_data, header_lens, ts - base_timestamp, deltas)
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
