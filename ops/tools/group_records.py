"""Records of ``__consumer_offsets``: offset commits and classic group metadata, decoded as
Kafka's ``DumpLogSegments --offsets-decoder`` prints them (``OffsetsMessageParser`` with
``GroupCoordinatorRecordSerde`` at the commit of reference/kafka-storage.md). The records are
read by ``node.groups.records``, the group coordinator's own codec, so the dump shows what the
coordinator loads; this module prints them.

Layouts (wire rules: ``node.groups.records``; ``?`` = nullable)::

    key   => RecordType int16 | key message (read at version RecordType)
             0, 1  OffsetCommitKey    group: string | topic: string | partition: int32
             2     GroupMetadataKey   group: string
    value => Version int16 | value message (read at Version); a null value is a tombstone
             OffsetCommitValue (key type 0, 1), v0-v4, flexible from v4:
               offset: int64 | leaderEpoch: int32 (v3+) | metadata: string |
               commitTimestamp: int64 | expireTimestamp: int64 (v1 only)
             GroupMetadataValue (key type 2), v0-v4, flexible from v4:
               protocolType: string | generation: int32 | protocol: string? | leader: string? |
               currentStateTimestamp: int64 (v2+) | members: [MemberMetadata]
             MemberMetadata: memberId: string | groupInstanceId: string? (v3+) |
               clientId: string | clientHost: string | rebalanceTimeout: int32 (v1+) |
               sessionTimeout: int32 | subscription: bytes | assignment: bytes

When ``protocolType`` is ``consumer`` each member's subscription and assignment are themselves
version-prefixed messages (never flexible), printed decoded, or as base64 when they do not read::

    ConsumerProtocolSubscription v0-v3: Version int16 | topics: [string] | userData: bytes? |
        ownedPartitions: [topic: string | partitions: [int32]] (v1+) | generationId: int32 (v2+) |
        rackId: string? (v3+)
    ConsumerProtocolAssignment v0-v3: Version int16 |
        assignedPartitions: [topic: string | partitions: [int32]] | userData: bytes?

Printed: ``key: {"type":"<RecordType>","data":{...}} payload: {"version":"<Version>",
"data":{...}}`` (Kafka's JSON converters: fields of the version only, camelCase names), and
``payload: <DELETE>`` for a tombstone. A record that does not decode prints Kafka's
``key: Error at offset <n>, skipping. <why>`` and no payload; an unknown record type prints
``key: Unknown record type <t> at offset <n>, skipping.``. Record types 3-15 (KIP-848 consumer
groups and share groups) are not decoded here and print a marker naming the type and offset.
A record without a key, which makes Kafka's tool throw, prints Kafka's exception message.
"""

from __future__ import annotations

from typing import Any

from node.errors import CoordinatorRecordError
from node.groups.records import (
    GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey, OffsetCommitValue,
    UnknownKey, decode_group_metadata_value, decode_key, decode_offset_commit_value,
    record_version)
from ops.tools.kafka_messages import (
    INT16, Field, MessageReadError, Reader, SkippedRecord, Struct, jackson_json, plain,
    read_message)

CONSUMER_PROTOCOL_TYPE = "consumer"
TOMBSTONE = "<DELETE>"
NO_TIMESTAMP = -1

OWNED_PARTITION = Struct("TopicPartition", "1-3", "none", (
    Field("topic", "string", "1+"),
    Field("partitions", "[]int32", "1+"),
))
SUBSCRIPTION = Struct("ConsumerProtocolSubscription", "0-3", "none", (
    Field("topics", "[]string"),
    Field("userData", "bytes", nullable="0+"),
    Field("ownedPartitions", "[]struct", "1+", struct=OWNED_PARTITION),
    Field("generationId", "int32", "2+"),
    Field("rackId", "string", "3+", nullable="3+"),
))
ASSIGNED_PARTITION = Struct("TopicPartition", "0-3", "none", (
    Field("topic", "string"),
    Field("partitions", "[]int32"),
))
ASSIGNMENT = Struct("ConsumerProtocolAssignment", "0-3", "none", (
    Field("assignedPartitions", "[]struct", struct=ASSIGNED_PARTITION),
    Field("userData", "bytes", nullable="0+"),
))

NOT_DECODED = {3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
               5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
               7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
               9: "ShareGroupPartitionMetadata", 10: "ShareGroupMemberMetadata",
               11: "ShareGroupMetadata", 12: "ShareGroupTargetAssignmentMetadata",
               13: "ShareGroupTargetAssignmentMember", 14: "ShareGroupCurrentMemberAssignment",
               15: "ShareGroupStatePartitionMetadata"}


