"""Our own codec for the hot messages: Produce requests (v3-11) and Fetch requests (v4-12)
decoded, Produce and Fetch responses encoded, without kio's generic reader and writer.

Layouts per version follow Kafka's ProduceRequest/ProduceResponse/FetchRequest/FetchResponse
and RequestHeader/ResponseHeader JSON schemas (Produce v9+ and Fetch v12+ are flexible: compact
strings, arrays and bytes, a tag section ending every struct; request header v2, response header
v1). Decoding builds kio's own dataclasses of the version directly, so handlers read the same
attributes as before; ``records`` is the batch bytes, sliced once from the frame.

Hostile bytes (the rules of ``bounds``): every declared length is checked against the bytes left
before anything is allocated (an array of N elements needs at least N bytes), a null where the
schema forbids one, a tag this version does not know or invalid UTF-8 raise
``MalformedRequestError``, so the connection closes. Bytes after the body are ignored, as kio's
reader ignores them.

Encoding takes the kio response entity the handlers build. A response whose tagged fields hold
anything but their defaults (which our handlers never set) is written by kio's writer instead,
so our bytes are always kio's bytes. The Produce handler skips the entity: it answers with
``PartitionProduced`` values, written by ``encode_produce_answer`` (the writer the entity's
encoding uses too).
"""

from __future__ import annotations

import datetime
import functools
import io
import struct
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

from kio.index import load_request_schema
from kio.serial import entity_writer

from node.kafka.errors import MalformedRequestError
from node.kafka.versions import ApiKey

PRODUCE_REQUEST_VERSIONS = range(3, 12)
FETCH_REQUEST_VERSIONS = range(4, 13)
PRODUCE_FLEXIBLE = 9
CURRENT_LEADER_VERSION = 10     # Produce answers name the current leader (KIP-951)
FETCH_FLEXIBLE = 12

_HEADER = struct.Struct(">hhi")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_PRODUCED = struct.Struct(">ihqq")    # index, error_code, base_offset, append time
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


class _Truncated(ValueError):
    """A read past the end, a bad length, a forbidden null or an unknown tag (``reason``)."""


class _Reader:
    """A position in one request frame; every read checks the bytes left."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    def _take(self, unpacker: struct.Struct) -> int:
        pos = self.pos
        if pos + unpacker.size > self.end:
            raise _Truncated(f"{unpacker.size}-byte integer past the end at byte {pos}")
        self.pos = pos + unpacker.size
        return unpacker.unpack_from(self.data, pos)[0]

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def uvarint(self) -> int:
        data, pos, end = self.data, self.pos, self.end
        if pos < end and data[pos] < 0x80:     # the common one-byte varint
            self.pos = pos + 1
            return data[pos]
        value = shift = 0
        for _ in range(5):
            if pos >= end:
                raise _Truncated(f"varint past the end at byte {pos}")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7
        raise _Truncated(f"varint longer than 5 bytes at byte {self.pos}")

    def _span(self, length: int, what: str) -> bytes:
        pos = self.pos
        if length < 0 or length > self.end - pos:
            raise _Truncated(f"{what}: {length} bytes needed, {self.end - pos} left at "
                             f"byte {pos}")
        self.pos = pos + length
        return self.data[pos:pos + length]

    def string(self, flexible: bool, nullable: bool, what: str) -> str | None:
        length = self.uvarint() - 1 if flexible else self.i16()
        if length == -1:
            if not nullable:
                raise _Truncated(f"{what}: null where the schema forbids it at byte {self.pos}")
            return None
        return self._span(length, what).decode()

    def records(self, flexible: bool) -> bytes | None:
        length = self.uvarint() - 1 if flexible else self.i32()
        if length == -1:
            return None
        return self._span(length, "records")

    def array(self, flexible: bool, element: Callable[[], Any], what: str) -> tuple[Any, ...]:
        """A non-nullable array of ``element``; its count is at most the bytes left."""
        length = self.uvarint() - 1 if flexible else self.i32()
        if length < 0:
            raise _Truncated(f"array {what}: length {length} at byte {self.pos}")
        if length > self.end - self.pos:
            raise _Truncated(f"array {what} of {length} elements: {length} bytes needed, "
                             f"{self.end - self.pos} left at byte {self.pos}")
        return tuple([element() for _ in range(length)])

    def tags(self, known: dict[int, Callable[[], Any]] | None = None) -> dict[int, Any]:
        """A tag section; each tag must be one ``known`` reads (its whole size)."""
        pos = self.pos
        if pos < self.end and self.data[pos] == 0:     # the common empty tag section
            self.pos = pos + 1
            return {}
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if known is None or tag not in known:
                raise _Truncated(f"unknown tagged field {tag} at byte {self.pos}")
            if size > self.end - self.pos:
                raise _Truncated(f"tagged field of {size} bytes at byte {self.pos}")
            stop = self.pos + size
            found[tag] = known[tag]()
            if self.pos != stop:
                raise _Truncated(f"tagged field {tag} does not fill its {size} bytes")
        return found


def decode_hot_request(data: bytes, api_key: int, api_version: int) -> tuple[str | None, Any]:
    """The client id and the kio body of the Produce or Fetch request in ``data`` (one frame
    without its size prefix; ``api_key``/``api_version`` from its header, a served pair).
    Raises ``MalformedRequestError`` for bytes that do not parse as that version."""
    try:
        flexible = api_version >= (PRODUCE_FLEXIBLE if api_key == ApiKey.PRODUCE
                                   else FETCH_FLEXIBLE)
        reader = _Reader(data, _HEADER.size)
        client_id = reader.string(False, True, "client_id")
        if flexible:
            reader.tags()
        cls, module = _schema(api_key, api_version)
        if api_key == ApiKey.PRODUCE:
            body = _produce(reader, cls, module, flexible)
        else:
            body = _fetch(reader, cls, module, api_version)
    except (_Truncated, UnicodeDecodeError) as err:
        raise MalformedRequestError(
            f"API key {api_key} version {api_version}: the request does not decode: {err}",
            api_key=api_key, api_version=api_version, reason=str(err)) from err
    return client_id, body


@functools.cache
def _schema(api_key: int, api_version: int) -> tuple[type, ModuleType]:
    """kio's request class of ``api_key`` at ``api_version`` and the module of its structs."""
    cls = load_request_schema(api_key, api_version)
    return cls, sys.modules[cls.__module__]


