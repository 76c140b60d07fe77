"""LeaveGroup, ported from Kafka's GroupMetadataManagerTest (testLeaveGroup*, testValidLeaveGroup,
testStaticMembers*BatchLeaveGroup, testPendingMember*LeaveGroup)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.messages import LeftMember
from tests.node.groups.harness import GROUP, Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)


def test_leaving_an_unknown_group_answers_each_member_unknown(groups: Harness) -> None:
    answer = groups.leave(("member", None), ("", "instance"))
    assert answer.error_code == ErrorCode.none
    assert answer.members == (LeftMember("member", None, ErrorCode.unknown_member_id),
                              LeftMember("", "instance", ErrorCode.unknown_member_id))


def test_unknown_member_leaving_an_existing_group_is_unknown(groups: Harness) -> None:
    groups.join_and_sync_leader(REQUEST)
    answer = groups.leave(("other", None))
    assert answer.members == (LeftMember("other", None, ErrorCode.unknown_member_id),)
    assert groups.group().state is GroupState.STABLE


def test_last_member_leaving_empties_the_group_and_writes_it(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    answer = groups.leave((joined.member_id, None))
    assert answer.members == (LeftMember(joined.member_id, None, ErrorCode.none),)
    assert groups.group().state is GroupState.EMPTY
    assert not groups.timer.is_scheduled(f"heartbeat-{GROUP}-{joined.member_id}")
    stored = groups.group_records()[-1][1]
    assert stored is not None
    assert (stored.generation, stored.members) == (joined.generation_id + 1, ())


def test_member_leaving_a_stable_group_starts_a_rebalance(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    follower_join = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    groups.join(dataclasses.replace(REQUEST, member_id=leader.member_id)).result(0)
    follower = follower_join.result(0)
    groups.sync(leader.member_id, 2, assignments=()).result(0)
    groups.sync(follower.member_id, 2).result(0)
    groups.leave((follower.member_id, None))
    # the leader is the only one left and has not rejoined
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    assert groups.heartbeat(leader.member_id, 2) == ErrorCode.rebalance_in_progress


def test_leaving_member_with_a_parked_join_is_answered_unknown(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    parked = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    newcomer = groups.group().member_ids[-1]
    groups.leave((newcomer, None))
    assert parked.result(0).error_code == ErrorCode.unknown_member_id
    assert groups.group().member_ids == [leader.member_id]


def test_pending_member_leaving_completes_the_join_phase(groups: Harness) -> None:
    """Kafka's ``setupGroupWithPendingMember``: the known members rejoined, a pending member
    holds the phase open; its leaving ends it."""
    leader = groups.join_and_sync_leader(REQUEST)
    follower_join = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    groups.join(dataclasses.replace(REQUEST, member_id=leader.member_id)).result(0)
    follower = follower_join.result(0)
    groups.sync(leader.member_id, 2, assignments=()).result(0)
    groups.sync(follower.member_id, 2).result(0)
    leader_join = groups.join(dataclasses.replace(REQUEST, member_id=leader.member_id))
    pending = groups.join(dataclasses.replace(REQUEST, session_timeout_ms=2500)).result(0)
    follower_rejoin = groups.join(dataclasses.replace(REQUEST, member_id=follower.member_id))
    assert not leader_join.done() and not follower_rejoin.done()
    assert groups.group().num_pending_join_members() == 1
    answer = groups.leave((pending.member_id, None))
    assert answer.members == (LeftMember(pending.member_id, None, ErrorCode.none),)
    assert not groups.timer.is_scheduled(f"heartbeat-{GROUP}-{pending.member_id}")
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    assert groups.group().num_members() == 2
    assert groups.group().num_pending_join_members() == 0
    assert leader_join.result(0).generation_id == follower_rejoin.result(0).generation_id == 3


def test_static_member_leaves_by_instance_id_alone(groups: Harness) -> None:
    groups.join_static_member_and_sync("instance")
    answer = groups.leave(("", "instance"))
    assert answer.members == (LeftMember("", "instance", ErrorCode.none),)
    assert groups.group().state is GroupState.EMPTY
    assert not groups.group().has_static_member("instance")


def test_static_member_leaving_with_another_member_id_is_fenced(groups: Harness) -> None:
    joined = groups.join_static_member_and_sync("instance")
    answer = groups.leave(("some-other-id", "instance"))
    assert answer.members == (LeftMember("some-other-id", "instance",
                                         ErrorCode.fenced_instance_id),)
    assert groups.group().has_member(joined.member_id)


def test_batch_leave_answers_each_member(groups: Harness) -> None:
    joined = groups.join_static_member_and_sync("instance")
    pending = groups.join(REQUEST).result(0)
    answer = groups.leave((joined.member_id, "instance"), (pending.member_id, None),
                          ("", "unknown-instance"), ("ghost", None))
    assert [m.error_code for m in answer.members] == [
        ErrorCode.none, ErrorCode.none, ErrorCode.unknown_member_id, ErrorCode.unknown_member_id]
    assert groups.group().state is GroupState.EMPTY
    assert groups.group().num_pending_join_members() == 0
