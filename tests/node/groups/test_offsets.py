"""The committed offsets of one ``__consumer_offsets`` partition (node.groups.offsets), with the
classic-group scenarios of Kafka's ``OffsetMetadataManagerTest``: commits and their records,
fetches (stable or not), deletes, group deletion, KIP-211 expiration, transactional commits,
and a load by replay that rebuilds what the operations built."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from node.groups.config import GroupCoordinatorConfig
from node.groups.messages import (
    CommittedOffset, FetchedOffset, OffsetCommit, OffsetCommitResult, OffsetDelete,
    OffsetDeleteResult, OffsetFetch, OffsetFetchResult, PartitionError)
from node.groups.offsets import (
    OffsetAndMetadata, OffsetExpirationCondition, OffsetManager, expiration_condition)
from node.groups.records import (
    CoordinatorRecord, OffsetCommitKey, OffsetCommitValue, decode_key,
    decode_offset_commit_value, offset_commit_record)
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import ControlType, Record, iter_batches

MINUTE = 60_000
OK = ErrorCode.none


def manager(clock: FakeClock, **settings_: int) -> OffsetManager:
    return OffsetManager(GroupCoordinatorConfig(**settings_), clock)


def commit(offsets: OffsetManager, group: str, topic: str, partition: int, offset: int, *,
           epoch: int = -1, metadata: str | None = "metadata",
           expire: int | None = None) -> list[CoordinatorRecord]:
    result, records = offsets.commit(OffsetCommit(group, -1, "", None, (
        CommittedOffset(topic, partition, offset, epoch, metadata, expire),)))
    assert result == OffsetCommitResult((PartitionError(topic, partition, OK),))
    return records


def commit_txn(offsets: OffsetManager, producer_id: int, group: str, topic: str, partition: int,
               offset: int, *, epoch: int = -1) -> list[CoordinatorRecord]:
    result, records = offsets.commit_transactional(producer_id, 0, OffsetCommit(
        group, -1, "", None, (CommittedOffset(topic, partition, offset, epoch, "metadata"),)))
    assert result == OffsetCommitResult((PartitionError(topic, partition, OK),))
    return records


def fetched(offsets: OffsetManager, group: str, partitions: list[tuple[str, int]] | None,
            require_stable: bool = False) -> tuple[FetchedOffset, ...]:
    result = offsets.fetch(OffsetFetch(group, None if partitions is None else tuple(partitions),
                                       require_stable))
    assert (result.group_id, result.error_code) == (group, OK)
    return result.partitions


def tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return offset_commit_record(OffsetCommitKey(group, topic, partition), None)


def unstable(topic: str, partition: int) -> FetchedOffset:
    return FetchedOffset(topic, partition, error_code=ErrorCode.unstable_offset_commit)


def has_offset(offsets: OffsetManager, group: str, topic: str, partition: int) -> bool:
    return offsets.has_committed_offset(group, topic, partition) or \
        offsets.has_pending_offset(group, topic, partition)


# ---- commit -------------------------------------------------------------------------------------
def test_a_commit_writes_the_offset_with_the_clocks_time_as_a_version_3_record(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    result, records = offsets.commit(OffsetCommit("foo", -1, "", None, (
        CommittedOffset("bar", 0, 100),)))
    assert result == OffsetCommitResult((PartitionError("bar", 0, OK),))
    assert records == [offset_commit_record(OffsetCommitKey("foo", "bar", 0),
                                            OffsetCommitValue(100, -1, "", clock.milliseconds()))]
    assert records[0].value is not None and records[0].value[:2] == b"\x00\x03"
    assert offsets.offset("foo", "bar", 0) == OffsetAndMetadata(
        100, -1, "", clock.milliseconds(), None, offsets.offset("foo", "bar", 0).sequence)
    assert fetched(offsets, "foo", [("bar", 0)]) == (FetchedOffset("bar", 0, 100, -1, ""),)


def test_a_commit_with_an_expire_timestamp_writes_it_in_a_version_1_record(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    now = clock.milliseconds()
    records = commit(offsets, "foo", "bar", 0, 100, metadata="", expire=now + 1234)
    assert records == [offset_commit_record(OffsetCommitKey("foo", "bar", 0),
                                            OffsetCommitValue(100, -1, "", now, now + 1234))]
    assert records[0].value is not None and records[0].value[:2] == b"\x00\x01"
    assert offsets.offset("foo", "bar", 0).expire_timestamp_ms == now + 1234


def test_metadata_over_offset_metadata_max_bytes_is_refused_for_its_partition_only(
        clock: FakeClock) -> None:
    offsets = manager(clock, offset_metadata_max_bytes=5)
    result, records = offsets.commit(OffsetCommit("foo", 10, "member", None, (
        CommittedOffset("bar", 0, 100, 10, "toolarge"),
        CommittedOffset("bar", 1, 100, 10, "small"))))
    assert result == OffsetCommitResult((
        PartitionError("bar", 0, ErrorCode.offset_metadata_too_large),
        PartitionError("bar", 1, OK)))
    assert records == [offset_commit_record(OffsetCommitKey("foo", "bar", 1),
                                            OffsetCommitValue(100, 10, "small",
                                                              clock.milliseconds()))]
    assert not offsets.has_committed_offset("foo", "bar", 0)


def test_metadata_length_counts_utf16_units_as_javas_string_length(clock: FakeClock) -> None:
    offsets = manager(clock, offset_metadata_max_bytes=2)
    result, records = offsets.commit(OffsetCommit("g", -1, "", None, (
        CommittedOffset("t", 0, 1, metadata="éé"),          # 4 UTF-8 bytes, 2 units
        CommittedOffset("t", 1, 1, metadata="\U0001F600"),  # a surrogate pair: 2 units
        CommittedOffset("t", 2, 1, metadata="\U0001F600a"))))
    assert [p.error_code for p in result.partitions] == [
        OK, OK, ErrorCode.offset_metadata_too_large]
    assert len(records) == 2


def test_null_metadata_is_committed_as_an_empty_string(clock: FakeClock) -> None:
    offsets = manager(clock)
    records = commit(offsets, "g", "t", 0, 5, metadata=None)
    assert records[0].value is not None
    assert decode_offset_commit_value(records[0].value).metadata == ""
    assert fetched(offsets, "g", [("t", 0)]) == (FetchedOffset("t", 0, 5, -1, ""),)


def test_a_later_commit_of_a_partition_replaces_the_earlier(clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "g", "t", 0, 5, epoch=1)
    clock.advance(10)
    commit(offsets, "g", "t", 0, 9, epoch=2, metadata="later")
    assert fetched(offsets, "g", [("t", 0)]) == (FetchedOffset("t", 0, 9, 2, "later"),)
    assert offsets.offset("g", "t", 0).commit_timestamp_ms == clock.milliseconds()


# ---- fetch --------------------------------------------------------------------------------------
def test_a_partition_without_a_committed_offset_fetches_as_minus_one_and_empty_metadata(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "group", "foo", 0, 100)
    assert fetched(offsets, "group", [("foo", 0), ("foo", 1), ("bar", 0)]) == (
        FetchedOffset("foo", 0, 100, -1, "metadata"),
        FetchedOffset("foo", 1, -1, -1, ""), FetchedOffset("bar", 0, -1, -1, ""))
    assert fetched(offsets, "unknown", [("foo", 0)]) == (FetchedOffset("foo", 0, -1, -1, ""),)


def test_fetching_every_partition_lists_the_groups_offsets_by_topic_then_partition(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "group", "foo", 1, 110, epoch=1)
    commit(offsets, "group", "foo", 0, 100, epoch=1)
    commit(offsets, "group", "bar", 0, 200, epoch=1)
    commit(offsets, "other", "zar", 0, 1)
    assert fetched(offsets, "group", None) == (
        FetchedOffset("bar", 0, 200, 1, "metadata"), FetchedOffset("foo", 0, 100, 1, "metadata"),
        FetchedOffset("foo", 1, 110, 1, "metadata"))
    assert fetched(offsets, "unknown", None) == ()


def test_require_stable_answers_unstable_offset_commit_while_a_transaction_holds_the_partition(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "group", "foo", 0, 100, epoch=1)
    commit(offsets, "group", "foo", 1, 110, epoch=1)
    commit(offsets, "group", "bar", 0, 200, epoch=1)
    commit_txn(offsets, 10, "group", "foo", 1, 111, epoch=1)
    commit_txn(offsets, 10, "group", "bar", 0, 201, epoch=1)
    # bar-1 has no committed offset: it is unstable all the same
    commit_txn(offsets, 10, "group", "bar", 1, 211, epoch=1)
    asked = [("foo", 0), ("foo", 1), ("bar", 0), ("bar", 1)]

    assert fetched(offsets, "group", asked, require_stable=True) == (
        FetchedOffset("foo", 0, 100, 1, "metadata"), unstable("foo", 1), unstable("bar", 0),
        unstable("bar", 1))
    assert fetched(offsets, "group", asked) == (
        FetchedOffset("foo", 0, 100, 1, "metadata"), FetchedOffset("foo", 1, 110, 1, "metadata"),
        FetchedOffset("bar", 0, 200, 1, "metadata"), FetchedOffset("bar", 1))
    # fetching every partition lists committed ones only: bar-1 is not there yet
    assert fetched(offsets, "group", None, require_stable=True) == (
        unstable("bar", 0), FetchedOffset("foo", 0, 100, 1, "metadata"), unstable("foo", 1))

    offsets.complete_transaction(10, committed=True)
    assert fetched(offsets, "group", asked, require_stable=True) == (
        FetchedOffset("foo", 0, 100, 1, "metadata"), FetchedOffset("foo", 1, 111, 1, "metadata"),
        FetchedOffset("bar", 0, 201, 1, "metadata"), FetchedOffset("bar", 1, 211, 1, "metadata"))
    assert fetched(offsets, "group", None) == (
        FetchedOffset("bar", 0, 201, 1, "metadata"), FetchedOffset("bar", 1, 211, 1, "metadata"),
        FetchedOffset("foo", 0, 100, 1, "metadata"), FetchedOffset("foo", 1, 111, 1, "metadata"))


# ---- transactions -------------------------------------------------------------------------------
def test_a_transactional_commit_writes_the_same_record_and_stays_pending_until_its_marker(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    records = commit_txn(offsets, 7, "g", "t", 0, 42, epoch=3)
    plain = offset_commit_record(OffsetCommitKey("g", "t", 0),
                                 OffsetCommitValue(42, 3, "metadata", clock.milliseconds()))
    assert [(r.key, r.value) for r in records] == [(plain.key, plain.value)]
    assert [r.producer for r in records] == [(7, 0)]
    assert offsets.pending_offset(7, "g", "t", 0).offset == 42
    assert offsets.offset("g", "t", 0) is None
    assert offsets.has_pending_transactions("g") and offsets.has_offsets("g")
    offsets.complete_transaction(7, committed=True)
    assert offsets.offset("g", "t", 0).offset == 42
    assert offsets.pending_offset(7, "g", "t", 0) is None
    assert not offsets.has_pending_transactions("g")


def test_a_transactional_commit_ignores_an_expire_timestamp_and_refuses_large_metadata(
        clock: FakeClock) -> None:
    offsets = manager(clock, offset_metadata_max_bytes=3)
    result, records = offsets.commit_transactional(7, 0, OffsetCommit("g", -1, "", None, (
        CommittedOffset("t", 0, 1, metadata="abc", expire_timestamp_ms=5),
        CommittedOffset("t", 1, 1, metadata="abcd"))))
    assert [p.error_code for p in result.partitions] == [OK, ErrorCode.offset_metadata_too_large]
    assert [decode_offset_commit_value(r.value).expire_timestamp_ms for r in records
            if r.value is not None] == [None]


def test_an_aborted_transaction_drops_its_offsets(clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "g", "t", 0, 99)
    commit_txn(offsets, 6, "g", "t", 0, 100)
    commit_txn(offsets, 6, "g", "t", 1, 200)
    offsets.complete_transaction(6, committed=False)
    assert offsets.offset("g", "t", 0).offset == 99
    assert offsets.offset("g", "t", 1) is None
    assert offsets.pending_offset(6, "g", "t", 1) is None
    assert not offsets.has_pending_transactions("g")


def test_a_commit_marker_moves_pending_offsets_and_an_unknown_producers_marker_is_ignored(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    now = clock.milliseconds()
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(99, -1, "small", now))
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(100, -1, "small", now),
                   producer_id=5)
    offsets.replay(OffsetCommitKey("foo", "bar", 1), OffsetCommitValue(200, -1, "small", now),
                   producer_id=6)
    offsets.replay_end_transaction(1, committed=True)
    offsets.replay_end_transaction(5, committed=True)
    assert offsets.pending_offset(5, "foo", "bar", 0) is None
    assert offsets.offset("foo", "bar", 0).offset == 100
    offsets.replay_end_transaction(6, committed=False)
    assert offsets.pending_offset(6, "foo", "bar", 1) is None
    assert offsets.offset("foo", "bar", 1) is None


def test_a_commit_marker_keeps_a_plain_commit_written_after_the_transactional_one(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    now = clock.milliseconds()
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(100, -1, "small", now),
                   producer_id=5)
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(101, -1, "small", now))
    offsets.replay_end_transaction(5, committed=True)
    assert offsets.pending_offset(5, "foo", "bar", 0) is None
    assert offsets.offset("foo", "bar", 0).offset == 101


def test_transactional_replay_holds_offsets_per_producer_and_group(clock: FakeClock) -> None:
    offsets = manager(clock)
    now = clock.milliseconds()
    for producer, group, topic, partition, offset in [(5, "foo", "bar", 0, 100),
                                                      (5, "foo", "bar", 1, 101),
                                                      (5, "bar", "zar", 0, 100),
                                                      (5, "bar", "zar", 1, 101),
                                                      (6, "foo", "bar", 2, 102),
                                                      (6, "foo", "bar", 3, 102)]:
        offsets.replay(OffsetCommitKey(group, topic, partition),
                       OffsetCommitValue(offset, -1, "small", now), producer_id=producer)
        assert offsets.pending_offset(producer, group, topic, partition).offset == offset
        assert offsets.offset(group, topic, partition) is None
    assert offsets.pending_offset(6, "foo", "bar", 0) is None
    assert offsets.group_ids() == {"foo", "bar"}


def test_a_tombstone_drops_the_committed_and_the_pending_offsets_of_its_partition(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    now = clock.milliseconds()
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(100, -1, "small", now))
    offsets.replay(OffsetCommitKey("foo", "bar", 0), OffsetCommitValue(100, -1, "small", now),
                   producer_id=10)
    offsets.replay(OffsetCommitKey("foo", "bar", 1), OffsetCommitValue(100, -1, "small", now),
                   producer_id=10)
    offsets.replay(OffsetCommitKey("foo", "bar", 0), None)
    offsets.replay(OffsetCommitKey("foo", "bar", 1), None)
    assert not has_offset(offsets, "foo", "bar", 0)
    assert not has_offset(offsets, "foo", "bar", 1)
    # the transaction stays open until its marker, which then commits nothing
    assert offsets.has_pending_transactions("foo")
    offsets.replay_end_transaction(10, committed=True)
    assert not offsets.has_pending_transactions("foo") and not offsets.has_offsets("foo")
    assert offsets.offset("foo", "bar", 0) is None


# ---- delete -------------------------------------------------------------------------------------
def test_deleting_an_offset_writes_a_tombstone_and_forgets_it(clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "foo", "bar", 0, 100)
    result, records = offsets.delete(OffsetDelete("foo", (("bar", 0),)), frozenset())
    assert result == OffsetDeleteResult(OK, (PartitionError("bar", 0, OK),))
    assert records == [tombstone("foo", "bar", 0)]
    assert not has_offset(offsets, "foo", "bar", 0)
    assert not offsets.has_offsets("foo")


def test_deleting_offsets_of_a_subscribed_topic_is_refused_and_an_unknown_one_writes_nothing(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "foo", "bar", 0, 100)
    result, records = offsets.delete(OffsetDelete("foo", (("bar1", 0), ("bar", 0))),
                                     frozenset({"bar"}))
    assert result == OffsetDeleteResult(OK, (
        PartitionError("bar1", 0, OK),
        PartitionError("bar", 0, ErrorCode.group_subscribed_to_topic)))
    assert records == []
    assert offsets.has_committed_offset("foo", "bar", 0)


def test_deleting_a_partition_with_only_a_pending_transactional_offset_writes_a_tombstone(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit_txn(offsets, 10, "foo", "bar", 0, 100)
    result, records = offsets.delete(OffsetDelete("foo", (("bar", 0),)), frozenset())
    assert result.partitions == (PartitionError("bar", 0, OK),)
    assert records == [tombstone("foo", "bar", 0)]
    assert not has_offset(offsets, "foo", "bar", 0)


def test_deleting_a_group_writes_a_tombstone_for_each_committed_offset(clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "foo", "bar-0", 0, 100)
    commit(offsets, "foo", "bar-0", 1, 100)
    commit(offsets, "foo", "bar-1", 0, 100)
    commit(offsets, "other", "bar-0", 0, 100)
    records = offsets.delete_group("foo")
    assert records == [tombstone("foo", "bar-0", 0), tombstone("foo", "bar-0", 1),
                       tombstone("foo", "bar-1", 0)]
    assert not offsets.has_offsets("foo") and offsets.has_offsets("other")


def test_deleting_a_group_also_tombstones_partitions_only_a_transaction_holds(
        clock: FakeClock) -> None:
    offsets = manager(clock)
    commit(offsets, "foo", "bar-0", 0, 100)
    commit(offsets, "foo", "bar-0", 1, 100)
    commit(offsets, "foo", "bar-1", 0, 100)
    commit_txn(offsets, 10, "foo", "bar-1", 0, 101)
    commit_txn(offsets, 10, "foo", "bar-2", 0, 100)
    records = offsets.delete_group("foo")
    # one tombstone per partition, never two in a row for one partition
    assert records == [tombstone("foo", "bar-0", 0), tombstone("foo", "bar-0", 1),
                       tombstone("foo", "bar-1", 0), tombstone("foo", "bar-2", 0)]
    for topic, partition in (("bar-0", 0), ("bar-0", 1), ("bar-1", 0), ("bar-2", 0)):
        assert not has_offset(offsets, "foo", topic, partition)


def test_deleted_topic_partitions_lose_their_offsets_in_every_group(clock: FakeClock) -> None:
    offsets = manager(clock)
    for partition, offset in ((1, 100), (2, 200), (3, 300)):
        commit(offsets, "grp-0", "foo", partition, offset)
        commit(offsets, "grp-1", "bar", partition, offset)
        commit_txn(offsets, 100, "grp-2", "foo", partition, offset)
    records = offsets.delete_partitions([("foo", 1), ("foo", 2), ("foo", 3), ("bar", 1)])
    assert set(map(lambda r: (r.key, r.value), records)) == {
        (tombstone(g, t, p).key, None) for g, t, p in [
            ("grp-0", "foo", 1), ("grp-0", "foo", 2), ("grp-0", "foo", 3), ("grp-1", "bar", 1),
            ("grp-2", "foo", 1), ("grp-2", "foo", 2), ("grp-2", "foo", 3)]}
    assert len(records) == 7
    assert not any(has_offset(offsets, g, t, p) for g, t, p in [
        ("grp-0", "foo", 1), ("grp-1", "bar", 1), ("grp-2", "foo", 3)])
    assert offsets.has_committed_offset("grp-1", "bar", 2)


# ---- expiration (KIP-211) -----------------------------------------------------------------------
def test_offsets_expire_retention_after_their_commit_unless_the_group_subscribes_to_the_topic(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=1)
    commit(offsets, "group-id", "firstTopic", 0, 100)
    commit(offsets, "group-id", "secondTopic", 0, 100)
    clock.advance(500)
    commit(offsets, "group-id", "secondTopic", 1, 100)
    clock.advance(MINUTE - 500)
    condition = OffsetExpirationCondition(subscribed_topics=frozenset({"firstTopic"}))

    assert offsets.expire("group-id", condition) == [tombstone("group-id", "secondTopic", 0)]
    assert offsets.has_offsets("group-id")

    clock.advance(500)
    assert offsets.expire("group-id", condition) == [tombstone("group-id", "secondTopic", 1)]

    commit(offsets, "group-id", "firstTopic", 1, 100)
    commit(offsets, "group-id", "secondTopic", 0, 101)
    clock.advance(MINUTE)
    assert offsets.expire("group-id", OffsetExpirationCondition()) == [
        tombstone("group-id", "firstTopic", 0), tombstone("group-id", "firstTopic", 1),
        tombstone("group-id", "secondTopic", 0)]
    assert not offsets.has_offsets("group-id")


def test_an_offset_with_a_pending_transactional_commit_does_not_expire(clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=1)
    commit(offsets, "group-id", "foo", 0, 100)
    clock.advance(500)
    commit_txn(offsets, 10, "group-id", "foo", 0, 101)
    clock.advance(MINUTE)
    assert offsets.expire("group-id", OffsetExpirationCondition()) == []
    assert offsets.has_committed_offset("group-id", "foo", 0)


def test_an_expire_timestamp_expires_the_offset_at_that_time_whatever_the_retention(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=60)
    now = clock.milliseconds()
    commit(offsets, "g", "t", 0, 1, expire=now + 1_000)
    commit(offsets, "g", "t", 1, 1)
    clock.advance(999)
    assert offsets.expire("g", OffsetExpirationCondition()) == []
    clock.advance(1)
    assert offsets.expire("g", OffsetExpirationCondition()) == [tombstone("g", "t", 0)]
    # even for a subscribed topic's neighbour: the explicit timestamp needs no retention
    assert offsets.has_committed_offset("g", "t", 1)


def test_an_empty_groups_offsets_expire_retention_after_it_became_empty(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=10)
    commit(offsets, "g", "t", 0, 1)
    clock.advance(8 * MINUTE)
    empty_since = clock.milliseconds()
    condition = expiration_condition("consumer", "Empty", empty_since, frozenset())
    clock.advance(5 * MINUTE)           # 13 minutes after the commit, 5 after the group emptied
    assert offsets.expire("g", condition) == []
    clock.advance(5 * MINUTE)
    assert offsets.expire("g", condition) == [tombstone("g", "t", 0)]


def test_an_empty_group_without_a_current_state_timestamp_expires_offsets_from_their_commit(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=10)
    commit(offsets, "g", "t", 0, 1)
    clock.advance(10 * MINUTE)
    condition = expiration_condition("consumer", "Empty", None, frozenset())
    assert offsets.expire("g", condition) == [tombstone("g", "t", 0)]


def test_expire_without_a_condition_keeps_every_offset(clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=1)
    commit(offsets, "g", "t", 0, 1)
    clock.advance(10 * MINUTE)
    assert offsets.expire("g", None) == []
    assert offsets.expire("unknown", OffsetExpirationCondition()) == []
    assert offsets.has_committed_offset("g", "t", 0)


def test_offsets_stay_while_a_transaction_is_open_after_the_rest_expired(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=1)
    commit(offsets, "g", "t", 0, 1)
    commit_txn(offsets, 3, "g", "u", 0, 1)
    clock.advance(MINUTE)
    assert offsets.expire("g", OffsetExpirationCondition()) == [tombstone("g", "t", 0)]
    assert offsets.has_offsets("g")       # so the coordinator keeps the group
    offsets.complete_transaction(3, committed=False)
    assert not offsets.has_offsets("g")


def test_the_expiration_condition_follows_the_groups_protocol_state_and_subscriptions() -> None:
    # standalone (offsets committed without membership): from the commit, no topic subscribed
    for protocol_type in (None, ""):
        assert expiration_condition(protocol_type, "Empty", 5, None) == \
            OffsetExpirationCondition()
    # Empty: from when the group became Empty
    assert expiration_condition("consumer", "Empty", 5, frozenset()) == \
        OffsetExpirationCondition(empty_since_ms=5)
    assert expiration_condition("connect", "Empty", 5, None) == \
        OffsetExpirationCondition(empty_since_ms=5)
    # Stable consumer group that knows its topics: the others' offsets, from their commit
    assert expiration_condition("consumer", "Stable", 5, frozenset({"a"})) == \
        OffsetExpirationCondition(subscribed_topics=frozenset({"a"}))
    # no condition: topics unknown, not a consumer group, or rebalancing
    assert expiration_condition("consumer", "Stable", 5, None) is None
    assert expiration_condition("connect", "Stable", 5, None) is None
    for state in ("PreparingRebalance", "CompletingRebalance"):
        assert expiration_condition("consumer", state, 5, frozenset({"a"})) is None


def test_an_empty_consumer_group_of_unknown_subscriptions_counts_every_topic_subscribed(
        clock: FakeClock) -> None:
    offsets = manager(clock, offsets_retention_minutes=1)
    commit(offsets, "g", "t", 0, 1)
    clock.advance(MINUTE)
    condition = expiration_condition("consumer", "Empty", None, None)
    assert condition is not None and condition.is_subscribed("t")
    assert offsets.expire("g", condition) == []


# ---- load ---------------------------------------------------------------------------------------
operations = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from("gh"), st.sampled_from("tu"), st.integers(0, 2),
              st.integers(0, 1000), st.one_of(st.none(), st.integers(0, 10**6))),
    st.tuples(st.just("txn"), st.integers(1, 3), st.sampled_from("gh"), st.sampled_from("tu"),
              st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("end"), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from("gh"), st.sampled_from("tu"),
              st.integers(0, 2)),
    st.tuples(st.just("delete_group"), st.sampled_from("gh")),
    st.tuples(st.just("expire"), st.sampled_from("gh"), st.integers(0, 3)),
), max_size=40)


def state_of(offsets: OffsetManager) -> tuple[object, ...]:
    groups = ("g", "h")
    return (tuple(fetched(offsets, g, None) for g in groups),
            tuple(fetched(offsets, g, None, require_stable=True) for g in groups),
            tuple(offsets.pending_offset(p, g, t, n) is not None for p in (1, 2, 3)
                  for g in groups for t in "tu" for n in range(3)),
            tuple(offsets.has_offsets(g) for g in groups), offsets.group_ids())


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_replaying_the_written_records_and_markers_rebuilds_the_same_offsets(
        ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    live = manager(clock, offsets_retention_minutes=1)
    log: list[tuple[Any, ...]] = []
    for op in ops:
        clock.advance(20_000)
        if op[0] == "commit":
            _, group, topic, partition, offset, expire = op
            log += [(r, None) for r in commit(live, group, topic, partition, offset,
                                              expire=expire)]
        elif op[0] == "txn":
            _, producer, group, topic, partition, offset = op
            log += [(r, producer) for r in commit_txn(live, producer, group, topic, partition,
                                                      offset)]
        elif op[0] == "end":
            live.complete_transaction(op[1], op[2])
            log.append(("end", op[1], op[2]))
        elif op[0] == "delete":
            _, group, topic, partition = op
            log += [(r, None) for r in live.delete(OffsetDelete(group, ((topic, partition),)),
                                                   frozenset())[1]]
        elif op[0] == "delete_group":
            log += [(r, None) for r in live.delete_group(op[1])]
        else:
            condition = OffsetExpirationCondition(subscribed_topics=frozenset("t")
                                                  if op[2] == 0 else frozenset())
            log += [(r, None) for r in live.expire(op[1], condition)]

    loaded = manager(FakeClock())
    for entry in log:
        if entry[0] == "end":
            loaded.replay_end_transaction(entry[1], entry[2])
            continue
        record, producer = entry
        key = decode_key(record.key)
        assert isinstance(key, OffsetCommitKey)
        value = None if record.value is None else decode_offset_commit_value(record.value)
        loaded.replay(key, value, producer)
    assert state_of(loaded) == state_of(live)


def test_records_appended_to_a_real_compacted_log_load_back_into_the_same_offsets(
        tmp_path: Path, clock: FakeClock) -> None:
    """Plain commits, a committed and an aborted transaction, a delete: appended as the
    coordinator appends them (transactional batches, then the markers), read back from the
    segment files and replayed batch by batch."""
    live = manager(clock)
    log = Log.open(tmp_path / "__consumer_offsets-7", LogConfig(cleanup_policy="compact"),
                   clock=clock)
    sequences: dict[int, int] = {}

    def append(records: list[CoordinatorRecord], producer_id: int = -1) -> None:
        batch = [Record(r.key, r.value, clock.milliseconds()) for r in records]
        if producer_id < 0:
            log.append(batch)
            return
        log.append(batch, producer_id=producer_id, producer_epoch=0,
                   base_sequence=sequences.get(producer_id, 0), is_transactional=True)
        sequences[producer_id] = sequences.get(producer_id, 0) + len(batch)

    def end(producer_id: int, committed: bool) -> None:
        live.complete_transaction(producer_id, committed)
        log.append_end_txn_marker(ControlType.COMMIT if committed else ControlType.ABORT,
                                  producer_id=producer_id, producer_epoch=0)

    try:
        append(commit(live, "g", "t", 0, 10) + commit(live, "g", "t", 1, 20))
        append(commit_txn(live, 5, "g", "t", 0, 11), producer_id=5)
        append(commit_txn(live, 6, "g", "t", 1, 21), producer_id=6)
        append(commit(live, "h", "u", 0, 30, expire=clock.milliseconds() + 5))
        append(commit_txn(live, 5, "h", "u", 1, 31), producer_id=5)
        end(5, committed=True)
        end(6, committed=False)
        append(commit_txn(live, 7, "g", "t", 2, 40), producer_id=7)       # still open
        append(live.delete(OffsetDelete("h", (("u", 0),)), frozenset())[1])
        log.flush()

        loaded = manager(FakeClock())
        for path in sorted(log.dir.glob("*.log")):
            for batch in iter_batches(path.read_bytes(), path=path):
                if batch.is_control:
                    for marker in batch.records():
                        assert marker.key is not None
                        control_type = struct.unpack(">hh", marker.key)[1]
                        loaded.replay_end_transaction(batch.producer_id,
                                                      control_type == ControlType.COMMIT)
                    continue
                producer = batch.producer_id if batch.is_transactional else None
                for record in batch.records():
                    assert record.key is not None
                    key = decode_key(record.key)
                    assert isinstance(key, OffsetCommitKey)
                    loaded.replay(key, None if record.value is None
                                  else decode_offset_commit_value(record.value), producer)
    finally:
        log.close()

    assert state_of(loaded) == state_of(live)
    assert fetched(loaded, "g", None) == (FetchedOffset("t", 0, 11, -1, "metadata"),
                                          FetchedOffset("t", 1, 20, -1, "metadata"))
    assert fetched(loaded, "h", None) == (FetchedOffset("u", 1, 31, -1, "metadata"),)
    assert fetched(loaded, "g", [("t", 2)], require_stable=True) == (unstable("t", 2),)
    assert loaded.has_pending_transactions("g") and not loaded.has_pending_transactions("h")
