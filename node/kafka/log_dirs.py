"""DescribeLogDirs (key 35, v1-4) and AlterReplicaLogDirs (key 34, v1-2): the broker's log
directories and the KIP-113 moves of replicas between them, through the ``BrokerView``
(``log_dirs``, ``alter_replica_log_dir``).

DescribeLogDirs (Kafka's ``ReplicaManager.describeLogDirs``): every directory of the broker with
the replicas it holds of the partitions asked (all when ``topics`` is null), each with its size,
its offset lag (0, or how far a future replica is behind the current one) and whether it is the
future replica of a move; a topic none of whose partitions was asked is left out. From v4 the
file system's total and usable bytes. An offline directory is KAFKA_STORAGE_ERROR with no
topics and sizes -1.

AlterReplicaLogDirs (Kafka's ``ReplicaManager.alterReplicaLogDirs``): per partition, the error
of ``BrokerView.alter_replica_log_dir``: LOG_DIR_NOT_FOUND for a directory the broker does not
have, KAFKA_STORAGE_ERROR for an offline one, UNKNOWN_TOPIC_OR_PARTITION for a replica the
broker does not hold; a partition named for two directories moves to the last, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage.errors import StorageError


def handle_describe_log_dirs(served: ServedDir, request: Request) -> Any:
    """The DescribeLogDirs response to ``request``."""
    asked = request.body.topics
    wanted = None if asked is None else {(t.topic, p) for t in asked for p in t.partitions}
    results = []
    for log_dir in served.view.log_dirs():
        if log_dir.offline_reason is not None:
            results.append({"error_code": ErrorCode.kafka_storage_error,
                            "log_dir": log_dir.path, "topics": [], "total_bytes": -1,
                            "usable_bytes": -1})
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        for replica in log_dir.replicas:
            if wanted is None or (replica.topic, replica.partition) in wanted:
                topics.setdefault(replica.topic, []).append({
                    "partition_index": replica.partition, "partition_size": replica.size_bytes,
                    "offset_lag": replica.offset_lag, "is_future_key": replica.is_future})
        results.append({"error_code": ErrorCode.none, "log_dir": log_dir.path,
                        "topics": [{"name": name, "partitions": partitions}
                                   for name, partitions in topics.items()],
                        "total_bytes": log_dir.total_bytes,
                        "usable_bytes": log_dir.usable_bytes})
    return build(response_class(ApiKey.DESCRIBE_LOG_DIRS, request.api_version),
                 {"throttle_time": 0, "error_code": ErrorCode.none, "results": results})


def handle_alter_replica_log_dirs(served: ServedDir, request: Request) -> Any:
    """The AlterReplicaLogDirs response to ``request``."""
    targets: dict[tuple[str, int], str] = {}
    for log_dir in request.body.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                targets[(topic.name, partition)] = log_dir.path
    results: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), path in targets.items():
        try:
            served.view.alter_replica_log_dir(topic, partition, path)
            code = ErrorCode.none
        except StorageError as err:
            code = error_code_for(err)
        results.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return build(response_class(ApiKey.ALTER_REPLICA_LOG_DIRS, request.api_version),
                 {"throttle_time": 0,
                  "results": [{"topic_name": topic, "partitions": partitions}
                              for topic, partitions in results.items()]})
