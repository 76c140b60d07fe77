"""``ClassicMembership``: the classic groups of one ``__consumer_offsets`` partition and the
protocol that moves them (the classic half of Kafka's ``GroupMetadataManager``): JoinGroup,
SyncGroup, Heartbeat and LeaveGroup, the rebalance and its timers, the replay of group records
at load, and the re-arming of heartbeats afterwards.

Timers (keys as Kafka's): ``heartbeat-<group>-<member>`` expires a member (its session timeout;
a new member's JoinGroup waits at most ``NEW_MEMBER_JOIN_TIMEOUT_MS``; a pending member's id at
most its session timeout), ``join-<group>`` ends a join phase (the initial delay
``group.initial.rebalance.delay.ms``, extended while members keep arriving up to the rebalance
timeout; later the rebalance timeout), ``sync-<group>`` removes the members that did not sync
within the rebalance timeout.

Records: a JoinGroup that creates a group writes an empty GroupMetadata record; a join phase
that leaves the group Empty writes the Empty group; the leader's SyncGroup writes every member
with its assignment before any member is answered; a static member that replaces its id in a
Stable group writes the group. Not thread-safe: called under its partition's lock only.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from kio.schema.errors import ErrorCode

from node.groups.classic_group import ClassicGroup, GroupState, answer_alike
from node.groups.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig
from node.groups.group_records import group_from_record, group_record, group_tombstone
from node.groups.member import EMPTY_ASSIGNMENT, ClassicGroupMember
from node.groups.messages import (
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    LeftMember,
    SyncGroup,
    SyncGroupResult,
)
from node.groups.operation import OperationOutput
from node.groups.records import GroupMetadataValue
from node.groups.timer import CoordinatorTimer
from storage.clock import Clock

logger = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD)


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ClassicMembership:
    """The classic groups of one partition. ``timer`` runs its operations under the
    partition's lock and drains ``out`` after each (the coordinator's partition timer)."""

    def __init__(self, config: GroupCoordinatorConfig, clock: Clock, timer: CoordinatorTimer,
                 out: OperationOutput) -> None:
        self._config = config
        self._clock = clock
        self._timer = timer
        self._out = out
        self.groups: dict[str, ClassicGroup] = {}

    # ---- groups ------------------------------------------------------------------------------
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, self._clock, self._out.complete)
            self.groups[group_id] = group
        return group

    def remove_group(self, group_id: str) -> None:
        """Forget the group (it was deleted or expired): Dead, its timers cancelled."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        group.transition_to(DEAD)
        self._timer.cancel(join_key(group_id))
        self._timer.cancel(sync_key(group_id))
        for member_id in group.member_ids:
            self._timer.cancel(heartbeat_key(group_id, member_id))

    def _write_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        self._out.append(group_record(group, assignment))

    # ---- JoinGroup ---------------------------------------------------------------------------
    def join(self, request: JoinGroup, future: Future[JoinGroupResult]) -> None:
        if not (self._config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self._config.group_max_session_timeout_ms):
            self._out.complete(future, JoinGroupResult(ErrorCode.invalid_session_timeout,
                                                       member_id=request.member_id))
            return
        member_id = request.member_id
        is_unknown = member_id == ""
        group = self.groups.get(request.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                self._out.complete(future, JoinGroupResult(ErrorCode.unknown_member_id,
                                                           member_id=member_id))
                return
            group = self.get_or_create(request.group_id)
        records_before = len(self._out.records)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self._out.complete(future, JoinGroupResult(ErrorCode.group_max_size_reached))
        elif is_unknown:
            self._join_new_member(request, group, future)
        else:
            self._join_existing_member(request, group, future)
        if is_new_group and len(self._out.records) == records_before:
            self._out.append(group_record(group, {}, empty=True))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self._config.group_max_size
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            return ((group.has_member(member_id) and group.member(member_id).is_awaiting_join)
                    or group.num_awaiting_join() < max_size)
        return group.has_member(member_id) or group.num_members() < max_size

    def _join_new_member(self, request: JoinGroup, group: ClassicGroup,
                         future: Future[JoinGroupResult]) -> None:
        if group.is_in(DEAD):
            self._out.complete(future, JoinGroupResult(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type,
                                        {name for name, _ in request.protocols}):
            self._out.complete(future, JoinGroupResult(ErrorCode.inconsistent_group_protocol))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if request.group_instance_id is not None:
            existing = group.static_member_id(request.group_instance_id)
            if existing is not None:
                self._update_static_member(request, group, existing, new_member_id, future)
            else:
                self._add_member(request, group, new_member_id, future)
        elif request.require_known_member_id:
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(group.group_id, new_member_id, request.session_timeout_ms)
            self._out.complete(future, JoinGroupResult(ErrorCode.member_id_required,
                                                       member_id=new_member_id))
        else:
            self._add_member(request, group, new_member_id, future)

    def _join_existing_member(self, request: JoinGroup, group: ClassicGroup,
                              future: Future[JoinGroupResult]) -> None:
        member_id = request.member_id
        if group.is_in(DEAD):
            self._out.complete(future, JoinGroupResult(ErrorCode.coordinator_not_available,
                                                       member_id=member_id))
            return
        if not group.supports_protocols(request.protocol_type,
                                        {name for name, _ in request.protocols}):
            self._out.complete(future, JoinGroupResult(ErrorCode.inconsistent_group_protocol,
                                                       member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # Kafka: a pending member cannot be static (it raises an IllegalStateException)
                self._out.complete(future, JoinGroupResult(ErrorCode.unknown_server_error,
                                                           member_id=member_id))
                return
            self._add_member(request, group, member_id, future)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            self._out.complete(future, JoinGroupResult(error, member_id=member_id))
            return
        member = group.member(member_id)
        if group.is_in(PREPARING):
            self._update_member_then_rebalance(request, group, member, future)
        elif group.is_in(COMPLETING):
            if member.matches(request.protocols):
                self._out.complete(future, self._current_join_result(
                    group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance(request, group, member, future)
        elif group.is_in(STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_then_rebalance(request, group, member, future)
            else:
                self._out.complete(future, self._current_join_result(group, member_id,
                                                                     with_members=False))
        else:
            self._out.complete(future, JoinGroupResult(ErrorCode.unknown_member_id,
                                                       member_id=member_id))

    @staticmethod
    def _current_join_result(group: ClassicGroup, member_id: str, *, with_members: bool,
                             skip_assignment: bool = False) -> JoinGroupResult:
        return JoinGroupResult(
            ErrorCode.none, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=group.leader_id or "", skip_assignment=skip_assignment, member_id=member_id,
            members=group.current_members_for_leader() if with_members else ())

    def _update_member_then_rebalance(self, request: JoinGroup, group: ClassicGroup,
                                      member: ClassicGroupMember,
                                      future: Future[JoinGroupResult]) -> None:
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _add_member(self, request: JoinGroup, group: ClassicGroup, member_id: str,
                    future: Future[JoinGroupResult]) -> None:
        member = ClassicGroupMember(member_id, request.group_instance_id, request.client_id,
                                    request.client_host, request.rebalance_timeout_ms,
                                    request.session_timeout_ms, request.protocol_type,
                                    tuple(request.protocols))
        member.is_new = True
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add(member, future)
        # a parked new member cannot heartbeat: its JoinGroup is given up after a while
        self._schedule_heartbeat(group.group_id, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(self, request: JoinGroup, group: ClassicGroup, old_member_id: str,
                              new_member_id: str, future: Future[JoinGroupResult]) -> None:
        assert request.group_instance_id is not None
        current_leader = group.leader_id or ""
        member = group.replace_static_member(request.group_instance_id, old_member_id,
                                             new_member_id)
        self._timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self._schedule_heartbeat(group.group_id, new_member_id, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # no rebalance: persist the new member id, then give the current generation
                self._write_group(group, group.group_assignment())

                def answer() -> None:
                    if request.supports_skip_assignment:
                        is_leader = group.is_leader(new_member_id)
                        group.complete_join(member, self._current_join_result(
                            group, new_member_id, with_members=is_leader,
                            skip_assignment=is_leader))
                    else:
                        result = self._current_join_result(group, new_member_id,
                                                           with_members=False)
                        group.complete_join(member, JoinGroupResult(
                            result.error_code, result.generation_id, result.protocol_type,
                            result.protocol_name, current_leader, False, new_member_id))
                self._out.on_appended(answer)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(COMPLETING):
            # the leader may already have the old id in its assignment: rebalance again
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    # ---- the join phase ----------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(PREPARING) and group.previous_state is not EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(COMPLETING):
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        initial = group.is_in(EMPTY)
        if initial:
            delay = self._config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group.group_id, delay, remaining)
        group.transition_to(PREPARING)
        logger.info("preparing to rebalance group %s with old generation %d",
                    group.group_id, group.generation_id)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule_join(group)

    def _schedule_join(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self._timer.schedule(join_key(group_id), group.rebalance_timeout_ms(),
                             lambda: self._complete_join_by_id(group_id))

    def _schedule_initial_join(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        self._timer.schedule(join_key(group_id), delay_ms,
                             lambda: self._initial_join_timeout(group_id, delay_ms, remaining_ms))

    def _initial_join_timeout(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self._config.group_initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group_id, new_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop the dynamic members that did not rejoin, then start the
        next generation (CompletingRebalance, every parked JoinGroup answered) or go Empty."""
        group_id = group.group_id
        self._timer.cancel(join_key(group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self._timer.cancel(heartbeat_key(group_id, member.member_id))
        if group.is_in(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.num_members() > 0:
            # nobody rejoined: wait another rebalance timeout for the sessions to expire
            self._schedule_join(group)
            return
        group.init_next_generation()
        if group.is_in(EMPTY):
            logger.info("group %s with generation %d is now empty", group_id, group.generation_id)
            self._write_group(group, {})
            return
        logger.info("stabilized group %s generation %d with %d members", group_id,
                    group.generation_id, group.num_members())
        for member in group.members:
            group.complete_join(member, self._current_join_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group_id, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        generation = group.generation_id
        self._timer.schedule(sync_key(group_id), group.rebalance_timeout_ms(),
                             lambda: self._expire_pending_sync(group_id, generation))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.is_in(COMPLETING, STABLE) and not group.has_received_sync_from_all_members():
            for member_id in group.pending_sync_members():
                group.remove(member_id)
                self._timer.cancel(heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.clear_pending_sync_members()
        self._timer.cancel(sync_key(group.group_id))

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        group.reset_assignments()
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in group.members:
            answer = SyncGroupResult(
                error, protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None, assignment=member.assignment)
            if group.complete_sync(member, answer):
                self._schedule_heartbeat(group.group_id, member.member_id,
                                         member.session_timeout_ms)

    # ---- heartbeats and expiry ---------------------------------------------------------------
    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Restart the member's session (an OffsetCommit keeps it, as a heartbeat does)."""
        self._schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)

    def _schedule_heartbeat(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self._timer.schedule(heartbeat_key(group_id, member_id), timeout_ms,
                             lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            if group.is_in(PREPARING) and group.has_all_members_joined():
                self._complete_join(group)
            return
        if not group.has_member(member_id):
            return
        member = group.member(member_id)
        if not member.has_satisfied_heartbeat():
            logger.info("member %s of group %s has failed, removing it", member_id, group_id)
            self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: ClassicGroup,
                                        member: ClassicGroupMember) -> None:
        group.complete_join(member, JoinGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.is_in(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    # ---- SyncGroup ---------------------------------------------------------------------------
    def sync(self, request: SyncGroup, future: Future[SyncGroupResult]) -> None:
        group = self.groups.get(request.group_id)
        if group is None or group.is_empty:
            self._out.complete(future, SyncGroupResult(ErrorCode.unknown_member_id))
            return
        error = self._validate_sync(group, request)
        if error is not ErrorCode.none:
            self._out.complete(future, SyncGroupResult(error))
        elif group.is_in(PREPARING):
            self._out.complete(future, SyncGroupResult(ErrorCode.rebalance_in_progress))
        elif group.is_in(COMPLETING):
            member = group.member(request.member_id)
            if member.awaiting_sync is not None:
                answer_alike(member.awaiting_sync, future)
            member.awaiting_sync = future
            self._remove_pending_sync_member(group, request.member_id)
            if group.is_leader(request.member_id):
                self._leader_sync(group, request)
        elif group.is_in(STABLE):
            self._remove_pending_sync_member(group, request.member_id)
            member = group.member(request.member_id)
            self._out.complete(future, SyncGroupResult(
                ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment))

    def _leader_sync(self, group: ClassicGroup, request: SyncGroup) -> None:
        assignment = dict(request.assignments)
        for member_id in group.member_ids:
            assignment.setdefault(member_id, EMPTY_ASSIGNMENT)
        assignment = {member_id: assignment[member_id] for member_id in group.member_ids}
        self._write_group(group, assignment)
        generation = request.generation_id

        def propagate() -> None:
            # a member may have joined meanwhile: only the same generation gets this assignment
            if group.is_in(COMPLETING) and group.generation_id == generation:
                for member in group.members:
                    member.assignment = assignment.get(member.member_id, EMPTY_ASSIGNMENT)
                self._propagate_assignment(group, ErrorCode.none)
                group.transition_to(STABLE)
        self._out.on_appended(propagate)

    @staticmethod
    def _validate_sync(group: ClassicGroup, request: SyncGroup) -> ErrorCode:
        if group.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
                request.protocol_name, group.protocol_name):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        if not group.is_in(COMPLETING, STABLE) or group.has_received_sync_from_all_members():
            self._timer.cancel(sync_key(group.group_id))

    # ---- Heartbeat ---------------------------------------------------------------------------
    def heartbeat(self, request: Heartbeat) -> ErrorCode:
        group = self.groups.get(request.group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_in(EMPTY):
            return ErrorCode.unknown_member_id
        member = group.member(request.member_id)
        self._schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
        return ErrorCode.rebalance_in_progress if group.is_in(PREPARING) else ErrorCode.none

    # ---- LeaveGroup --------------------------------------------------------------------------
    def leave(self, request: LeaveGroup) -> LeaveGroupResult:
        group = self.groups.get(request.group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.none, tuple(
                LeftMember(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                for m in request.members))
        if group.is_in(DEAD):
            return LeaveGroupResult(ErrorCode.coordinator_not_available)
        answers: list[LeftMember] = []
        for leaving in request.members:
            error = ErrorCode.none
            if leaving.member_id == "":
                instance = leaving.group_instance_id
                member_id = group.static_member_id(instance) if instance is not None else None
                if member_id is not None:
                    self._remove_current_member(group, member_id)
                else:
                    error = ErrorCode.unknown_member_id
            elif group.is_pending_member(leaving.member_id):
                group.remove(leaving.member_id)
                self._timer.cancel(heartbeat_key(group.group_id, leaving.member_id))
            else:
                error = group.validate_member(leaving.member_id, leaving.group_instance_id)
                if error is ErrorCode.none:
                    self._remove_current_member(group, leaving.member_id)
            answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, error))
        if any(a.error_code is ErrorCode.none for a in answers):
            if group.is_in(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(PREPARING):
                self._maybe_complete_join_phase(group)
        return LeaveGroupResult(ErrorCode.none, tuple(answers))

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.member(member_id)
        self._timer.cancel(heartbeat_key(group.group_id, member_id))
        group.complete_join(member, JoinGroupResult(ErrorCode.unknown_member_id))
        group.remove(member_id)

    # ---- load and unload ---------------------------------------------------------------------
    def replay(self, group_id: str, value: GroupMetadataValue | None) -> None:
        """Apply one GroupMetadata record read back from the partition (None: a tombstone)."""
        if value is None:
            self.groups.pop(group_id, None)
            return
        self.groups[group_id] = group_from_record(group_id, value, self._clock, self._out.complete)

    def on_loaded(self) -> None:
        """Re-arm every loaded member's heartbeat (members that do not come back within their
        session timeout are removed) and rebalance groups above ``group.max.size``."""
        for group in self.groups.values():
            for member in group.members:
                self._schedule_heartbeat(group.group_id, member.member_id,
                                         member.session_timeout_ms)
            if group.num_members() > self._config.group_max_size:
                self._prepare_rebalance(group)

    def on_unloaded(self) -> None:
        """The partition went away: every group Dead, its parked answers NOT_COORDINATOR, its
        timers cancelled."""
        for group in list(self.groups.values()):
            group.transition_to(DEAD)
            for member in group.members:
                # Kafka answers the joins of a rebalancing group and the syncs of the others;
                # a join parked behind its record (a static member's new id) is answered too
                group.complete_join(member, JoinGroupResult(ErrorCode.not_coordinator,
                                                            member_id=member.member_id))
                group.complete_sync(member, SyncGroupResult(ErrorCode.not_coordinator))
                self._timer.cancel(heartbeat_key(group.group_id, member.member_id))
            self._timer.cancel(join_key(group.group_id))
            self._timer.cancel(sync_key(group.group_id))
        self.groups.clear()

    # ---- deletion ----------------------------------------------------------------------------
    def tombstone(self, group_id: str) -> None:
        """Write the group's tombstone and forget it."""
        self._out.append(group_tombstone(group_id))
        self.remove_group(group_id)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
