"""DescribeProducers (key 61, v0): the active producers of partitions served here, from each
log's producer state (``Log.active_producers``, Kafka's ``UnifiedLog.activeProducers``): producer
id, epoch, last sequence, last timestamp, the epoch of the coordinator that wrote its last
marker, and the first offset of its open transaction (-1 when none).

Errors (Kafka's ``KafkaApis.handleDescribeProducersRequest``): a topic name Kafka refuses is
INVALID_TOPIC_EXCEPTION and a topic no broker holds UNKNOWN_TOPIC_OR_PARTITION, for each of its
partitions; a partition another broker leads is NOT_LEADER_OR_FOLLOWER, one nobody holds
UNKNOWN_TOPIC_OR_PARTITION; an offline directory KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage import files
from storage.errors import StorageError


def handle_describe_producers(served: ServedDir, request: Request) -> Any:
    """The DescribeProducers response to ``request``."""
    topics = []
    for topic in request.body.topics:
        code, message = _topic_error(served, topic.name)
        partitions = [
            _partition(served, topic.name, p) if code == ErrorCode.none else
            {"partition_index": p, "error_code": code, "error_message": message,
             "active_producers": []}
            for p in topic.partition_indexes]
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(ApiKey.DESCRIBE_PRODUCERS, request.api_version),
                 {"throttle_time": 0, "topics": topics})


def _topic_error(served: ServedDir, name: str) -> tuple[ErrorCode, str | None]:
    try:
        files.validate_topic(name)
    except StorageError as err:
        return ErrorCode.invalid_topic_exception, str(err)
    try:
        if served.view.partition_count(name) is None:
            return ErrorCode.unknown_topic_or_partition, None
    except StorageError as err:              # the directory went offline, for one
        return error_code_for(err), str(err)
    return ErrorCode.none, None


def _partition(served: ServedDir, topic: str, partition: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"partition_index": partition, "error_code": ErrorCode.none,
                              "error_message": None, "active_producers": []}
    try:
        log = served.logdir.get_log(topic, partition)
        if log is None:
            held = served.view.leader(topic, partition) is not None
            answer["error_code"] = (ErrorCode.not_leader_or_follower if held
                                    else ErrorCode.unknown_topic_or_partition)
            return answer
        answer["active_producers"] = [
            {"producer_id": e.producer_id, "producer_epoch": e.epoch,
             "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
             "coordinator_epoch": e.coordinator_epoch,
             "current_txn_start_offset": e.current_txn_first_offset}
            for e in log.active_producers()]
    except StorageError as err:
        answer["error_code"], answer["error_message"] = error_code_for(err), str(err)
    return answer
