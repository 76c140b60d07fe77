"""FindCoordinator (key 10, v0-4): where a group's or a transactional id's coordinator is.

A transactional id (key type 1) is answered by ``txn_apis.find_transaction_coordinator``: the
broker leading the id's partition of the transaction state log. Consumer groups are not served
over the protocol yet, so a group key is answered COORDINATOR_NOT_AVAILABLE, Kafka's answer
while the partition of ``__consumer_offsets`` a coordinator lives on has no leader: clients
retry it, and a consumer
that ``assign``s its partitions and keeps its own offsets works on. The API is served at all
because librdkafka takes it as the sign of a broker that decodes LZ4 (its ``FEATURE_LZ4``
depends on FindCoordinator, a proxy for Kafka 0.8.2): without it a librdkafka producer asked for
``compression.type=lz4`` sends its batches uncompressed. A key type other than group (0) or
transaction (1) is INVALID_REQUEST, as Kafka answers. v0-3 ask for one key, v4 (KIP-699) for
several.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.txn_apis import find_transaction_coordinator
from node.kafka.versions import ApiKey

GROUP, TRANSACTION = 0, 1
BATCHED_VERSION = 4
NOT_SERVED = ("consumer groups are not served over the Kafka protocol yet: "
              "assign partitions and keep offsets in the client")


def handle_find_coordinator(served: ServedDir, request: Request) -> Any:
    """The FindCoordinator response to ``request``."""
    body, version = request.body, request.api_version
    key_type = int(getattr(body, "key_type", GROUP))
    answer: tuple[ErrorCode, str | None, int, str, int] = (
        ErrorCode.coordinator_not_available, NOT_SERVED, -1, "", -1)
    if key_type not in (GROUP, TRANSACTION):
        answer = (ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", -1,
                  "", -1)
    cls = response_class(ApiKey.FIND_COORDINATOR, version)
    keys = list(body.coordinator_keys) if version >= BATCHED_VERSION else [body.key]
    answers = [find_transaction_coordinator(served, key) if key_type == TRANSACTION else answer
               for key in keys]
    if version >= BATCHED_VERSION:
        return build(cls, {"throttle_time": 0, "coordinators": [
            {"key": key, "node_id": node, "host": host, "port": port, "error_code": code,
             "error_message": message}
            for key, (code, message, node, host, port) in zip(keys, answers)]})
    code, message, node, host, port = answers[0]
    return build(cls, {"throttle_time": 0, "error_code": code, "error_message": message,
                       "node_id": node, "host": host, "port": port})
