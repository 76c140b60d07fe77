"""The transaction APIs (KIP-98) of a broker, answered by the cluster's transaction coordinator
through the broker's ``TransactionService`` (``node.kafka.transactions``: why a directory served
without a cluster answers COORDINATOR_NOT_AVAILABLE):

    FindCoordinator key type 1   the broker leading the id's partition of the state log
    InitProducerId (22, v0-4)    with a transactional id (without one: ``init_producer_id``)
    AddPartitionsToTxn (24, v0-3)
    AddOffsetsToTxn (25, v0-3)   the group's partition of ``__consumer_offsets``, as the
                                 group coordinator places it (``partition_for``)
    EndTxn (26, v0-3)
    DescribeTransactions (65, v0), ListTransactions (66, v0-1)

and the check of a produce of transactional data (``check_transactional_batch``): a producer's
first transactional batch on a partition (the log holds no open transaction of that producer and
epoch) is refused with INVALID_TXN_STATE unless the coordinator has the partition in the
producer's open transaction (Kafka's KIP-890 verification, asked of the coordinator).

Error codes per Kafka's ``TransactionCoordinator`` (``node.kafka.errors.error_code_for``;
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for the versions before it, ``FENCED_SINCE``);
AddPartitionsToTxn answers one code for every partition of the request, as Kafka's coordinator
does, after UNKNOWN_TOPIC_OR_PARTITION for a partition no broker holds (the others then
OPERATION_NOT_ATTEMPTED, Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest``).
"""

from __future__ import annotations

import datetime
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.kafka.codec import Request, build, millis, response_class
from node.groups.placement import partition_for
from node.kafka.errors import error_code_for
from node.kafka.context import ServedDir
from node.kafka.transactions import (
    CoordinatorNotAvailableError,
    TransactionService,
    TransactionStateError,
    TxnDescription,
)
from node.kafka.versions import ApiKey
from storage.batch_layout import ATTRIBUTES_OFFSET, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET
from storage.errors import StorageError
from storage.log import Log

TRANSACTIONAL_FLAG = 0x10
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER = struct.Struct(">qh")        # producer id, producer epoch
NOT_SERVED = ("no transaction coordinator: this broker serves one directory without a cluster; "
              "transactions need a Strata cluster")


def service(served: ServedDir) -> TransactionService:
    """The broker's transaction coordinator; ``CoordinatorNotAvailableError`` when it has none."""
    found = served.view.transactions()
    if found is None:
        raise CoordinatorNotAvailableError(NOT_SERVED)
    return found


