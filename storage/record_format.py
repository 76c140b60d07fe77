"""The types of Kafka's record format (magic 2): compression codecs, timestamp types, control
records, ``Record``, varints and the parsed ``BatchHeader``. The byte layout of the header is
``storage.batch_layout``; reading batches is ``storage.record_reader``, building them
``storage.record_builder``; ``storage.records`` re-exports all three."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from storage import legacy
from storage.errors import CorruptRecordError
# the header layout and its offsets: storage.batch_layout (one definition)
from storage.batch_layout import (
    BATCH_HEADER,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    SIZE_OFFSET,
)


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
RECORD_BATCH_OVERHEAD = HEADER_SIZE
LEGACY_RECORD_OVERHEAD_V0 = legacy.RECORD_OVERHEAD_V0             # 14: the smallest batchLength
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
INT32_MAX = 2**31 - 1
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024      # bound on one batch's decompressed records, for
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
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"{batch_location(None, position)}: batch length {length} "
                                     f"is below the minimum {LEGACY_RECORD_OVERHEAD_V0}",
                                     path=None, position=position)
        entry = view[position:position + LOG_OVERHEAD + length]
        if len(entry) < LOG_OVERHEAD + length:
            raise CorruptRecordError(f"{batch_location(None, position)}: batch of "
                                     f"{LOG_OVERHEAD + length} bytes is truncated to "
                                     f"{len(entry)}", path=None, position=position)
        if magic not in (0, 1):
            raise CorruptRecordError(f"{batch_location(None, position)}: unknown magic {magic}",
                                     path=None, position=position)
        message = legacy.read_message(entry, 0, base_position=position)
        return cls.of_legacy(message, path=None, position=position)

    @classmethod
    def of_legacy(cls, message: legacy.LegacyMessage, *, path: Path | None,
                  position: int) -> BatchHeader:
        """The header synthesized for a magic 0/1 entry: a compressed wrapper is decompressed
        for its base offset and record count, as Kafka's legacy batches do; ``path`` and
        ``position`` name the entry in a ``CorruptRecordError``."""
        base, count = legacy.span(message, max_decompressed_bytes=MAX_DECOMPRESSED_BYTES,
                                  path=path, position=position)
        attributes = message.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK
                                           if message.magic > 0 else COMPRESSION_MASK)
        return cls(base, message.size - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH,
                   message.magic, message.crc, attributes, message.offset - base,
                   message.timestamp, message.timestamp, NO_PRODUCER_ID,
                   NO_PRODUCER_EPOCH, NO_SEQUENCE, count)

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
    view = buf if type(buf) is memoryview else memoryview(buf)  # type: ignore[arg-type]
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def batch_location(path: Path | str | None, position: int) -> str:
    """How every read-path error names a batch: ``<file>: batch at position <n>`` (the file and
    the position are left out when unknown, e.g. bytes fetched from another process)."""
    where = "record batch" if position < 0 else f"record batch at position {position}"
    return where if path is None else f"{path}: {where}"
