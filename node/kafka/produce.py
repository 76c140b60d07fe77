"""Produce (key 0, v3-11): append each partition's batch as the producer encoded it.

Per partition, in Kafka's order (``KafkaApis.handleProduceRequest``, ``ProduceRequest
.validateRecords``): an internal topic (``__consumer_offsets``, ``__transaction_state``) takes no
client's records but the admin's (INVALID_TOPIC_EXCEPTION, ``ReplicaManager.appendToLocalLog``:
its coordinator writes it); the partition must be held here (UNKNOWN_TOPIC_OR_PARTITION, or
NOT_LEADER_OR_FOLLOWER when another broker of the cluster holds it or it moved away,
``ServedDir.leading``; from v10 that answer names the current leader and carries its endpoint,
KIP-951, so the client goes there without a Metadata round trip); the records must be exactly
one magic-2 batch
(INVALID_RECORD) and zstd needs v7+ (UNSUPPORTED_COMPRESSION_TYPE); a producer's first
transactional batch on a partition must be in its open transaction, asked of its transaction
coordinator (INVALID_TXN_STATE otherwise, ``txn_apis.check_transactional_batch``); then
``Log.append_batch`` validates the batch (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD), checks the
producer's sequence and epoch (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
INVALID_TXN_STATE; a retry of an appended batch is answered with its original offset) and
stamps the offsets. ``acks`` other than 0, 1 and -1 is INVALID_REQUIRED_ACKS for every
partition; with one replica, -1 is answered like 1, after the append.

The answer is ``hot_codec.PartitionProduced`` values per topic, which the hot codec writes
directly (no kio entity is built for it).

With acks=0 the client expects no response; the caller sends none, and closes the connection
when a partition failed (``ProduceOutcome.failed``), the only signal Kafka gives then.

``appends_only`` says whether a request's handling waits on nothing but its appends' writes
to the page cache (the server then answers it without a hop to its request pool).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request
from node.kafka.context import ServedDir
from node.kafka.errors import UnsupportedCompressionTypeError, error_code_for
from node.kafka.hot_codec import (CURRENT_LEADER_VERSION, NodeEndpoint, PartitionProduced,
                                  ProducedTopics)
from node.kafka.internal_topics import ADMIN_CLIENT_ID, is_internal
from node.kafka.leader_epoch import LEADER_EPOCH
from node.kafka.txn_apis import check_transactional_batch
from storage.batch_layout import ATTRIBUTES_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, SIZE_OFFSET
from storage.config import DEFAULT_FLUSH_MESSAGES
from storage.errors import InvalidRecordError, StorageError

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
COMPRESSION_MASK = 0x07
ZSTD = 4
ZSTD_MIN_VERSION = 7
VALID_ACKS = (-1, 0, 1)


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    """The response's topics, whether any partition failed, the request's ``acks``, and the
    endpoints of the leaders its NOT_LEADER_OR_FOLLOWER answers name (KIP-951, v10+)."""

    topics: ProducedTopics
    failed: bool
    acks: int
    node_endpoints: tuple[NodeEndpoint, ...] = ()


def check_single_batch(records: bytes | None, version: int, where: str) -> None:
    """Kafka's ``ProduceRequest.validateRecords``: exactly one magic-2 batch, zstd only from
    v7. Bytes that are not a whole batch are left to ``Log.append_batch`` (CORRUPT_MESSAGE)."""
    data = records or b""
    if len(data) < LOG_OVERHEAD:
        raise InvalidRecordError(
            f"produce to {where}: version {version} requests must carry one record batch per "
            f"partition, found {len(data)} bytes", partition=where, size=len(data))
    size = LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(data, SIZE_OFFSET)[0]
    if len(data) > MAGIC_OFFSET and data[MAGIC_OFFSET] != 2:
        raise InvalidRecordError(
            f"produce to {where}: version {version} requests may only carry magic 2 batches, "
            f"found magic {data[MAGIC_OFFSET]}", partition=where, magic=data[MAGIC_OFFSET])
    if len(data) >= ATTRIBUTES_OFFSET + _ATTRIBUTES.size:
        codec = _ATTRIBUTES.unpack_from(data, ATTRIBUTES_OFFSET)[0] & COMPRESSION_MASK
        if codec == ZSTD and version < ZSTD_MIN_VERSION:
            raise UnsupportedCompressionTypeError(
                f"produce to {where}: zstd needs produce version {ZSTD_MIN_VERSION}, the "
                f"request is version {version}", partition=where, version=version,
                compression="zstd")
    if LOG_OVERHEAD <= size < len(data):
        raise InvalidRecordError(
            f"produce to {where}: version {version} requests must carry exactly one record "
            f"batch per partition, found more bytes after the first batch", partition=where)


def appends_only(served: ServedDir, request: Request) -> bool:
    """Whether ``handle_produce`` of ``request`` waits on nothing but its appends' writes:
    no transaction to ask its coordinator about, every partition held by this directory (an
    answer naming another leader may ask the cluster), and none whose topic flushes every
    ``flush.messages`` records (an fsync inside the append). A request this cannot judge
    (a partition name no partition can have, the directory offline) is not."""
    body = request.body
    if body.transactional_id is not None:
        return False
    logdir = served.logdir
    try:
        for topic in body.topic_data:
            for data in topic.partition_data:
                log = logdir.get_log(topic.name, data.index)
                if log is None or log.config.flush_messages != DEFAULT_FLUSH_MESSAGES:
                    return False
    except StorageError:   # a bad name, an offline directory: handle_produce answers it
        return False
    return True


def handle_produce(served: ServedDir, request: Request) -> ProduceOutcome:
    """Append every partition's batch of ``request`` and build the response."""
    body, version = request.body, request.api_version
    acks = int(body.acks)
    internal_allowed = request.client_id == ADMIN_CLIENT_ID
    failed = False
    topics: ProducedTopics = []
    leaders: set[int] = set()     # the brokers a NOT_LEADER_OR_FOLLOWER answer names (KIP-951)
    for topic in body.topic_data:
        partitions: list[PartitionProduced] = []
        for data in topic.partition_data:
            where = f"{topic.name}-{data.index}"
            try:
                if acks not in VALID_ACKS:
                    partitions.append(_error(data.index, ErrorCode.invalid_required_acks,
                                             f"acks={acks} is not -1, 0 or 1"))
                    failed = True
                    continue
                if is_internal(topic.name) and not internal_allowed:
                    partitions.append(_error(data.index, ErrorCode.invalid_topic_exception,
                                             f"Cannot append to internal topic {topic.name}"))
                    failed = True
                    continue
                with served.leading(topic.name, data.index) as log:
                    check_single_batch(data.records, version, where)
                    check_transactional_batch(served, body.transactional_id, log, topic.name,
                                              data.index, data.records)
                    served.signal.watch(log)
                    info = log.append_batch(data.records)
                partitions.append(PartitionProduced(
                    data.index, ErrorCode.none, info.first_offset, info.log_append_time,
                    info.log_start_offset))
            except StorageError as err:
                failed = True
                code = error_code_for(err)
                leader = None
                if code == ErrorCode.not_leader_or_follower and version >= CURRENT_LEADER_VERSION:
                    leader = _current_leader(served, topic.name, data.index, leaders)
                partitions.append(_error(data.index, code, str(err), leader))
        topics.append((topic.name, partitions))
    endpoints = tuple((b.node_id, b.host, b.port, b.rack) for b in served.view.brokers()
                      if b.node_id in leaders) if leaders else ()
    return ProduceOutcome(topics, failed, acks, endpoints)


def _current_leader(served: ServedDir, topic: str, partition: int,
                    leaders: set[int]) -> tuple[int, int]:
    """KIP-951: the leader a NOT_LEADER_OR_FOLLOWER answer names (its node id, added to
    ``leaders`` so the response carries its endpoint, and its epoch, always 0 here), or
    (-1, -1) when no broker holds the partition now, as Kafka's ``getCurrentLeader`` answers."""
    leader = served.view.leader(topic, partition)
    if leader is None:
        return -1, -1
    leaders.add(leader)
    return leader, LEADER_EPOCH


def _error(index: int, code: ErrorCode, message: str,
           current_leader: tuple[int, int] | None = None) -> PartitionProduced:
    return PartitionProduced(index, code, -1, -1, -1, message, current_leader=current_leader)
