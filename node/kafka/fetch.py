"""Fetch (key 1, v4-12), sessionless: stored batch bytes of each requested partition, as they
are on disk.

Per partition (``ReplicaManager.readFromLog``, ``LocalLog.read``): NOT_LEADER_OR_FOLLOWER when
another broker of the cluster holds it (``ServedDir.leading``); OFFSET_OUT_OF_RANGE when the
fetch offset is below the log start or above the log end; else whole batches from the one
holding the fetch offset, up to the high watermark (``read_uncommitted``) or the last stable
offset (``read_committed``), each partition at most ``partition_max_bytes`` and the response at
most ``min(max_bytes, fetch.max.bytes)``, partitions in request order. KIP-74: the first batch
of the first partition that returns data is returned whole even when it exceeds both limits;
after it the limits are strict. ``read_committed`` answers carry the aborted transactions
overlapping the data (``Log.collect_aborted_transactions``); ``read_uncommitted`` ones carry
none (null). Every requested partition is in the response, with or without data (a full
response).

Sessions (KIP-227) are not kept: every answer has session id 0 ("no session"), which every
client takes as "send full fetches"; an incremental fetch (a non-zero session id with epoch > 0)
gets FETCH_SESSION_ID_NOT_FOUND. ``read_partitions`` is one pass; the long poll around it is
the server's (``apis``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage.errors import OffsetOutOfRangeError, StorageError
from storage.log import Log
from storage.record_reader import scan_batches

READ_COMMITTED_LEVEL = 1
FINAL_EPOCH = -1                    # session epoch of a sessionless full fetch
INITIAL_EPOCH = 0                   # session epoch of a full fetch asking for a session


@dataclass(frozen=True, slots=True)
class FetchRead:
    """One pass over a fetch's partitions: the response's ``topics``, the record bytes
    gathered, and whether a partition answered with an error."""

    topics: list[dict[str, Any]]
    size: int
    has_error: bool


def session_error(request: Request) -> ErrorCode | None:
    """FETCH_SESSION_ID_NOT_FOUND for an incremental fetch (no session is ever created)."""
    if getattr(request.body, "session_epoch", FINAL_EPOCH) in (FINAL_EPOCH, INITIAL_EPOCH):
        return None     # before v7 every fetch is sessionless
    return ErrorCode.fetch_session_id_not_found


def read_partitions(served: ServedDir, request: Request) -> FetchRead:
    """Read every partition of ``request`` once (see the module docstring)."""
    body = request.body
    committed = body.isolation_level == READ_COMMITTED_LEVEL
    remaining = max(0, min(body.max_bytes, served.config.fetch_max_bytes))
    min_one = True
    total, has_error = 0, False
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            try:
                with served.leading(topic.topic, part.partition) as log:
                    served.signal.watch(log)
                    answer, size = _read_partition(log, part.partition, part.fetch_offset,
                                                   min(part.partition_max_bytes, remaining),
                                                   min_one, committed)
            except StorageError as err:
                has_error = True
                answer, size = _error(part.partition, error_code_for(err)), 0
            if size:
                min_one = False
                total += size
                remaining = max(0, remaining - size)
            partitions.append(answer)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return FetchRead(topics, total, has_error)


def fetch_response(request: Request, read: FetchRead | None,
                   error: ErrorCode = ErrorCode.none) -> Any:
    """The Fetch response carrying ``read`` (none for a top-level ``error``)."""
    return build(response_class(ApiKey.FETCH, request.api_version), {
        "throttle_time": 0, "error_code": error, "session_id": 0,
        "responses": [] if read is None else read.topics,
    })


def _read_partition(log: Log, partition: int, fetch_offset: int, limit: int, min_one: bool,
                    committed: bool) -> tuple[dict[str, Any], int]:
    high_watermark = log.high_watermark
    stable = log.last_stable_offset
    start, end = log.log_start_offset, log.log_end_offset
    if fetch_offset < start or fetch_offset > end:
        raise OffsetOutOfRangeError(
            f"{log.name}: fetch offset {fetch_offset} is outside [{start}, {end}]",
            partition=log.name, offset=fetch_offset, log_start_offset=start, log_end_offset=end)
    upper = stable if committed else high_watermark
    data, next_offset = read_batches(log, fetch_offset, upper, limit, min_one)
    aborted = None
    if committed:
        aborted = ([] if not data else
                   [{"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                    for txn in log.collect_aborted_transactions(fetch_offset, next_offset)])
    return {"partition_index": partition, "error_code": ErrorCode.none,
            "high_watermark": high_watermark, "last_stable_offset": stable,
            "log_start_offset": start, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": data}, len(data)


def read_batches(log: Log, offset: int, upper: int, limit: int,
                 min_one: bool) -> tuple[bytes, int]:
    """Whole batches of ``log`` from the one holding ``offset``, below ``upper``, at most
    ``limit`` bytes (the first batch whatever its size when ``min_one``), across segments.
    Returns the bytes and the offset after the last batch returned. The batches of each read
    are found by the numba scan of their headers (``scan_batches``), not one by one."""
    pieces: list[bytes | memoryview] = []
    size = 0
    if limit <= 0 and not min_one:
        return b"", offset
    while offset < upper:
        fetched = log.read_raw(offset, max(limit - size, 1), min_one_message=True)
        if fetched is None or not fetched.data:
            break
        scan = scan_batches(fetched.data)
        found = len(scan)
        # the batches below ``upper`` (offsets grow) whose bytes, with those taken, fit ``limit``
        below = int(np.searchsorted(scan.base_offsets, upper, side="left"))
        fits = int(np.searchsorted(np.cumsum(scan.sizes) + size, limit, side="right"))
        taken = min(below, fits)
        if taken == 0 and min_one and not pieces and below:
            taken = 1
        if taken:
            end = int(scan.positions[taken - 1] + scan.sizes[taken - 1])
            data = fetched.data
            pieces.append(data if end == len(data) else memoryview(data)[:end])
            size += end
            offset = int(scan.last_offsets[taken - 1]) + 1
        if taken < found or taken == 0 or size >= limit:
            break
    if len(pieces) == 1 and isinstance(pieces[0], bytes):
        return pieces[0], offset          # one whole read: its bytes as they are
    return b"".join(pieces), offset


def _error(partition: int, code: ErrorCode) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}
