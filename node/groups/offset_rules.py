"""``OffsetRules``: the group's side of the offset requests of one partition (the checks of
Kafka's ``OffsetMetadataManager`` and the composition of ``GroupCoordinatorShard``): who may
commit (``ClassicGroup.validate_offset_commit``; a simple commit to a missing group creates it
Empty, without a record), which offsets may be deleted (not those of a topic the group
consumes), which groups may be deleted (Empty ones), and the periodic expiry of offsets
(KIP-211) that deletes an Empty group left without any. The offsets themselves are
``OffsetManager``'s.

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
    TxnOffsetCommit,
)
from node.groups.membership import ClassicMembership
from node.groups.offsets import OffsetExpirationCondition, OffsetManager, expiration_condition
from node.groups.operation import OperationOutput
from node.groups.records import CoordinatorRecord

logger = logging.getLogger(__name__)


class OffsetRules:
    """The offset operations of one loaded partition (the caller holds its lock)."""

    def __init__(self, membership: ClassicMembership, offsets: OffsetManager,
                 out: OperationOutput) -> None:
        self._membership = membership
        self._offsets = offsets
        self._out = out

    def _write(self, records: list[CoordinatorRecord]) -> None:
        for record in records:
            self._out.append(record)

    def commit(self, request: OffsetCommit) -> OffsetCommitResult:
        """Kafka's ``commitOffset``: the group's checks, then the offsets. A member's commit
        to a Stable or rebalancing group keeps its session, as a heartbeat does."""
        group = self._membership.group(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                # OffsetCommit before v9 answers a missing group so (v9: GROUP_ID_NOT_FOUND)
                return _commit_error(request, ErrorCode.illegal_generation)
            group = self._membership.get_or_create(request.group_id)
        error = group.validate_offset_commit(request.member_id, request.group_instance_id,
                                             request.generation_id)
        if error is not ErrorCode.none:
            return _commit_error(request, error)
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) \
                and group.has_member(request.member_id):
            self._membership.reschedule_heartbeat(group, group.member(request.member_id))
        result, records = self._offsets.commit(request)
        self._write(records)
        return result

    def commit_transactional(self, request: TxnOffsetCommit) -> OffsetCommitResult:
        """Kafka's ``commitTransactionalOffset``: the group's checks
        (``validateTransactionalOffsetCommit``: a missing group is created Empty for a commit
        without generation, else ILLEGAL_GENERATION; a member's generation and instance id
        checked as for OffsetCommit, in any group state), then the offsets, pending in the
        producer's transaction until its marker. Keeps no member's session alive."""
        commit = request.commit
        group = self._membership.group(commit.group_id)
        if group is None:
            if commit.generation_id >= 0:
                return _commit_error(commit, ErrorCode.illegal_generation)
            group = self._membership.get_or_create(commit.group_id)
        error = group.validate_offset_commit(commit.member_id, commit.group_instance_id,
                                             commit.generation_id, transactional=True)
        if error is not ErrorCode.none:
            return _commit_error(commit, error)
        result, records = self._offsets.commit_transactional(
            request.producer_id, request.producer_epoch, commit)
        self._write(records)
        return result

    def fetch(self, request: OffsetFetch) -> OffsetFetchResult:
        return self._offsets.fetch(request)

    def delete(self, request: OffsetDelete) -> OffsetDeleteResult:
        """Kafka's ``deleteOffsets``: a group that is not Empty must use the consumer
        protocol (NON_EMPTY_GROUP); offsets of the topics it consumes are kept."""
        group = self._membership.group(request.group_id)
        if group is None:
            return OffsetDeleteResult(ErrorCode.group_id_not_found)
        if not group.is_empty and not group.uses_consumer_protocol():
            return OffsetDeleteResult(ErrorCode.non_empty_group)
        subscribed = frozenset(topic for topic, _ in request.partitions
                               if group.is_subscribed_to_topic(topic))
        result, records = self._offsets.delete(request, subscribed)
        self._write(records)
        return result

    def delete_group(self, group_id: str) -> GroupDeletion:
        """DeleteGroups for one group: Empty only; its offsets and its record tombstoned."""
        group = self._membership.group(group_id)
        if group is None:
            return GroupDeletion(group_id, ErrorCode.group_id_not_found)
        error = group.validate_delete()
        if error is not ErrorCode.none:
            return GroupDeletion(group_id, error)
        self._write(self._offsets.delete_group(group_id))
        self._membership.tombstone(group_id)
        return GroupDeletion(group_id, ErrorCode.none)

    def expire(self) -> None:
        """Kafka's ``cleanupGroupMetadata``: expire each group's offsets; an Empty group left
        without any (and without an open transaction) is deleted, its tombstone written."""
        for group_id, group in list(self._membership.groups.items()):
            self._write(self._offsets.expire(group_id, _condition(group)))
            if not self._offsets.has_offsets(group_id) and group.is_empty:
                logger.info("group %s has no offsets left: deleting it", group_id)
                self._membership.tombstone(group_id)


def _condition(group: ClassicGroup) -> OffsetExpirationCondition | None:
    return expiration_condition(group.protocol_type, str(group.state),
                                group.current_state_timestamp_ms, group.subscribed_topics)


def _commit_error(request: OffsetCommit, error: ErrorCode) -> OffsetCommitResult:
    return OffsetCommitResult(tuple(PartitionError(o.topic, o.partition, error)
                                    for o in request.offsets))
