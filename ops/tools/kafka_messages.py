"""Kafka's schema-defined messages (the ``"type": "data"`` JSON schemas of ``common/message/``):
reading one at a version as Kafka's generated ``read(Readable, short)`` does, and printing it as
Kafka's generated ``*JsonConverter.write`` and Jackson's ``ObjectNode.toString()`` do.

Wire rules at version ``v`` (big-endian; ``flexible`` when ``v`` is in the schema's
``flexibleVersions``)::

    int8 | int16 | int32 | int64      fixed width, signed
    string   non-flexible: int16 length (-1 = null) + UTF-8 bytes
             flexible:     unsigned varint (length + 1, 0 = null) + UTF-8 bytes
    bytes    non-flexible: int32 length (-1 = null) + bytes
             flexible:     unsigned varint (length + 1, 0 = null) + bytes
    array    non-flexible: int32 count (-1 = null) + elements
             flexible:     unsigned varint (count + 1, 0 = null) + elements
    struct   its fields in schema order; when flexible, then its tagged fields:
             unsigned varint count, then per field: unsigned varint tag | unsigned varint size |
             data (a known tag is read by its type, an unknown one is skipped)

Unsigned varints are 7-bit little-endian groups, at most 5 bytes, read into a Java ``int``: a
5th byte with its top bit set is an error, a larger value wraps negative. Bytes after the last
field are ignored.

Which fields a version holds: the generated code tests only the bounds that a field's versions
add to the message's ``validVersions``, and never rejects the version itself (KIP-915: a reader
must take records written by a newer broker). So a version above the highest reads like the
highest, and one below zero like version 0.

``MessageReadError.reason`` is the text of the Java exception the generated code would throw
(``null`` for a buffer underflow, whose Java message is null), so callers can print Kafka's
error lines. Strings decode as Java's ``new String(bytes, UTF_8)``: malformed bytes become U+FFFD.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from storage.java_buffer import INT8, INT16, INT32, INT64, BufferReader, int32
from storage.java_text import java_string

MAX_VERSION = 0x7FFF
MAX_STRING_LENGTH = 0x7FFF


class MessageReadError(Exception):
    """The bytes of a message do not read at the version asked for: a buffer underflow, a length
    beyond the bytes left, a null where the schema allows none, a varint longer than 5 bytes.

    ``reason`` is what the Java exception of Kafka's generated reader says (``"null"`` for an
    underflow). Unlike ``storage.errors.CorruptRecordError`` it concerns the key or value bytes of
    one record, never the batch around it: the dump prints it and goes on.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SkippedRecord(Exception):
    """A record that a topic decoder (``group_records``, ``transaction_records``) prints a line
    about instead of its key and value: ``text`` is that line, Kafka's where Kafka has one, and
    names the record's offset. Unlike ``MessageReadError`` it is worded for the dump."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _versions(spec: str) -> tuple[int, int] | None:
    """``"3+"``, ``"1"``, ``"0-4"`` or ``"none"`` (None) as an inclusive (low, high) range."""
    return None if spec == "none" else _range(spec)


def _range(spec: str) -> tuple[int, int]:
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a schema. ``kind`` is ``int8``, ``int16``, ``int32``, ``int64``, ``string``,
    ``bytes``, ``[]int32``, ``[]string`` or ``[]struct`` (then ``struct`` is the element);
    ``name`` is the camelCase name Kafka's JSON prints; a ``tag`` makes it a tagged field."""

    name: str
    kind: str
    versions: str = "0+"
    nullable: str = "none"
    struct: Struct | None = None
    tag: int | None = None
    default: Any = None
    present: tuple[int, int] = field(init=False)
    nullable_range: tuple[int, int] | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "present", _range(self.versions))
        object.__setattr__(self, "nullable_range", _versions(self.nullable))


@dataclass(frozen=True, slots=True)
class Struct:
    """A message (or a struct inside one): its fields in wire order, the versions it is valid at
    (nested structs: the versions of the field holding them) and its flexible versions."""

    name: str
    valid: str
    flexible: str
    fields: tuple[Field, ...]
    valid_range: tuple[int, int] = field(init=False)
    flexible_range: tuple[int, int] | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "valid_range", _range(self.valid))
        object.__setattr__(self, "flexible_range", _versions(self.flexible))


def _within(bounds: tuple[int, int] | None, valid: tuple[int, int], version: int) -> bool:
    """Kafka's VersionConditional: only the bounds ``bounds`` adds to ``valid`` are tested."""
    if bounds is None:
        return False
    low, high = bounds
    return ((low <= valid[0] or version >= low) and (high >= valid[1] or version <= high)
            and low <= valid[1] and high >= valid[0])


def is_flexible(struct: Struct, version: int) -> bool:
    return _within(struct.flexible_range, struct.valid_range, version)


# ---- reading -----------------------------------------------------------------------------------

