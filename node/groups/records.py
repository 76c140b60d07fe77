"""Records of ``__consumer_offsets`` for the classic protocol: offset commits and group
metadata, encoded and decoded byte for byte as Kafka's ``GroupCoordinatorRecordSerde`` and the
generated ``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/``GroupMetadataValue``
classes do (``group-coordinator/src/main/resources/common/message/*.json``).

A record's key and value each start with an int16 (``CoordinatorRecordSerde``)::

    key   => RecordType int16 | key message, read at version RecordType
             0, 1  OffsetCommitKey    group: string | topic: string | partition: int32
             2     GroupMetadataKey   group: string
             3-15  KIP-848 consumer-group and share-group records (``UnknownKey`` here)
    value => Version int16 | value message, read at Version; a null value is a tombstone
             OffsetCommitValue (record types 0, 1), v0-v4, flexible from v4:
               offset: int64 | leaderEpoch: int32 (v3+) | metadata: string |
               commitTimestamp: int64 | expireTimestamp: int64 (v1 only)
             GroupMetadataValue (record type 2), v0-v4, flexible from v4:
               protocolType: string | generation: int32 | protocol: string? | leader: string? |
               currentStateTimestamp: int64 (v2+) | members: [MemberMetadata]
             MemberMetadata: memberId: string | groupInstanceId: string? (v3+) |
               clientId: string | clientHost: string | rebalanceTimeout: int32 (v1+) |
               sessionTimeout: int32 | subscription: bytes | assignment: bytes

Wire rules (big-endian; ``?`` = nullable)::

    string   non-flexible: int16 length (-1 = null) + UTF-8 | flexible: uvarint length+1 (0 = null)
    bytes    non-flexible: int32 length + bytes              | flexible: uvarint length+1
    array    non-flexible: int32 count + elements            | flexible: uvarint count+1
    flexible structs end with their tagged fields: uvarint count, then per field
             uvarint tag | uvarint size | data (every tag is unknown here, so skipped)

Written as Kafka writes them (``GroupCoordinatorRecordHelpers``): keys at record type 1 (offset
commit) and 2 (group metadata); an offset commit value at version 1 when it has an expire
timestamp (OffsetCommit v2-4 with a retention time), else version 3; group metadata at
version 3. Fields a version does not hold are dropped on write (all are ``ignorable``) and read
as their defaults: leader epoch -1, rebalance timeout -1, no instance id, no timestamps.

Read as Kafka reads them (KIP-915): a version above the highest reads like the highest, one
below zero like version 0, bytes after the last field are ignored, strings decode as Java's
``new String(bytes, UTF_8)``. Bytes that do not read raise ``CoordinatorRecordError`` whose
message is Kafka's (``Could not read record with version 3 from value's buffer due to: ...``).
An expire or current-state timestamp of -1 (Kafka's "none") is None.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from node.errors import CoordinatorRecordError
from storage.java_buffer import INT8, INT16, INT32, INT64, BufferReader, int32
from storage.java_text import java_string
MAX_STRING_LENGTH = 0x7FFF

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1       # the only version with expireTimestamp
GROUP_METADATA_VALUE_VERSION = 3
HIGHEST_VALUE_VERSION = 4                    # the first flexible one
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1
NO_REBALANCE_TIMEOUT = -1


# ---- the records --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """The key of a committed offset (record types 0 and 1 are the same message)."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """The key of a classic group's metadata (record type 2)."""

    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a record type this module does not read (``version``: the record type): 3-15
    are KIP-848 consumer groups and share groups; Kafka's loader skips unknown types too."""

    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset. ``leader_epoch`` -1 is none; ``expire_timestamp_ms`` is set only by
    OffsetCommit v2-4 with a retention time (and then written as value version 1)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a classic group: ``subscription`` is its metadata for the group's chosen
    protocol, ``assignment`` what the leader gave it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A classic group as its coordinator stores it at each generation (an empty group has
    protocol None, leader None and no members)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int | None
    members: tuple[MemberMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record to append to a ``__consumer_offsets`` partition: its key and value bytes
    (value None: a tombstone). ``producer`` is the (producer id, producer epoch) of a
    transactional offset commit's record: it goes to the log in a transactional batch of that
    producer, which the transaction's marker later commits or aborts; None for the others."""

    key: bytes
    value: bytes | None
    producer: tuple[int, int] | None = None


def offset_commit_record(key: OffsetCommitKey,
                         value: OffsetCommitValue | None) -> CoordinatorRecord:
    """Kafka's ``newOffsetCommitRecord`` (value None: ``newOffsetCommitTombstoneRecord``)."""
    return CoordinatorRecord(encode_key(key),
                             None if value is None else encode_offset_commit_value(value))


def group_metadata_record(key: GroupMetadataKey,
                          value: GroupMetadataValue | None) -> CoordinatorRecord:
    """Kafka's ``newGroupMetadataRecord`` (value None: ``newGroupMetadataTombstoneRecord``)."""
    return CoordinatorRecord(encode_key(key),
                             None if value is None else encode_group_metadata_value(value))


# ---- encoding -----------------------------------------------------------------------------------

def encode_key(key: OffsetCommitKey | GroupMetadataKey, version: int | None = None) -> bytes:
    """The key bytes, at record type ``version`` (default: 1 for an offset commit, 2 for group
    metadata; an offset commit key may also be written as type 0)."""
    if isinstance(key, OffsetCommitKey):
        version = OFFSET_COMMIT_KEY_VERSION if version is None else version
        if version not in OFFSET_COMMIT_KEY_VERSIONS:
            raise _write_error("key", version, f"OffsetCommitKey has no version {version}")
        w = _Writer("key", version, flexible=False)
        w.string("group", key.group)
        w.string("topic", key.topic)
        w.fixed(INT32, key.partition, "partition")
        return w.done()
    version = GROUP_METADATA_KEY_VERSION if version is None else version
    if version != GROUP_METADATA_KEY_VERSION:
        raise _write_error("key", version, f"GroupMetadataKey has no version {version}")
    w = _Writer("key", version, flexible=False)
    w.string("group", key.group)
    return w.done()


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """The value bytes at ``version`` (default: 1 with an expire timestamp, else 3)."""
    if version is None:
        version = (OFFSET_COMMIT_VALUE_EXPIRE_VERSION if value.expire_timestamp_ms is not None
                   else OFFSET_COMMIT_VALUE_VERSION)
    _check_value_version(version)
    w = _Writer("value", version, flexible=version >= 4)
    w.fixed(INT64, value.offset, "offset")
    if version >= 3:
        w.fixed(INT32, value.leader_epoch, "leaderEpoch")
    w.string("metadata", value.metadata)
    w.fixed(INT64, value.commit_timestamp_ms, "commitTimestamp")
    if version == 1:
        expire = value.expire_timestamp_ms
        w.fixed(INT64, NO_TIMESTAMP if expire is None else expire, "expireTimestamp")
    w.tagged_fields()
    return w.done()


def encode_group_metadata_value(value: GroupMetadataValue,
                                version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    """The value bytes at ``version`` (Kafka writes 3)."""
    _check_value_version(version)
    w = _Writer("value", version, flexible=version >= 4)
    w.string("protocolType", value.protocol_type)
    w.fixed(INT32, value.generation, "generation")
    w.string("protocol", value.protocol, nullable=True)
    w.string("leader", value.leader, nullable=True)
    if version >= 2:
        timestamp = value.current_state_timestamp_ms
        w.fixed(INT64, NO_TIMESTAMP if timestamp is None else timestamp,
                "currentStateTimestamp")
    w.count(len(value.members))
    for member in value.members:
        w.string("memberId", member.member_id)
        if version >= 3:
            w.string("groupInstanceId", member.group_instance_id, nullable=True)
        w.string("clientId", member.client_id)
        w.string("clientHost", member.client_host)
        if version >= 1:
            w.fixed(INT32, member.rebalance_timeout_ms, "rebalanceTimeout")
        w.fixed(INT32, member.session_timeout_ms, "sessionTimeout")
        w.blob(member.subscription)
        w.blob(member.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return w.done()


def _check_value_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise _write_error("value", version, f"no value version {version} (0-4)")


def _write_error(part: str, version: int, reason: str) -> CoordinatorRecordError:
    return CoordinatorRecordError(f"Could not write record with version {version} to {part}'s "
                                  f"buffer: {reason}.", part=part, version=version, reason=reason)


class _Writer:
    """Kafka's generated ``write``: the version prefix, then fields by the wire rules."""

    __slots__ = ("part", "version", "flexible", "chunks")

    def __init__(self, part: str, version: int, flexible: bool) -> None:
        self.part, self.version, self.flexible = part, version, flexible
        self.chunks: list[bytes] = [INT16.pack(version)]

    def fixed(self, codec: struct.Struct, value: int, name: str) -> None:
        try:
            self.chunks.append(codec.pack(value))
        except struct.error as err:
            raise _write_error(self.part, self.version,
                               f"field {name} cannot hold {value!r}") from err

    def uvarint(self, value: int) -> None:
        out = bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
        self.chunks.append(bytes(out))

    def length(self, length: int, codec: struct.Struct) -> None:
        if self.flexible:
            self.uvarint(length + 1)
        else:
            self.chunks.append(codec.pack(length))

    def string(self, name: str, value: str | None, nullable: bool = False) -> None:
        if value is None:
            if not nullable:
                raise _write_error(self.part, self.version,
                                   f"non-nullable field {name} was serialized as null")
            self.chunks.append(b"\x00" if self.flexible else INT16.pack(-1))
            return
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise _write_error(self.part, self.version,
                               f"field {name} is not encodable as UTF-8") from err
        if len(raw) > MAX_STRING_LENGTH:
            raise _write_error(self.part, self.version,
                               f"'{name}' field is too long to be serialized")
        self.length(len(raw), INT16)
        self.chunks.append(raw)

    def blob(self, value: bytes) -> None:
        self.length(len(value), INT32)
        self.chunks.append(bytes(value))

    def count(self, count: int) -> None:
        self.length(count, INT32)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.chunks.append(b"\x00")

    def done(self) -> bytes:
        return b"".join(self.chunks)


# ---- decoding -----------------------------------------------------------------------------------

class _ReadError(Exception):
    """What Kafka's generated reader throws, as its message (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def record_version(raw: bytes, part: str = "key") -> int:
    """The int16 that starts a record's key (its record type) or value (its version).
    Raises ``CoordinatorRecordError`` with Kafka's message when fewer than 2 bytes."""
    if len(raw) < INT16.size:
        raise CoordinatorRecordError(f"Could not read version from {part}'s buffer.",
                                     part=part, version=None,
                                     reason="buffer underflow")
    return int(INT16.unpack_from(raw)[0])


def decode_key(raw: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """A record's key: an offset commit (types 0, 1), a group's metadata (type 2), or
    ``UnknownKey`` for any other type, never an error. Raises ``CoordinatorRecordError`` when
    the key of a known type does not read."""
    version = record_version(raw, "key")
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        with _reading("key", version):
            r = _Reader(raw, flexible=False)
            return OffsetCommitKey(r.string("group"), r.string("topic"), r.fixed(INT32))
    if version == GROUP_METADATA_KEY_VERSION:
        with _reading("key", version):
            r = _Reader(raw, flexible=False)
            return GroupMetadataKey(r.string("group"))
    return UnknownKey(version)


def decode_offset_commit_value(raw: bytes) -> OffsetCommitValue:
    """The value of an offset commit record, any version. Raises ``CoordinatorRecordError``."""
    version = record_version(raw, "value")
    with _reading("value", version):
        r = _Reader(raw, flexible=version >= 4)
        offset = r.fixed(INT64)
        leader_epoch = r.fixed(INT32) if version >= 3 else NO_LEADER_EPOCH
        metadata = r.string("metadata")
        commit_timestamp = r.fixed(INT64)
        expire = r.fixed(INT64) if version == 1 else NO_TIMESTAMP
        r.skip_tagged_fields()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp,
                             None if expire == NO_TIMESTAMP else expire)


def decode_group_metadata_value(raw: bytes) -> GroupMetadataValue:
    """The value of a group metadata record, any version. Raises ``CoordinatorRecordError``."""
    version = record_version(raw, "value")
    with _reading("value", version):
        r = _Reader(raw, flexible=version >= 4)
        protocol_type = r.string("protocolType")
        generation = r.fixed(INT32)
        protocol = r.nullable_string("protocol")
        leader = r.nullable_string("leader")
        timestamp = r.fixed(INT64) if version >= 2 else NO_TIMESTAMP
        members = tuple(_read_member(r, version) for _ in range(r.count("members")))
        r.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader,
                              None if timestamp == NO_TIMESTAMP else timestamp, members)


def _read_member(r: _Reader, version: int) -> MemberMetadata:
    member_id = r.string("memberId")
    instance_id = r.nullable_string("groupInstanceId") if version >= 3 else None
    client_id = r.string("clientId")
    client_host = r.string("clientHost")
    rebalance_timeout = r.fixed(INT32) if version >= 1 else NO_REBALANCE_TIMEOUT
    session_timeout = r.fixed(INT32)
    subscription = r.blob("subscription")
    assignment = r.blob("assignment")
    r.skip_tagged_fields()
    return MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                          session_timeout, subscription, assignment)


@contextmanager
def _reading(part: str, version: int) -> Iterator[None]:
    """Turns what the reader throws into ``CoordinatorRecordError`` with Kafka's message."""
    try:
        yield
    except _ReadError as error:
        raise CoordinatorRecordError(
            f"Could not read record with version {version} from {part}'s buffer due to: "
            f"{error.reason}.", part=part, version=version, reason=error.reason) from error


class _Reader(BufferReader):
    """Kafka's ``ByteBufferAccessor`` reads after the version prefix, throwing ``_ReadError``
    with the message of the Java exception the generated reader would throw (``"null"`` for a
    buffer underflow, whose Java message is null)."""

    __slots__ = ("flexible",)
    error = _ReadError

    def __init__(self, data: bytes, flexible: bool) -> None:
        super().__init__(data, INT16.size)
        self.flexible = flexible

    def _length(self, codec: struct.Struct) -> int:
        return int32(self.unsigned_varint() - 1) if self.flexible else self.fixed(codec)

    def string(self, name: str) -> str:
        text = self.nullable_string(name, nullable=False)
        assert text is not None
        return text

    def nullable_string(self, name: str, nullable: bool = True) -> str | None:
        length = self._length(INT16)
        if length < 0:
            if not nullable:
                raise _ReadError(f"non-nullable field {name} was serialized as null")
            return None
        if length > MAX_STRING_LENGTH:
            raise _ReadError(f"string field {name} had invalid length {length}")
        return java_string(self.array(length))

    def blob(self, name: str) -> bytes:
        length = self._length(INT32)
        if length < 0:
            raise _ReadError(f"non-nullable field {name} was serialized as null")
        return self.array(length)

    def count(self, name: str) -> int:
        length = self._length(INT32)
        if length < 0:
            raise _ReadError(f"non-nullable field {name} was serialized as null")
        if length > self.remaining:
            raise _ReadError(f"Tried to allocate a collection of size {length}, but there are "
                             f"only {self.remaining} bytes remaining.")
        return length

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(max(self.unsigned_varint(), 0)):
            self.unsigned_varint()                                    # tag: none is known here
            self.array(self.unsigned_varint())


__all__ = ["CoordinatorRecord", "GroupMetadataKey", "GroupMetadataValue", "MemberMetadata",
           "OffsetCommitKey", "OffsetCommitValue", "UnknownKey", "decode_group_metadata_value",
           "decode_key", "decode_offset_commit_value", "encode_group_metadata_value",
           "encode_key", "encode_offset_commit_value", "group_metadata_record",
           "offset_commit_record", "record_version"]
