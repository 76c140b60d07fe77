"""``CoordinatorService``: the body of the coordinator actor — the ``Coordinator`` (cleaning),
the ``TopicMetadata`` (routing) and the ``TransactionCoordinator``
(``cluster.transactions.coordinator``; its state log is the internal topic
``__strata_transactions``) of one cluster, built from names only so that Ray can rerun the
constructor after a restart: it looks the node and worker actors up again, starts the control loops,
and rebuilds its tables from the directories (the transaction loop loads the state log, completes
decided transactions and aborts expired ones).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Callable

from cleaner.config import CleanerConfig
from cluster.config import BrokerConfig
from cluster.cleaning.coordinator import Coordinator
from cluster.errors import UnknownTopicError
from cluster.handles import Handle
from cluster.loop import ControlLoop
from cluster.metadata.topics import TopicInfo, TopicMetadata
from cluster.metrics.sink import MetricsSink
from cluster.metadata.placement import DirRoom
from cleaner.explain import Explanation
from cluster.status import CleanerStatus, ClusterDescription
from cluster.transactions.coordinator import TransactionCoordinator, TxnInfo, TxnOutcome
from cluster.transactions.txn_state import TxnMetadata
from cluster.transactions.txn_store import NodeMarkerWriter, NodeStateStore
from storage import files

logger = logging.getLogger(__name__)


class CoordinatorService:
    def __init__(self, description: ClusterDescription,
                 node_handle: Callable[[str, str], Handle],
                 worker_handle: Callable[[str, str], Handle],
                 metrics: MetricsSink | None = None, start_loop: bool = True) -> None:
        self.description = description
        broker = BrokerConfig.from_properties(description.properties)
        nodes = {d: node_handle(name, d) for d, name in description.node_names.items()}
        workers = [worker_handle(name, host) for name, host in description.workers]
        self._nodes = nodes
        self.coordinator = Coordinator(
            nodes, workers, broker.cleaner, metrics=metrics,
            retention_check_interval_ms=broker.log_dir.log_retention_check_interval_ms)
        self.metadata = TopicMetadata(nodes, broker.log,
                                      missing_dirs=description.missing_log_dirs)
        self._metadata_loaded = False
        self._load_lock = threading.Lock()
        self._progress: dict[str, tuple[str, int, int]] = {}
        self._txn_store = NodeStateStore(
            self.metadata, nodes, self._rooms,
            partitions=broker.transactions.transaction_state_log_num_partitions)
        self.transactions = TransactionCoordinator(
            self._txn_store, NodeMarkerWriter(nodes, self._route_or_none), broker.transactions)
        interval_s = broker.transactions.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self.txn_loop = ControlLoop("strata-transactions",
                                    lambda: self._txn_round(interval_s / 1000.0))
        if start_loop:
            self.coordinator.start()
            self.txn_loop.start()
            threading.Thread(target=self._load_quietly, name="strata-metadata-load",
                             daemon=True).start()

    def _load_quietly(self) -> None:
        try:
            self.load_metadata()
        except Exception:  # noqa: BLE001 - the next topic call loads it again
            logger.warning("loading the topic table failed; retried at the next call",
                           exc_info=True)

    def describe(self) -> ClusterDescription:
        return self.description

    def ping(self) -> bool:
        return True

    # ---- topics ------------------------------------------------------------------------------
    def _meta(self) -> TopicMetadata:
        with self._load_lock:
            if not self._metadata_loaded:
                self.metadata.refresh()
                self._metadata_loaded = True
                resume = True
            else:
                resume = False
        if resume:
            self._resume_deletions()
        return self.metadata

    def _resume_deletions(self) -> None:
        for topic in self.metadata.resume_deletions(self._progress_of("(resumed)")):
            logger.info("finished the deletion of topic %s, interrupted before", topic)

    def load_metadata(self) -> None:
        """Build the routing table now and finish the topic deletions a restart interrupted
        (the actor's constructor runs this on a thread of its own: a cluster start resumes them
        without waiting for the first topic call)."""
        self._meta()

    def _progress_of(self, name: str) -> Callable[[str, int, int], None]:
        def record(stage: str, done: int, total: int) -> None:
            self._progress[name] = (stage, done, total)
        return record

    def topic_progress(self, name: str) -> tuple[str, int, int] | None:
        """(stage, partitions done, partitions in all) of the create or delete of ``name`` in
        progress (or last finished), for the CLI's progress display; None when there was none."""
        return self._progress.get(name)

    def create_topic(self, name: str, partitions: int, config: Mapping[str, Any]) -> TopicInfo:
        meta = self._meta()
        self._progress.pop(name, None)
        return meta.create_topic(name, partitions, config, self._rooms(),
                                 on_progress=self._progress_of(name))

    def alter_topic_config(self, name: str, config: Mapping[str, Any],
                           delete: Sequence[str] = ()) -> TopicInfo:
        self._known(name)
        return self._meta().alter_topic_config(name, config, delete)

    def topic_overrides(self, name: str) -> dict[str, Any]:
        """``name``'s config overrides from the table (the nodes are asked again only when it
        does not know the topic; ``list_topics`` asks them every time)."""
        self._known(name)
        return self._meta().overrides(name)

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        self._known(name)
        return self._meta().add_partitions(name, total, self._rooms())

    def _known(self, name: str) -> None:
        """Ask the nodes again when the table does not know ``name`` (created meanwhile
        through another coordinator incarnation); an unknown topic then raises
        ``UnknownTopicError`` from the call itself."""
        meta = self._meta()
        if name not in meta.routes():
            meta.refresh()

    def delete_topic(self, name: str) -> int:
        meta = self._meta()
        self._progress.pop(name, None)
        return meta.delete_topic(name, on_progress=self._progress_of(name))

    def list_topics(self) -> list[TopicInfo]:
        meta = self._meta()
        meta.refresh()
        self._resume_deletions()
        return meta.topics()

    def routes(self, topic: str | None = None) -> dict[str, dict[int, str]]:
        meta = self._meta()
        try:
            return meta.routes(topic)
        except Exception:
            meta.refresh()
            return meta.routes(topic)

    def refresh_routes(self, topic: str | None = None) -> dict[str, dict[int, str]]:
        """``routes`` after asking every node again (a client whose node said the partition is
        not there: it moved, or the table is stale)."""
        meta = self._meta()
        meta.refresh()
        return meta.routes(topic)

    def partition_moved(self, topic: str, partition: int, log_dir: str) -> None:
        """A move finished: route ``topic``-``partition`` to ``log_dir`` from now on."""
        self._meta().set_route(topic, files.validate_partition(partition, topic), log_dir)

    def _rooms(self) -> list[DirRoom]:
        pendings = {d: h.submit("stats") for d, h in self._nodes.items()}
        rooms = []
        for log_dir, pending in pendings.items():
            try:
                s = pending.result(60)
            except Exception:  # noqa: BLE001 - a directory that cannot answer gets nothing new
                continue
            rooms.append(DirRoom(log_dir, s.disk_free_bytes, s.log_bytes, s.partitions_count,
                                 s.online and not s.closed, total_bytes=s.disk_total_bytes,
                                 file_system=s.file_system))
        return rooms

    # ---- cleaning ----------------------------------------------------------------------------
    # a partition number is checked where it would change the cleaning state of a partition:
    # True == 1 would pause or clean partition 1
    def _held(self, topic: str, partition: int) -> int:
        """``partition`` checked, and ``UnknownTopicError`` unless the cluster holds
        ``topic``-``partition``: an operator's pause, resume or trigger of a partition that does
        not exist is refused, never reported done."""
        partition = files.validate_partition(partition, topic)
        self._meta().route(topic, partition)
        return partition

    def abort_and_pause(self, topic: str, partition: int, timeout_s: float | None = None) -> bool:
        partition = self._held(topic, partition)
        self.coordinator.abort_and_pause(topic, partition, timeout_s)
        return True

    def resume(self, topic: str, partition: int) -> bool:
        partition = self._held(topic, partition)
        return self.coordinator.resume(topic, partition)

    def pause_internal(self, topic: str, partition: int, timeout_s: float | None = None,
                       reason: str = "") -> bool:
        """``abort_and_pause`` for the node's own work (truncation, deletion, a directory move,
        retention): not an operator's pause, so ``strata cleaner resume`` cannot release it.
        A ``reason`` (``move``) is reported by ``pause_reasons``."""
        partition = files.validate_partition(partition, topic)
        if reason:
            self.coordinator.pause_for(topic, partition, reason, timeout_s)
        else:
            self.coordinator.abort_and_pause(topic, partition, timeout_s, operator=False)
        return True

    def resume_internal(self, topic: str, partition: int, reason: str = "") -> bool:
        partition = files.validate_partition(partition, topic)
        if reason:
            return self.coordinator.resume_for(topic, partition, reason)
        return self.coordinator.resume(topic, partition, operator=False)

    def pause_internal_many(self, partitions: list[tuple[str, int]],
                            timeout_s: float | None = None) -> bool:
        """``pause_internal`` of every partition of ``partitions`` in one call (a node deleting
        a topic's partitions)."""
        checked = [(t, files.validate_partition(p, t)) for t, p in partitions]
        self.coordinator.pause_many(checked, timeout_s)
        return True

    def resume_internal_many(self, partitions: list[tuple[str, int]]) -> list[bool]:
        checked = [(t, files.validate_partition(p, t)) for t, p in partitions]
        return self.coordinator.resume_many(checked)

    def pause_reasons(self, topic: str, partition: int) -> dict[str, int]:
        partition = files.validate_partition(partition, topic)
        return self.coordinator.pause_reasons(topic, partition)

    def pauses(self, topic: str, partition: int) -> tuple[int, int]:
        partition = files.validate_partition(partition, topic)
        return self.coordinator.pauses(topic, partition)

    def trigger_clean(self, topic: str, partition: int) -> int:
        partition = self._held(topic, partition)
        return self.coordinator.trigger_clean(topic, partition)

    def request_clean(self, topic: str, partition: int) -> int:
        partition = self._held(topic, partition)
        return self.coordinator.request_clean(topic, partition)

    def clean_request_done(self, topic: str, partition: int, ticket: int) -> bool:
        return self.coordinator.clean_request_done(topic, partition, ticket)

    def cleans_completed(self, topic: str, partition: int) -> int:
        return self.coordinator.cleans_completed(topic, partition)

    def status(self) -> CleanerStatus:
        return self.coordinator.status()

    def explain(self, topic: str, partition: int) -> Explanation:
        return self.coordinator.explain(topic, partition)

    def reset_uncleanable(self, topic: str | None = None, partition: int = 0) -> list[str]:
        return self.coordinator.reset_uncleanable(topic, partition)

    def stop(self) -> None:
        """Stop the loops and the cleans in flight (before the nodes shut down)."""
        self.txn_loop.stop()
        self.coordinator.stop(abort_running=True)

    # ---- transactions (cluster.transactions; the client's side: cluster.client.txn_client) ---
    def _txn(self) -> TransactionCoordinator:
        """The transaction coordinator, its state log loaded (at the first call after a start,
        if the loop has not loaded it yet)."""
        if not self.transactions.loaded:
            self._meta()
            self.transactions.load()
        return self.transactions

    def _txn_round(self, interval_s: float) -> float:
        self._txn().tick()
        return interval_s

    def _route_or_none(self, topic: str, partition: int) -> str | None:
        try:
            return self._meta().route(topic, partition)
        except UnknownTopicError:
            return None

    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None,
                          tag: str = "", join: bool = False) -> TxnInfo:
        return self._txn().begin(transactional_id, timeout_ms, tag, join=join)

    def add_txn_partitions(self, transactional_id: str, epoch: int, producer_id: int,
                           partitions: Sequence[tuple[str, int]]) -> bool:
        self._txn().add_partitions(transactional_id, epoch, producer_id, partitions)
        return True

    def end_transaction(self, transactional_id: str, epoch: int, commit: bool,
                        producer_ids: Sequence[int] | None = None,
                        sink_batch: int | None = None) -> TxnOutcome:
        return self._txn().end(transactional_id, epoch, commit, producer_ids, sink_batch)

    def describe_transaction(self, transactional_id: str) -> TxnMetadata:
        return self._txn().describe(transactional_id)

    def list_transactions(self) -> list[TxnMetadata]:
        return self._txn().transactions()

    def abort_expired_transactions(self) -> list[TxnOutcome]:
        return self._txn().tick()

    # ---- a Kafka client's transactions (the brokers' door: cluster.kafka.txns) ---------------
    def kafka_txn_coordinator_dir(self, transactional_id: str) -> str:
        """The directory holding ``transactional_id``'s partition of the state log (created
        when it does not exist): its broker is the id's coordinator."""
        txn = self._txn()
        return self._txn_store.log_dir(txn.partition_of(transactional_id))

    def kafka_init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int]:
        return self._txn().init_producer_id(transactional_id, timeout_ms, producer_id,
                                            producer_epoch)

    def kafka_add_txn_partitions(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int,
                                 partitions: Sequence[tuple[str, int]]) -> bool:
        self._txn().add_kafka_partitions(transactional_id, producer_id, producer_epoch,
                                         partitions)
        return True

    def kafka_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> bool:
        self._txn().end_kafka(transactional_id, producer_id, producer_epoch, commit)
        return True

    def kafka_verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> bool:
        return self._txn().verify_kafka(transactional_id, producer_id, producer_epoch, topic,
                                        partition)


def description_dict(description: ClusterDescription) -> dict[str, Any]:
    return asdict(description)


def cleaner_config(description: ClusterDescription) -> CleanerConfig:
    return BrokerConfig.from_properties(description.properties).cleaner


def worker_specs(hosts: Sequence[str], per_host: int) -> list[tuple[str, str, int]]:
    """(name, host, cleaner id) of ``per_host`` workers on each host."""
    from cluster.naming import worker_actor_name

    specs = []
    for host in hosts:
        for i in range(per_host):
            specs.append((worker_actor_name(host, i), host, len(specs)))
    return specs
