"""``OffsetRules``: the group's side of the offset requests of one partition (Kafka's
``OffsetMetadataManager`` validation and ``GroupCoordinatorShard``'s composition): who may commit
(``ClassicGroup.validate_offset_commit``; a simple commit to a missing group creates it Empty,
without a record), which offsets may be deleted (not those of a topic the group consumes), which
groups may be deleted (Empty ones), and the periodic expiry of offsets (KIP-211) that deletes an
Empty group left without any. The offsets themselves are ``OffsetManager``'s.

Runs under the partition's lock; records go to the partition's ``OperationOutput``.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from node.groups.classic_group import ClassicGroup, GroupState
from node.groups.messages import (
    GroupDeletion,
    OffsetCommit,
    OffsetCommitResult,
    OffsetDelete,
    OffsetDeleteResult,
    OffsetFetch,
    OffsetFetchResult,
    PartitionError,
)
from node.groups.partition import CoordinatorPartition

logger = logging.getLogger(__name__)


class OffsetRules:
    """The offset operations of one loaded partition (the caller holds its lock)."""

    def __init__(self, partition: CoordinatorPartition) -> None:
        self._partition = partition
        self._membership = partition.membership
        self._offsets = partition.offsets
        self._out = partition.out

    def commit(self, request: OffsetCommit) -> OffsetCommitResult:
        group = self._membership.group(request.group_id)
        if group is None:
            if request.generation_id < 0:
                group = self._membership.get_or_create(request.group_id)
            else:
                return self._commit_error(request, ErrorCode.illegal_generation)
        error = group.validate_offset_commit(request.member_id, request.group_instance_id,
                                             request.generation_id)
        if error is not ErrorCode.none:
            return self._commit_error(request, error)
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) \
                and group.has_member(request.member_id):
            # a commit keeps the member's session, as a heartbeat does
            member = group.member(request.member_id)
            self._membership.reschedule_heartbeat(group, member)
        records, answers = self._offsets.commit(request.group_id, request.offsets)
        for record in records:
            self._out.append(record)
        return OffsetCommitResult(tuple(answers))

    @staticmethod
    def _commit_error(request: OffsetCommit, error: ErrorCode) -> OffsetCommitResult:
        return OffsetCommitResult(tuple(PartitionError(o.topic, o.partition, error)
                                        for o in request.offsets))

    def fetch(self, request: OffsetFetch) -> OffsetFetchResult:
        return OffsetFetchResult(request.group_id, ErrorCode.none, tuple(
            self._offsets.fetch(request.group_id, request.partitions, request.require_stable)))

    def delete(self, request: OffsetDelete) -> OffsetDeleteResult:
        group = self._membership.group(request.group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return OffsetDeleteResult(ErrorCode.group_id_not_found)
        if not group.is_empty and not group.uses_consumer_protocol():
            return OffsetDeleteResult(ErrorCode.non_empty_group)
        answers = []
        deletable = []
        for topic, partition in request.partitions:
            if group.is_subscribed_to_topic(topic):
                answers.append(PartitionError(topic, partition,
                                              ErrorCode.group_subscribed_to_topic))
            else:
                answers.append(PartitionError(topic, partition, ErrorCode.none))
                deletable.append((topic, partition))
        for record in self._offsets.delete(request.group_id, deletable):
            self._out.append(record)
        return OffsetDeleteResult(ErrorCode.none, tuple(answers))

    def delete_group(self, group_id: str) -> GroupDeletion:
        group = self._membership.group(group_id)
        if group is None:
            return GroupDeletion(group_id, ErrorCode.group_id_not_found)
        error = group.validate_delete()
        if error is not ErrorCode.none:
            return GroupDeletion(group_id, error)
        for record in self._offsets.delete_all(group_id):
            self._out.append(record)
        self._membership.tombstone(group_id)
        return GroupDeletion(group_id, ErrorCode.none)

    def expire(self) -> None:
        """Kafka's ``cleanupGroupMetadata``: expire each group's offsets; an Empty group left
        without any is deleted (its tombstone written)."""
        for group_id, group in list(self._membership.groups.items()):
            if self._expire_group(group) and group.is_empty:
                self._membership.tombstone(group_id)

    def _expire_group(self, group: ClassicGroup) -> bool:
        """True when the group has no offsets left (or never had any)."""
        base = _expiration_base(group)
        if base is None:
            return not self._offsets.has_offsets(group.group_id)
        records, all_expired = self._offsets.expire(group.group_id, base,
                                                    group.is_subscribed_to_topic)
        for record in records:
            self._out.append(record)
        return all_expired


def _expiration_base(group: ClassicGroup) -> str | int | None:
    """What an offset's age counts from (KIP-211): the time the group became Empty (an int;
    the commit time when the record had none), the commit time ("commit"), or None: the
    group's offsets do not expire now."""
    if group.protocol_type is None:
        return "commit"                 # standalone consumers
    if group.is_empty:
        timestamp = group.current_state_timestamp_ms
        return "commit" if timestamp is None else timestamp
    if group.uses_consumer_protocol() and group.subscribed_topics is not None \
            and group.is_in(GroupState.STABLE):
        return "commit"
    return None

