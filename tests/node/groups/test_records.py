"""The records of ``__consumer_offsets`` (node.groups.records): written as Kafka writes them,
checked byte for byte against layouts built here from Kafka's schemas; every value version
round-trips; every record of the real Kafka partitions decodes and re-encodes to its own bytes;
random bytes raise nothing but ``CoordinatorRecordError``."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.errors import CoordinatorRecordError
from node.groups.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    group_metadata_record,
    offset_commit_record,
    record_version,
)
from storage.records import iter_batches


# ---- the wire rules, written from Kafka's schemas ----------------------------------------------
def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(text: str | None) -> bytes:
    if text is None:
        return i16(-1)
    return i16(len(text.encode())) + text.encode()


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def cstring(text: str | None) -> bytes:
    return uvarint(0) if text is None else uvarint(len(text.encode()) + 1) + text.encode()


MEMBER = MemberMetadata(member_id="m1", group_instance_id="i1", client_id="c1",
                        client_host="/10.0.0.1", rebalance_timeout_ms=300_000,
                        session_timeout_ms=45_000, subscription=b"sub", assignment=b"asg")
GROUP = GroupMetadataValue(protocol_type="consumer", generation=7, protocol="range",
                           leader="m1", current_state_timestamp_ms=1_700_000_000_123,
                           members=(MEMBER,))


# ---- writing as Kafka writes --------------------------------------------------------------------
def test_offset_commit_without_expire_timestamp_is_written_as_key_type_1_and_value_version_3(
        ) -> None:
    record = offset_commit_record(OffsetCommitKey("g", "orders", 4),
                                  OffsetCommitValue(42, 5, "meta", 1_000))
    assert record == CoordinatorRecord(
        key=i16(1) + string("g") + string("orders") + i32(4),
        value=i16(3) + i64(42) + i32(5) + string("meta") + i64(1_000))


def test_offset_commit_with_expire_timestamp_is_written_as_value_version_1() -> None:
    record = offset_commit_record(OffsetCommitKey("g", "orders", 4),
                                  OffsetCommitValue(42, 5, "meta", 1_000, 9_000))
    # version 1 has no leader epoch: Kafka drops it (the field is ignorable)
    assert record.value == i16(1) + i64(42) + string("meta") + i64(1_000) + i64(9_000)
    assert decode_offset_commit_value(record.value) == OffsetCommitValue(42, -1, "meta", 1_000,
                                                                         9_000)


def test_group_metadata_is_written_as_key_type_2_and_value_version_3() -> None:
    record = group_metadata_record(GroupMetadataKey("g"), GROUP)
    member = (string("m1") + string("i1") + string("c1") + string("/10.0.0.1") + i32(300_000)
              + i32(45_000) + i32(3) + b"sub" + i32(3) + b"asg")
    assert record == CoordinatorRecord(
        key=i16(2) + string("g"),
        value=i16(3) + string("consumer") + i32(7) + string("range") + string("m1")
        + i64(1_700_000_000_123) + i32(1) + member)


def test_an_empty_group_is_written_with_null_protocol_and_leader_and_no_members() -> None:
    empty = GroupMetadataValue("", 0, None, None, 5_000, ())
    assert encode_group_metadata_value(empty) == (i16(3) + string("") + i32(0) + i16(-1)
                                                  + i16(-1) + i64(5_000) + i32(0))


def test_a_group_without_a_current_state_timestamp_writes_minus_one() -> None:
    value = GroupMetadataValue("consumer", 1, None, None, None, ())
    raw = encode_group_metadata_value(value)
    assert raw[-12:-4] == i64(-1)
    assert decode_group_metadata_value(raw).current_state_timestamp_ms is None


def test_tombstones_have_the_key_and_no_value() -> None:
    assert offset_commit_record(OffsetCommitKey("g", "t", 0), None) == CoordinatorRecord(
        i16(1) + string("g") + string("t") + i32(0), None)
    assert group_metadata_record(GroupMetadataKey("g"), None) == CoordinatorRecord(
        i16(2) + string("g"), None)


def test_the_flexible_version_4_uses_compact_lengths_and_tagged_fields() -> None:
    value = OffsetCommitValue(42, 5, "meta", 1_000)
    assert encode_offset_commit_value(value, 4) == (i16(4) + i64(42) + i32(5) + cstring("meta")
                                                    + i64(1_000) + uvarint(0))
    member = (cstring("m1") + cstring("i1") + cstring("c1") + cstring("/10.0.0.1")
              + i32(300_000) + i32(45_000) + uvarint(4) + b"sub" + uvarint(4) + b"asg"
              + uvarint(0))
    assert encode_group_metadata_value(GROUP, 4) == (
        i16(4) + cstring("consumer") + i32(7) + cstring("range") + cstring("m1")
        + i64(1_700_000_000_123) + uvarint(2) + member + uvarint(0))


def test_a_string_longer_than_kafkas_limit_is_refused_when_written() -> None:
    with pytest.raises(CoordinatorRecordError, match="'group' field is too long") as caught:
        encode_key(OffsetCommitKey("g" * 0x8000, "t", 0))
    assert (caught.value.part, caught.value.version) == ("key", 1)
    encode_key(OffsetCommitKey("g" * 0x7FFF, "t", 0))


def test_an_offset_outside_int64_is_refused_when_written() -> None:
    with pytest.raises(CoordinatorRecordError, match="field offset cannot hold"):
        encode_offset_commit_value(OffsetCommitValue(2**63, -1, "", 0))


# ---- every version round-trips ------------------------------------------------------------------
texts = st.text(max_size=20)
int32s = st.integers(-2**31, 2**31 - 1)
int64s = st.integers(-2**63, 2**63 - 1)
timestamps = st.one_of(st.none(), st.integers(0, 2**63 - 1))


def held_at(value: OffsetCommitValue, version: int) -> OffsetCommitValue:
    """What ``version`` keeps of ``value``: the rest reads back as the defaults."""
    return OffsetCommitValue(value.offset, value.leader_epoch if version >= 3 else -1,
                             value.metadata, value.commit_timestamp_ms,
                             value.expire_timestamp_ms if version == 1 else None)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 4), offset=int64s, epoch=int32s, metadata=texts,
       committed=int64s, expire=timestamps)
def test_every_offset_commit_value_version_round_trips(version: int, offset: int, epoch: int,
                                                       metadata: str, committed: int,
                                                       expire: int | None) -> None:
    value = OffsetCommitValue(offset, epoch, metadata, committed, expire)
    raw = encode_offset_commit_value(value, version)
    assert record_version(raw, "value") == version
    assert decode_offset_commit_value(raw) == held_at(value, version)


members = st.builds(MemberMetadata, texts, st.one_of(st.none(), texts), texts, texts, int32s,
                    int32s, st.binary(max_size=30), st.binary(max_size=30))


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 4), protocol_type=texts, generation=int32s,
       protocol=st.one_of(st.none(), texts), leader=st.one_of(st.none(), texts),
       timestamp=timestamps, group_members=st.lists(members, max_size=4))
def test_every_group_metadata_value_version_round_trips(
        version: int, protocol_type: str, generation: int, protocol: str | None,
        leader: str | None, timestamp: int | None, group_members: list[MemberMetadata]) -> None:
    value = GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp,
                               tuple(group_members))
    kept = tuple(MemberMetadata(m.member_id, m.group_instance_id if version >= 3 else None,
                                m.client_id, m.client_host,
                                m.rebalance_timeout_ms if version >= 1 else -1,
                                m.session_timeout_ms, m.subscription, m.assignment)
                 for m in group_members)
    raw = encode_group_metadata_value(value, version)
    assert record_version(raw, "value") == version
    assert decode_group_metadata_value(raw) == GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp if version >= 2 else None, kept)


@settings(max_examples=200, deadline=None)
@given(group=texts, topic=texts, partition=int32s, record_type=st.sampled_from([0, 1]))
def test_offset_commit_keys_of_both_record_types_and_group_keys_round_trip(
        group: str, topic: str, partition: int, record_type: int) -> None:
    raw = encode_key(OffsetCommitKey(group, topic, partition), record_type)
    assert record_version(raw) == record_type
    assert decode_key(raw) == OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


# ---- reading as Kafka reads --------------------------------------------------------------------
@pytest.mark.parametrize("record_type", [*range(3, 16), 16, 99, -1, 0x7FFF])
def test_keys_of_other_record_types_decode_as_unknown_keys(record_type: int) -> None:
    # 3-15: KIP-848 consumer groups and share groups, whose keys hold a group id string
    assert decode_key(i16(record_type) + string("g")) == UnknownKey(record_type)
    assert decode_key(i16(record_type)) == UnknownKey(record_type)


def test_versions_above_the_highest_read_like_the_highest() -> None:
    body = i64(42) + i32(5) + cstring("meta") + i64(1_000) + uvarint(0)
    assert decode_offset_commit_value(i16(9) + body) == OffsetCommitValue(42, 5, "meta", 1_000)


def test_a_negative_version_reads_like_version_0() -> None:
    body = i64(42) + string("meta") + i64(1_000)
    assert decode_offset_commit_value(i16(-3) + body) == OffsetCommitValue(42, -1, "meta", 1_000)


def test_unknown_tagged_fields_of_flexible_values_are_skipped() -> None:
    tags = uvarint(2) + uvarint(7) + uvarint(3) + b"xyz" + uvarint(90) + uvarint(0)
    raw = i16(4) + i64(42) + i32(5) + cstring("meta") + i64(1_000) + tags
    assert decode_offset_commit_value(raw) == OffsetCommitValue(42, 5, "meta", 1_000)
    member = (cstring("m") + cstring(None) + cstring("c") + cstring("h") + i32(1) + i32(2)
              + uvarint(1) + uvarint(1) + tags)
    group = (i16(4) + cstring("consumer") + i32(1) + cstring(None) + cstring(None) + i64(-1)
             + uvarint(2) + member + tags)
    assert decode_group_metadata_value(group) == GroupMetadataValue(
        "consumer", 1, None, None, None, (MemberMetadata("m", None, "c", "h", 1, 2, b"", b""),))


def test_bytes_after_the_last_field_are_ignored() -> None:
    raw = encode_offset_commit_value(OffsetCommitValue(1, 2, "", 3)) + b"trailing"
    assert decode_offset_commit_value(raw) == OffsetCommitValue(1, 2, "", 3)


def test_malformed_utf8_decodes_as_java_decodes_it() -> None:
    key = i16(2) + i16(6) + b"\xf0\x9f\x98\x80\xf0\x9f"
    assert decode_key(key) == GroupMetadataKey("\U0001F600\ufffd")


@pytest.mark.parametrize(("raw", "reader", "message"), [
    (b"\x00", decode_key, "Could not read version from key's buffer."),
    (b"", decode_offset_commit_value, "Could not read version from value's buffer."),
    (i16(1) + i16(-1), decode_key, "Could not read record with version 1 from key's buffer due "
                                   "to: non-nullable field group was serialized as null."),
    (i16(1) + string("g") + string("t") + b"\x00", decode_key,
     "Could not read record with version 1 from key's buffer due to: null."),
    (i16(3) + i64(1) + i32(0) + i16(10) + b"abc", decode_offset_commit_value,
     "Could not read record with version 3 from value's buffer due to: Error reading byte "
     "array of 10 byte(s): only 3 byte(s) available."),
    (i16(3) + string("consumer") + i32(1) + i16(-1) + i16(-1) + i64(0) + i32(1000),
     decode_group_metadata_value,
     "Could not read record with version 3 from value's buffer due to: Tried to allocate a "
     "collection of size 1000, but there are only 0 bytes remaining.."),    # Kafka's two dots
    (i16(3) + string("consumer") + i32(1) + i16(-1) + i16(-1) + i64(0) + i32(-1),
     decode_group_metadata_value,
     "Could not read record with version 3 from value's buffer due to: non-nullable field "
     "members was serialized as null."),
    (i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\xff", decode_offset_commit_value,
     "Could not read record with version 4 from value's buffer due to: Varint is too long, the "
     "most significant bit in the 5th byte is set, converted value: ffffffff."),
])
def test_bytes_that_do_not_read_raise_kafkas_message(raw: bytes, reader: object,
                                                     message: str) -> None:
    assert callable(reader)
    with pytest.raises(CoordinatorRecordError) as caught:
        reader(raw)
    assert str(caught.value) == message


def test_a_coordinator_record_error_names_the_part_version_and_reason_and_pickles() -> None:
    with pytest.raises(CoordinatorRecordError) as caught:
        decode_group_metadata_value(i16(2) + string("consumer"))
    error = caught.value
    assert (error.part, error.version, error.reason) == ("value", 2, "null")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is CoordinatorRecordError
    assert (str(copy), copy.part, copy.version, copy.reason) == (
        str(error), "value", 2, "null")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=st.sampled_from([0, 1, 2, 3, 4, 5, -1]), body=st.binary(max_size=120))
def test_random_bytes_decode_or_raise_only_coordinator_record_errors(prefix: int,
                                                                     body: bytes) -> None:
    raw = i16(prefix) + body
    for reader in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            reader(raw)
        except CoordinatorRecordError as error:
            assert error.part in ("key", "value") and error.reason


@settings(max_examples=400, deadline=None)
@given(cut=st.integers(0, 200), flip=st.integers(0, 10_000), bit=st.integers(0, 7),
       version=st.integers(0, 4))
def test_truncated_or_flipped_group_metadata_raises_only_coordinator_record_errors(
        cut: int, flip: int, bit: int, version: int) -> None:
    value = bytearray(encode_group_metadata_value(GROUP, version))
    value[flip % len(value)] ^= 1 << bit
    try:
        decode_group_metadata_value(bytes(value[:len(value) - cut % len(value)]))
    except CoordinatorRecordError as error:
        assert error.version is None or error.part == "value"


# ---- the real partitions ------------------------------------------------------------------------
def test_every_record_of_the_real_consumer_offsets_partitions_decodes_and_re_encodes_to_its_bytes(
        kafka_fixtures: Path) -> None:
    seen: dict[tuple[str, int], int] = {}
    for path in sorted(kafka_fixtures.glob("*/**/__consumer_offsets-*/*.log")):
        for batch in iter_batches(path.read_bytes(), path=path):
            if batch.is_control:
                continue
            for record in batch.records():
                assert record.key is not None
                record_type = record_version(record.key)
                key = decode_key(record.key)
                assert not isinstance(key, UnknownKey), path
                assert encode_key(key, record_type) == record.key
                if record.value is None:
                    seen["tombstone", record_type] = seen.get(("tombstone", record_type), 0) + 1
                    continue
                version = record_version(record.value, "value")
                if isinstance(key, OffsetCommitKey):
                    offset = decode_offset_commit_value(record.value)
                    again = encode_offset_commit_value(offset, version)
                else:
                    group = decode_group_metadata_value(record.value)
                    again = encode_group_metadata_value(group, version)
                assert again == record.value, (path, record.offset)
                kind = "commit" if isinstance(key, OffsetCommitKey) else "group"
                seen[kind, version] = seen.get((kind, version), 0) + 1
    assert seen[("commit", 3)] > 20_000 and seen[("group", 3)] > 100
    assert seen[("group", 2)] >= 1 and seen[("tombstone", 1)] >= 1
