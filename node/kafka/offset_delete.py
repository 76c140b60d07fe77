"""OffsetDelete (key 47, v0): remove a group's committed offsets of some partitions (Kafka's
``KafkaApis.handleOffsetDeleteRequest``). A topic or partition the cluster does not have is
UNKNOWN_TOPIC_OR_PARTITION here; the coordinator answers the group's error
(GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...) and each partition's
(GROUP_SUBSCRIBED_TO_TOPIC while the group consumes the topic)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from node.groups.messages import OffsetDelete, OffsetDeleteResult
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.offset_commit import partition_errors, split_known
from node.kafka.pending import then
from node.kafka.versions import ApiKey


def handle_offset_delete(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The OffsetDelete response to ``request``, once the deletion is durable."""
    body, version = request.body, request.api_version
    known, unknown = split_known(served, body.topics)
    served.groups.ensure(body.group_id)
    delete = OffsetDelete(body.group_id, tuple((t, int(p.partition_index)) for t, p in known))
    cls = response_class(ApiKey.OFFSET_DELETE, version)
    order = [topic.name for topic in body.topics]

    def answer(result: OffsetDeleteResult) -> Any:
        return build(cls, {"throttle_time": 0, "error_code": result.error_code,
                           "topics": partition_errors(order, (*unknown, *result.partitions))})

    return then(served.groups.coordinator.delete_offsets(delete), answer)