def decode(key: bytes | None, value: bytes | None,
           offset: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``({"type": "<t>", "data": key fields}, {"version": "<v>", "data": value fields} or None
    for a tombstone)``; bytes stay bytes. Raises ``SkippedRecord``."""
    if key is None:
        raise SkippedRecord(f"Failed to decode message at offset {offset} using offset topic "
                            f"decoder (message had a missing key)")
    try:
        decoded = decode_key(key)
        record_type = record_version(key, "key")
        if isinstance(decoded, UnknownKey):
            if record_type in NOT_DECODED:
                raise SkippedRecord(f"Record type {record_type} ({NOT_DECODED[record_type]}Key) "
                                    f"at offset {offset} is not decoded by strata, skipping.")
            raise SkippedRecord(f"Unknown record type {record_type} at offset {offset}, "
                                f"skipping.")
        decoded_key = {"type": str(record_type), "data": _key_fields(decoded)}
        if value is None:
            return decoded_key, None
        version = record_version(value, "value")
        if isinstance(decoded, OffsetCommitKey):
            value_data = _offset_commit_fields(decode_offset_commit_value(value), version)
        else:
            value_data = _group_metadata_fields(decode_group_metadata_value(value), version)
            _decode_consumer_protocol(value_data)
    except CoordinatorRecordError as error:
        raise SkippedRecord(f"Error at offset {offset}, skipping. {error.message}") from error
    return decoded_key, {"version": str(version), "data": value_data}


def _key_fields(key: OffsetCommitKey | GroupMetadataKey) -> dict[str, Any]:
    if isinstance(key, OffsetCommitKey):
        return {"group": key.group, "topic": key.topic, "partition": key.partition}
    return {"group": key.group}


def _offset_commit_fields(value: OffsetCommitValue, version: int) -> dict[str, Any]:
    """Kafka's ``OffsetCommitValueJsonConverter.write``: the fields ``version`` holds."""
    fields: dict[str, Any] = {"offset": value.offset}
    if version >= 3:
        fields["leaderEpoch"] = value.leader_epoch
    fields["metadata"] = value.metadata
    fields["commitTimestamp"] = value.commit_timestamp_ms
    if version == 1:
        fields["expireTimestamp"] = _timestamp(value.expire_timestamp_ms)
    return fields


def _group_metadata_fields(value: GroupMetadataValue, version: int) -> dict[str, Any]:
    """Kafka's ``GroupMetadataValueJsonConverter.write``: the fields ``version`` holds."""
    fields: dict[str, Any] = {"protocolType": value.protocol_type,
                              "generation": value.generation, "protocol": value.protocol,
                              "leader": value.leader}
    if version >= 2:
        fields["currentStateTimestamp"] = _timestamp(value.current_state_timestamp_ms)
    fields["members"] = [_member_fields(m, version) for m in value.members]
    return fields


def _member_fields(member: MemberMetadata, version: int) -> dict[str, Any]:
    fields: dict[str, Any] = {"memberId": member.member_id}
    if version >= 3:
        fields["groupInstanceId"] = member.group_instance_id
    fields["clientId"] = member.client_id
    fields["clientHost"] = member.client_host
    if version >= 1:
        fields["rebalanceTimeout"] = member.rebalance_timeout_ms
    fields["sessionTimeout"] = member.session_timeout_ms
    fields["subscription"] = member.subscription
    fields["assignment"] = member.assignment
    return fields


def _timestamp(value: int | None) -> int:
    return NO_TIMESTAMP if value is None else value


def _decode_consumer_protocol(group: dict[str, Any]) -> None:
    """Kafka's prepareGroupMetadataValue: a consumer group's member subscriptions and
    assignments, each replaced by its decoded message when it reads, left as bytes otherwise."""
    if group.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return
    for member in group.get("members") or ():
        for name, schema in (("subscription", SUBSCRIPTION), ("assignment", ASSIGNMENT)):
            raw = member.get(name)
            if raw is None:
                continue
            try:
                reader = Reader(raw)
                version = reader.fixed(INT16)
                member[name] = read_message(schema, raw[reader.pos:], version)
            except MessageReadError:
                pass


def format_record(key: bytes | None, value: bytes | None,
                  offset: int) -> tuple[str | None, str | None]:
    """The ``key:`` and ``payload:`` texts Kafka prints for one record (None: not printed)."""
    try:
        decoded_key, decoded_value = decode(key, value, offset)
    except SkippedRecord as skipped:
        return skipped.text, None
    payload = TOMBSTONE if decoded_value is None else jackson_json(decoded_value)
    return jackson_json(decoded_key), payload


def record_json(key: bytes | None, value: bytes | None, offset: int) -> dict[str, Any]:
    """``{"key": {...}, "payload": {...}}`` (payload null for a tombstone, bytes as base64), or
    ``{"decodeError": <the line Kafka prints>}``."""
    try:
        decoded_key, decoded_value = decode(key, value, offset)
    except SkippedRecord as skipped:
        return {"decodeError": skipped.text}
    return {"key": plain(decoded_key), "payload": plain(decoded_value)}


__all__ = ["ASSIGNMENT", "SUBSCRIPTION", "decode", "format_record", "record_json"]
