"""``ClassicGroup``: a consumer group of the classic protocol (Kafka's ``ClassicGroup``): its
members, its state machine, its generation, protocol and leader, the members still to (re)join
or to sync, and its static members (KIP-345).

States and the transitions Kafka allows (to <- from)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any state

A transition Kafka does not allow raises ``IllegalGroupTransition`` (a bug, never a client's
doing). The group never completes a future itself: it hands (future, answer) to the
``complete`` callable it was given, which the coordinator runs once the operation's records are
durable.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from concurrent.futures import Future
from typing import Any, Callable

from kio.schema.errors import ErrorCode

from node.groups.member import EMPTY_ASSIGNMENT, ClassicGroupMember, Protocols
from node.groups.messages import JoinGroupMember, JoinGroupResult, SyncGroupResult
from node.groups.subscription import (
    CONSUMER_PROTOCOL_TYPE,
    SubscriptionFormatError,
    subscribed_topics,
)
from storage.clock import Clock

NO_LEADER = ""
NOW = object()      # a new group's state timestamp: the clock's time at creation
Complete = Callable[[Future[Any], Any], None]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


def answer_alike(replaced: Future[Any], parked: Future[Any]) -> None:
    """A retried JoinGroup or SyncGroup takes the place of the one parked before it (Kafka then
    forgets the first); the first gets the same answer as its retry, so no caller waits on a
    future nobody completes."""
    parked.add_done_callback(
        lambda done: replaced.done() or replaced.set_result(done.result()))


class IllegalGroupTransition(RuntimeError):
    """The coordinator asked a group for a transition Kafka's state machine forbids."""

    def __init__(self, group_id: str, current: str, target: str) -> None:
        super().__init__(group_id, current, target)
        self.group_id, self.current, self.target = group_id, current, target

    def __str__(self) -> str:
        return f"group {self.group_id}: no transition from {self.current} to {self.target}"


