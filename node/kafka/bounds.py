"""A bounds check of a request's bytes against its schema, before kio reads them.

kio's native reader allocates a collection for an array's declared length before it reads an
element, and a failed allocation aborts the whole process: one frame declaring an array of
2^35 elements would end the broker. Kafka's generated readers refuse such a length first
("Tried to allocate a collection of size N, but there are only M bytes remaining"); this walk
does the same for every array, string and bytes length, nullable struct marker and tagged
field of the request, following kio's dataclasses (the field order, ``kafka_type``, the
flexible encoding, the header's classic ``client_id``). Values are not built; only lengths and
sizes are checked, so kio's reader then never sees a length larger than the bytes left.

Encodings (KIP-482): a flexible array, string or bytes length is an unsigned varint holding
length + 1 (0 = null); a classic array and bytes length an int32, a classic string length an
int16 (-1 = null). Every flexible struct ends with a tag section: a count, then per field its
tag, its size and its bytes.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

FIXED_SIZES = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8,
    "uuid": 16, "error_code": 2, "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8,
}
MAX_VARINT_BYTES = 5                 # an unsigned varint of 32 bits
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class BoundsError(ValueError):
    """A length or size in the bytes that runs past their end (``position``, ``reason``)."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} at byte {position}")
        self.reason = reason
        self.position = position


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kafka_type: str | None      # None for a struct
    entity: type | None         # the struct type of a struct field or array
    array: bool
    nullable: bool
    tag: int | None


@functools.cache
def _plan(cls: type) -> tuple[tuple[_Field, ...], dict[int, _Field]]:
    plain, tagged = [], {}
    for f in fields(cls):
        kind = classify_field(f)
        entity = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        array = isinstance(kind, EntityTupleField | PrimitiveTupleField)
        tag = get_field_tag(f)
        spec = _Field(f.name, f.metadata.get("kafka_type"), entity, array,
                      is_optional(f) and tag is None, tag)
        if tag is None:
            plain.append(spec)
        else:
            tagged[int(tag)] = spec
    return tuple(plain), tagged


def check_bounds(cls: type, data: bytes, position: int, end: int | None = None) -> int:
    """Walk an instance of kio's entity ``cls`` encoded in ``data`` from ``position``; returns
    the position after it. Raises ``BoundsError`` at the first length or size that runs past
    ``end`` (default: the end of ``data``) or a varint longer than 5 bytes."""
    walker = _Walker(data, len(data) if end is None else end)
    return walker.entity(cls, position)


class _Walker:
    def __init__(self, data: bytes, end: int) -> None:
        self.data = data
        self.end = end

    def entity(self, cls: type, pos: int) -> int:
        plain, tagged = _plan(cls)
        flexible = bool(getattr(cls, "__flexible__", False))
        header = cls.__name__ == "RequestHeader"
        for spec in plain:
            pos = self.field(spec, pos, flexible, header)
        if flexible:
            count, pos = self.uvarint(pos)
            for _ in range(count):
                tag, pos = self.uvarint(pos)
                size, pos = self.uvarint(pos)
                stop = self.need(pos, size, "tagged field")
                spec = tagged.get(tag)
                if spec is not None:
                    _Walker(self.data, stop).field(spec, pos, flexible, header)
                pos = stop
        return pos

    def field(self, spec: _Field, pos: int, flexible: bool, header: bool) -> int:
        if spec.array:
            count, pos = self.length(pos, flexible, classic=_INT32, what=spec.name)
            if count is None:
                return pos
            self.need(pos, count, f"array {spec.name} of {count} elements")
            for _ in range(count):
                pos = self.element(spec, pos, flexible, header)
            return pos
        if spec.entity is not None and spec.nullable:
            marker = self.data[self.need(pos, 1, spec.name) - 1]
            pos += 1
            if marker == 0xFF:
                return pos
        return self.element(spec, pos, flexible, header)

    def element(self, spec: _Field, pos: int, flexible: bool, header: bool) -> int:
        if spec.entity is not None:
            return self.entity(spec.entity, pos)
        kind = spec.kafka_type or ""
        if kind in FIXED_SIZES:
            return self.need(pos, FIXED_SIZES[kind], spec.name)
        if kind == "string" and header and spec.name == "client_id":
            flexible = False          # the header's client_id keeps its int16 length
        classic = _INT16 if kind == "string" else _INT32
        size, pos = self.length(pos, flexible, classic=classic, what=spec.name)
        return pos if size is None else self.need(pos, size, spec.name)

    def length(self, pos: int, flexible: bool, *, classic: struct.Struct,
               what: str) -> tuple[int | None, int]:
        if flexible:
            value, pos = self.uvarint(pos)
            return (None if value == 0 else value - 1), pos
        stop = self.need(pos, classic.size, what)
        value = classic.unpack_from(self.data, pos)[0]
        if value < -1:
            raise BoundsError(f"{what}: negative length {value}", pos)
        return (None if value == -1 else value), stop

    def uvarint(self, pos: int) -> tuple[int, int]:
        value = shift = 0
        for i in range(MAX_VARINT_BYTES):
            if pos >= self.end:
                raise BoundsError("varint runs past the end", pos)
            byte = self.data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, pos
            shift += 7
        raise BoundsError("varint longer than 5 bytes", pos)

    def need(self, pos: int, size: int, what: Any) -> int:
        if size > self.end - pos:
            raise BoundsError(f"{what}: {size} bytes needed, {self.end - pos} left", pos)
        return pos + size
