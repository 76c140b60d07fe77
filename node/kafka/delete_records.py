"""DeleteRecords (key 21, v0-2): move a partition's log start offset forward.

Per partition (Kafka's ``ReplicaManager.deleteRecords``, here ``node.partition_ops``): offset -1
means the high watermark; an offset above the high watermark or below -1 is OFFSET_OUT_OF_RANGE;
a topic whose ``cleanup.policy`` lacks delete is POLICY_VIOLATION; a partition not held here is
UNKNOWN_TOPIC_OR_PARTITION. The answer's low watermark is the new log start offset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node import partition_ops
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage.errors import StorageError


def handle_delete_records(served: ServedDir, request: Request) -> Any:
    """The DeleteRecords response to ``request``."""
    topics = []
    for topic in request.body.topics:
        partitions = []
        for part in topic.partitions:
            try:
                low = partition_ops.delete_records(served.logdir, topic.name,
                                                   part.partition_index, part.offset)
                partitions.append({"partition_index": part.partition_index,
                                   "low_watermark": low, "error_code": ErrorCode.none})
            except StorageError as err:
                partitions.append({"partition_index": part.partition_index,
                                   "low_watermark": -1, "error_code": error_code_for(err)})
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(ApiKey.DELETE_RECORDS, request.api_version),
                 {"throttle_time": 0, "topics": topics})
