"""``ClassicGroup`` on its own, ported from Kafka's ClassicGroupTest: the state machine's
transitions, protocol selection, subscribed topics, generations, members, pending members,
static members, leader election and the offset-commit checks."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from node.groups.classic_group import ClassicGroup, GroupState, IllegalGroupTransition
from node.groups.member import ClassicGroupMember
from node.groups.messages import JoinGroupResult, SyncGroupResult
from node.groups.subscription import encode_subscription
from storage.clock import FakeClock

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD)

VALID = {
    (STABLE, PREPARING), (STABLE, DEAD), (COMPLETING, PREPARING), (COMPLETING, STABLE),
    (COMPLETING, DEAD), (PREPARING, DEAD), (PREPARING, EMPTY), (PREPARING, COMPLETING),
    (EMPTY, PREPARING), (EMPTY, DEAD), (DEAD, DEAD),
}
PATHS = {EMPTY: [], PREPARING: [PREPARING], COMPLETING: [PREPARING, COMPLETING],
         STABLE: [PREPARING, COMPLETING, STABLE], DEAD: [DEAD]}


class Answers:
    """The group's ``complete`` callable: records every answer it is handed."""

    def __init__(self) -> None:
        self.given: list[tuple[Future[Any], Any]] = []

    def __call__(self, future: Future[Any], answer: Any) -> None:
        self.given.append((future, answer))


@pytest.fixture
def answers() -> Answers:
    return Answers()


@pytest.fixture
def group(clock: FakeClock, answers: Answers) -> ClassicGroup:
    return ClassicGroup("group-id", clock, answers)


def member(member_id: str = "member", protocols: tuple[tuple[str, bytes], ...] = (
           ("roundrobin", b""),), instance: str | None = None,
           protocol_type: str = "consumer") -> ClassicGroupMember:
    return ClassicGroupMember(member_id, instance, "client", "host", 3000, 1000,
                              protocol_type, protocols)


def walk(group: ClassicGroup, state: GroupState) -> None:
    for step in PATHS[state]:
        group.transition_to(step)