class ClassicGroup:
    """One classic group. Not thread-safe: the lock of its ``__consumer_offsets`` partition
    guards it. Members are kept in the order they joined (the leader falls to the oldest)."""

    def __init__(self, group_id: str, clock: Clock, complete: Complete, *,
                 state: GroupState = GroupState.EMPTY, generation_id: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None,
                 current_state_timestamp_ms: int | None | object = NOW) -> None:
        """A new group (its state's timestamp is now), or a loaded one with the timestamp of
        its record (None: the record had none)."""
        self.group_id = group_id
        self._clock = clock
        self._complete = complete
        self.state = state
        self.previous_state = GroupState.DEAD
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.current_state_timestamp_ms: int | None = (
            clock.milliseconds() if current_state_timestamp_ms is NOW
            else current_state_timestamp_ms)  # type: ignore[assignment]
        self._members: dict[str, ClassicGroupMember] = {}
        self._static_members: dict[str, str] = {}       # instance id -> member id
        self._pending_join: set[str] = set()
        self._pending_sync: set[str] = set()
        self._awaiting_join_count = 0
        self._supported_protocols: Counter[str] = Counter()
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False

    # ---- state -------------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupTransition(self.group_id, str(self.state), str(target))
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp_ms = self._clock.milliseconds()

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    # ---- members -----------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self._members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self._members[member_id]

    @property
    def members(self) -> list[ClassicGroupMember]:
        return list(self._members.values())

    @property
    def member_ids(self) -> list[str]:
        return list(self._members)

    def num_members(self) -> int:
        return len(self._members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self._static_members.get(group_instance_id)

    def has_static_member(self, group_instance_id: str) -> bool:
        return group_instance_id in self._static_members

    def add(self, member: ClassicGroupMember,
            future: Future[JoinGroupResult] | None = None) -> None:
        """Add a member (awaiting ``future``'s join answer if given); the first one sets the
        group's protocol type and becomes leader when there is none."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self._static_members:
                raise ValueError(f"static member {member.group_instance_id} is already a member "
                                 f"of group {self.group_id}")
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError(f"group {self.group_id} has protocol type {self.protocol_type!r}, "
                             f"member {member.member_id} {member.protocol_type!r}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names())
        member.awaiting_join = future
        if future is not None:
            self._awaiting_join_count += 1
        self._pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        """Remove a member or a pending member; the leader falls to the oldest member left."""
        removed = self._members.pop(member_id, None)
        if removed is not None:
            self._supported_protocols.subtract(removed.protocol_names())
            if removed.is_awaiting_join:
                self._awaiting_join_count -= 1
            if removed.group_instance_id is not None:
                self._static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self._members), None)
        self._pending_join.discard(member_id)
        self._pending_sync.discard(member_id)

    def update_member(self, member: ClassicGroupMember, protocols: Protocols,
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      future: Future[JoinGroupResult] | None) -> None:
        self._supported_protocols.subtract(member.protocol_names())
        member.supported_protocols = tuple(protocols)
        self._supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.is_awaiting_join:
            self._awaiting_join_count += 1
        elif future is None and member.is_awaiting_join:
            self._awaiting_join_count -= 1
        if future is not None and member.awaiting_join is not None:
            answer_alike(member.awaiting_join, future)
        member.awaiting_join = future

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> ClassicGroupMember:
        """Give the static member a new member id, keeping everything else; whoever still waits
        under the old id is fenced (FENCED_INSTANCE_ID)."""
        old = self._members.pop(old_member_id)
        self.complete_join(old, JoinGroupResult(error_code=ErrorCode.fenced_instance_id,
                                                member_id=old_member_id, leader=NO_LEADER))
        self.complete_sync(old, SyncGroupResult(error_code=ErrorCode.fenced_instance_id))
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id,
                                 old.client_host, old.rebalance_timeout_ms,
                                 old.session_timeout_ms, old.protocol_type,
                                 old.supported_protocols, old.assignment)
        self._members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self._static_members[group_instance_id] = new_member_id
        return new

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        """KIP-394/345: ``client_id-uuid4``, or ``group_instance_id-uuid4`` for a static member."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # ---- pending members (KIP-394) and members to sync -------------------------------------
    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self._pending_join

    def add_pending_member(self, member_id: str) -> None:
        if self.has_member(member_id):
            raise ValueError(f"{member_id} is already a member of group {self.group_id}")
        self._pending_join.add(member_id)

    def num_pending_join_members(self) -> int:
        return len(self._pending_join)

    def add_pending_sync_member(self, member_id: str) -> None:
        self._pending_sync.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self._pending_sync.discard(member_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self._pending_sync

    def pending_sync_members(self) -> set[str]:
        return set(self._pending_sync)

    def clear_pending_sync_members(self) -> None:
        self._pending_sync.clear()

    # ---- the join phase ----------------------------------------------------------------------
    def num_awaiting_join(self) -> int:
        return self._awaiting_join_count

    def has_all_members_joined(self) -> bool:
        return len(self._members) == self._awaiting_join_count and not self._pending_join

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self._members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout among the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else elect the first member that did; False when the
        group has no leader or no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self._members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self._members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self) -> None:
        """Bump the generation: CompletingRebalance with the voted protocol, or Empty."""
        self.generation_id += 1
        if self._members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.clear_pending_sync_members()

    def current_members_for_leader(self) -> tuple[JoinGroupMember, ...]:
        """Every member with its metadata for the chosen protocol (the leader's JoinGroup
        answer)."""
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id,
                                     m.metadata(self.protocol_name))
                     for m in self._members.values())

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self._members.values()}

    # ---- protocols ---------------------------------------------------------------------------
    def _candidate_protocols(self) -> set[str]:
        size = len(self._members)
        return {name for name, count in self._supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        """Each member votes for its first protocol that every member supports; the most votes
        win (a tie goes to the protocol voted for first)."""
        if not self._members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self._members.values())
        return max(votes, key=lambda name: votes[name])

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Whether a member offering ``protocols`` can join: in an Empty group, any non-empty
        type and set; otherwise the same type and a protocol every member supports."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        size = len(self._members)
        return (self.protocol_type == protocol_type
                and any(self._supported_protocols.get(name, 0) == size for name in protocols))

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, for a ``consumer`` group; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self._members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for member in self._members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
            return frozenset(topics)
        except (SubscriptionFormatError, ValueError):
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's rule: when the topics are unknown, a consumer group counts as subscribed."""
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    # ---- validation --------------------------------------------------------------------------
    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """NONE, UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when the instance id maps to another
        member id."""
        if group_instance_id is not None:
            existing = self._static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self._members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id: int, transactional: bool = False) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateOffsetCommit``. A ``transactional`` commit
        (TxnOffsetCommit) without member id and generation is accepted in any state (its v0-2
        carry neither), and one of a member is accepted while the group completes a rebalance."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.none
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        elif not transactional and self.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def validate_delete(self) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is GroupState.EMPTY:
            return ErrorCode.none
        return ErrorCode.non_empty_group

    # ---- answers ----------------------------------------------------------------------------
    def complete_join(self, member: ClassicGroupMember, answer: JoinGroupResult) -> bool:
        """Answer the member's parked JoinGroup; False when it has none."""
        future = member.awaiting_join
        if future is None:
            return False
        member.awaiting_join = None
        self._awaiting_join_count -= 1
        self._complete(future, answer)
        return True

    def complete_sync(self, member: ClassicGroupMember, answer: SyncGroupResult) -> bool:
        """Answer the member's parked SyncGroup; False when it has none."""
        future = member.awaiting_sync
        if future is None:
            return False
        member.awaiting_sync = None
        self._complete(future, answer)
        return True

    def reset_assignments(self) -> None:
        for member in self._members.values():
            member.assignment = EMPTY_ASSIGNMENT

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
                f"members={list(self._members)})")
