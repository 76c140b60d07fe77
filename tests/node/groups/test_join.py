"""JoinGroup, ported from Kafka's GroupMetadataManagerTest (the classic group join tests)."""

from __future__ import annotations

import dataclasses
import uuid

from kio.schema.errors import ErrorCode

from node.groups.classic_group import GroupState
from node.groups.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from tests.node.groups.harness import GROUP, TEST_CONFIG, Harness, join_request


def test_unknown_member_joining_a_new_group_is_asked_for_a_member_id(groups: Harness) -> None:
    answer = groups.join(client_id="consumer").result(0)
    assert answer.error_code == ErrorCode.member_id_required
    prefix, _, generated = answer.member_id.partition("-")
    assert prefix == "consumer"
    uuid.UUID(generated)
    assert groups.group().is_pending_member(answer.member_id)
    assert groups.group().state is GroupState.EMPTY


def test_joining_creates_the_group_with_an_empty_record(groups: Harness) -> None:
    groups.join().result(0)
    [(group_id, value)] = groups.group_records()
    assert group_id == GROUP
    assert value is not None
    assert (value.protocol_type, value.generation, value.protocol, value.leader,
            value.members) == ("", 0, None, None, ())


def test_member_id_given_for_a_group_that_does_not_exist_is_unknown(groups: Harness) -> None:
    answer = groups.join(member_id="some-member").result(0)
    assert answer.error_code == ErrorCode.unknown_member_id
    assert groups.group() is None
    assert groups.group_records() == []


def test_session_timeout_outside_the_configured_bounds_is_invalid(groups: Harness) -> None:
    low = groups.join(session_timeout_ms=TEST_CONFIG.group_min_session_timeout_ms - 1).result(0)
    high = groups.join(session_timeout_ms=TEST_CONFIG.group_max_session_timeout_ms + 1).result(0)
    assert low.error_code == high.error_code == ErrorCode.invalid_session_timeout
    assert groups.group() is None


def test_empty_protocol_type_or_protocols_are_inconsistent(groups: Harness) -> None:
    assert groups.join(protocol_type="").result(0).error_code == \
        ErrorCode.inconsistent_group_protocol
    assert groups.join(protocols=()).result(0).error_code == ErrorCode.inconsistent_group_protocol


def test_member_with_another_protocol_type_is_inconsistent(groups: Harness) -> None:
    groups.join_and_sync_leader()
    answer = groups.join(protocol_type="connect").result(0)
    assert answer.error_code == ErrorCode.inconsistent_group_protocol


def test_member_sharing_no_protocol_with_the_group_is_inconsistent(groups: Harness) -> None:
    groups.join_and_sync_leader()
    answer = groups.join(protocols=(("roundrobin", b""),)).result(0)
    assert answer.error_code == ErrorCode.inconsistent_group_protocol


def test_join_answers_carry_the_protocol_type_and_name(groups: Harness) -> None:
    answer = groups.join_dynamic_member()
    assert (answer.protocol_type, answer.protocol_name) == ("consumer", "range")


def test_first_member_leads_and_only_the_leader_sees_the_members(groups: Harness) -> None:
    request = join_request(rebalance_timeout_ms=10000)
    first = groups.join(request).result(0)
    second = groups.join(request).result(0)
    leader = groups.join(dataclasses.replace(request, member_id=first.member_id))
    follower = groups.join(dataclasses.replace(request, member_id=second.member_id))
    groups.sleep(TEST_CONFIG.group_initial_rebalance_delay_ms)
    groups.sleep(TEST_CONFIG.group_initial_rebalance_delay_ms)
    lead, follow = leader.result(0), follower.result(0)
    assert lead.leader == follow.leader == first.member_id
    assert [m.member_id for m in lead.members] == [first.member_id, second.member_id]
    assert follow.members == ()
    assert lead.generation_id == follow.generation_id == 1


def test_protocol_is_chosen_by_vote_among_those_every_member_supports(groups: Harness) -> None:
    both = (("roundrobin", b"r"), ("range", b"g"))
    prefer_range = (("range", b"g"), ("roundrobin", b"r"), ("sticky", b"s"))
    prefer_roundrobin = (("roundrobin", b"r"), ("sticky", b"s"), ("range", b"g"))
    ids = [groups.join(join_request(protocols=p)).result(0).member_id
           for p in (both, prefer_range, prefer_roundrobin)]
    futures = [groups.join(join_request(member_id=i, protocols=p))
               for i, p in zip(ids, (both, prefer_range, prefer_roundrobin))]
    groups.sleep(3000)
    groups.sleep(3000)
    answers = [f.result(0) for f in futures]
    # sticky is not supported by all; roundrobin has two votes, range one
    assert {a.protocol_name for a in answers} == {"roundrobin"}
    assert [m.metadata for m in answers[0].members] == [b"r", b"r", b"r"]


