"""The client side of transactions: ``TxnHandle`` (one transaction) and ``TxnProducer`` (one
member of it).

    txn = c.begin_transaction("orders-load", timeout_ms=60_000)
    txn.produce("orders", 0, records)            # its own member (producer id)
    worker = txn.new_producer()                  # another member, e.g. in another process:
    worker.produce("orders", 1, records)         #   TxnHandle.attach(c, txn.info).new_producer()
    txn.commit()                                 # or txn.commit([worker.producer_id]), txn.abort()

Contract:

* Until the commit, nothing of the transaction is visible to ``read_committed`` readers
  (``Cluster.consume(..., isolation="read_committed")``, Spark's reader); the partitions it wrote
  have their last stable offset held at its first offset. After ``commit`` every committed
  member's records are visible, whole, at their offsets; after ``abort`` none ever is.
* ``commit(producer_ids)`` commits exactly those members and aborts every other one in the same
  durable decision (a Spark job commits the task attempts that succeeded). ``sink_batch`` makes a
  streaming sink's micro-batch id part of the decision: a batch id not above the last one
  committed under this transactional id is a replay, and everything is aborted
  (``TxnOutcome.replayed_batch``).
* A member registers each partition with the coordinator before its first append there; a
  member appending after the end is refused by the log (``InvalidProducerEpochError``), one
  registering after it by the coordinator (``TransactionStateError``).
* A transaction left open longer than its timeout (``transaction.timeout.ms``, default 60 s) is
  aborted by the coordinator, and its owner's later calls fail with ``ProducerFencedError``; so a
  client that dies never holds a partition's last stable offset for longer than the timeout.
  ``begin_transaction`` of an id whose transaction is open aborts that one (fencing its owner).
* A commit or abort interrupted by a coordinator crash is completed by the next coordinator;
  calling it again returns the same outcome.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cluster.transactions.coordinator import TxnInfo, TxnOutcome
from cluster.transactions.txn_state import DATA_EPOCH
from storage.records import Record, build_batch

if TYPE_CHECKING:
    from cluster.client.data_path import ProduceResult
    from cluster.handles import Handle

PRODUCER_ID_BITS = 62
REGISTER_LOOKAHEAD_BYTES = 8 << 20


def new_producer_id() -> int:
    """A producer id for one member: random, so that members of every transaction and every
    process differ without asking anyone (62 bits: a collision is not a practical concern)."""
    return secrets.randbits(PRODUCER_ID_BITS)


class TxnCluster(Protocol):
    """What a transaction's handle needs of its cluster: the coordinator actor, and the data
    path of its members (``cluster.client.client.Cluster`` is one)."""

    @property
    def coordinator(self) -> Handle: ...

    def batch_limit(self, topic: str) -> int: ...

    def produce_batches(self, items: Iterable[tuple[str, int, bytes]]) -> ProduceResult: ...


class TxnHandle:
    """One transaction of the cluster (picklable as its ``info``; see ``attach``)."""

    def __init__(self, cluster: TxnCluster, info: TxnInfo) -> None:
        self.cluster = cluster
        self.info = info
        self._own: TxnProducer | None = None

    @classmethod
    def attach(cls, cluster: TxnCluster, info: TxnInfo) -> TxnHandle:
        """The transaction ``info`` from another process (a Spark task)."""
        return cls(cluster, info)

    @property
    def transactional_id(self) -> str:
        return self.info.transactional_id

    @property
    def epoch(self) -> int:
        return self.info.epoch

    def new_producer(self, producer_id: int | None = None) -> TxnProducer:
        """A new member of this transaction."""
        return TxnProducer(self, new_producer_id() if producer_id is None else producer_id)

    def add_partitions(self, producer_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """Register ``partitions`` for member ``producer_id`` (durable when it returns)."""
        self.cluster.coordinator.call("add_txn_partitions", self.transactional_id, self.epoch,
                                       producer_id, list(partitions), timeout=120)

    def produce(self, topic: str, partition: int, records: Iterable[Record]) -> ProduceResult:
        """Append ``records`` as this handle's own member."""
        if self._own is None:
            self._own = self.new_producer()
        return self._own.produce(topic, partition, records)

    def commit(self, producer_ids: Sequence[int] | None = None, *,
               sink_batch: int | None = None) -> TxnOutcome:
        ids = None if producer_ids is None else list(producer_ids)
        return self.cluster.coordinator.call("end_transaction", self.transactional_id,
                                              self.epoch, True, ids, sink_batch, timeout=300)

    def abort(self) -> TxnOutcome:
        return self.cluster.coordinator.call("end_transaction", self.transactional_id,
                                              self.epoch, False, None, None, timeout=300)

    def __enter__(self) -> TxnHandle:
        return self

    def __exit__(self, kind: Any, *exc: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


class TxnProducer:
    """One member: a producer id appending transactional batches (epoch ``DATA_EPOCH``,
    sequences from 0 per partition). Not thread-safe."""

    def __init__(self, txn: TxnHandle, producer_id: int) -> None:
        self.txn = txn
        self.producer_id = producer_id
        self._registered: set[tuple[str, int]] = set()
        self._sequences: dict[tuple[str, int], int] = {}

    def register(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Register the partitions not registered yet (one coordinator call)."""
        new = sorted(set(partitions) - self._registered)
        if new:
            self.txn.add_partitions(self.producer_id, new)
            self._registered.update(new)

    def registering(self, items: Iterable[tuple[str, int, bytes]],
                    lookahead_bytes: int = REGISTER_LOOKAHEAD_BYTES
                    ) -> Iterator[tuple[str, int, bytes]]:
        """``items`` (encoded batches), each partition registered before its first batch is
        handed on. Batches of new partitions are held until ``lookahead_bytes`` of them (or the
        end) so that their partitions are registered in one call; the order within a partition
        is kept."""
        pending: list[tuple[str, int, bytes]] = []
        size = 0
        for item in items:
            if not pending and (item[0], item[1]) in self._registered:
                yield item
                continue
            pending.append(item)
            size += len(item[2])
            if size >= lookahead_bytes:
                self.register((t, p) for t, p, _ in pending)
                yield from pending
                pending, size = [], 0
        if pending:
            self.register((t, p) for t, p, _ in pending)
            yield from pending

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        """The base sequence of the next batch of ``count`` records to ``topic``-``partition``."""
        key = (topic, partition)
        first = self._sequences.get(key, 0)
        self._sequences[key] = first + count
        return first

    def build(self, topic: str, partition: int, records: Sequence[Record]) -> bytes:
        return build_batch(records, producer_id=self.producer_id, producer_epoch=DATA_EPOCH,
                           base_sequence=self.next_sequence(topic, partition, len(records)),
                           is_transactional=True)

    def produce(self, topic: str, partition: int, records: Iterable[Record]) -> ProduceResult:
        from cluster.client.data_path import encode_batches

        self.register([(topic, partition)])
        cluster = self.txn.cluster
        batches = encode_batches(records, cluster.batch_limit(topic),
                                 build=lambda chunk: self.build(topic, partition, chunk))
        return cluster.produce_batches((topic, partition, b) for b in batches)
