"""SyncGroup, ported from Kafka's GroupMetadataManagerTest (testSyncGroup*, testLeaderFailureIn
SyncGroup, testRebalanceTimesOutWhenSyncRequestIsNotReceived*)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.messages import JoinGroup, JoinGroupResult
from tests.node.groups.harness import GROUP, Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)


def _leader_and_new_follower(groups: Harness, request: JoinGroup = REQUEST
                             ) -> tuple[JoinGroupResult, JoinGroupResult]:
    """Kafka's setup: a one-member Stable group, then a follower joins and the leader rejoins;
    the group is CompletingRebalance at generation 2."""
    leader = groups.join_and_sync_leader(request)
    follower_join = groups.join(dataclasses.replace(request, require_known_member_id=False))
    assert not follower_join.done()
    leader_join = groups.join(dataclasses.replace(request, member_id=leader.member_id))
    lead, follow = leader_join.result(0), follower_join.result(0)
    assert lead.generation_id == follow.generation_id == 2
    assert lead.leader == follow.leader == leader.member_id
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    return lead, follow


def test_sync_to_an_unknown_group_is_an_unknown_member(groups: Harness) -> None:
    answer = groups.sync("member", 1).result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_sync_from_an_unknown_member_is_refused(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    answer = groups.sync("unknown", leader.generation_id).result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_sync_with_another_generation_is_illegal(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    answer = groups.sync(leader.member_id, leader.generation_id + 1).result(0)
    assert answer.error_code == ErrorCode.illegal_generation


def test_sync_naming_another_protocol_type_or_name_is_inconsistent(groups: Harness) -> None:
    leader = groups.join_dynamic_member(REQUEST)
    wrong_type = groups.sync(leader.member_id, 1, protocol_type="connect").result(0)
    wrong_name = groups.sync(leader.member_id, 1, protocol_type="consumer",
                             protocol_name="roundrobin").result(0)
    assert wrong_type.error_code == wrong_name.error_code == ErrorCode.inconsistent_group_protocol
    right = groups.sync(leader.member_id, 1, protocol_type="consumer",
                        protocol_name="range").result(0)
    assert (right.error_code, right.protocol_type, right.protocol_name) == \
        (ErrorCode.none, "consumer", "range")


def test_follower_syncing_after_the_leader_gets_its_assignment(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    leader_sync = groups.sync(lead.member_id, 2, assignments=(
        (lead.member_id, b"\x00"), (follow.member_id, b"\x01"))).result(0)
    assert (leader_sync.error_code, leader_sync.assignment) == (ErrorCode.none, b"\x00")
    follower_sync = groups.sync(follow.member_id, 2).result(0)
    assert (follower_sync.error_code, follower_sync.assignment) == (ErrorCode.none, b"\x01")
    assert groups.group().state is GroupState.STABLE


def test_follower_syncing_first_waits_for_the_leader(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    follower_sync = groups.sync(follow.member_id, 2)
    assert not follower_sync.done()
    groups.sync(lead.member_id, 2, assignments=(
        (lead.member_id, b"\x00"), (follow.member_id, b"\x01"))).result(0)
    assert follower_sync.result(0).assignment == b"\x01"
    assert groups.group().state is GroupState.STABLE


def test_leader_assignment_is_durable_before_any_member_is_answered(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    follower_sync = groups.sync(follow.member_id, 2)
    seen: list[list[bytes]] = []
    follower_sync.add_done_callback(lambda _: seen.append(
        [m.assignment for m in groups.group_records()[-1][1].members]))
    log = groups.logs[groups.partition]
    groups.sync(lead.member_id, 2, assignments=(
        (lead.member_id, b"\x00"), (follow.member_id, b"\x01"))).result(0)
    assert seen == [[b"\x00", b"\x01"]]
    assert log.recovery_point == log.log_end_offset       # flushed
    [_, *rest] = groups.group_records()
    stored = rest[-1][1]
    assert stored is not None
    assert (stored.generation, stored.leader, stored.protocol) == (2, lead.member_id, "range")
    assert {m.member_id: m.assignment for m in stored.members} == {
        lead.member_id: b"\x00", follow.member_id: b"\x01"}


def test_members_left_out_of_the_leader_assignment_get_an_empty_one(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    groups.sync(lead.member_id, 2, assignments=((lead.member_id, b"\x00"),)).result(0)
    answer = groups.sync(follow.member_id, 2).result(0)
    assert (answer.error_code, answer.assignment) == (ErrorCode.none, b"")
    stored = groups.group_records()[-1][1]
    assert stored is not None
    assert {m.member_id: m.assignment for m in stored.members}[follow.member_id] == b""


def test_sync_while_preparing_a_rebalance_is_refused(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    groups.sync(lead.member_id, 2, assignments=()).result(0)
    groups.join(dataclasses.replace(REQUEST, member_id=lead.member_id))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    answer = groups.sync(follow.member_id, 2).result(0)
    assert answer.error_code == ErrorCode.rebalance_in_progress


def test_leader_failing_to_sync_sends_the_parked_follower_to_rejoin(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    follower_sync = groups.sync(follow.member_id, 2)
    assert not follower_sync.done()
    groups.sleep(10000)       # the leader's session (5 s) and the sync timeout (10 s) run out
    assert follower_sync.result(0).error_code == ErrorCode.rebalance_in_progress
    assert groups.group().member_ids == [follow.member_id]
    assert groups.group().state is GroupState.PREPARING_REBALANCE


def test_members_that_neither_sync_nor_heartbeat_are_removed_and_the_group_empties(
        groups: Harness) -> None:
    _leader_and_new_follower(groups)
    assert groups.timer.deadline(f"sync-{GROUP}") == groups.clock.milliseconds() + 10000
    groups.sleep(5000)
    assert groups.group().state is GroupState.EMPTY
    assert groups.group().num_members() == 0
    stored = groups.group_records()[-1][1]
    assert stored is not None
    assert (stored.generation, stored.members, stored.protocol) == (3, (), None)


def test_only_the_followers_that_did_not_sync_are_removed(groups: Harness) -> None:
    # sessions outlive the rebalance timeout: the sync timeout is what removes the follower
    lead, follow = _leader_and_new_follower(
        groups, join_request(rebalance_timeout_ms=10000, session_timeout_ms=30000))
    groups.sync(lead.member_id, 2, assignments=()).result(0)
    assert groups.timer.is_scheduled(f"sync-{GROUP}")
    groups.sleep(9999)
    assert groups.group().num_members() == 2
    groups.sleep(1)
    assert groups.group().member_ids == [lead.member_id]
    assert groups.group().state is GroupState.PREPARING_REBALANCE


def test_sync_timeout_is_cancelled_once_every_member_synced(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    groups.sync(lead.member_id, 2, assignments=()).result(0)
    groups.sync(follow.member_id, 2).result(0)
    assert not groups.timer.is_scheduled(f"sync-{GROUP}")
    for _ in range(3):
        groups.sleep(4000)
        assert groups.heartbeat(lead.member_id, 2) == ErrorCode.none
        assert groups.heartbeat(follow.member_id, 2) == ErrorCode.none
    assert groups.group().state is GroupState.STABLE


def test_retried_sync_and_its_first_attempt_get_the_same_answer(groups: Harness) -> None:
    lead, follow = _leader_and_new_follower(groups)
    first = groups.sync(follow.member_id, 2)
    retry = groups.sync(follow.member_id, 2)
    assert not first.done() and not retry.done()
    groups.sync(lead.member_id, 2, assignments=((follow.member_id, b"\x01"),)).result(0)
    assert first.result(0) == retry.result(0)
    assert retry.result(0).assignment == b"\x01"