def _produce(reader: _Reader, cls: type, module: ModuleType, flexible: bool) -> Any:
    topic_cls, partition_cls = module.TopicProduceData, module.PartitionProduceData
    data, end = reader.data, reader.end
    tags = reader.tags

    def partition() -> Any:
        pos = reader.pos
        if pos + 4 > end:
            raise _Truncated(f"index: 4 bytes needed, {end - pos} left at byte {pos}")
        index = _I32.unpack_from(data, pos)[0]
        reader.pos = pos + 4
        records = reader.records(flexible)
        if flexible:
            tags()
        return partition_cls(index=index, records=records)

    def topic() -> Any:
        name = reader.string(flexible, False, "name")
        partitions = reader.array(flexible, partition, "partition_data")
        if flexible:
            tags()
        return topic_cls(name=name, partition_data=partitions)

    transactional_id = reader.string(flexible, True, "transactional_id")
    pos = reader.pos
    if pos + _ACKS_TIMEOUT.size > end:
        raise _Truncated(f"acks, timeout: 6 bytes needed, {end - pos} left at byte {pos}")
    acks, timeout = _ACKS_TIMEOUT.unpack_from(data, pos)
    reader.pos = pos + _ACKS_TIMEOUT.size
    topics = reader.array(flexible, topic, "topic_data")
    if flexible:
        tags()
    return cls(transactional_id=transactional_id, acks=acks,
               timeout=datetime.timedelta(milliseconds=timeout), topic_data=topics)


