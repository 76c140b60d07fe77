"""``ClusterTransactions``: the ``node.kafka.transactions.TransactionService`` of a cluster's
brokers. Every broker forwards the transaction APIs to the cluster's one
``TransactionCoordinator`` on the coordinator actor (the coordinator of ``Cluster.
begin_transaction`` and the Spark sinks too); FindCoordinator names the broker leading the
transactional id's partition of the state log (``__strata_transactions``, created at the first
question), as Kafka names the leader of its ``__transaction_state`` partition, though any broker
would serve the id alike.

Calls are made from the broker's request threads (never from one of the node actor's
concurrency groups, so none waits for a group it holds). A coordinator actor that is down or
restarting is COORDINATOR_NOT_AVAILABLE, which Kafka's clients retry after finding the
coordinator again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cluster.errors import ActorUnavailableError
from cluster.handles import Handle
from cluster.transactions.txn_state import TxnKind, TxnMetadata, UnknownTransactionError
from node.kafka.transactions import CoordinatorNotAvailableError, TxnDescription

CALL_TIMEOUT_S = 30.0
END_TIMEOUT_S = 120.0     # an end writes and flushes every marker first


class ClusterTransactions:
    """Thread-safe (it holds no state of its own); ``node_of_dir(log_dir)`` gives the node id of
    a directory's broker (None when unknown)."""

    def __init__(self, coordinator: Handle, node_of_dir: Callable[[str], int | None],
                 call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._coordinator = coordinator
        self._node_of_dir = node_of_dir
        self._timeout = call_timeout_s

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        try:
            return self._coordinator.call(method, *args, timeout=timeout or self._timeout)
        except ActorUnavailableError as err:
            raise CoordinatorNotAvailableError(
                f"the transaction coordinator is not available: {err}") from None

    def coordinator(self, transactional_id: str) -> int:
        log_dir = self._call("kafka_txn_coordinator_dir", transactional_id)
        node_id = self._node_of_dir(log_dir)
        if node_id is None:
            raise CoordinatorNotAvailableError(
                f"the state log partition of {transactional_id} is in {log_dir}, which is no "
                "broker's", transactional_id=transactional_id, log_dir=log_dir)
        return node_id

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                         producer_epoch: int) -> tuple[int, int]:
        pid, epoch = self._call("kafka_init_producer_id", transactional_id, timeout_ms,
                                producer_id, producer_epoch, timeout=END_TIMEOUT_S)
        return int(pid), int(epoch)

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[tuple[str, int]]) -> None:
        self._call("kafka_add_txn_partitions", transactional_id, producer_id, producer_epoch,
                   list(partitions))

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool) -> None:
        self._call("kafka_end_txn", transactional_id, producer_id, producer_epoch, commit,
                   timeout=END_TIMEOUT_S)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               topic: str, partition: int) -> bool:
        return bool(self._call("kafka_verify_txn", transactional_id, producer_id,
                               producer_epoch, topic, partition))

    def describe(self, transactional_ids: Sequence[str]) -> list[TxnDescription | None]:
        found: list[TxnDescription | None] = []
        for tid in transactional_ids:
            try:
                found.append(describe(self._call("describe_transaction", tid)))
            except UnknownTransactionError:
                found.append(None)
        return found

    def list_transactions(self) -> list[TxnDescription]:
        return [describe(meta) for meta in self._call("list_transactions")]


def describe(meta: TxnMetadata) -> TxnDescription:
    """``meta`` as the transaction APIs report it; a Strata transaction names its first member
    as its producer (it has one per task attempt) and the epoch it began with."""
    if meta.kind == TxnKind.KAFKA:
        producer_id = meta.producer_id
    else:
        producer_id = min(meta.members, default=-1)
    partitions = sorted({tp for parts in meta.members.values() for tp in parts})
    return TxnDescription(meta.transactional_id, meta.state.value, producer_id, meta.epoch,
                          meta.timeout_ms, meta.start_ms, tuple(partitions))