def offsets_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``:
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``)."""
    return partition_for(group_id, partitions)


# below these versions a client does not know PRODUCER_FENCED: INVALID_PRODUCER_EPOCH instead
# (Kafka's KafkaApis, KIP-588)
FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
                ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2}


def _code(error: StorageError, request: Request) -> ErrorCode:
    """``error``'s code for ``request``'s version (``FENCED_SINCE``)."""
    code = error_code_for(error)
    if code == ErrorCode.producer_fenced and \
            request.api_version < FENCED_SINCE.get(ApiKey(request.api_key), 0):
        return ErrorCode.invalid_producer_epoch
    return code


# ---- FindCoordinator, key type 1 ----------------------------------------------------------------
def find_transaction_coordinator(served: ServedDir, transactional_id: str
                                 ) -> tuple[ErrorCode, str | None, int, str, int]:
    """FindCoordinator's answer for ``transactional_id``: (error code, message, node id, host,
    port) of the broker leading its partition of the transaction state log."""
    try:
        node_id = service(served).coordinator(transactional_id)
        for broker in served.view.brokers():
            if broker.node_id == node_id:
                return ErrorCode.none, None, node_id, broker.host, broker.port
        raise CoordinatorNotAvailableError(
            f"the coordinator of {transactional_id}, broker {node_id}, is not serving")
    except StorageError as err:
        code = error_code_for(err)
        if code == ErrorCode.unknown_server_error:
            code = ErrorCode.coordinator_not_available
        return code, str(err), -1, "", -1


# ---- InitProducerId -----------------------------------------------------------------------------
def init_transactional_producer_id(served: ServedDir, request: Request) -> Any:
    """InitProducerId with a transactional id (an empty one is INVALID_REQUEST, as Kafka)."""
    body = request.body
    cls = response_class(ApiKey.INIT_PRODUCER_ID, request.api_version)
    failed = {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1}
    if not body.transactional_id:
        return build(cls, {**failed, "error_code": ErrorCode.invalid_request})
    try:
        pid, epoch = service(served).init_producer_id(
            body.transactional_id, millis(body.transaction_timeout),
            int(getattr(body, "producer_id", -1)), int(getattr(body, "producer_epoch", -1)))
    except StorageError as err:
        return build(cls, {**failed, "error_code": _code(err, request)})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid,
                       "producer_epoch": epoch})


# ---- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ------------------------------------------------
def handle_add_partitions_to_txn(served: ServedDir, request: Request) -> Any:
    """AddPartitionsToTxn v0-3 (one transaction per request)."""
    body = request.body
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    unknown = {(t, p) for t, p in wanted if not _exists(served, t, p)}
    if unknown:
        codes = {tp: (ErrorCode.unknown_topic_or_partition if tp in unknown
                      else ErrorCode.operation_not_attempted) for tp in wanted}
    else:
        try:
            service(served).add_partitions(
                body.v3_and_below_transactional_id, int(body.v3_and_below_producer_id),
                int(body.v3_and_below_producer_epoch), wanted)
            code = ErrorCode.none
        except StorageError as err:
            code = _code(err, request)
        codes = {tp: code for tp in wanted}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in codes.items():
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "partition_error_code": code})
    return build(response_class(ApiKey.ADD_PARTITIONS_TO_TXN, request.api_version), {
        "throttle_time": 0, "results_by_topic_v3_and_below": [
            {"name": t, "results_by_partition": parts} for t, parts in topics.items()]})


def _exists(served: ServedDir, topic: str, partition: int) -> bool:
    try:
        return partition < (served.view.partition_count(topic) or 0)
    except StorageError:
        return False


def handle_add_offsets_to_txn(served: ServedDir, request: Request) -> Any:
    """AddOffsetsToTxn v0-3: the group's ``__consumer_offsets`` partition joins the
    transaction (its marker is written there at the end)."""
    body = request.body
    try:
        partition = served.groups.partition_for(body.group_id)
        service(served).add_partitions(body.transactional_id, int(body.producer_id),
                                       int(body.producer_epoch), [(OFFSETS_TOPIC, partition)])
        code = ErrorCode.none
    except StorageError as err:
        code = _code(err, request)
    return build(response_class(ApiKey.ADD_OFFSETS_TO_TXN, request.api_version),
                 {"throttle_time": 0, "error_code": code})


def handle_end_txn(served: ServedDir, request: Request) -> Any:
    """EndTxn v0-3: answered once the markers are written."""
    body = request.body
    try:
        service(served).end_transaction(body.transactional_id, int(body.producer_id),
                                        int(body.producer_epoch), bool(body.committed))
        code = ErrorCode.none
    except StorageError as err:
        code = _code(err, request)
    return build(response_class(ApiKey.END_TXN, request.api_version),
                 {"throttle_time": 0, "error_code": code})


# ---- DescribeTransactions, ListTransactions -----------------------------------------------------
def handle_describe_transactions(served: ServedDir, request: Request) -> Any:
    """DescribeTransactions v0: TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not
    know."""
    ids = list(request.body.transactional_ids)
    states: list[dict[str, Any]] = []
    try:
        found = service(served).describe(ids)
    except StorageError as err:
        found, code = [None] * len(ids), error_code_for(err)
    else:
        code = ErrorCode.transactional_id_not_found
    for tid, txn in zip(ids, found):
        if txn is None:
            states.append({"error_code": code, "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": _instant(0),
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in txn.partitions:
            topics.setdefault(topic, []).append(partition)
        states.append({"error_code": ErrorCode.none, "transactional_id": tid,
                       "transaction_state": txn.state, "transaction_timeout": txn.timeout_ms,
                       "transaction_start_time": _instant(txn.start_ms), "producer_id": txn.producer_id,
                       "producer_epoch": txn.producer_epoch,
                       "topics": [{"topic": t, "partitions": sorted(p)}
                                  for t, p in sorted(topics.items())]})
    return build(response_class(ApiKey.DESCRIBE_TRANSACTIONS, request.api_version),
                 {"throttle_time": 0, "transaction_states": states})


def _instant(ms: int) -> datetime.datetime:
    """A timestamp field in epoch milliseconds, -1 (Kafka's "none") included."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


KAFKA_STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                          "CompleteAbort", "Dead", "PrepareEpochFence"})


