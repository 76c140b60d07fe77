"""Magic 0 and 1 message sets (Kafka's ``LegacyRecord``), read-only.

A message set is a sequence of entries, big-endian::

    Offset      int64
    MessageSize int32    bytes after this field
    Crc         uint32   zlib CRC32 of Magic..end
    Magic       int8     0 or 1
    Attributes  int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4); bit 3 timestamp type (v1)
    Timestamp   int64    v1 only
    Key         int32 length (-1 = null) + bytes
    Value       int32 length (-1 = null) + bytes

A compressed *wrapper* message carries a whole inner message set, compressed, as its value; its
offset is the offset of the last inner message. Inner offsets are absolute for magic 0 and relative
for magic 1: ``absolute = wrapper_offset - last_inner_relative + inner_relative``. Inner messages
are never compressed themselves. A v1 wrapper with LogAppendTime gives its own timestamp to every
inner message. Magic 0 lz4 wrappers carry Kafka's broken frame header checksum (KAFKA-3160).

This module knows nothing of ``storage.records``: it returns plain tuples
``(offset, timestamp, key, value)`` that the record batch reader turns into ``Record``s.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from storage import compression
from storage.batch_layout import (
    LEGACY_CRC_OFFSET,
    LEGACY_FIELDS,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    LEGACY_OFFSETS,
    LOG_OVERHEAD,
    SIZE_OFFSET,
)
from storage.errors import CorruptRecordError

# the layout of a legacy message is storage.batch_layout's (LEGACY_FIELDS); the names used here
HEADER_V0 = struct.Struct(">" + "".join(code for _, code in LEGACY_FIELDS[:-1]))   # no timestamp
HEADER_V1 = struct.Struct(">" + "".join(code for _, code in LEGACY_FIELDS))
LENGTH = struct.Struct(">i")            # key or value length, -1 = null
CRC_OFFSET = LEGACY_CRC_OFFSET
MAGIC_OFFSET = LEGACY_OFFSETS["magic"]
RECORD_OVERHEAD_V0 = LEGACY_RECORD_OVERHEAD_V0    # crc, magic, attributes, key length, value length
RECORD_OVERHEAD_V1 = LEGACY_RECORD_OVERHEAD_V1    # ... and the timestamp
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
LOG_APPEND_TIME = 1

DecodedRecord = tuple[int, int, "bytes | None", "bytes | None"]   # offset, timestamp, key, value


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One parsed entry. ``key`` and ``value`` are views into the buffer it was read from."""

    offset: int
    size: int                   # the whole entry, offset and size fields included
    crc: int
    magic: int
    attributes: int
    timestamp: int              # -1 for magic 0
    key: memoryview | None
    value: memoryview | None

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3 if self.magic > 0 else 0


def _in_file(path: Path | None) -> str:
    """The prefix naming the file in an error message (as ``records.batch_location`` does)."""
    return "" if path is None else f"{path}: "


def read_message(buf: memoryview, position: int = 0, *, path: Path | None = None,
                 base_position: int = 0) -> LegacyMessage:
    """Parse the complete entry at ``buf[position:]``; its key and value must end it exactly.

    ``path`` and ``base_position + position`` name the entry in a ``CorruptRecordError``.
    """
    where = base_position + position

    def corrupt(problem: str) -> CorruptRecordError:
        return CorruptRecordError(f"{_in_file(path)}legacy message at position {where}: {problem}",
                                  path=path, position=where)

    if len(buf) - position < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise corrupt(f"only {len(buf) - position} bytes, fewer than a message header")
    magic = buf[position + MAGIC_OFFSET]
    if magic == 0:
        offset, length, crc, _, attributes = HEADER_V0.unpack_from(buf, position)
        timestamp, overhead, key_at = -1, RECORD_OVERHEAD_V0, HEADER_V0.size
    elif magic == 1:
        if len(buf) - position < LOG_OVERHEAD + RECORD_OVERHEAD_V1:
            raise corrupt(f"only {len(buf) - position} bytes, fewer than a v1 message header")
        offset, length, crc, _, attributes, timestamp = HEADER_V1.unpack_from(buf, position)
        overhead, key_at = RECORD_OVERHEAD_V1, HEADER_V1.size
    else:
        raise corrupt(f"magic {magic} is not 0 or 1")
    if length < overhead:
        raise corrupt(f"message size {length} is below the {overhead}-byte v{magic} overhead")
    end = position + LOG_OVERHEAD + length
    if end > len(buf):
        raise corrupt(f"message of {length} bytes runs past the {len(buf)}-byte buffer")
    pos = position + key_at
    key, pos = _read_bytes(buf, pos, end, "key", corrupt)
    value, pos = _read_bytes(buf, pos, end, "value", corrupt)
    if pos != end:
        raise corrupt(f"{end - pos} bytes left after the value")
    return LegacyMessage(offset, LOG_OVERHEAD + length, crc, magic, attributes & 0xFF,
                         timestamp, key, value)


