"""FindCoordinator (key 10, v0-4): where a group's or a transactional id's coordinator is.

A group's coordinator is the broker leading partition ``partition_for(group_id)`` of
``__consumer_offsets`` (Kafka's ``KafkaApis.getCoordinator``). The topic is created on first
need, as Kafka's ``AutoTopicCreationManager`` creates it: ``offsets.topic.num.partitions``
partitions, ``cleanup.policy=compact``, ``segment.bytes=offsets.topic.segment.bytes``, through
the ``BrokerView`` (in a cluster, placed over every directory). Kafka creates it asynchronously
and answers COORDINATOR_NOT_AVAILABLE meanwhile; here the creation is done before the answer,
so the first request already names the coordinator. COORDINATOR_NOT_AVAILABLE while the topic
cannot be created, or the partition has no leader, or its leader is no live broker. When this
broker is the coordinator, its partition is loaded before the answer (``ServedGroups.ensure``).

A transactional id (key type 1) is answered by ``txn_apis.find_transaction_coordinator``: the
broker leading the id's partition of the transaction state log. A key type other than 0 or 1 is
INVALID_REQUEST, as Kafka answers. v0-3 ask for one key, v4 (KIP-699) for several.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.offsets_topic import create_offsets_topic
from node.kafka.txn_apis import find_transaction_coordinator
from node.kafka.versions import ApiKey

GROUP, TRANSACTION = 0, 1
BATCHED_VERSION = 4


@dataclass(frozen=True, slots=True)
class Coordinator:
    """One key's answer: ``node_id``/``host``/``port`` when ``error_code`` is NONE."""

    error_code: ErrorCode
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


def handle_find_coordinator(served: ServedDir, request: Request) -> Any:
    """The FindCoordinator response to ``request``; may create ``__consumer_offsets``."""
    body, version = request.body, request.api_version
    key_type = int(getattr(body, "key_type", GROUP))
    keys = list(body.coordinator_keys) if version >= BATCHED_VERSION else [body.key]
    found = [find(served, key_type, key) for key in keys]
    cls = response_class(ApiKey.FIND_COORDINATOR, version)
    if version >= BATCHED_VERSION:
        return build(cls, {"throttle_time": 0, "coordinators": [
            {"key": key, "node_id": c.node_id, "host": c.host, "port": c.port,
             "error_code": c.error_code, "error_message": c.message}
            for key, c in zip(keys, found)]})
    c = found[0]
    return build(cls, {"throttle_time": 0, "error_code": c.error_code,
                       "error_message": c.message, "node_id": c.node_id, "host": c.host,
                       "port": c.port})


def find(served: ServedDir, key_type: int, key: str) -> Coordinator:
    """The coordinator of ``key`` of ``key_type``."""
    if key_type == GROUP:
        return group_coordinator(served, key)
    if key_type == TRANSACTION:
        return transaction_coordinator(served, key)
    return Coordinator(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")


def transaction_coordinator(served: ServedDir, transactional_id: str) -> Coordinator:
    """The coordinator of ``transactional_id``: the transaction state log's leader."""
    return Coordinator(*find_transaction_coordinator(served, transactional_id))


def group_coordinator(served: ServedDir, group_id: str) -> Coordinator:
    """The broker leading the ``__consumer_offsets`` partition of ``group_id``."""
    view = served.view
    partition = served.groups.partition_for(group_id)
    if view.partition_count(OFFSETS_TOPIC) is None:
        problem = create_offsets_topic(served)
        if problem is not None:
            return Coordinator(ErrorCode.coordinator_not_available, problem)
    leader = view.leader(OFFSETS_TOPIC, partition)
    endpoint = next((b for b in view.brokers() if b.node_id == leader), None)
    if leader is None or endpoint is None:
        return Coordinator(ErrorCode.coordinator_not_available,
                           f"{OFFSETS_TOPIC}-{partition} (group {group_id!r}) has no leader")
    if leader == view.node_id:
        served.groups.ensure(group_id)
    return Coordinator(ErrorCode.none, None, endpoint.node_id, endpoint.host, endpoint.port)
