"""TxnOffsetCommit through the coordinator, on a real ``__consumer_offsets`` log: the offsets are
a transactional batch of the producer, pending until the transaction's marker (OffsetFetch sees
them after a COMMIT, never after an ABORT; UNSTABLE_OFFSET_COMMIT with require_stable while
pending), a reload replays both, a stale producer epoch is refused, and the group's checks for a
transactional commit (Kafka's OffsetMetadataManagerTest transactional cases and
ClassicGroup.validateOffsetCommit with isTransactional)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from node.groups.messages import CommittedOffset, OffsetFetch, TxnOffsetCommit
from storage.records import ControlType
from tests.node.groups.harness import GROUP, Harness

PRODUCER_ID, EPOCH = 4000, 3


def txn_commit(groups: Harness, offset: int, *, epoch: int = EPOCH, generation_id: int = -1,
               member_id: str = "", partition: int = 0) -> ErrorCode:
    result = groups.coordinator.commit_transactional_offsets(TxnOffsetCommit(
        group_id=GROUP, transactional_id="txn", producer_id=PRODUCER_ID, producer_epoch=epoch,
        generation_id=generation_id, member_id=member_id, group_instance_id=None,
        offsets=(CommittedOffset("foo", partition, offset),))).result(0)
    [answer] = result.partitions
    return answer.error_code


def end_transaction(groups: Harness, control: ControlType, epoch: int = EPOCH) -> None:
    """What the transaction coordinator does at the end: the marker appended to the group's
    partition, then the coordinator told."""
    groups.logs[groups.partition].append_end_txn_marker(
        control, producer_id=PRODUCER_ID, producer_epoch=epoch, coordinator_epoch=0)
    assert groups.coordinator.complete_transaction(groups.partition, PRODUCER_ID,
                                                   control is ControlType.COMMIT)


def fetched(groups: Harness, require_stable: bool = False) -> list[tuple[int, int, ErrorCode]]:
    result = groups.coordinator.fetch_offsets(
        OffsetFetch(GROUP, (("foo", 0),), require_stable=require_stable)).result(0)
    return [(p.partition, p.offset, p.error_code) for p in result.partitions]


def test_a_transactional_commit_is_a_transactional_batch_of_the_producer(groups: Harness) -> None:
    assert txn_commit(groups, 7) == ErrorCode.none
    batches = list(groups.logs[groups.partition].read_raw(0).batches())
    [batch] = [b for b in batches if not b.header.is_control]
    assert (batch.header.producer_id, batch.header.producer_epoch) == (PRODUCER_ID, EPOCH)
    assert batch.header.is_transactional and batch.header.base_sequence == -1
    assert groups.logs[groups.partition].last_stable_offset == batch.header.base_offset


def test_offsets_of_an_open_transaction_are_pending_until_its_commit_marker(
        groups: Harness) -> None:
    assert txn_commit(groups, 7) == ErrorCode.none
    assert fetched(groups) == [(0, -1, ErrorCode.none)]
    assert fetched(groups, require_stable=True) == [(0, -1, ErrorCode.unstable_offset_commit)]
    end_transaction(groups, ControlType.COMMIT)
    assert fetched(groups) == [(0, 7, ErrorCode.none)]
    assert fetched(groups, require_stable=True) == [(0, 7, ErrorCode.none)]


def test_offsets_of_an_aborted_transaction_are_never_visible(groups: Harness) -> None:
    assert txn_commit(groups, 7) == ErrorCode.none
    end_transaction(groups, ControlType.ABORT)
    assert fetched(groups) == [(0, -1, ErrorCode.none)]
    again = groups.restart()
    try:
        assert fetched(again) == [(0, -1, ErrorCode.none)]
    finally:
        again.coordinator.close()


def test_a_reload_replays_the_transactional_commit_and_its_marker(groups: Harness) -> None:
    assert txn_commit(groups, 7) == ErrorCode.none
    end_transaction(groups, ControlType.COMMIT)
    assert txn_commit(groups, 9) == ErrorCode.none        # the next transaction, still open
    again = groups.restart()
    try:
        assert fetched(again) == [(0, 7, ErrorCode.none)]
        assert fetched(again, require_stable=True) == [(0, -1, ErrorCode.unstable_offset_commit)]
    finally:
        again.coordinator.close()


def test_a_stale_producer_epoch_is_refused_and_leaves_nothing_pending(groups: Harness) -> None:
    assert txn_commit(groups, 7) == ErrorCode.none
    end_transaction(groups, ControlType.COMMIT)
    assert txn_commit(groups, 8, epoch=EPOCH - 1) == ErrorCode.invalid_producer_epoch
    assert fetched(groups, require_stable=True) == [(0, 7, ErrorCode.none)]
    data = [b for b in groups.logs[groups.partition].read_raw(0).batches() if not b.header.is_control]
    assert len(data) == 1


def test_a_transactional_commit_without_a_member_is_accepted_by_a_group_with_members(
        groups: Harness) -> None:
    """v0-2 carry no member id or generation: Kafka accepts them whatever the group's state
    (a plain commit so is UNKNOWN_MEMBER_ID)."""
    leader = groups.join_and_sync_leader()
    assert groups.group().state.name == "STABLE"
    assert txn_commit(groups, 5) == ErrorCode.none
    assert txn_commit(groups, 5, generation_id=leader.generation_id + 1,
                      member_id=leader.member_id) == ErrorCode.illegal_generation
    assert txn_commit(groups, 5, generation_id=leader.generation_id,
                      member_id="stranger") == ErrorCode.unknown_member_id
    assert txn_commit(groups, 6, generation_id=leader.generation_id,
                      member_id=leader.member_id) == ErrorCode.none


def test_a_marker_for_a_partition_not_loaded_here_is_left_to_the_load(groups: Harness) -> None:
    other = (groups.partition + 1) % groups.config.offsets_topic_num_partitions
    assert groups.coordinator.complete_transaction(other, PRODUCER_ID, True) is False