def test_max_group_size_rejects_the_member_beyond_it(tmp_path, clock) -> None:
    config = dataclasses.replace(TEST_CONFIG, group_max_size=3,
                                 group_initial_rebalance_delay_ms=50)
    groups = Harness(tmp_path, clock, config)
    request = join_request(rebalance_timeout_ms=500)
    ids = [groups.join(request).result(0).member_id for _ in range(4)]
    assert groups.group().num_pending_join_members() == 4
    second_round = [groups.join(dataclasses.replace(request, member_id=i)) for i in ids]
    groups.sleep(50)
    groups.sleep(50)
    errors = [f.result(0).error_code for f in second_round]
    assert errors.count(ErrorCode.group_max_size_reached) == 1
    assert errors.count(ErrorCode.none) == 3
    assert groups.group().num_members() == 3
    assert groups.group().num_pending_join_members() == 0
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    # accepted members can rejoin while completing; the rejected one still cannot
    third_round = [groups.join(dataclasses.replace(request, member_id=i)).result(0).error_code
                   for i in ids]
    assert third_round.count(ErrorCode.group_max_size_reached) == 1
    groups.coordinator.close()


def test_max_group_size_without_required_member_ids(tmp_path, clock) -> None:
    config = dataclasses.replace(TEST_CONFIG, group_max_size=3,
                                 group_initial_rebalance_delay_ms=50)
    groups = Harness(tmp_path, clock, config)
    request = join_request(require_known_member_id=False)
    futures = [groups.join(request) for _ in range(4)]
    assert groups.group().num_members() == 3
    assert groups.group().num_awaiting_join() == 3
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    groups.sleep(50)
    groups.sleep(50)
    errors = [f.result(0).error_code for f in futures]
    assert errors == [ErrorCode.none] * 3 + [ErrorCode.group_max_size_reached]
    groups.coordinator.close()


def test_join_before_v4_is_added_at_once(groups: Harness) -> None:
    future = groups.join(require_known_member_id=False)
    assert not future.done()
    assert groups.group().num_members() == 1
    groups.sleep(3000)
    assert future.result(0).error_code == ErrorCode.none


def test_existing_member_joining_an_empty_group_is_unknown(groups: Harness) -> None:
    joined = groups.join_and_sync_leader()
    groups.leave((joined.member_id, None))
    assert groups.group().state is GroupState.EMPTY
    answer = groups.join(member_id=joined.member_id).result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_unknown_member_id_in_an_existing_group_is_unknown(groups: Harness) -> None:
    groups.join_and_sync_leader()
    answer = groups.join(member_id="not-a-member").result(0)
    assert answer.error_code == ErrorCode.unknown_member_id


def test_leader_rejoining_a_stable_group_starts_a_rebalance(groups: Harness) -> None:
    joined = groups.join_and_sync_leader()
    future = groups.join(member_id=joined.member_id)
    assert groups.group().state is GroupState.COMPLETING_REBALANCE   # alone: completes at once
    answer = future.result(0)
    assert answer.generation_id == joined.generation_id + 1


def test_unchanged_follower_rejoining_a_stable_group_gets_the_current_generation(
        groups: Harness) -> None:
    leader, follower = _two_member_stable_group(groups)
    answer = groups.join(member_id=follower).result(0)
    assert answer.error_code == ErrorCode.none
    assert answer.generation_id == groups.group().generation_id
    assert answer.leader == leader
    assert answer.members == ()
    assert groups.group().state is GroupState.STABLE


def test_follower_with_new_metadata_starts_a_rebalance(groups: Harness) -> None:
    _, follower = _two_member_stable_group(groups)
    future = groups.join(member_id=follower, protocols=(("range", b"new"),))
    assert not future.done()
    assert groups.group().state is GroupState.PREPARING_REBALANCE


def test_member_rejoining_with_the_same_metadata_while_completing_gets_the_generation(
        groups: Harness) -> None:
    joined = groups.join_dynamic_member()
    assert groups.group().state is GroupState.COMPLETING_REBALANCE
    again = groups.join(member_id=joined.member_id).result(0)
    assert again.generation_id == joined.generation_id
    assert [m.member_id for m in again.members] == [joined.member_id]


def test_generation_increments_with_each_rebalance(groups: Harness) -> None:
    joined = groups.join_and_sync_leader()
    again = groups.join(member_id=joined.member_id).result(0)
    assert again.generation_id == joined.generation_id + 1


def test_members_that_did_not_rejoin_are_removed_when_the_join_phase_ends(
        groups: Harness) -> None:
    leader, follower = _two_member_stable_group(groups)
    future = groups.join(member_id=leader)
    assert not future.done()
    groups.sleep(10000)        # the rebalance timeout of both members
    answer = future.result(0)
    assert answer.error_code == ErrorCode.none
    assert groups.group().member_ids == [leader]
    assert groups.heartbeat(follower, answer.generation_id) == ErrorCode.unknown_member_id


