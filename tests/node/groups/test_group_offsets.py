"""The group's side of offsets through the coordinator: who may commit (Kafka's
ClassicGroupTest.testValidateOffsetCommit and OffsetMetadataManagerTest's classic-group commit
tests), OffsetDelete against the topics a group consumes, DeleteGroups, and the periodic
expiry that deletes an Empty group left without offsets (GroupCoordinatorShardTest's
cleanupGroupMetadata)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.messages import (
    CommittedOffset,
    GroupDeletion,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    PartitionError,
)
from node.groups.records import OffsetCommitKey, decode_key
from node.groups.subscription import encode_subscription
from tests.node.groups.harness import GROUP, TEST_CONFIG, Harness, join_request

SUBSCRIBED = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000,
                          protocols=(("range", encode_subscription(["foo"])),))


def _commit(groups: Harness, generation_id: int = -1, member_id: str = "",
            group_instance_id: str | None = None, topic: str = "foo",
            offset: int = 1) -> ErrorCode:
    result = groups.coordinator.commit_offsets(OffsetCommit(
        GROUP, generation_id, member_id, group_instance_id,
        (CommittedOffset(topic, 0, offset),))).result(0)
    [answer] = result.partitions
    return answer.error_code


def _offset_keys(groups: Harness) -> list[tuple[str, int, bool]]:
    found = []
    for record in groups.logs[groups.partition].read():
        assert record.key is not None
        key = decode_key(record.key)
        if isinstance(key, OffsetCommitKey):
            found.append((key.topic, key.partition, record.value is None))
    return found


def test_simple_commit_to_a_missing_group_creates_it_empty_without_a_record(
        groups: Harness) -> None:
    assert _commit(groups) == ErrorCode.none
    assert groups.group().state is GroupState.EMPTY
    assert groups.group_records() == []
    assert _offset_keys(groups) == [("foo", 0, False)]
    fetched = groups.coordinator.fetch_offsets(OffsetFetch(GROUP, None)).result(0)
    assert [(p.topic, p.offset) for p in fetched.partitions] == [("foo", 1)]


def test_commit_with_a_generation_to_a_missing_group_is_illegal(groups: Harness) -> None:
    assert _commit(groups, generation_id=1, member_id="m") == ErrorCode.illegal_generation
    assert groups.group() is None


def test_member_commits_with_its_generation(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(SUBSCRIBED)
    assert _commit(groups, joined.generation_id, joined.member_id) == ErrorCode.none
    assert _commit(groups, joined.generation_id + 1, joined.member_id) == \
        ErrorCode.illegal_generation
    assert _commit(groups, joined.generation_id, "stranger") == ErrorCode.unknown_member_id


def test_simple_commit_to_a_group_with_members_is_an_unknown_member(groups: Harness) -> None:
    groups.join_and_sync_leader(SUBSCRIBED)
    assert _commit(groups) == ErrorCode.unknown_member_id


def test_commit_while_completing_the_rebalance_is_refused(groups: Harness) -> None:
    joined = groups.join_dynamic_member(SUBSCRIBED)
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    assert _commit(groups, joined.generation_id, joined.member_id) == \
        ErrorCode.rebalance_in_progress


def test_commit_by_a_fenced_static_member_is_refused(groups: Harness) -> None:
    joined = groups.join_static_member_and_sync("instance")
    assert _commit(groups, joined.generation_id, "other", "instance") == \
        ErrorCode.fenced_instance_id


def test_member_commit_keeps_its_session(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(SUBSCRIBED)
    for _ in range(3):
        groups.sleep(4000)
        assert _commit(groups, joined.generation_id, joined.member_id) == ErrorCode.none
    assert groups.group().has_member(joined.member_id)


def test_offsets_of_a_consumed_topic_cannot_be_deleted(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(SUBSCRIBED)
    _commit(groups, joined.generation_id, joined.member_id, topic="foo")
    _commit(groups, joined.generation_id, joined.member_id, topic="bar")
    result = groups.coordinator.delete_offsets(OffsetDelete(
        GROUP, (("foo", 0), ("bar", 0)))).result(0)
    assert result.error_code == ErrorCode.none
    assert result.partitions == (
        PartitionError("foo", 0, ErrorCode.group_subscribed_to_topic),
        PartitionError("bar", 0, ErrorCode.none))
    assert _offset_keys(groups)[-1] == ("bar", 0, True)


def test_offset_delete_of_an_unknown_group_is_not_found(groups: Harness) -> None:
    result = groups.coordinator.delete_offsets(OffsetDelete(GROUP, (("foo", 0),))).result(0)
    assert result.error_code == ErrorCode.group_id_not_found


def test_offset_delete_of_a_non_consumer_group_with_members_is_refused(
        groups: Harness) -> None:
    groups.join_and_sync_leader(dataclasses.replace(SUBSCRIBED, protocol_type="connect"))
    result = groups.coordinator.delete_offsets(OffsetDelete(GROUP, (("foo", 0),))).result(0)
    assert result.error_code == ErrorCode.non_empty_group


def test_delete_groups_deletes_only_empty_groups(groups: Harness) -> None:
    assert _commit(groups) == ErrorCode.none
    other = "other-group"
    groups.load(groups.coordinator.partition_for(other))
    groups.join(join_request(group_id=other, require_known_member_id=False))
    unknown = next(f"unknown-{i}" for i in range(1000)
                   if groups.coordinator.partition_for(f"unknown-{i}") == groups.partition)
    answers = groups.coordinator.delete_groups([GROUP, other, unknown]).result(0)
    assert answers == [GroupDeletion(GROUP, ErrorCode.none),
                       GroupDeletion(other, ErrorCode.non_empty_group),
                       GroupDeletion(unknown, ErrorCode.group_id_not_found)]
    assert groups.group() is None
    assert _offset_keys(groups)[-1] == ("foo", 0, True)
    assert groups.group_records()[-1] == (GROUP, None)
    again = groups.restart()
    assert again.group() is None
    fetched = again.coordinator.fetch_offsets(OffsetFetch(GROUP, (("foo", 0),))).result(0)
    assert fetched.partitions[0].offset == -1
    again.coordinator.close()


def test_expired_offsets_of_a_standalone_group_delete_the_group(groups: Harness) -> None:
    assert _commit(groups) == ErrorCode.none
    interval = TEST_CONFIG.offsets_retention_check_interval_ms
    retention = TEST_CONFIG.offsets_retention_ms
    groups.sleep(retention - 1)
    groups.sleep(interval)
    assert groups.group() is None
    assert _offset_keys(groups)[-1] == ("foo", 0, True)
    assert groups.group_records() == [(GROUP, None)]


def test_offsets_of_a_stable_group_on_its_topics_do_not_expire(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(dataclasses.replace(
        SUBSCRIBED, session_timeout_ms=TEST_CONFIG.group_max_session_timeout_ms))
    _commit(groups, joined.generation_id, joined.member_id, topic="foo")
    _commit(groups, joined.generation_id, joined.member_id, topic="bar")
    interval = TEST_CONFIG.offsets_retention_check_interval_ms
    elapsed = 0
    while elapsed < TEST_CONFIG.offsets_retention_ms + interval:
        groups.sleep(interval // 2)
        elapsed += interval // 2
        assert groups.heartbeat(joined.member_id, joined.generation_id) == ErrorCode.none
    fetched = groups.coordinator.fetch_offsets(OffsetFetch(GROUP, None)).result(0)
    assert [(p.topic, p.offset) for p in fetched.partitions] == [("foo", 1)]
    assert groups.group().state is GroupState.STABLE
