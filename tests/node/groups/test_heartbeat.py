"""Heartbeats and session expiry, ported from Kafka's GroupMetadataManagerTest (testHeartbeat*,
testClassicGroupMemberSessionTimeout*, testHeartbeatExpirationShouldRemove*)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from tests.node.groups.harness import GROUP, Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)


def test_heartbeat_to_an_unknown_group_is_an_unknown_member(groups: Harness) -> None:
    assert groups.heartbeat("member", 1) == ErrorCode.unknown_member_id


def test_heartbeat_to_an_empty_group_is_an_unknown_member(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    groups.leave((joined.member_id, None))
    assert groups.heartbeat(joined.member_id, joined.generation_id) == \
        ErrorCode.unknown_member_id


def test_heartbeat_from_an_unknown_member_is_refused(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    assert groups.heartbeat("other", joined.generation_id) == ErrorCode.unknown_member_id


def test_heartbeat_with_another_generation_is_illegal(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    assert groups.heartbeat(joined.member_id, joined.generation_id + 1) == \
        ErrorCode.illegal_generation


def test_valid_heartbeat_to_a_stable_group(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    assert groups.heartbeat(joined.member_id, joined.generation_id) == ErrorCode.none


def test_heartbeat_while_completing_the_rebalance_is_accepted(groups: Harness) -> None:
    joined = groups.join_dynamic_member(REQUEST)
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    assert groups.heartbeat(joined.member_id, joined.generation_id) == ErrorCode.none


def test_heartbeat_while_preparing_a_rebalance_asks_to_rejoin(groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    follower_join = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    assert groups.heartbeat(leader.member_id, leader.generation_id) == \
        ErrorCode.rebalance_in_progress
    assert not follower_join.done()


def test_member_is_removed_when_its_session_expires(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    groups.sleep(4999)
    assert groups.group().has_member(joined.member_id)
    groups.sleep(1)
    assert groups.group().num_members() == 0
    assert groups.group().state is GroupState.EMPTY
    assert groups.heartbeat(joined.member_id, joined.generation_id) == \
        ErrorCode.unknown_member_id


def test_heartbeats_keep_the_session(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    for _ in range(5):
        groups.sleep(2500)
        assert groups.heartbeat(joined.member_id, joined.generation_id) == ErrorCode.none
    assert groups.group().state is GroupState.STABLE


def test_session_expiring_during_a_rebalance_removes_the_member_and_ends_the_phase(
        groups: Harness) -> None:
    leader = groups.join_and_sync_leader(REQUEST)
    follower_join = groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    assert not follower_join.done()
    groups.sleep(5000)       # the leader never rejoins: its session runs out
    answer = follower_join.result(0)
    assert answer.error_code == ErrorCode.none
    assert answer.leader == answer.member_id
    assert not groups.group().has_member(leader.member_id)


def test_expired_pending_member_is_removed(groups: Harness) -> None:
    pending = groups.join(REQUEST).result(0)
    assert groups.group().is_pending_member(pending.member_id)
    groups.sleep(REQUEST.session_timeout_ms)
    assert not groups.group().is_pending_member(pending.member_id)
    answer = groups.join(dataclasses.replace(REQUEST, member_id=pending.member_id)).result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_expired_member_is_removed_and_the_group_rebalances(groups: Harness) -> None:
    request = dataclasses.replace(REQUEST, session_timeout_ms=30000)
    leader = groups.join_and_sync_leader(request)
    follower_join = groups.join(dataclasses.replace(request, require_known_member_id=False))
    leader_join = groups.join(dataclasses.replace(request, member_id=leader.member_id))
    follower = follower_join.result(0)
    generation = leader_join.result(0).generation_id
    groups.sync(leader.member_id, generation, assignments=()).result(0)
    groups.sync(follower.member_id, generation).result(0)
    groups.sleep(20000)
    assert groups.heartbeat(leader.member_id, generation) == ErrorCode.none
    groups.sleep(10000)       # the follower sent nothing for 30 s
    assert not groups.group().has_member(follower.member_id)
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    assert groups.heartbeat(leader.member_id, generation) == ErrorCode.rebalance_in_progress
    rejoined = groups.join(dataclasses.replace(request, member_id=leader.member_id)).result(0)
    assert rejoined.generation_id == generation + 1
    assert not groups.timer.is_scheduled(f"heartbeat-{GROUP}-{follower.member_id}")


def test_new_member_follows_its_session_once_its_join_completed(groups: Harness) -> None:
    """Kafka's testNewMemberTimeoutCompletion: the new-member join timeout no longer applies
    after the join phase; the session does, and the last member's expiry empties the group."""
    request = join_request(session_timeout_ms=NEW_MEMBER_JOIN_TIMEOUT_MS + 5000,
                           require_known_member_id=False)
    future = groups.join(request)
    groups.sleep(3000)
    joined = future.result(0)
    assert not any(m.is_new for m in groups.group().members)
    groups.sync(joined.member_id, 1, assignments=()).result(0)
    groups.sleep(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert groups.group().num_members() == 1
    assert groups.sleep(5000) == [f"heartbeat-{GROUP}-{joined.member_id}"]
    assert groups.group().state is GroupState.EMPTY
    stored = groups.group_records()[-1][1]
    assert stored is not None
    assert (stored.generation, stored.leader, stored.protocol_type, stored.protocol,
            stored.members) == (2, None, "consumer", None, ())
    assert stored.current_state_timestamp_ms == groups.clock.milliseconds()