def _read_bytes(buf: memoryview, pos: int, end: int, what: str,
                corrupt: Callable[[str], CorruptRecordError]) -> tuple[memoryview | None, int]:
    if end - pos < LENGTH.size:
        raise corrupt(f"no room for the {what} length")
    (size,) = LENGTH.unpack_from(buf, pos)
    pos += LENGTH.size
    if size == -1:
        return None, pos
    if size < 0 or size > end - pos:
        raise corrupt(f"{what} length {size} does not fit in the message")
    return buf[pos:pos + size], pos + size


def compute_crc(buf: memoryview, position: int, size: int) -> int:
    """zlib CRC32 of the entry at ``position`` of ``size`` bytes, from its magic byte to its end."""
    return zlib.crc32(buf[position + MAGIC_OFFSET:position + size])


def decode(message: LegacyMessage, *, max_decompressed_bytes: int, path: Path | None = None,
           position: int = -1) -> list[DecodedRecord]:
    """The records of one top-level entry: itself, or the inner messages of a wrapper, with
    absolute offsets and their effective timestamps (-1 for magic 0)."""
    if message.codec == 0:
        return [(message.offset, message.timestamp, _bytes(message.key), _bytes(message.value))]
    inner = inner_messages(message, max_decompressed_bytes=max_decompressed_bytes, path=path,
                           position=position)
    shift = _offset_shift(message, inner)
    wrapper_time = message.timestamp_type == LOG_APPEND_TIME
    return [(m.offset + shift, message.timestamp if wrapper_time else m.timestamp,
             _bytes(m.key), _bytes(m.value)) for m in inner]


def span(message: LegacyMessage, *, max_decompressed_bytes: int, path: Path | None = None,
         position: int = -1) -> tuple[int, int]:
    """``(first offset, record count)`` of one top-level entry (a wrapper is decompressed)."""
    if message.codec == 0:
        return message.offset, 1
    inner = inner_messages(message, max_decompressed_bytes=max_decompressed_bytes, path=path,
                           position=position)
    return inner[0].offset + _offset_shift(message, inner), len(inner)


def _offset_shift(wrapper: LegacyMessage, inner: list[LegacyMessage]) -> int:
    """What turns inner offsets into absolute ones: nothing for magic 0, and for magic 1 the
    wrapper offset minus the last inner (relative) offset."""
    return wrapper.offset - inner[-1].offset if wrapper.magic > 0 else 0


def inner_messages(message: LegacyMessage, *, max_decompressed_bytes: int,
                   path: Path | None = None, position: int = -1) -> list[LegacyMessage]:
    """Decompress a wrapper's value and parse the inner message set (raw inner offsets)."""
    def corrupt(problem: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"{_in_file(path)}compressed legacy message at position {position} (offset "
            f"{message.offset}): {problem}", path=path, position=position, offset=message.offset)

    if message.codec not in (compression.GZIP, compression.SNAPPY, compression.LZ4):
        raise corrupt(f"codec {message.codec} is not valid for magic {message.magic}")
    if message.value is None:
        raise corrupt("the wrapper has no value")
    try:
        data = compression.decompress(message.codec, message.value,
                                      max_size=max_decompressed_bytes,
                                      legacy_lz4_checksum=message.magic == 0)
    except CorruptRecordError as err:
        raise corrupt(err.message) from err
    view = memoryview(data)
    inner: list[LegacyMessage] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < LOG_OVERHEAD:
            raise corrupt(f"{len(view) - pos} stray bytes after the inner messages")
        (length,) = LENGTH.unpack_from(view, pos + SIZE_OFFSET)
        if length < RECORD_OVERHEAD_V0 or length > len(view) - pos - LOG_OVERHEAD:
            raise corrupt(f"inner message size {length} at byte {pos} is impossible")
        try:
            entry = read_message(view, pos, path=path)
        except CorruptRecordError as err:
            raise corrupt(f"inner message at byte {pos}: {err.message}") from err
        if entry.codec != 0:
            raise corrupt(f"inner message at byte {pos} is compressed again")
        inner.append(entry)
        pos += entry.size
    if not inner:
        raise corrupt("the wrapper holds no inner messages")
    return inner


def _bytes(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)
