"""Metadata (key 3, v0-12): brokers, cluster id, controller, and every requested topic's
partitions with their leader (``BrokerView``).

Kafka's rules (``KafkaApis.handleTopicMetadataRequest``): from v1 a null topic list means every
topic and an empty list none (v0: empty means every topic). A requested topic that does not
exist is created when the request allows it (v4+ ``allow_auto_topic_creation``, always before)
and ``auto.create.topics.enable`` is on; it is created synchronously and answered at once with
NONE (also when another client created it meanwhile). Otherwise UNKNOWN_TOPIC_OR_PARTITION, or
INVALID_TOPIC_EXCEPTION for a name Kafka refuses. ``__consumer_offsets`` is created with the
group coordinator's settings (``offsets_topic``), as Kafka's ``AutoTopicCreationManager`` does. A partition no broker holds is
LEADER_NOT_AVAILABLE. A led partition reports the leader epoch of its one leader,
``leader_epoch.LEADER_EPOCH`` (v7+), which clients then check their positions against with
OffsetForLeaderEpoch (KIP-320); topic ids are the zero UUID (v10+); a topic asked for by id alone
is UNKNOWN_TOPIC_ID. ``__consumer_offsets`` and ``__transaction_state`` are reported internal.

DescribeCluster (key 60, v0-1) answers the same brokers, cluster id and controller; a request
for the controllers' endpoints (v1 ``endpoint_type`` 2) is UNSUPPORTED_ENDPOINT_TYPE, as a
broker answers it.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import TopicAlreadyExistsError
from node.kafka.internal_topics import is_internal
from node.kafka.offsets_topic import create_offsets_topic
from node.kafka.leader_epoch import LEADER_EPOCH, UNDEFINED_EPOCH
from node.kafka.versions import ApiKey
from storage.errors import InvalidTopicError

ZERO_UUID = uuid.UUID(int=0)


def handle_metadata(served: ServedDir, request: Request) -> Any:
    """The Metadata response to ``request``; may create topics (see the module docstring)."""
    body, version = request.body, request.api_version
    view = served.view
    known = view.topics()
    allow_create = (getattr(body, "allow_auto_topic_creation", True)
                    and served.config.auto_create_topics_enable)
    if body.topics is None or (version == 0 and not body.topics):
        wanted: list[tuple[str | None, Any]] = [(name, None) for name in sorted(known)]
    else:
        wanted = list({(t.name, getattr(t, "topic_id", None)): None for t in body.topics})
    topics = []
    for name, topic_id in wanted:
        if name is None:
            topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None,
                           "topic_id": topic_id or ZERO_UUID, "partitions": []})
            continue
        error = ErrorCode.none
        if name not in known and (count := view.partition_count(name)) is not None:
            known[name] = count                      # created since the view's last look
        if name not in known:
            error = ErrorCode.unknown_topic_or_partition
            if allow_create:
                try:
                    if name == OFFSETS_TOPIC:    # with the coordinator's settings
                        problem = create_offsets_topic(served)
                        known = view.topics()
                        error = (ErrorCode.none if problem is None and name in known
                                 else ErrorCode.leader_not_available)
                    else:
                        view.create_topic(name, served.config.num_partitions)
                        known[name] = served.config.num_partitions
                        error = ErrorCode.none
                except TopicAlreadyExistsError:      # another client's, just now
                    known = view.topics()
                    error = ErrorCode.none if name in known else error
                except InvalidTopicError:
                    error = ErrorCode.invalid_topic_exception
        partitions = []
        for index in range(known.get(name, 0) if error == ErrorCode.none else 0):
            leader = view.leader(name, index)
            replicas = [] if leader is None else [leader]
            partitions.append({
                "error_code": ErrorCode.none if leader is not None
                else ErrorCode.leader_not_available,
                "partition_index": index, "leader_id": -1 if leader is None else leader,
                "leader_epoch": UNDEFINED_EPOCH if leader is None else LEADER_EPOCH,
                "replica_nodes": replicas, "isr_nodes": replicas,
                "offline_replicas": []})
        topics.append({"error_code": error, "name": name, "topic_id": ZERO_UUID,
                       "is_internal": is_internal(name), "partitions": partitions})
    return build(response_class(ApiKey.METADATA, version), {
        "throttle_time": 0,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in view.brokers()],
        "cluster_id": view.cluster_id,
        "controller_id": view.controller_id(),
        "topics": topics,
    })


BROKER_ENDPOINTS = 1


def handle_describe_cluster(served: ServedDir, request: Request) -> Any:
    """The DescribeCluster response to ``request``."""
    view = served.view
    endpoint_type = getattr(request.body, "endpoint_type", BROKER_ENDPOINTS)
    values: dict[str, Any] = {"throttle_time": 0, "endpoint_type": endpoint_type,
                              "cluster_id": view.cluster_id, "brokers": []}
    if endpoint_type != BROKER_ENDPOINTS:
        values.update(error_code=ErrorCode.unsupported_endpoint_type,
                      error_message=f"endpoint type {endpoint_type} is not served by a broker")
    else:
        values.update(error_code=ErrorCode.none, controller_id=view.controller_id(),
                      brokers=[{"broker_id": b.node_id, "host": b.host, "port": b.port,
                                "rack": b.rack} for b in view.brokers()])
    return build(response_class(ApiKey.DESCRIBE_CLUSTER, request.api_version), values)