def _fetch(reader: _Reader, cls: type, module: ModuleType, version: int) -> Any:
    flexible = version >= FETCH_FLEXIBLE
    topic_cls, partition_cls = module.FetchTopic, module.FetchPartition

    def partition() -> Any:
        values: dict[str, Any] = {"partition": reader.i32()}
        if version >= 9:
            values["current_leader_epoch"] = reader.i32()
        values["fetch_offset"] = reader.i64()
        if version >= 12:
            values["last_fetched_epoch"] = reader.i32()
        if version >= 5:
            values["log_start_offset"] = reader.i64()
        values["partition_max_bytes"] = reader.i32()
        if flexible:
            reader.tags()
        return partition_cls(**values)

    def topic() -> Any:
        name = reader.string(flexible, False, "topic")
        partitions = reader.array(flexible, partition, "partitions")
        if flexible:
            reader.tags()
        return topic_cls(topic=name, partitions=partitions)

    def forgotten() -> Any:
        name = reader.string(flexible, False, "topic")
        partitions = reader.array(flexible, reader.i32, "partitions")
        if flexible:
            reader.tags()
        return module.ForgottenTopic(topic=name, partitions=partitions)

    values: dict[str, Any] = {"replica_id": reader.i32(),
                              "max_wait": datetime.timedelta(milliseconds=reader.i32()),
                              "min_bytes": reader.i32(), "max_bytes": reader.i32(),
                              "isolation_level": reader.i8()}
    if version >= 7:
        values["session_id"] = reader.i32()
        values["session_epoch"] = reader.i32()
    values["topics"] = reader.array(flexible, topic, "topics")
    if version >= 7:
        values["forgotten_topics_data"] = reader.array(flexible, forgotten,
                                                       "forgotten_topics_data")
    if version >= 11:
        values["rack_id"] = reader.string(flexible, False, "rack_id")
    if flexible:
        tags = reader.tags({0: lambda: reader.string(True, True, "cluster_id")})
        if 0 in tags:
            values["cluster_id"] = tags[0]
    return cls(**values)


# ---- encoding responses ------------------------------------------------------------------------
def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [_uvarint(n) for n in range(128)]


