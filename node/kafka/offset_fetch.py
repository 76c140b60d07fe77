"""OffsetFetch (key 9, v1-9): a group's committed offsets, from its coordinator.

Version rules (Kafka's ``KafkaApis.handleOffsetFetchRequest`` and ``OffsetFetchResponse``):
v1-7 ask for one group and v8+ for several (each answered with its own error); from v2 a null
topic list asks for every committed offset of the group, and the group's error is the
response's; v1 has no such error, so a group error is put on each partition (offset -1); the
leader epoch from v5; ``require_stable`` from v7 (UNSTABLE_OFFSET_COMMIT while a transactional
commit is pending); v9's member id and epoch are not used by a classic group. A partition
without a committed offset is offset -1 and metadata "".
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.messages import NO_LEADER_EPOCH, NO_OFFSET, OffsetFetch, OffsetFetchResult
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.pending import all_of, then
from node.kafka.versions import ApiKey

GROUP_ERROR_VERSION = 2
GROUPS_VERSION = 8


def handle_offset_fetch(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The OffsetFetch response to ``request``."""
    body, version = request.body, request.api_version
    stable = bool(getattr(body, "require_stable", False))
    asked = ([(g.group_id, g.topics) for g in body.groups] if version >= GROUPS_VERSION
             else [(body.group_id, body.topics)])
    futures = []
    for group_id, topics in asked:
        served.groups.ensure(group_id)
        partitions = (None if topics is None else
                      tuple((t.name, int(p)) for t in topics for p in t.partition_indexes))
        futures.append(served.groups.coordinator.fetch_offsets(
            OffsetFetch(group_id, partitions, stable)))
    cls = response_class(ApiKey.OFFSET_FETCH, version)

    def answer(results: list[OffsetFetchResult]) -> Any:
        if version >= GROUPS_VERSION:
            return build(cls, {"throttle_time": 0, "groups": [
                {"group_id": r.group_id, "error_code": r.error_code,
                 "topics": topics_of(r, version)} for r in results]})
        result = results[0]
        return build(cls, {"throttle_time": 0, "error_code": result.error_code,
                           "topics": topics_of(result, version)})

    return then(all_of(futures), answer)


def topics_of(result: OffsetFetchResult, version: int) -> list[dict[str, Any]]:
    """The response's topics of one group, in the coordinator's order."""
    group_error = (result.error_code if version < GROUP_ERROR_VERSION
                   and result.error_code != ErrorCode.none else None)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for p in result.partitions:
        if group_error is not None:
            entry = {"partition_index": p.partition, "committed_offset": NO_OFFSET,
                     "committed_leader_epoch": NO_LEADER_EPOCH, "metadata": "",
                     "error_code": group_error}
        else:
            entry = {"partition_index": p.partition, "committed_offset": p.offset,
                     "committed_leader_epoch": p.leader_epoch, "metadata": p.metadata,
                     "error_code": p.error_code}
        by_topic.setdefault(p.topic, []).append(entry)
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
