"""ListOffsets (key 2, v1-7): an offset per partition for a timestamp query.

``ReplicaManager.fetchOffsetForTimestamp``: -2 (earliest) is the log start offset; -1 (latest)
the last offset a reader may fetch, the high watermark for ``read_uncommitted`` and the last
stable offset for ``read_committed`` (v2+); -3 (max timestamp, v7) the offset and timestamp of
the record with the largest timestamp; any other timestamp the first offset whose record's
timestamp is at or after it (``Log.offset_for_timestamp``). A lookup whose offset a reader may
not fetch yet, or that finds nothing, answers offset -1 and timestamp -1. A partition not held
here is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage.errors import StorageError
from storage.log import Log

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
READ_COMMITTED_LEVEL = 1
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
                log = served.logdir.log(topic.name, part.partition_index)
                offset, timestamp = lookup(log, part.timestamp, committed)
                partitions.append({"partition_index": part.partition_index,
                                   "error_code": ErrorCode.none, "timestamp": timestamp,
                                   "offset": offset, "leader_epoch": -1})
            except StorageError as err:
                partitions.append({"partition_index": part.partition_index,
                                   "error_code": error_code_for(err), "timestamp": -1,
                                   "offset": -1, "leader_epoch": -1})
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(ApiKey.LIST_OFFSETS, request.api_version),
                 {"throttle_time": 0, "topics": topics})


def lookup(log: Log, timestamp: int, committed: bool) -> tuple[int, int]:
    """(offset, timestamp) answering ``timestamp`` for ``log`` (see the module docstring)."""
    fetchable = log.last_stable_offset if committed else log.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return fetchable, -1
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return log.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = _max_timestamp(log)
    elif timestamp < 0:
        return NOT_FOUND
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable or found[0] < log.log_start_offset:
        return NOT_FOUND
    return found


def _max_timestamp(log: Log) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp (the first to reach it)."""
    best: tuple[int, int] | None = None
    for segment in log.segments():
        timestamp = segment.max_timestamp_so_far
        if timestamp >= 0 and (best is None or timestamp > best[1]):
            best = (segment.offset_of_max_timestamp_so_far, timestamp)
    return best
