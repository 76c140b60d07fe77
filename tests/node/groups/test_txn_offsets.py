"""Transactional offset commits through the coordinator on a real ``__consumer_offsets`` log
(Kafka's OffsetMetadataManagerTest classic-group TxnOffsetCommit tests and
GroupCoordinatorShardTest's replayEndTransactionMarker): who may commit, the transactional
batch in the log (its producer, the LSO held below it), the offsets pending until the
transaction's marker (``write_marker``: COMMIT makes them visible, ABORT drops them,
UNSTABLE_OFFSET_COMMIT with require_stable meanwhile), a fenced producer epoch, and a marker
written while the partition is not loaded, replayed by the load."""

from __future__ import annotations

import threading

import pytest
from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.messages import (
    CommittedOffset,
    OffsetCommit,
    OffsetFetch,
    TxnOffsetCommit,
)
from node.groups import partition as partition_module
from storage.log import Log
from storage.records import ControlType
from tests.node.groups.harness import GROUP, Harness, join_request

PRODUCER_ID = 4000
EPOCH = 3


def _txn_commit(groups: Harness, offset: int = 100, *, generation_id: int = -1,
                member_id: str = "", group_instance_id: str | None = None,
                producer_id: int = PRODUCER_ID, epoch: int = EPOCH,
                group_id: str = GROUP) -> ErrorCode:
    result = groups.coordinator.commit_transactional_offsets(TxnOffsetCommit(
        "txn", producer_id, epoch, OffsetCommit(
            group_id, generation_id, member_id, group_instance_id,
            (CommittedOffset("foo", 0, offset, metadata="meta"),)))).result(0)
    [answer] = result.partitions
    return answer.error_code


def _fetch(groups: Harness, require_stable: bool = False) -> tuple[ErrorCode, int]:
    fetched = groups.coordinator.fetch_offsets(
        OffsetFetch(GROUP, (("foo", 0),), require_stable=require_stable)).result(0)
    [partition] = fetched.partitions
    return partition.error_code, partition.offset


def _marker(groups: Harness, control: ControlType, producer_id: int = PRODUCER_ID,
            epoch: int = EPOCH) -> None:
    groups.coordinator.write_marker(groups.partition, groups.logs[groups.partition], control,
                                    producer_id, epoch, 0)


def test_transactional_commit_is_a_transactional_batch_of_the_producer(
        groups: Harness) -> None:
    assert _txn_commit(groups) == ErrorCode.none
    log = groups.logs[groups.partition]
    fetched = log.read_raw(0)
    assert fetched is not None
    [batch] = list(fetched.batches())
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch) == (PRODUCER_ID, EPOCH)
    assert log.last_stable_offset == batch.base_offset