class Reader(BufferReader):
    """A position in one buffer, with the primitive reads of Kafka's ``ByteBufferAccessor``."""

    __slots__ = ()
    error = MessageReadError


_FIXED = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64}


def read_message(struct_: Struct, data: bytes, version: int) -> dict[str, Any]:
    """The fields of ``struct_`` held at ``version``, read from the start of ``data``, as Kafka's
    JSON converter would print them (a tagged field only when not at its default). Raises
    ``MessageReadError``."""
    return _read_struct(struct_, Reader(data), version)


def _read_struct(struct_: Struct, reader: Reader, version: int) -> dict[str, Any]:
    flexible = is_flexible(struct_, version)
    values: dict[str, Any] = {}
    for f in struct_.fields:
        if f.tag is None and _within(f.present, struct_.valid_range, version):
            values[f.name] = _read_field(f, f.kind, reader, version, flexible, struct_)
    if not flexible:
        return values
    tagged = {f.tag: f for f in struct_.fields if f.tag is not None}
    found: dict[str, Any] = {}
    for _ in range(max(reader.unsigned_varint(), 0)):
        tag, size = reader.unsigned_varint(), reader.unsigned_varint()
        known = tagged.get(tag)
        if known is None:
            reader.array(size)
        else:
            found[known.name] = _read_field(known, known.kind, reader, version, True, struct_)
    return {f.name: values[f.name] if f.tag is None else found[f.name] for f in struct_.fields
            if f.name in values or (f.name in found and found[f.name] != f.default)}


def _read_field(f: Field, kind: str, reader: Reader, version: int, flexible: bool,
                parent: Struct, element: bool = False) -> Any:
    codec = _FIXED.get(kind)
    if codec is not None:
        return reader.fixed(codec)
    if kind == "struct":
        assert f.struct is not None
        return _read_struct(f.struct, reader, version)
    name = f"{f.name} element" if element else f.name
    if flexible:
        length = int32(reader.unsigned_varint() - 1)
    else:
        length = reader.fixed(INT16 if kind == "string" else INT32)
    if length < 0:
        if element or not _within(f.nullable_range, parent.valid_range, version):
            raise MessageReadError(f"non-nullable field {name} was serialized as null")
        return None
    if kind == "string":
        if length > MAX_STRING_LENGTH:
            raise MessageReadError(f"string field {name} had invalid length {length}")
        return java_string(reader.array(length))
    if kind == "bytes":
        return reader.array(length)
    if length > reader.remaining:
        raise MessageReadError(f"Tried to allocate a collection of size {length}, but there are "
                               f"only {reader.remaining} bytes remaining.")
    if kind == "[]int32":
        return [reader.fixed(INT32) for _ in range(length)]
    if kind == "[]string":
        return [_read_field(f, "string", reader, version, flexible, parent, element=True)
                for _ in range(length)]
    assert kind == "[]struct" and f.struct is not None, kind
    return [_read_struct(f.struct, reader, version) for _ in range(length)]


def record_version(raw: bytes, part: str, offset: int) -> int:
    """The int16 version (or record type) that prefixes a record's key or value (``part``).
    Raises ``SkippedRecord`` with the line Kafka's CoordinatorRecordSerde gives."""
    if len(raw) < INT16.size:
        raise SkippedRecord(f"Error at offset {offset}, skipping. Could not read version from "
                            f"{part}'s buffer.")
    return int(INT16.unpack_from(raw)[0])


def read_record_part(schema: Struct, raw: bytes, version: int, part: str,
                     offset: int) -> dict[str, Any]:
    """The message after the version prefix of a record's key or value (``part``). Raises
    ``SkippedRecord`` with the line Kafka's CoordinatorRecordSerde gives."""
    try:
        return read_message(schema, bytes(raw[INT16.size:]), version)
    except MessageReadError as error:
        raise SkippedRecord(f"Error at offset {offset}, skipping. Could not read record with "
                            f"version {version} from {part}'s buffer due to: "
                            f"{error.reason}.") from error


# ---- printing ----------------------------------------------------------------------------------
_JACKSON_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_JACKSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 0x08: "\\b", 0x09: "\\t",
                         0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})


def jackson_json(value: Any) -> str:
    """``value`` as Jackson's ``JsonNode.toString()`` prints it: compact, non-ASCII as is,
    control characters as ``\\u00XX`` (upper-case hex), bytes as padded base64."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.translate(_JACKSON_ESCAPES) + '"'
    if isinstance(value, (bytes, bytearray)):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{jackson_json(k)}:{jackson_json(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(jackson_json(v) for v in value) + "]"
    raise TypeError(f"no JSON form for {type(value).__name__}")


def plain(value: Any) -> Any:
    """``value`` with bytes as base64 strings (as Jackson prints them), ready for ``json``."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


__all__ = ["Field", "MessageReadError", "Reader", "SkippedRecord", "Struct", "is_flexible",
           "jackson_json", "java_string", "plain", "read_message", "read_record_part",
           "record_version"]