@pytest.mark.parametrize("source", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_only_kafkas_transitions_are_allowed(group: ClassicGroup, source: GroupState,
                                             target: GroupState) -> None:
    walk(group, source)
    if (source, target) in VALID:
        group.transition_to(target)
        assert (group.state, group.previous_state) == (target, source)
    else:
        with pytest.raises(IllegalGroupTransition) as caught:
            group.transition_to(target)
        assert (caught.value.current, caught.value.target) == (str(source), str(target))
        assert group.state is source


def test_transition_stamps_the_state_timestamp(group: ClassicGroup, clock: FakeClock) -> None:
    clock.advance(1234)
    group.transition_to(PREPARING)
    assert group.current_state_timestamp_ms == clock.milliseconds()


@pytest.mark.parametrize("state,expected", [(STABLE, True), (COMPLETING, True), (EMPTY, True),
                                            (PREPARING, False), (DEAD, False)])
def test_which_states_can_rebalance(group: ClassicGroup, state: GroupState,
                                    expected: bool) -> None:
    walk(group, state)
    assert group.can_rebalance() is expected


def test_protocol_with_the_most_votes_is_selected(group: ClassicGroup) -> None:
    group.add(member("m1", (("range", b""), ("roundrobin", b""))))
    group.add(member("m2", (("roundrobin", b""), ("range", b""))))
    assert group.select_protocol() in {"range", "roundrobin"}
    group.add(member("m3", (("roundrobin", b""), ("range", b""))))
    assert group.select_protocol() == "roundrobin"


def test_selecting_a_protocol_without_members_raises(group: ClassicGroup) -> None:
    with pytest.raises(ValueError):
        group.select_protocol()


def test_only_a_protocol_every_member_supports_is_selected(group: ClassicGroup) -> None:
    group.add(member("m1", (("range", b""), ("roundrobin", b""))))
    group.add(member("m2", (("roundrobin", b""), ("foo", b""))))
    assert group.select_protocol() == "roundrobin"


def test_supported_protocols(group: ClassicGroup) -> None:
    assert group.supports_protocols("consumer", {"range", "roundrobin"})
    group.add(member("m1", (("range", b""), ("roundrobin", b""))))
    group.transition_to(PREPARING)
    assert group.supports_protocols("consumer", {"roundrobin", "foo"})
    assert group.supports_protocols("consumer", {"range", "bar"})
    assert not group.supports_protocols("consumer", {"foo", "bar"})
    assert not group.supports_protocols("connect", {"range"})


def test_subscribed_topics_of_a_consumer_group(group: ClassicGroup) -> None:
    assert group.subscribed_topics is None
    group.add(member("m1", (("range", encode_subscription(["foo"])),)))
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert group.subscribed_topics == frozenset({"foo"})
    assert group.is_subscribed_to_topic("foo") and not group.is_subscribed_to_topic("bar")
    group.remove("m1")
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert group.subscribed_topics == frozenset()


def test_unreadable_subscription_counts_as_every_topic(group: ClassicGroup) -> None:
    group.add(member("m1", (("range", b"\x00"),)))
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert group.subscribed_topics is None
    assert group.is_subscribed_to_topic("anything")


def test_non_consumer_group_subscribes_to_nothing(group: ClassicGroup) -> None:
    group.add(member("m1", (("range", encode_subscription(["foo"])),),
                     protocol_type="connect"))
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert group.subscribed_topics is None
    assert not group.is_subscribed_to_topic("foo")


def test_next_generation_with_members(group: ClassicGroup) -> None:
    group.add(member("m1"), Future())
    group.transition_to(PREPARING)
    group.add_pending_sync_member("m1")
    group.init_next_generation()
    assert (group.generation_id, group.state, group.protocol_name) == (1, COMPLETING,
                                                                       "roundrobin")
    assert group.has_received_sync_from_all_members()


def test_next_generation_of_an_empty_group(group: ClassicGroup) -> None:
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert (group.generation_id, group.state, group.protocol_name) == (1, EMPTY, None)


def test_update_member_counts_its_join(group: ClassicGroup) -> None:
    m = member("m1", (("range", b""), ("roundrobin", b"")))
    group.add(m)
    assert group.num_awaiting_join() == 0
    group.update_member(m, (("roundrobin", b"x"),), 10, 20, Future())
    assert (m.rebalance_timeout_ms, m.session_timeout_ms) == (10, 20)
    assert group.num_awaiting_join() == 1
    group.transition_to(PREPARING)
    assert not group.supports_protocols("consumer", {"range"})
    group.update_member(m, (("roundrobin", b"x"),), 10, 20, None)
    assert group.num_awaiting_join() == 0


def test_replacing_a_static_member_fences_what_the_old_id_awaits(
        group: ClassicGroup, answers: Answers) -> None:
    old = member("old", instance="instance")
    join: Future[JoinGroupResult] = Future()
    group.add(old, join)
    sync: Future[SyncGroupResult] = Future()
    old.awaiting_sync = sync
    new = group.replace_static_member("instance", "old", "new")
    assert group.member_ids == ["new"] and group.leader_id == "new"
    assert group.static_member_id("instance") == "new"
    assert new.supported_protocols == old.supported_protocols
    given = {id(f): a for f, a in answers.given}
    assert given[id(join)].error_code == ErrorCode.fenced_instance_id
    assert given[id(sync)].error_code == ErrorCode.fenced_instance_id


def test_replacing_an_unknown_static_member_raises(group: ClassicGroup) -> None:
    with pytest.raises(KeyError):
        group.replace_static_member("instance", "old", "new")


def test_static_member_cannot_be_added_twice(group: ClassicGroup) -> None:
    group.add(member("m1", instance="instance"))
    with pytest.raises(ValueError):
        group.add(member("m2", instance="instance"))


def test_a_member_cannot_also_be_pending(group: ClassicGroup) -> None:
    group.add(member("m1"))
    with pytest.raises(ValueError):
        group.add_pending_member("m1")


def test_pending_member_stops_pending_when_added_or_removed(group: ClassicGroup) -> None:
    group.add_pending_member("m1")
    group.add_pending_member("m2")
    group.add(member("m1"))
    assert not group.is_pending_member("m1")
    group.remove("m2")
    assert not group.is_pending_member("m2")
    assert group.num_pending_join_members() == 0


def test_removed_member_leaves_pending_sync(group: ClassicGroup) -> None:
    group.add(member("m1"))
    group.add_pending_sync_member("m1")
    assert not group.has_received_sync_from_all_members()
    group.remove("m1")
    assert group.has_received_sync_from_all_members()


def test_a_member_that_rejoined_is_elected_leader(group: ClassicGroup) -> None:
    group.add(member("leader"))
    group.add(member("new-leader"), Future())
    group.add(member("new-member"))
    assert group.is_leader("leader")
    assert group.maybe_elect_new_joined_leader()
    assert group.is_leader("new-leader")


def test_a_leader_that_rejoined_stays_leader(group: ClassicGroup) -> None:
    group.add(member("leader"), Future())
    group.add(member("new-member"))
    assert group.maybe_elect_new_joined_leader()
    assert group.is_leader("leader")


def test_no_leader_when_nobody_rejoined(group: ClassicGroup) -> None:
    group.add(member("leader"))
    assert not group.maybe_elect_new_joined_leader()


def test_removing_the_leader_hands_leadership_to_the_oldest_member(group: ClassicGroup) -> None:
    for name in ("a", "b", "c"):
        group.add(member(name))
    group.remove("a")
    assert group.leader_id == "b"


def test_offset_commit_checks(group: ClassicGroup) -> None:
    assert group.validate_offset_commit("", None, -1) == ErrorCode.none
    group.add(member("member-id", instance="instance-id"))
    group.transition_to(PREPARING)
    group.init_next_generation()
    assert group.validate_offset_commit("", None, -1) == ErrorCode.unknown_member_id
    assert group.validate_offset_commit("unknown", "unknown", -1) == \
        ErrorCode.unknown_member_id
    assert group.validate_offset_commit("member-id", "unknown", -1) == \
        ErrorCode.unknown_member_id
    assert group.validate_offset_commit("member-id", "instance-id", 0) == \
        ErrorCode.illegal_generation
    assert group.validate_offset_commit("member-id", "instance-id", 1) == \
        ErrorCode.rebalance_in_progress
    group.transition_to(STABLE)
    assert group.validate_offset_commit("member-id", "instance-id", 1) == ErrorCode.none
    group.replace_static_member("instance-id", "member-id", "new-member-id")
    assert group.validate_offset_commit("member-id", "instance-id", 1) == \
        ErrorCode.fenced_instance_id
    group.transition_to(DEAD)
    assert group.validate_offset_commit("member-id", "new-instance-id", 1) == \
        ErrorCode.coordinator_not_available


@pytest.mark.parametrize("state,expected", [
    (EMPTY, ErrorCode.none), (PREPARING, ErrorCode.non_empty_group),
    (COMPLETING, ErrorCode.non_empty_group), (STABLE, ErrorCode.non_empty_group),
    (DEAD, ErrorCode.group_id_not_found)])
def test_which_groups_may_be_deleted(group: ClassicGroup, state: GroupState,
                                     expected: ErrorCode) -> None:
    walk(group, state)
    assert group.validate_delete() == expected


def test_join_and_sync_answers_are_given_once(group: ClassicGroup, answers: Answers) -> None:
    m = member("m1")
    join: Future[JoinGroupResult] = Future()
    group.add(m, join)
    assert group.complete_join(m, JoinGroupResult(ErrorCode.none))
    assert not group.complete_join(m, JoinGroupResult(ErrorCode.none))
    assert group.num_awaiting_join() == 0
    sync: Future[SyncGroupResult] = Future()
    m.awaiting_sync = sync
    assert group.complete_sync(m, SyncGroupResult(ErrorCode.none))
    assert not group.complete_sync(m, SyncGroupResult(ErrorCode.none))
    assert [f for f, _ in answers.given] == [join, sync]