def test_transactional_offsets_are_visible_only_after_the_commit_marker(
        groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    assert _fetch(groups) == (ErrorCode.none, -1)
    assert _fetch(groups, require_stable=True)[0] == ErrorCode.unstable_offset_commit
    _marker(groups, ControlType.COMMIT)
    assert _fetch(groups) == (ErrorCode.none, 100)
    assert _fetch(groups, require_stable=True) == (ErrorCode.none, 100)
    log = groups.logs[groups.partition]
    assert log.last_stable_offset == log.log_end_offset


def test_aborted_transactional_offsets_are_dropped(groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    _marker(groups, ControlType.ABORT)
    assert _fetch(groups) == (ErrorCode.none, -1)
    assert _fetch(groups, require_stable=True) == (ErrorCode.none, -1)


def test_abort_keeps_the_offsets_committed_before(groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    _marker(groups, ControlType.COMMIT)
    assert _txn_commit(groups, 200) == ErrorCode.none
    _marker(groups, ControlType.ABORT)
    assert _fetch(groups) == (ErrorCode.none, 100)


def test_a_later_plain_commit_wins_over_the_committed_transaction(groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    result = groups.coordinator.commit_offsets(OffsetCommit(
        GROUP, -1, "", None, (CommittedOffset("foo", 0, 150),))).result(0)
    assert result.partitions[0].error_code == ErrorCode.none
    _marker(groups, ControlType.COMMIT)
    assert _fetch(groups) == (ErrorCode.none, 150)


def test_pending_and_completed_transactions_survive_a_restart(groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    _marker(groups, ControlType.COMMIT)
    assert _txn_commit(groups, 200, producer_id=PRODUCER_ID + 1) == ErrorCode.none
    again = groups.restart()
    try:
        assert _fetch(again) == (ErrorCode.none, 100)
        assert _fetch(again, require_stable=True)[0] == ErrorCode.unstable_offset_commit
        _marker(again, ControlType.COMMIT, producer_id=PRODUCER_ID + 1)
        assert _fetch(again) == (ErrorCode.none, 200)
    finally:
        again.coordinator.close()


def test_a_marker_written_while_the_partition_is_not_loaded_is_replayed_at_load(
        groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    groups.coordinator.unload(groups.partition)
    _marker(groups, ControlType.COMMIT)
    groups.load(groups.partition)
    assert _fetch(groups) == (ErrorCode.none, 100)


def test_old_producer_epoch_is_fenced_and_commits_nothing(groups: Harness) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    _marker(groups, ControlType.ABORT)
    end = groups.logs[groups.partition].log_end_offset
    assert _txn_commit(groups, 300, epoch=EPOCH - 1) == ErrorCode.invalid_producer_epoch
    assert groups.logs[groups.partition].log_end_offset == end
    assert _fetch(groups, require_stable=True) == (ErrorCode.none, -1)
    assert groups.coordinator.is_loaded(groups.partition)


def test_transactional_commit_to_a_missing_group_creates_it_empty(groups: Harness) -> None:
    assert _txn_commit(groups) == ErrorCode.none
    assert groups.group().state is GroupState.EMPTY


def test_transactional_commit_with_a_generation_to_a_missing_group_is_illegal(
        groups: Harness) -> None:
    assert _txn_commit(groups, generation_id=1, member_id="m") == \
        ErrorCode.illegal_generation
    assert groups.group() is None


def test_transactional_commit_checks_the_member_and_generation(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(join_request())
    assert _txn_commit(groups, generation_id=joined.generation_id + 1,
                       member_id=joined.member_id) == ErrorCode.illegal_generation
    assert _txn_commit(groups, generation_id=joined.generation_id,
                       member_id="stranger") == ErrorCode.unknown_member_id
    assert _txn_commit(groups, generation_id=joined.generation_id,
                       member_id=joined.member_id) == ErrorCode.none


def test_transactional_commit_without_member_is_accepted_by_a_group_with_members(
        groups: Harness) -> None:
    groups.join_and_sync_leader(join_request())
    assert _txn_commit(groups) == ErrorCode.none


def test_transactional_commit_while_completing_the_rebalance_is_accepted(
        groups: Harness) -> None:
    joined = groups.join_dynamic_member(join_request())
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    assert _txn_commit(groups, generation_id=joined.generation_id,
                       member_id=joined.member_id) == ErrorCode.none


def test_transactional_commit_by_a_fenced_static_member_is_refused(groups: Harness) -> None:
    joined = groups.join_static_member_and_sync("instance")
    assert _txn_commit(groups, generation_id=joined.generation_id, member_id="other",
                       group_instance_id="instance") == ErrorCode.fenced_instance_id


def test_transactional_commit_with_an_empty_group_id_is_invalid(groups: Harness) -> None:
    assert _txn_commit(groups, group_id="") == ErrorCode.invalid_group_id


def test_a_marker_written_while_the_partition_loads_is_applied_by_the_load(
        groups: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _txn_commit(groups, 100) == ErrorCode.none
    groups.coordinator.unload(groups.partition)
    started, release = threading.Event(), threading.Event()
    replay = partition_module.CoordinatorPartition.replay_log

    def slow_replay(self: partition_module.CoordinatorPartition, log: Log) -> int:
        applied = replay(self, log)
        started.set()
        release.wait(10)
        return applied
    monkeypatch.setattr(partition_module.CoordinatorPartition, "replay_log", slow_replay)
    loader = threading.Thread(target=groups.load, args=(groups.partition,))
    loader.start()
    try:
        assert started.wait(10)
        _marker(groups, ControlType.COMMIT)
    finally:
        release.set()
        loader.join(10)
    assert groups.coordinator.is_loaded(groups.partition)
    assert _fetch(groups, require_stable=True) == (ErrorCode.none, 100)
