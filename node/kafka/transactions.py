"""The broker's door to a transaction coordinator (KIP-98): ``TransactionService``, the narrow
interface the transaction APIs call, its errors and the values it answers.

A broker does not hold transactions itself. In a cluster the service is the cluster's one
``TransactionCoordinator`` (``cluster.transactions``, on the coordinator actor: the same
coordinator that ``Cluster.begin_transaction`` and the Spark sinks use), reached through the
cluster's ``BrokerView.transactions()``; every broker forwards the APIs to it. A directory served
on its own (``LogDirBrokerView``, no cluster) has no service: ``node`` may not import the cluster's
coordinator (``tests/test_layers.py``), and a second implementation of the state machine over
the directory's logs would be a second coordinator to keep in step with the first. Its
transaction APIs answer COORDINATOR_NOT_AVAILABLE, Kafka's answer while no coordinator is
reachable, so a transactional client waits and never writes a transaction nobody could end.

Errors: each is Kafka's error of the same name; the coordinator raises them (or subclasses of
them) and the handlers turn them into codes (``node.kafka.errors.error_code_for``). They pickle
(``StorageError``). Nothing here loads the protocol's schemas: the coordinator's process imports
this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from storage.errors import InvalidTxnStateError, StorageError

__all__ = [
    "ConcurrentTransactionsError",
    "CoordinatorNotAvailableError",
    "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError",
    "ProducerFencedError",
    "TransactionService",
    "TransactionStateError",
    "TxnDescription",
]


class ProducerFencedError(StorageError):
    """The producer epoch given for a transactional id is not its current one: another producer
    with the same id initialized since, or the coordinator aborted its transaction after
    ``transaction.timeout.ms`` (Kafka's PRODUCER_FENCED). Fatal for the client, unlike
    ``ConcurrentTransactionsError``."""


class TransactionStateError(InvalidTxnStateError):
    """An operation the transaction's state does not allow: committing one that was aborted,
    ending one that has no partitions, a transactional batch produced to a partition not in its
    producer's transaction (Kafka's INVALID_TXN_STATE). Unlike its parent, raised by the
    transaction coordinator (or the produce's check with it), not by a log's producer state."""


class ConcurrentTransactionsError(StorageError):
    """The transaction is ending (its markers are being written) or was just aborted to fence
    its producer; the client retries (Kafka's CONCURRENT_TRANSACTIONS, retriable)."""


class InvalidProducerIdMappingError(StorageError):
    """The producer id is not the one the coordinator gave the transactional id, or the id has
    no transaction at all (Kafka's INVALID_PRODUCER_ID_MAPPING)."""


class InvalidTransactionTimeoutError(StorageError):
    """A transaction timeout not in 1..``transaction.max.timeout.ms`` (Kafka's
    INVALID_TRANSACTION_TIMEOUT)."""


class CoordinatorNotAvailableError(StorageError):
    """No transaction coordinator can be reached from this broker (a directory served without a
    cluster, or the coordinator's state log partition has no leader now): Kafka's
    COORDINATOR_NOT_AVAILABLE, retriable."""


@dataclass(frozen=True)
class TxnDescription:
    """One transactional id as DescribeTransactions and ListTransactions report it. ``state``
    is Kafka's state name (``Empty``, ``Ongoing``, ``PrepareCommit``, ...)."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: tuple[tuple[str, int], ...] = ()


class TransactionService(Protocol):
    """A transaction coordinator as a broker reaches it. Thread-safe: the server calls it from
    its request threads. Every method raises the errors of this module (others become their
    ``error_code_for`` code)."""

    def coordinator(self, transactional_id: str) -> int:
        """The node id of the broker that is ``transactional_id``'s coordinator (the leader of
        its partition of the transaction state log, which is created when it does not exist,
        as Kafka does); ``CoordinatorNotAvailableError`` when it has no live leader."""
        ...

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                         producer_epoch: int) -> tuple[int, int]:
        """InitProducerId with a transactional id: its (producer id, epoch); ``producer_id``
        and ``producer_epoch`` are the ones a v3+ client already has (-1 when none)."""
        ...

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[tuple[str, int]]) -> None:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition):
        durable when it returns; then the producer may write transactional batches there."""
        ...

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool) -> None:
        """EndTxn: the markers are written when it returns."""
        ...

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` is part of the open transaction of
        ``transactional_id`` with that producer id and epoch (a produce's check before the
        producer's first transactional batch on a partition)."""
        ...

    def describe(self, transactional_ids: Sequence[str]) -> list[TxnDescription | None]:
        """Each id's transaction, None for an id the coordinator does not know."""
        ...

    def list_transactions(self) -> list[TxnDescription]:
        """Every transactional id the coordinator knows."""
        ...