def test_join_phase_where_nobody_rejoined_waits_another_rebalance_timeout(
        groups: Harness) -> None:
    request = join_request(session_timeout_ms=30000, rebalance_timeout_ms=10000)
    first = groups.join(dataclasses.replace(request, group_instance_id="first"))
    groups.sleep(3000)
    first_id = first.result(0).member_id
    second = groups.join(dataclasses.replace(request, group_instance_id="second"))
    third = groups.join(dataclasses.replace(request, group_instance_id="third"))
    groups.join(dataclasses.replace(request, member_id=first_id, group_instance_id="first"))
    second_id = second.result(0).member_id
    assert third.result(0).generation_id == 2
    # a member leaves: a rebalance starts that nobody has rejoined
    groups.leave(("", "third"))
    assert groups.group().state is GroupState.PREPARING_REBALANCE
    assert groups.group().num_awaiting_join() == 0
    for _ in range(2):
        groups.sleep(10000)
        assert groups.timer.deadline(f"join-{GROUP}") == groups.clock.milliseconds() + 10000
        assert groups.group().state is GroupState.PREPARING_REBALANCE
        assert groups.group().num_members() == 2
        assert groups.group().generation_id == 2
    again = groups.join(dataclasses.replace(request, member_id=first_id,
                                            group_instance_id="first"))
    assert not again.done()
    groups.join(dataclasses.replace(request, member_id=second_id, group_instance_id="second"))
    assert again.result(0).generation_id == 3
    assert groups.group().state is GroupState.COMPLETING_REBALANCE


def test_new_member_join_times_out_while_the_rebalance_hangs(groups: Harness) -> None:
    request = join_request(session_timeout_ms=5000 + NEW_MEMBER_JOIN_TIMEOUT_MS,
                           rebalance_timeout_ms=2 * NEW_MEMBER_JOIN_TIMEOUT_MS)
    first = groups.join_dynamic_member(request)
    assert not any(m.is_new for m in groups.group().members)
    second = groups.join(dataclasses.replace(request, session_timeout_ms=5000,
                                             rebalance_timeout_ms=5000,
                                             require_known_member_id=False))
    assert not second.done()
    assert [m.is_new for m in groups.group().members] == [False, True]
    groups.sleep(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert second.result(0).error_code == ErrorCode.unknown_member_id
    assert groups.group().member_ids == [first.member_id]


def test_pending_member_joining_completes_the_join_phase(groups: Harness) -> None:
    leader, follower = _two_member_stable_group(groups)
    leader_join = groups.join(member_id=leader)
    pending = groups.join().result(0)
    follower_join = groups.join(member_id=follower)
    assert not leader_join.done() and not follower_join.done()
    newcomer = groups.join(member_id=pending.member_id)
    for future in (leader_join, follower_join, newcomer):
        assert future.result(0).error_code == ErrorCode.none
    assert groups.group().num_members() == 3


def test_pending_member_timing_out_completes_the_join_phase(groups: Harness) -> None:
    leader, follower = _two_member_stable_group(groups)
    leader_join = groups.join(member_id=leader)
    groups.join(session_timeout_ms=2500).result(0)
    follower_join = groups.join(member_id=follower)
    assert not leader_join.done()
    groups.sleep(2500)
    assert leader_join.result(0).error_code == ErrorCode.none
    assert follower_join.result(0).error_code == ErrorCode.none
    assert groups.group().num_members() == 2


def _two_member_stable_group(groups: Harness) -> tuple[str, str]:
    """Kafka's ``joinWithNMembers`` for two dynamic members, then synced: (leader, follower)."""
    request = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)
    ids = [groups.join(request).result(0).member_id for _ in range(2)]
    futures = [groups.join(dataclasses.replace(request, member_id=i)) for i in ids]
    groups.sleep(3000)
    groups.sleep(3000)
    answers = [f.result(0) for f in futures]
    leader = answers[0].leader
    follower = next(a.member_id for a in answers if a.member_id != leader)
    generation = answers[0].generation_id
    synced = groups.sync(leader, generation, assignments=((leader, b"1"), (follower, b"2")))
    assert synced.result(0).error_code == ErrorCode.none
    assert groups.sync(follower, generation).result(0).assignment == b"2"
    assert groups.group().state is GroupState.STABLE
    return leader, follower


def test_retried_join_and_its_first_attempt_get_the_same_answer(groups: Harness) -> None:
    leader, follower = _two_member_stable_group(groups)
    first = groups.join(member_id=leader)
    retry = groups.join(member_id=leader)
    assert not first.done() and not retry.done()
    groups.join(member_id=follower).result(0)
    assert first.result(0) == retry.result(0)
    assert retry.result(0).generation_id == 2
