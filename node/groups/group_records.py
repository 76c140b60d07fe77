"""A classic group to and from its GroupMetadata record (Kafka's
``GroupCoordinatorRecordHelpers.newGroupMetadataRecord`` / ``newEmptyGroupMetadataRecord`` and
``GroupMetadataManager.replay``). The byte formats are ``node.groups.records``'."""

from __future__ import annotations

from node.groups.classic_group import ClassicGroup, Complete, GroupState
from node.groups.member import ClassicGroupMember
from node.groups.records import (
    NO_REBALANCE_TIMEOUT,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    group_metadata_record,
)
from storage.clock import Clock


def group_value(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
    """The group as Kafka stores it: every member with its subscription for the chosen
    protocol and its assignment from ``assignment`` (every member must have one)."""
    members = []
    for member in group.members:
        if group.protocol_name is None:
            raise ValueError(f"group {group.group_id}: members but no protocol to write")
        members.append(MemberMetadata(
            member_id=member.member_id, group_instance_id=member.group_instance_id,
            client_id=member.client_id, client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            session_timeout_ms=member.session_timeout_ms,
            subscription=member.metadata(group.protocol_name),
            assignment=assignment[member.member_id]))
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=group.protocol_name, leader=group.leader_id,
        current_state_timestamp_ms=group.current_state_timestamp_ms, members=tuple(members))


def group_record(group: ClassicGroup, assignment: dict[str, bytes], *,
                 empty: bool = False) -> CoordinatorRecord:
    """The group's record; ``empty``: the memberless record of a group JoinGroup just created
    (protocol type "", generation 0, no protocol nor leader)."""
    if empty:
        value = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                                   current_state_timestamp_ms=group.current_state_timestamp_ms)
    else:
        value = group_value(group, assignment)
    return group_metadata_record(GroupMetadataKey(group.group_id), value)


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return group_metadata_record(GroupMetadataKey(group_id), None)


def group_from_record(group_id: str, value: GroupMetadataValue, clock: Clock,
                      complete: Complete) -> ClassicGroup:
    """The group a record describes: Stable with its members, or Empty without."""
    group = ClassicGroup(
        group_id, clock, complete,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation, protocol_type=value.protocol_type or None,
        protocol_name=value.protocol, leader_id=value.leader,
        current_state_timestamp_ms=value.current_state_timestamp_ms)
    for stored in value.members:
        rebalance_timeout = (stored.session_timeout_ms
                             if stored.rebalance_timeout_ms == NO_REBALANCE_TIMEOUT
                             else stored.rebalance_timeout_ms)
        group.add(ClassicGroupMember(
            stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
            rebalance_timeout, stored.session_timeout_ms, value.protocol_type,
            ((value.protocol or "", stored.subscription),), stored.assignment))
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
