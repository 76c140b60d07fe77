"""Static membership (KIP-345), ported from Kafka's GroupMetadataManagerTest
(testReplaceStaticMember*, testStaticMemberFence*, testStaticMemberRejoin*)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from tests.node.groups.harness import Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000,
                       protocols=(("range", b"r"), ("roundrobin", b"o")))


def _two_static_members(groups: Harness) -> tuple[str, str]:
    """Kafka's ``staticMembersJoinAndRebalance``: leader and follower, Stable at generation 1."""
    leader_join = groups.join(dataclasses.replace(REQUEST, group_instance_id="leader-instance"))
    follower_join = groups.join(dataclasses.replace(REQUEST,
                                                    group_instance_id="follower-instance"))
    groups.sleep(3000)
    groups.sleep(3000)
    leader, follower = leader_join.result(0), follower_join.result(0)
    assert leader.generation_id == follower.generation_id == 1
    groups.sync(leader.member_id, 1, group_instance_id="leader-instance", assignments=(
        (leader.member_id, b"\x01"), (follower.member_id, b"\x02"))).result(0)
    answer = groups.sync(follower.member_id, 1, group_instance_id="follower-instance").result(0)
    assert answer.assignment == b"\x02"
    assert groups.group().state is GroupState.STABLE
    return leader.member_id, follower.member_id


def test_static_member_id_starts_with_its_instance_id(groups: Harness) -> None:
    future = groups.join(dataclasses.replace(REQUEST, group_instance_id="instance"))
    groups.sleep(3000)
    assert future.result(0).member_id.startswith("instance-")


def test_unchanged_static_rejoin_of_a_stable_group_needs_no_rebalance(groups: Harness) -> None:
    leader, follower = _two_static_members(groups)
    records_before = len(groups.group_records())
    answer = groups.join(dataclasses.replace(REQUEST, group_instance_id="follower-instance")
                         ).result(0)
    assert answer.error_code == ErrorCode.none
    assert answer.member_id != follower
    assert (answer.generation_id, answer.leader, answer.members) == (1, leader, ())
    assert groups.group().state is GroupState.STABLE
    assert groups.group().static_member_id("follower-instance") == answer.member_id
    # the new id is durable, with the member's assignment kept
    records = groups.group_records()
    assert len(records) == records_before + 1
    stored = records[-1][1]
    assert stored is not None
    assert {m.member_id: m.assignment for m in stored.members} == {
        leader: b"\x01", answer.member_id: b"\x02"}
    synced = groups.sync(answer.member_id, 1, group_instance_id="follower-instance").result(0)
    assert synced.assignment == b"\x02"


def test_replaced_static_leader_with_skip_assignment_gets_the_members(groups: Harness) -> None:
    leader, _ = _two_static_members(groups)
    answer = groups.join(dataclasses.replace(REQUEST, group_instance_id="leader-instance",
                                             supports_skip_assignment=True)).result(0)
    assert answer.skip_assignment
    assert answer.leader == answer.member_id != leader
    assert len(answer.members) == 2
    assert groups.group().state is GroupState.STABLE


def test_static_rejoin_changing_the_selected_protocol_rebalances(groups: Harness) -> None:
    member = groups.join_static_member_and_sync("instance")
    assert groups.group().protocol_name == "range"
    answer = groups.join(dataclasses.replace(REQUEST, group_instance_id="instance",
                                             protocols=(("roundrobin", b"o"), ("range", b"r")))
                         ).result(0)        # alone: the rebalance completes at once
    assert answer.member_id != member.member_id
    assert (answer.generation_id, answer.protocol_name) == (2, "roundrobin")
    assert groups.group().state is GroupState.COMPLETING_REBALANCE


def test_static_rejoin_with_only_a_new_protocol_rebalances(groups: Harness) -> None:
    _two_static_members(groups)
    future = groups.join(dataclasses.replace(REQUEST, group_instance_id="follower-instance",
                                             protocols=(("roundrobin", b"o"),)))
    assert not future.done()
    assert groups.group().state is GroupState.PREPARING_REBALANCE


