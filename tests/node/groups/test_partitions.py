"""The coordinator's partitions: load (replay, heartbeats re-armed, COORDINATOR_LOAD_IN_PROGRESS
meanwhile), unload (parked answers NOT_COORDINATOR), requests for partitions held elsewhere,
failed writes; ported from Kafka's GroupMetadataManagerTest (testOnLoaded*, testReplayGroup
MetadataRecords, testClassicGroupOnUnloaded*) and CoordinatorLoaderImplTest."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from node.errors import CoordinatorRecordError
from node.groups import partition as partition_module
from node.groups.classic_group import GroupState
from node.groups.coordinator import GroupCoordinator
from node.groups.messages import (
    CommittedOffset,
    Heartbeat,
    LeaveGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from node.groups.placement import partition_for
from node.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    group_metadata_record,
    offset_commit_record,
)
from node.groups.subscription import encode_subscription
from storage.clock import FakeClock
from storage.log import Log
from storage.records import ControlType, Record
from tests.node.groups.harness import GROUP, Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)


def _append(harness: Harness, *records: tuple[bytes, bytes | None]) -> None:
    log = harness.open_log(harness.partition)
    log.append([Record(key=k, value=v, timestamp=harness.clock.milliseconds())
                for k, v in records])
    log.flush()


def _stored_group(members: int, session_timeout_ms: int = 4000) -> GroupMetadataValue:
    subscription = encode_subscription(["foo"])
    return GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="range", leader="member-0",
        current_state_timestamp_ms=1, members=tuple(
            MemberMetadata(f"member-{i}", f"instance-{i}", f"client-{i}", f"host-{i}", 9000,
                           session_timeout_ms, subscription, b"\x02")
            for i in range(members)))


def _fresh(tmp_path: Path, clock: FakeClock, *records: tuple[bytes, bytes | None],
           max_size: int | None = None) -> Harness:
    """A coordinator loading a partition that already holds ``records``."""
    groups = Harness(tmp_path, clock)
    groups.coordinator.unload(groups.partition)
    _append(groups, *records)
    if max_size is not None:
        groups.coordinator.close()
        groups.config = dataclasses.replace(groups.config, group_max_size=max_size)
        groups.coordinator = GroupCoordinator(groups.config, clock, groups.timer)
    groups.load(groups.partition)
    return groups


def test_partition_of_a_group_is_javas_hash(groups: Harness) -> None:
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("", 50) == 0
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Kafka's Utils.abs makes it 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("\U0001f600", 50) == abs(31 * 0xD83D + 0xDE00) % 50
    assert groups.coordinator.partition_for(GROUP) == partition_for(GROUP, 50)


def test_loaded_group_comes_back_stable_with_its_members(tmp_path: Path,
                                                         clock: FakeClock) -> None:
    record = group_metadata_record(GroupMetadataKey(GROUP), _stored_group(2))
    groups = _fresh(tmp_path, clock, (record.key, record.value))
    group = groups.group()
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (
        GroupState.STABLE, 1, "member-0", "range")
    assert group.member_ids == ["member-0", "member-1"]
    assert group.static_member_id("instance-1") == "member-1"
    assert group.subscribed_topics == frozenset({"foo"})
    synced = groups.sync("member-1", 1, group_instance_id="instance-1").result(0)
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"\x02")
    groups.coordinator.close()


def test_load_rearms_every_member_heartbeat(tmp_path: Path, clock: FakeClock) -> None:
    record = group_metadata_record(GroupMetadataKey(GROUP), _stored_group(2))
    groups = _fresh(tmp_path, clock, (record.key, record.value))
    for i in range(2):
        assert groups.timer.deadline(f"heartbeat-{GROUP}-member-{i}") == \
            clock.milliseconds() + 4000
    groups.sleep(2000)
    assert groups.heartbeat("member-0", 1, group_instance_id="instance-0") == ErrorCode.none
    groups.sleep(2000)
    # member-1 never came back: removed, and the group rebalances without it
    assert groups.group().member_ids == ["member-0"]
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    groups.coordinator.close()


def test_load_of_a_group_above_the_max_size_rebalances_it(tmp_path: Path,
                                                          clock: FakeClock) -> None:
    record = group_metadata_record(GroupMetadataKey(GROUP), _stored_group(2))
    groups = _fresh(tmp_path, clock, (record.key, record.value), max_size=1)
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    assert groups.group().num_members() == 2
    groups.coordinator.close()


def test_restart_restores_groups_and_offsets_from_the_log(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST, assignment=b"mine")
    commit = groups.coordinator.commit_offsets(OffsetCommit(
        GROUP, joined.generation_id, joined.member_id, None,
        (CommittedOffset("foo", 0, 42, metadata="m"),))).result(0)
    assert commit.partitions[0].error_code == ErrorCode.none
    again = groups.restart()
    group = again.group()
    assert (group.state, group.generation_id, group.member_ids) == (
        GroupState.STABLE, joined.generation_id, [joined.member_id])
    synced = again.sync(joined.member_id, joined.generation_id).result(0)
    assert synced.assignment == b"mine"
    fetched = again.coordinator.fetch_offsets(OffsetFetch(GROUP, (("foo", 0),))).result(0)
    assert (fetched.partitions[0].offset, fetched.partitions[0].metadata) == (42, "m")
    # its session restarted at the load: silent for 5 s, it is gone
    again.sleep(5000)
    assert again.group().state is GroupState.EMPTY
    again.coordinator.close()


def test_tombstone_deletes_a_loaded_group(tmp_path: Path, clock: FakeClock) -> None:
    record = group_metadata_record(GroupMetadataKey(GROUP), _stored_group(1))
    tombstone = group_metadata_record(GroupMetadataKey(GROUP), None)
    groups = _fresh(tmp_path, clock, (record.key, record.value), (tombstone.key, None))
    assert groups.group() is None
    assert groups.timer.keys == [f"expire-offsets-{groups.partition}"]
    groups.coordinator.close()


def test_offsets_without_group_metadata_load_as_a_standalone_group(tmp_path: Path,
                                                                   clock: FakeClock) -> None:
    record = offset_commit_record(OffsetCommitKey(GROUP, "foo", 0),
                                  OffsetCommitValue(7, -1, "", 1))
    groups = _fresh(tmp_path, clock, (record.key, record.value))
    group = groups.group()
    assert (group.state, group.protocol_type) == (GroupState.EMPTY, None)
    groups.coordinator.close()


def test_unknown_record_types_are_skipped_at_load(tmp_path: Path, clock: FakeClock) -> None:
    record = group_metadata_record(GroupMetadataKey(GROUP), _stored_group(1))
    consumer_group_key = b"\x00\x03\x00\x01g"          # KIP-848 record type 3
    groups = _fresh(tmp_path, clock, (consumer_group_key, b"\x00\x00"),
                    (record.key, record.value))
    assert groups.coordinator.is_loaded(groups.partition)
    assert groups.group().num_members() == 1
    groups.coordinator.close()


def test_transactional_offset_commits_load_only_when_committed(tmp_path: Path,
                                                               clock: FakeClock) -> None:
    groups = Harness(tmp_path, clock)
    groups.coordinator.unload(groups.partition)
    log = groups.open_log(groups.partition)
    for producer_id, topic, marker in ((10, "kept", ControlType.COMMIT),
                                       (11, "dropped", ControlType.ABORT)):
        record = offset_commit_record(OffsetCommitKey(GROUP, topic, 0),
                                      OffsetCommitValue(5, -1, "", 1))
        log.append([Record(key=record.key, value=record.value, timestamp=1)],
                   producer_id=producer_id, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_end_txn_marker(marker, producer_id=producer_id, producer_epoch=0)
    pending = offset_commit_record(OffsetCommitKey(GROUP, "open", 0),
                                   OffsetCommitValue(9, -1, "", 1))
    log.append([Record(key=pending.key, value=pending.value, timestamp=1)], producer_id=12,
               producer_epoch=0, base_sequence=0, is_transactional=True)
    log.flush()
    groups.load(groups.partition)
    fetched = groups.coordinator.fetch_offsets(OffsetFetch(
        GROUP, (("kept", 0), ("dropped", 0), ("open", 0)), require_stable=True)).result(0)
    assert [(p.topic, p.offset, p.error_code) for p in fetched.partitions] == [
        ("kept", 5, ErrorCode.none), ("dropped", -1, ErrorCode.none),
        ("open", -1, ErrorCode.unstable_offset_commit)]
    groups.coordinator.close()


def test_requests_while_loading_are_answered_load_in_progress(
        tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    groups = Harness(tmp_path, clock)
    groups.coordinator.unload(groups.partition)
    started, release = threading.Event(), threading.Event()
    replay = partition_module.CoordinatorPartition.replay_log

    def slow_replay(self: partition_module.CoordinatorPartition, log: Log) -> int:
        started.set()
        release.wait(10)
        return replay(self, log)
    monkeypatch.setattr(partition_module.CoordinatorPartition, "replay_log", slow_replay)
    loader = threading.Thread(target=groups.load, args=(groups.partition,))
    loader.start()
    try:
        assert started.wait(10)
        coordinator = groups.coordinator
        assert not coordinator.is_loaded(groups.partition)
        assert groups.join().result(0).error_code == ErrorCode.coordinator_load_in_progress
        assert groups.sync("m", 1).result(0).error_code == ErrorCode.coordinator_load_in_progress
        # Kafka answers a heartbeat to a loading coordinator blindly
        assert groups.heartbeat("m", 1) == ErrorCode.none
        assert coordinator.fetch_offsets(OffsetFetch(GROUP, None)).result(0).error_code == \
            ErrorCode.coordinator_load_in_progress
        assert coordinator.list_groups().result(0) == []
    finally:
        release.set()
        loader.join(10)
    assert groups.coordinator.is_loaded(groups.partition)
    assert groups.join().result(0).error_code == ErrorCode.member_id_required
    groups.coordinator.close()


def test_unload_answers_parked_joins_not_coordinator(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    parked = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    groups.coordinator.unload(groups.partition)
    assert parked.result(0).error_code == ErrorCode.not_coordinator
    assert groups.timer.keys == []
    assert not groups.coordinator.is_loaded(groups.partition)
    assert groups.heartbeat(leader.member_id, 1) == ErrorCode.not_coordinator


def test_unload_answers_parked_syncs_not_coordinator(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    follower_join = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    groups.join(dataclasses.replace(REQUEST, member_id=leader.member_id)).result(0)
    parked = groups.sync(follower_join.result(0).member_id, 2)
    assert not parked.done()
    groups.coordinator.unload(groups.partition)
    assert parked.result(0).error_code == ErrorCode.not_coordinator


def test_groups_of_partitions_held_elsewhere_are_not_coordinated_here(
        groups: Harness) -> None:
    other = next(f"g{i}" for i in range(1000)
                 if partition_for(f"g{i}", 50) != groups.partition)
    coordinator = groups.coordinator
    assert groups.join(group_id=other).result(0).error_code == ErrorCode.not_coordinator
    assert coordinator.sync_group(SyncGroup(other, 1, "m", None, None, None)).result(0) \
        .error_code == ErrorCode.not_coordinator
    assert coordinator.heartbeat(Heartbeat(other, 1, "m")).result(0) == \
        ErrorCode.not_coordinator
    assert coordinator.leave_group(LeaveGroup(other, ())).result(0).error_code == \
        ErrorCode.not_coordinator
    commit = coordinator.commit_offsets(OffsetCommit(other, -1, "", None, (
        CommittedOffset("t", 0, 1),))).result(0)
    assert commit.partitions[0].error_code == ErrorCode.not_coordinator
    assert coordinator.fetch_offsets(OffsetFetch(other, None)).result(0).error_code == \
        ErrorCode.not_coordinator
    assert coordinator.delete_offsets(OffsetDelete(other, ())).result(0).error_code == \
        ErrorCode.not_coordinator
    assert coordinator.describe_groups([other]).result(0)[0].error_code == \
        ErrorCode.not_coordinator
    assert coordinator.delete_groups([other]).result(0)[0].error_code == \
        ErrorCode.not_coordinator


def test_failed_write_answers_not_coordinator_and_unloads(groups: Harness) -> None:
    leader = groups.join_dynamic_member(REQUEST)
    groups.logs[groups.partition].close()
    answer = groups.sync(leader.member_id, leader.generation_id,
                         assignments=((leader.member_id, b"x"),)).result(0)
    assert answer.error_code == ErrorCode.not_coordinator
    assert not groups.coordinator.is_loaded(groups.partition)
    assert groups.timer.keys == []
    assert groups.join().result(0).error_code == ErrorCode.not_coordinator


def test_failed_write_of_a_new_group_answers_the_join_not_coordinator(
        groups: Harness) -> None:
    groups.logs[groups.partition].close()
    answer = groups.join().result(0)
    assert answer.error_code == ErrorCode.not_coordinator
    assert not groups.coordinator.is_loaded(groups.partition)


def test_close_unloads_every_partition(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    parked = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    groups.coordinator.close()
    assert parked.result(0).error_code == ErrorCode.not_coordinator
    assert groups.heartbeat(leader.member_id, 1) == ErrorCode.not_coordinator


def test_failed_write_of_a_static_member_new_id_answers_its_join_not_coordinator(
        groups: Harness) -> None:
    groups.join_static_member_and_sync("instance")
    groups.logs[groups.partition].close()
    rejoin = groups.join(join_request(group_instance_id="instance"))
    assert rejoin.result(0).error_code == ErrorCode.not_coordinator
    assert not groups.coordinator.is_loaded(groups.partition)


def test_a_record_that_does_not_decode_fails_the_load(tmp_path: Path, clock: FakeClock) -> None:
    groups = Harness(tmp_path, clock)
    groups.coordinator.unload(groups.partition)
    key = group_metadata_record(GroupMetadataKey(GROUP), None).key
    _append(groups, (key, b"\x00\x03\x00"))        # a version 3 value cut after two bytes
    with pytest.raises(CoordinatorRecordError) as caught:
        groups.load(groups.partition)
    error = caught.value
    assert (error.partition, error.offset, error.part, error.version) == (
        groups.partition, 0, "value", 3)
    assert str(error).startswith(f"__consumer_offsets-{groups.partition} offset 0: ")
    assert not groups.coordinator.is_loaded(groups.partition)
    assert groups.join().result(0).error_code == ErrorCode.not_coordinator
    groups.coordinator.close()