def handle_list_transactions(served: ServedDir, request: Request) -> Any:
    """ListTransactions v0-1: filtered by state, producer id and (v1) by running longer than
    ``duration_filter`` ms; an unknown state filter is reported back."""
    body = request.body
    states = set(body.state_filters)
    producers = {int(p) for p in body.producer_id_filters}
    duration = int(getattr(body, "duration_filter", -1))
    cls = response_class(ApiKey.LIST_TRANSACTIONS, request.api_version)
    try:
        found: list[TxnDescription] = service(served).list_transactions()
    except StorageError as err:
        return build(cls, {"throttle_time": 0, "error_code": error_code_for(err),
                           "unknown_state_filters": [], "transaction_states": []})
    now = _now_ms()
    listed = [t for t in found
              if (not states or t.state in states)
              and (not producers or t.producer_id in producers)
              and (duration < 0 or (t.start_ms >= 0 and now - t.start_ms >= duration))]
    return build(cls, {
        "throttle_time": 0, "error_code": ErrorCode.none,
        "unknown_state_filters": sorted(states - KAFKA_STATES),
        "transaction_states": [{"transactional_id": t.transactional_id,
                                "producer_id": t.producer_id, "transaction_state": t.state}
                               for t in listed]})


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- Produce ------------------------------------------------------------------------------------
def check_transactional_batch(served: ServedDir, transactional_id: str | None, log: Log,
                              topic: str, partition: int, records: bytes | None) -> None:
    """Before a produced batch is appended: a transactional batch whose producer has no open
    transaction in ``log`` at the batch's epoch must belong to a partition its coordinator added
    to the producer's open transaction; ``TransactionStateError`` (INVALID_TXN_STATE) when it
    is not, or when the request names no transactional id. Non-transactional batches and bytes
    too short to be a batch pass (the append refuses the latter)."""
    data = records or b""
    if len(data) < PRODUCER_EPOCH_OFFSET + 2:
        return
    if not _ATTRIBUTES.unpack_from(data, ATTRIBUTES_OFFSET)[0] & TRANSACTIONAL_FLAG:
        return
    pid, epoch = _PRODUCER.unpack_from(data, PRODUCER_ID_OFFSET)
    # one producer's entry, read without the log's lock (a dict lookup, not a copy of every
    # producer): the batch's own append re-checks the epoch under the lock
    entry = log.producer_state.producers.get(pid)
    if entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0:
        return
    where = f"{topic}-{partition}"
    if not transactional_id:
        raise TransactionStateError(
            f"produce to {where}: a transactional batch of producer {pid} in a request without "
            "a transactional id", producer_id=pid, partition=where)
    try:
        added = service(served).verify(transactional_id, pid, epoch, topic, partition)
    except CoordinatorNotAvailableError as err:
        raise TransactionStateError(
            f"produce to {where}: transactional batch of {transactional_id}, but {err}",
            transactional_id=transactional_id, partition=where) from None
    if not added:
        raise TransactionStateError(
            f"produce to {where}: {where} is not in the open transaction of {transactional_id} "
            f"(producer {pid}, epoch {epoch}): AddPartitionsToTxn first",
            transactional_id=transactional_id, producer_id=pid, epoch=epoch, partition=where)
