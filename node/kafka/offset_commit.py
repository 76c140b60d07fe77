"""OffsetCommit (key 8, v2-9): a group's consumed positions, committed through its coordinator.

Version rules (Kafka's ``KafkaApis.handleOffsetCommitRequest`` and ``OffsetMetadataManager``):
v2-4 carry a retention time, which becomes an expire timestamp (now + retention; -1 is the
broker's default, none); the committed leader epoch from v6; ``group_instance_id`` from v7; v9 is
v8 for a classic group. A topic or partition the cluster does not have is answered
UNKNOWN_TOPIC_OR_PARTITION here, as Kafka answers from its metadata, and is not committed; the
rest go to the coordinator, which answers each partition (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, OFFSET_METADATA_TOO_LARGE, NOT_COORDINATOR, ...) once the commit is durable.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.messages import (
    NO_LEADER_EPOCH,
    CommittedOffset,
    OffsetCommit,
    OffsetCommitResult,
    PartitionError,
)
from node.kafka.codec import Request, build, millis, response_class
from node.kafka.context import ServedDir
from node.kafka.pending import done, then
from node.kafka.versions import ApiKey

DEFAULT_RETENTION_TIME = -1


def handle_offset_commit(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The OffsetCommit response to ``request``, once the commit is durable."""
    body, version = request.body, request.api_version
    retention = getattr(body, "retention_time", None)
    retention_ms = DEFAULT_RETENTION_TIME if retention is None else millis(retention)
    expire = (None if retention_ms == DEFAULT_RETENTION_TIME
              else served.groups.clock.milliseconds() + retention_ms)
    known, unknown = split_known(served, body.topics)
    offsets = [CommittedOffset(
        topic=topic, partition=int(p.partition_index), offset=int(p.committed_offset),
        leader_epoch=int(getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH)),
        metadata=p.committed_metadata, expire_timestamp_ms=expire) for topic, p in known]
    cls = response_class(ApiKey.OFFSET_COMMIT, version)
    order = [topic.name for topic in body.topics]

    def answer(result: OffsetCommitResult) -> Any:
        return build(cls, {"throttle_time": 0,
                           "topics": partition_errors(order, (*unknown, *result.partitions))})

    if not offsets:
        return done(answer(OffsetCommitResult(())))
    served.groups.ensure(body.group_id)
    commit = OffsetCommit(
        group_id=body.group_id, generation_id=int(body.generation_id_or_member_epoch),
        member_id=body.member_id, group_instance_id=getattr(body, "group_instance_id", None),
        offsets=tuple(offsets))
    return then(served.groups.coordinator.commit_offsets(commit), answer)


def split_known(served: ServedDir, topics: Iterable[Any]
                ) -> tuple[list[tuple[str, Any]], list[PartitionError]]:
    """The (topic, partition entry) pairs of ``topics`` the cluster has, and
    UNKNOWN_TOPIC_OR_PARTITION for the others (Kafka checks its metadata cache so)."""
    known: list[tuple[str, Any]] = []
    unknown: list[PartitionError] = []
    for topic in topics:
        count = served.view.partition_count(topic.name) or 0
        for p in topic.partitions:
            if 0 <= p.partition_index < count:
                known.append((topic.name, p))
            else:
                unknown.append(PartitionError(topic.name, int(p.partition_index),
                                              ErrorCode.unknown_topic_or_partition))
    return known, unknown


def partition_errors(order: Iterable[str], errors: Iterable[PartitionError]
                     ) -> list[dict[str, Any]]:
    """Per-partition errors as a response's topics: the request's topics in ``order``, then any
    other topic an error names."""
    by_topic: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for e in errors:
        by_topic.setdefault(e.topic, []).append(
            {"partition_index": e.partition, "error_code": e.error_code})
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