def _length(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if value < 128 else _uvarint(value)


class _Writer:
    """The parts of one response, joined at the end."""

    __slots__ = ("parts", "flexible")

    def __init__(self, flexible: bool) -> None:
        self.parts: list[bytes] = []
        self.flexible = flexible

    def string(self, value: str | None) -> None:
        if value is None:
            self.parts.append(b"\x00" if self.flexible else b"\xff\xff")
            return
        encoded = value.encode()
        self.parts.append(_length(len(encoded) + 1) if self.flexible
                          else _I16.pack(len(encoded)))
        self.parts.append(encoded)

    def records(self, value: bytes | None) -> None:
        if value is None:
            self.parts.append(b"\x00" if self.flexible else b"\xff\xff\xff\xff")
            return
        self.parts.append(_length(len(value) + 1) if self.flexible else _I32.pack(len(value)))
        self.parts.append(value)

    def array_length(self, length: int) -> None:
        self.parts.append(_length(length + 1) if self.flexible else _I32.pack(length))

    def no_tags(self) -> None:
        if self.flexible:
            self.parts.append(b"\x00")


def _ms(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)


def _default(entity: Any, name: str) -> bool:
    """Whether tagged field ``name`` of ``entity`` holds its schema default."""
    value = getattr(entity, name)
    return value == entity.__dataclass_fields__[name].default


def _kio_bytes(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class PartitionProduced:
    """One partition's answer in a Produce response (``PartitionProduceResponse`` without its
    tagged fields), as the handler has it: ``log_append_time_ms`` -1 for none,
    ``record_errors`` as (batch index, message) pairs."""

    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()
    current_leader: tuple[int, int] | None = None   # (leader id, epoch): KIP-951's tag, v10+


# a Produce response's topics: (name, its partitions' answers), in request order
ProducedTopics = list[tuple[str, list[PartitionProduced]]]
# a broker a Produce response names (KIP-951's NodeEndpoints, v10+): node id, host, port, rack
NodeEndpoint = tuple[int, str, int, str | None]
_NO_LEADER = (-1, -1)        # CurrentLeader's default: not written


def encode_produce_answer(topics: ProducedTopics, throttle_time_ms: int, version: int,
                          node_endpoints: Sequence[NodeEndpoint] = ()) -> bytes:
    """The bytes of a ProduceResponse of ``version`` (3-11) holding ``topics``, without header.
    From v10 a partition's ``current_leader`` and the response's ``node_endpoints`` are its
    tagged fields (KIP-951; written when not their default, as kio writes them)."""
    out = _Writer(version >= PRODUCE_FLEXIBLE)
    parts = out.parts
    out.array_length(len(topics))
    for name, partitions in topics:
        out.string(name)
        out.array_length(len(partitions))
        for p in partitions:
            parts.append(_PARTITION_PRODUCED.pack(p.index, p.error_code, p.base_offset,
                                                  p.log_append_time_ms))
            if version >= 5:
                parts.append(_I64.pack(p.log_start_offset))
            if version >= 8:
                out.array_length(len(p.record_errors))
                for batch_index, message in p.record_errors:
                    parts.append(_I32.pack(batch_index))
                    out.string(message)
                    out.no_tags()
                out.string(p.error_message)
            leader = p.current_leader
            if version >= CURRENT_LEADER_VERSION and leader is not None \
                    and leader != _NO_LEADER:
                # one tagged field, tag 0: CurrentLeader (leader id, epoch, no tags of its own)
                parts.append(b"\x01\x00\x09" + _I32.pack(leader[0]) + _I32.pack(leader[1])
                             + b"\x00")
            else:
                out.no_tags()
        out.no_tags()
    parts.append(_I32.pack(throttle_time_ms))
    if version >= CURRENT_LEADER_VERSION and node_endpoints:
        parts.append(b"\x01\x00")          # one tagged field, tag 0: NodeEndpoints
        field = _Writer(True)
        field.array_length(len(node_endpoints))
        for node_id, host, port, rack in node_endpoints:
            field.parts.append(_I32.pack(node_id))
            field.string(host)
            field.parts.append(_I32.pack(port))
            field.string(rack)
            field.no_tags()
        data = b"".join(field.parts)
        parts.append(_length(len(data)))
        parts.append(data)
    else:
        out.no_tags()
    return b"".join(parts)


def encode_produce_response(body: Any, version: int) -> bytes:
    """The bytes of ``body`` (a kio ProduceResponse of ``version``, 3-11), without header."""
    if version >= 10 and not _produce_tags_default(body):
        return _kio_bytes(body)
    topics = [(topic.name, [PartitionProduced(
        p.index, p.error_code.value, p.base_offset,
        -1 if p.log_append_time is None else (p.log_append_time - _EPOCH) // _MS,
        getattr(p, "log_start_offset", -1), getattr(p, "error_message", None),
        tuple((e.batch_index, e.batch_index_error_message)
              for e in getattr(p, "record_errors", ())))
        for p in topic.partition_responses]) for topic in body.responses]
    return encode_produce_answer(topics, _ms(body.throttle_time), version)


def _produce_tags_default(body: Any) -> bool:
    if not _default(body, "node_endpoints"):
        return False
    return all(_default(p, "current_leader")
               for topic in body.responses for p in topic.partition_responses)


def encode_fetch_response(body: Any, version: int) -> bytes:
    """The bytes of ``body`` (a kio FetchResponse of ``version``, 4-12), without header."""
    flexible = version >= FETCH_FLEXIBLE
    if flexible and not _fetch_tags_default(body):
        return _kio_bytes(body)
    out = _Writer(flexible)
    parts = out.parts
    parts.append(_I32.pack(_ms(body.throttle_time)))
    if version >= 7:
        parts.append(_I16.pack(body.error_code.value) + _I32.pack(body.session_id))
    out.array_length(len(body.responses))
    for topic in body.responses:
        out.string(topic.topic)
        out.array_length(len(topic.partitions))
        for p in topic.partitions:
            parts.append(_I32.pack(p.partition_index) + _I16.pack(p.error_code.value)
                         + _I64.pack(p.high_watermark) + _I64.pack(p.last_stable_offset))
            if version >= 5:
                parts.append(_I64.pack(p.log_start_offset))
            aborted = p.aborted_transactions
            if aborted is None:
                out.array_length(-1)
            else:
                out.array_length(len(aborted))
                for transaction in aborted:
                    parts.append(_I64.pack(transaction.producer_id)
                                 + _I64.pack(transaction.first_offset))
                    out.no_tags()
            if version >= 11:
                parts.append(_I32.pack(p.preferred_read_replica))
            out.records(p.records)
            out.no_tags()
        out.no_tags()
    out.no_tags()
    return b"".join(parts)


def _fetch_tags_default(body: Any) -> bool:
    return all(_default(p, "diverging_epoch") and _default(p, "current_leader")
               and _default(p, "snapshot_id")
               for topic in body.responses for p in topic.partitions)


def produce_response_header(version: int, correlation_id: int) -> bytes:
    """The response header of a Produce response of ``version``."""
    return _I32.pack(correlation_id) + (b"\x00" if version >= PRODUCE_FLEXIBLE else b"")


def encode_hot_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """Response header and body of a Produce or Fetch response, without the size prefix."""
    if api_key == ApiKey.PRODUCE:
        return (produce_response_header(version, correlation_id)
                + encode_produce_response(body, version))
    header = _I32.pack(correlation_id) + (b"\x00" if version >= FETCH_FLEXIBLE else b"")
    return header + encode_fetch_response(body, version)