def test_old_member_id_of_a_replaced_static_member_is_fenced(groups: Harness) -> None:
    leader, follower = _two_static_members(groups)
    groups.join(dataclasses.replace(REQUEST, group_instance_id="follower-instance")).result(0)
    assert groups.heartbeat(follower, 1, group_instance_id="follower-instance") == \
        ErrorCode.fenced_instance_id
    stale_sync = groups.sync(follower, 1, group_instance_id="follower-instance").result(0)
    assert stale_sync.error_code == ErrorCode.fenced_instance_id
    stale_join = groups.join(dataclasses.replace(REQUEST, member_id=follower,
                                                 group_instance_id="follower-instance"))
    assert stale_join.result(0).error_code == ErrorCode.fenced_instance_id


def test_duplicate_static_member_fences_the_parked_join_of_the_old_one(groups: Harness) -> None:
    _, follower = _two_static_members(groups)
    groups.join(join_request(require_known_member_id=False, protocols=REQUEST.protocols))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    old_join = groups.join(dataclasses.replace(REQUEST, member_id=follower,
                                               group_instance_id="follower-instance"))
    assert not old_join.done()
    groups.join(dataclasses.replace(REQUEST, group_instance_id="follower-instance"))
    answer = old_join.result(0)
    assert (answer.error_code, answer.member_id, answer.leader) == (
        ErrorCode.fenced_instance_id, follower, "")


def test_static_rejoin_while_completing_the_rebalance_rebalances_again(groups: Harness) -> None:
    leader_join = groups.join(dataclasses.replace(REQUEST, group_instance_id="leader-instance"))
    groups.sleep(3000)
    leader = leader_join.result(0)
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    again = groups.join(dataclasses.replace(REQUEST, group_instance_id="leader-instance"))
    answer = again.result(0)       # alone: the new join phase ends at once
    assert answer.member_id != leader.member_id
    assert answer.generation_id == leader.generation_id + 1


def test_static_member_that_does_not_rejoin_is_kept_when_the_join_phase_ends(
        groups: Harness) -> None:
    leader, follower = _two_static_members(groups)
    leader_join = groups.join(dataclasses.replace(REQUEST, member_id=leader,
                                                  group_instance_id="leader-instance"))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    groups.sleep(4000)
    assert groups.heartbeat(follower, 1, group_instance_id="follower-instance") == \
        ErrorCode.rebalance_in_progress
    groups.sleep(4000)
    assert groups.heartbeat(follower, 1, group_instance_id="follower-instance") == \
        ErrorCode.rebalance_in_progress
    groups.sleep(2000)     # the rebalance timeout: dynamic laggards would be dropped here
    answer = leader_join.result(0)
    assert answer.generation_id == 2
    assert set(groups.group().member_ids) == {leader, follower}


def test_unknown_instance_id_with_a_known_member_id_is_unknown(groups: Harness) -> None:
    leader, _ = _two_static_members(groups)
    answer = groups.join(dataclasses.replace(REQUEST, member_id=leader,
                                             group_instance_id="other-instance")).result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_leader_rejoining_with_a_mismatched_instance_id_is_fenced(groups: Harness) -> None:
    leader, follower = _two_static_members(groups)
    answer = groups.join(dataclasses.replace(REQUEST, member_id=leader,
                                             group_instance_id="follower-instance")).result(0)
    assert answer.error_code == ErrorCode.fenced_instance_id


def test_each_static_rejoin_gets_a_different_member_id(groups: Harness) -> None:
    _two_static_members(groups)
    ids = {groups.join(dataclasses.replace(REQUEST, group_instance_id="follower-instance"))
           .result(0).member_id for _ in range(3)}
    assert len(ids) == 3
