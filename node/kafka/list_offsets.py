"""ListOffsets (key 2, v1-7): an offset per partition for a timestamp query, answered by
``Log.fetch_offset_by_timestamp`` (Kafka's ``Partition.fetchOffsetForTimestamp``): -2 (earliest)
is the log start offset; -1 (latest) the last offset a reader may fetch, the high watermark for
``read_uncommitted`` and the last stable offset for ``read_committed`` (v2+); -3 (max timestamp,
v7) the first record with the largest timestamp; any other time the first record whose
timestamp is at or after it. A lookup whose offset a reader may not fetch yet, or that finds
nothing, answers offset -1 and timestamp -1. A partition not held here is
UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER when another broker of the cluster holds
it (``ServedDir.leading``). An offset found carries the leader epoch it was written in (v4+),
the one epoch of ``leader_epoch.LEADER_EPOCH``, as Kafka's epoch cache gives it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.leader_epoch import LEADER_EPOCH, UNDEFINED_EPOCH
from node.kafka.versions import ApiKey
from storage.config import READ_COMMITTED, READ_UNCOMMITTED
from storage.errors import StorageError
from storage.log import Log

EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
READ_COMMITTED_LEVEL = 1                 # the request's isolation_level for read_committed
NOT_FOUND = (-1, -1)


def handle_list_offsets(served: ServedDir, request: Request) -> Any:
    """The ListOffsets response to ``request``."""
    body = request.body
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED_LEVEL
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            try:
                with served.leading(topic.name, part.partition_index) as log:
                    offset, timestamp = lookup(log, part.timestamp, committed)
                partitions.append({"partition_index": part.partition_index,
                                   "error_code": ErrorCode.none, "timestamp": timestamp,
                                   "offset": offset, "leader_epoch": UNDEFINED_EPOCH
                                   if offset == -1 else LEADER_EPOCH})
            except StorageError as err:
                partitions.append({"partition_index": part.partition_index,
                                   "error_code": error_code_for(err), "timestamp": -1,
                                   "offset": -1, "leader_epoch": -1})
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(ApiKey.LIST_OFFSETS, request.api_version),
                 {"throttle_time": 0, "topics": topics})


def lookup(log: Log, timestamp: int, committed: bool) -> tuple[int, int]:
    """(offset, timestamp) answering ``timestamp`` for ``log`` (``Log.fetch_offset_by_timestamp``;
    -4, the earliest local offset, is the earliest without tiered storage; other negative
    queries find nothing)."""
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        timestamp = EARLIEST_TIMESTAMP
    elif timestamp < MAX_TIMESTAMP:
        return NOT_FOUND
    found = log.fetch_offset_by_timestamp(timestamp,
                                          READ_COMMITTED if committed else READ_UNCOMMITTED)
    return NOT_FOUND if found is None else found
