"""OffsetForLeaderEpoch (key 23, v2-4): the end offset of a leader epoch, which consumers ask for
to check their position after a leader change (KIP-320: librdkafka, kafka-python 3).

A partition here has one leader, for ever: its leader epoch is ``LEADER_EPOCH`` (0), which
Metadata reports, and which began at the log start offset. Kafka's ``LeaderEpochFileCache``
holding that single entry answers ``endOffsetFor(requested, logEndOffset)`` (``end_offset_for``):

* requested -1 (undefined): epoch -1, offset -1;
* requested 0, the latest epoch: epoch 0, the log end offset (a consumer at or below it is not
  truncated);
* requested above 0 (no epoch that late is known): epoch -1, offset -1;
* requested below -1 (before every known epoch): that epoch, the log start offset.

Per partition first (Kafka's ``ReplicaManager``/``Partition.lastOffsetForLeaderEpoch``): a
partition another broker leads is NOT_LEADER_OR_FOLLOWER, one no broker holds
UNKNOWN_TOPIC_OR_PARTITION, one in an offline directory KAFKA_STORAGE_ERROR; then a
``current_leader_epoch`` (-1 skips the check) below ours is FENCED_LEADER_EPOCH, above ours
UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage.errors import StorageError

LEADER_EPOCH = 0               # the epoch of every partition's one leader
UNDEFINED_EPOCH = -1           # Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An epoch and the offset it ends at (Kafka's ``OffsetAndEpoch``)."""

    leader_epoch: int
    end_offset: int


def end_offset_for(requested: int, log_start_offset: int, log_end_offset: int
                   ) -> EpochEndOffset:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor`` over the one entry (``LEADER_EPOCH``,
    starting at ``log_start_offset``)."""
    if requested == UNDEFINED_EPOCH or requested > LEADER_EPOCH:
        return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    if requested == LEADER_EPOCH:
        return EpochEndOffset(LEADER_EPOCH, log_end_offset)
    return EpochEndOffset(requested, log_start_offset)


def handle_offset_for_leader_epoch(served: ServedDir, request: Request) -> Any:
    """The OffsetForLeaderEpoch response to ``request``."""
    topics = []
    for topic in request.body.topics:
        partitions = []
        for part in topic.partitions:
            answer = {"partition": part.partition, "error_code": ErrorCode.none,
                      "leader_epoch": UNDEFINED_EPOCH, "end_offset": UNDEFINED_EPOCH_OFFSET}
            answer.update(_end_offset(served, topic.topic, part.partition,
                                      part.current_leader_epoch, part.leader_epoch))
            partitions.append(answer)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return build(response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version),
                 {"throttle_time": 0, "topics": topics})


def _end_offset(served: ServedDir, topic: str, partition: int, current: int, requested: int
                ) -> dict[str, Any]:
    try:
        log = served.logdir.get_log(topic, partition)
        if log is None:
            held = served.view.leader(topic, partition) is not None
            return {"error_code": ErrorCode.not_leader_or_follower if held
                    else ErrorCode.unknown_topic_or_partition}
        if current != UNDEFINED_EPOCH and current < LEADER_EPOCH:
            return {"error_code": ErrorCode.fenced_leader_epoch}
        if current > LEADER_EPOCH:
            return {"error_code": ErrorCode.unknown_leader_epoch}
        found = end_offset_for(requested, log.log_start_offset, log.log_end_offset)
    except StorageError as err:
        return {"error_code": error_code_for(err)}
    return {"leader_epoch": found.leader_epoch, "end_offset": found.end_offset}
