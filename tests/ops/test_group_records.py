"""``strata dump-log --offsets-decoder`` reads ``__consumer_offsets`` through the coordinator's
own codec (node.groups.records) and prints exactly what the generic reader of Kafka's message
schemas (ops.tools.kafka_messages) prints for the same bytes: the same fields per version, the
same strings, the same error line, for valid, damaged and random records."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.groups.records import (
    GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey, OffsetCommitValue,
    encode_group_metadata_value, encode_key, encode_offset_commit_value)
from ops.tools import group_records
from ops.tools.group_records import NOT_DECODED, TOMBSTONE
from ops.tools.kafka_messages import (
    Field, SkippedRecord, Struct, jackson_json, read_record_part, record_version)

# Kafka's schemas (group-coordinator/src/main/resources/common/message/*.json)
OFFSET_COMMIT_KEY = Struct("OffsetCommitKey", "0-1", "none", (
    Field("group", "string", "0-1"),
    Field("topic", "string", "0-1"),
    Field("partition", "int32", "0-1"),
))
GROUP_METADATA_KEY = Struct("GroupMetadataKey", "2", "none", (
    Field("group", "string", "2"),
))
OFFSET_COMMIT_VALUE = Struct("OffsetCommitValue", "0-4", "4+", (
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", "3+"),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", "1"),
))
MEMBER_METADATA = Struct("MemberMetadata", "0-4", "4+", (
    Field("memberId", "string"),
    Field("groupInstanceId", "string", "3+", nullable="3+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", "1+"),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
))
GROUP_METADATA_VALUE = Struct("GroupMetadataValue", "0-4", "4+", (
    Field("protocolType", "string"),
    Field("generation", "int32"),
    Field("protocol", "string", nullable="0+"),
    Field("leader", "string", nullable="0+"),
    Field("currentStateTimestamp", "int64", "2+"),
    Field("members", "[]struct", struct=MEMBER_METADATA),
))
SCHEMAS = {0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE), 1: (OFFSET_COMMIT_KEY,
                                                            OFFSET_COMMIT_VALUE),
           2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE)}


def schema_decoded(key: bytes, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """The key and payload lines, read by the generic schema reader."""
    try:
        record_type = record_version(key, "key", offset)
        if record_type in NOT_DECODED:
            raise SkippedRecord(f"Record type {record_type} ({NOT_DECODED[record_type]}Key) at "
                                f"offset {offset} is not decoded by strata, skipping.")
        if record_type not in SCHEMAS:
            raise SkippedRecord(f"Unknown record type {record_type} at offset {offset}, "
                                f"skipping.")
        key_schema, value_schema = SCHEMAS[record_type]
        key_data = read_record_part(key_schema, key, record_type, "key", offset)
        decoded_key = {"type": str(record_type), "data": key_data}
        if value is None:
            return jackson_json(decoded_key), TOMBSTONE
        version = record_version(value, "value", offset)
        value_data: dict[str, Any] = read_record_part(value_schema, value, version, "value",
                                                      offset)
    except SkippedRecord as skipped:
        return skipped.text, None
    if value_schema is GROUP_METADATA_VALUE:
        group_records._decode_consumer_protocol(value_data)
    return jackson_json(decoded_key), jackson_json({"version": str(version),
                                                    "data": value_data})


texts = st.text(max_size=8)
int32s = st.integers(-2**31, 2**31 - 1)
members = st.builds(MemberMetadata, texts, st.one_of(st.none(), texts), texts, texts, int32s,
                    int32s, st.binary(max_size=12), st.binary(max_size=12))
groups = st.builds(GroupMetadataValue, st.sampled_from(["consumer", "connect", ""]), int32s,
                   st.one_of(st.none(), texts), st.one_of(st.none(), texts),
                   st.one_of(st.none(), st.integers(0, 2**40)),
                   st.lists(members, max_size=3).map(tuple))
commits = st.builds(OffsetCommitValue, st.integers(-1, 2**40), int32s, texts,
                    st.integers(0, 2**40), st.one_of(st.none(), st.integers(0, 2**40)))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.integers(0, 4), cut=st.integers(0, 300),
       flip=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.integers(0, 7))),
       new_version=st.one_of(st.none(), st.integers(-3, 9)))
def test_valid_and_damaged_records_print_as_the_schema_reader_prints_them(
        data: st.DataObject, version: int, cut: int, flip: tuple[int, int] | None,
        new_version: int | None) -> None:
    if data.draw(st.booleans()):
        key = encode_key(OffsetCommitKey(data.draw(texts), data.draw(texts), 3),
                         data.draw(st.sampled_from([0, 1])))
        value = bytearray(encode_offset_commit_value(data.draw(commits), version))
    else:
        key = encode_key(GroupMetadataKey(data.draw(texts)))
        value = bytearray(encode_group_metadata_value(data.draw(groups), version))
    if new_version is not None:
        value[:2] = new_version.to_bytes(2, "big", signed=True)
    if flip is not None:
        value[flip[0] % len(value)] ^= 1 << flip[1]
    damaged = bytes(value[:max(len(value) - cut, 0)]) if cut < 100 else bytes(value)
    assert group_records.format_record(key, damaged, 5) == schema_decoded(key, damaged, 5)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_type=st.sampled_from([0, 1, 2, 3, 15, 16, -1]), key_body=st.binary(max_size=24),
       value=st.one_of(st.none(), st.binary(max_size=80)))
def test_random_records_print_as_the_schema_reader_prints_them(
        record_type: int, key_body: bytes, value: bytes | None) -> None:
    key = record_type.to_bytes(2, "big", signed=True) + key_body
    assert group_records.format_record(key, value, 9) == schema_decoded(key, value, 9)
