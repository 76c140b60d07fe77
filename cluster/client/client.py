"""``Cluster``: the Python API of a running Strata cluster (used by the CLI, the Spark data
sources and the drills).

    from cluster import Cluster
    with Cluster.start(log_dirs=[d1, d2, d3], cleaners=2,
                       config={"log.cleaner.backoff.ms": 500}) as c:
        c.create_topic("orders", partitions=6, config={"cleanup.policy": "compact"})
        c.produce("orders", 0, [Record(key=b"k", value=b"v", timestamp=t)])
        list(c.consume("orders", 0, from_offset=0))

``Cluster.start`` joins the Ray cluster at ``address``, or the one running on this host, or starts
a head in this process; it deploys the actors (reusing any that run already) and returns once
every directory has loaded. ``Cluster.connect`` attaches to a running one. Leaving the ``with``
block (or ``stop()``) shuts the Strata actors down, every directory cleanly, and stops the Ray head
if this object started it in this process; ``close()`` only detaches.

``Cluster`` is the facade; its collaborators own the parts: ``cluster.client.routing`` (cached
routes, calls that follow a moved partition, moves), ``cluster.client.data_path`` (encoding,
produce, consume), ``cluster.client.client_monitoring`` (stats, worker statuses, process samples)
and ``cluster.client.txn_client`` (a transaction's handle). This module keeps starting and
attaching, the topic verbs, cleaning control and the transaction verbs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from cluster.client import client_monitoring, data_path
from cluster.runtime import attach
from cluster.client.data_path import (DEFAULT_BATCH_BYTES, DEFAULT_WINDOW, ProduceResult,
                                      TopicLayout, encode_batches)
from cluster.errors import ActorUnavailableError, UnknownLogDirError, UnknownTopicError
from cluster.handles import RayHandle, lookup
from cluster.naming import COORDINATOR_NAME, DEFAULT_NAMESPACE, abs_dir
from cluster.client.routing import Routes
from node.errors import UnknownPartitionError
from storage import files
from storage.config import READ_UNCOMMITTED
from storage.errors import StorageError
from storage.record_format import Record

if TYPE_CHECKING:   # the client's answers; kept out of its imports (``strata`` stays light)
    from cleaner.explain import Explanation
    from cluster.metadata.topics import TopicInfo
    from cluster.status import CleanerStatus, ClusterDescription
    from cluster.transactions.coordinator import TxnOutcome
    from cluster.client.txn_client import TxnHandle
    from cluster.transactions.txn_state import TxnMetadata
    from cluster.client.client_monitoring import ProcessSample
    from cluster.runtime.node_restart import NodeRestart
    from node.mover import MoveResult, MoveStatus
    from node.stats import LoadProgress, PartitionDescription

__all__ = ["Cluster", "ProduceResult", "TopicLayout", "encode_batches"]
EARLIEST_TIMESTAMP = -2     # list_offset: the log start offset (Kafka's OffsetSpec.earliest)
LATEST_TIMESTAMP = -1       # list_offset: the high watermark (Kafka's OffsetSpec.latest)
MAX_TIMESTAMP = -3          # list_offset: the record with the largest timestamp (OffsetSpec.maxTimestamp)


class Cluster:
    """A client of one running Strata cluster (one Ray namespace).

    Contract:
    * Build it with ``Cluster.start`` (deploys the actors, returns when every directory has
      loaded) or ``Cluster.connect`` (attaches; ``ClusterNotRunningError`` when nothing runs).
      ``stop`` shuts the cluster down cleanly; ``close`` only detaches this client.
    * Every call names a topic and partition; a bad name or number is refused before anything is
      sent (``storage.files.validate_*``), an unknown topic or partition is ``UnknownTopicError``.
    * Routes (partition -> directory) are cached; a node that no longer holds a partition (moved,
      re-created) answers so, and the call is routed again and retried, so nothing is appended to
      a stale copy.
    * Errors are the typed errors of the layer that raised them (storage, node, cluster), never
      Ray's wrappers; an actor that is down is ``ActorUnavailableError``.
    * An acknowledged produce is in the log, and on disk with ``flush=True``.
    """

    def __init__(self, description: ClusterDescription, *, owns_ray: bool = False) -> None:
        self.description = description
        self.namespace = description.namespace
        self._owns_ray = owns_ray
        self._coordinator = lookup(COORDINATOR_NAME, self.namespace)
        self._nodes = {d: lookup(name, self.namespace, description.node_hosts.get(d, ""))
                       for d, name in description.node_names.items()}
        self._routing = Routes(self._coordinator, self._nodes,
                               getattr(description, "missing_log_dirs", {}))
        self._batch_limits: dict[str, int] = {}       # topic -> largest batch it accepts
        self._stopped = False

    @property
    def coordinator(self) -> RayHandle:
        """The handle of the cluster's coordinator actor (its methods called by name), for the
        transaction handles of ``cluster.client.txn_client``."""
        return self._coordinator

    # ---- starting and attaching --------------------------------------------------------------
    @classmethod
    def start(cls, log_dirs: Sequence[str] | None = None, cleaners: int | None = None,
              config: Mapping[str, Any] | None = None, *, address: str | None = None,
              namespace: str = DEFAULT_NAMESPACE, dashboard_host: str = "127.0.0.1",
              include_dashboard: bool | None = False, metrics_export_port: int | None = None,
              timeout_s: float = 600.0,
              on_progress: Callable[[dict[str, LoadProgress | None]], None] | None = None,
              head_started_by_strata: bool = False,
              allow_missing_log_dirs: bool = False) -> Cluster:
        """Start (or complete) the cluster of ``namespace``; ``config`` holds Kafka broker keys
        (``log.dirs`` gives the directories when ``log_dirs`` does not; ``cleaners`` overrides
        ``log.cleaner.threads``). With ``listeners`` every directory is a Kafka broker, the
        i-th on port + i (``cluster.kafka.listeners``; ``bootstrap_servers`` names them); a
        port that cannot be bound undoes the start (``ListenerBindError``).

        Each directory carries the cluster's identity (``meta.properties``: ``cluster.id``,
        ``node.id``, ``directory.id``; and the list of every directory of the cluster). A start
        refuses, naming the directories: a directory of another cluster
        (``ForeignLogDirError``), a partition held by two directories
        (``DuplicatePartitionError``), and a known directory not given (``MissingLogDirError``)
        unless ``allow_missing_log_dirs``: then the cluster serves what it has and creates no
        partition (``MissingLogDirError``) until a start with every directory."""
        description, owns = attach.start(
            log_dirs, cleaners, config, address=address, namespace=namespace,
            dashboard_host=dashboard_host, include_dashboard=include_dashboard,
            metrics_export_port=metrics_export_port, timeout_s=timeout_s,
            on_progress=on_progress, head_started_by_strata=head_started_by_strata,
            allow_missing_log_dirs=allow_missing_log_dirs)
        return cls(description, owns_ray=owns)

    @classmethod
    def connect(cls, address: str | None = "auto",
                namespace: str = DEFAULT_NAMESPACE) -> Cluster:
        """Attach to the running cluster of ``namespace`` on the Ray cluster at ``address``
        ("auto": the one on this host, or ``RAY_ADDRESS``); ``ClusterNotRunningError`` when
        there is none."""
        return cls(attach.connect(address, namespace))

    def stop(self) -> None:
        """Shut every Strata actor down (directories closed cleanly); stop the Ray head if this
        object started it in this process."""
        if self._stopped:
            return
        self._stopped = True
        from cluster.runtime import deploy

        deploy.shutdown(self.namespace)
        if self._owns_ray:
            import ray
            ray.shutdown()

    def close(self) -> None:
        """Detach without stopping anything."""
        self._stopped = True

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- Kafka brokers -----------------------------------------------------------------------
    def kafka_brokers(self) -> dict[str, tuple[int, str, int]]:
        """Every directory's Kafka broker that serves (a cluster started with ``listeners``):
        log directory -> (node id, advertised host, port), in the order of the directories."""
        asked = {d: self._nodes[d].submit("kafka_endpoint") for d in self.description.log_dirs
                 if d in self._nodes}
        found = {}
        for log_dir, pending in asked.items():
            try:
                endpoint = pending.result(60)
            except (ActorUnavailableError, StorageError):
                continue
            if endpoint is not None:
                found[log_dir] = tuple(endpoint)
        return found

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every broker, comma-separated (Kafka clients' ``bootstrap.servers``);
        empty when the cluster serves no Kafka listener."""
        return ",".join(f"{host}:{port}" for _, host, port in self.kafka_brokers().values())

    @property
    def security_protocol(self) -> str | None:
        """What Kafka clients set as ``security.protocol`` for these brokers (the listener's
        name: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``); None without a Kafka
        listener."""
        from cluster.kafka.listeners import security_protocol

        return security_protocol(self.description.properties)

    # ---- topics ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, Any] | None = None) -> TopicInfo:
        """Create ``name`` with ``partitions`` partitions. A name or count Kafka refuses raises
        ``InvalidTopicError`` here, before any call."""
        files.validate_topic(name)
        partitions = files.validate_partition_count(partitions, name)
        info = self._coordinator.call("create_topic", name, partitions, dict(config or {}),
                                      timeout=120 + partitions / 100)   # 10,000 a second at least
        self._routing.remember(name, info.partitions)
        return info

    def delete_topic(self, name: str) -> int:
        self._routing.forget(name)
        return self._coordinator.call("delete_topic", name, timeout=3600)   # batches time out

    def topic_progress(self, name: str) -> tuple[str, int, int] | None:
        """(stage, partitions done, partitions in all) of the create or delete of ``name`` that
        is running (or ran last) on the coordinator; None if there was none."""
        return self._coordinator.call("topic_progress", name, timeout=10)

    def list_topics(self, include_internal: bool = False) -> list[TopicInfo]:
        """The topics of the cluster (``TopicInfo``: partitions, directories, overrides,
        ``internal``). Internal topics (``__strata_transactions``) only with
        ``include_internal``, as Kafka's ``Admin.listTopics`` (``ListTopicsOptions.listInternal``,
        false by default)."""
        topics = self._coordinator.call("list_topics", timeout=60)
        return topics if include_internal else [t for t in topics if not t.internal]

    def alter_topic_config(self, name: str, config: Mapping[str, Any] | None = None, *,
                           delete: Iterable[str] = ()) -> TopicInfo:
        """Set the keys of ``config`` and remove those of ``delete`` from the topic's overrides
        (Kafka's dynamic topic configs, ``kafka-configs --alter``): applied to the live logs at
        once (retention, cleaning and the next roll follow), persisted in every directory holding
        the topic, kept across restarts. An unknown key, a bad value or the deletion of a key
        that is not overridden raises ``InvalidConfigError`` naming the key; nothing changes.
        Returns the topic with its new overrides."""
        files.validate_topic(name)
        info = self._coordinator.call("alter_topic_config", name, dict(config or {}),
                                      list(delete), timeout=120)
        self._batch_limits.pop(name, None)
        return info

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow ``name`` to ``total`` partitions (Kafka's ``kafka-topics --alter --partitions``:
        the total, not the number added); the new ones are placed as a new topic's are
        (``cluster.metadata.placement``) and take the topic's overrides. ``InvalidPartitionsError``
        when ``total`` is not above the current count."""
        files.validate_topic(name)
        total = files.validate_partition_count(total, name)
        info = self._coordinator.call("add_partitions", name, total, timeout=120)
        self._routing.remember(name, info.partitions)
        return info

    def describe_topic(self, name: str | None = None) -> list[PartitionDescription]:
        """Every partition of ``name`` (of every topic when None), in topic and partition order:
        ``log_dir``, ``log_start_offset``, ``log_end_offset``, ``last_stable_offset``,
        ``size_bytes``, ``segments`` and the topic's ``config`` overrides, as the directories
        hold them now. ``UnknownTopicError`` for an unknown topic."""
        if name is None:
            dirs = sorted(self._nodes)
        else:
            files.validate_topic(name)
            dirs = sorted(set(self._routing.fetch(name).values()))
        pendings = [self._nodes[d].submit("describe_partitions", name) for d in dirs]
        found = [p for pending in pendings for p in pending.result(60)]
        return sorted(found, key=lambda p: (p.topic, p.partition))

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords: records below ``before_offset`` (-1: the high watermark) are no
        longer readable; the log start offset rises to it and the segments below go at the next
        retention check. Returns the new log start offset. ``OffsetOutOfRangeError`` for an
        offset above the log end; ``PolicyViolationError`` for a topic whose cleanup.policy does
        not include delete."""
        return self._node_of(topic, partition).call("delete_records", topic, partition,
                                                    before_offset, timeout=120)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset whose record has a timestamp >= ``timestamp_ms``, or None when no
        record is that recent (Kafka's ``offsetsForTimes``)."""
        found = self.list_offset(topic, partition, timestamp_ms)
        return None if found is None else found[0]

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation: str = "read_uncommitted") -> tuple[int, int | None] | None:
        """Kafka's ListOffsets: ``timestamp`` -2 (``EARLIEST_TIMESTAMP``) gives ``(log start,
        None)``, -1 (``LATEST_TIMESTAMP``) ``(high watermark, None)`` (the last stable offset
        for ``isolation="read_committed"``), -3 (``MAX_TIMESTAMP``) the first record with the
        largest timestamp, a time in ms ``(offset, its timestamp)`` of the first record at or
        after it; the last two only below the last fetchable offset, else None."""
        return self._node_of(topic, partition).call("list_offset", topic, partition, timestamp,
                                                    isolation, timeout=60)

    def last_sequence(self, topic: str, partition: int, producer_id: int) -> int:
        """The last sequence ``topic``-``partition`` holds of ``producer_id``, -1 for none."""
        return self._node_of(topic, partition).call("last_sequence", topic, partition,
                                                    producer_id, timeout=60)

    def partition_dir(self, topic: str, partition: int) -> str:
        """The log directory holding ``topic``-``partition``. A partition number that is not an
        int32 >= 0 raises ``InvalidTopicError`` (every per-partition call checks it here)."""
        return self._routing.partition_dir(topic, partition)

    def partitions(self, topic: str) -> list[int]:
        """The partition numbers of ``topic``, in order; ``UnknownTopicError`` for none."""
        return sorted(self._routing.fetch(topic))

    def node(self, log_dir: str) -> RayHandle:
        """The node actor of ``log_dir``; ``UnknownLogDirError`` when it is not the cluster's."""
        try:
            return self._nodes[abs_dir(log_dir)]
        except KeyError:
            raise UnknownLogDirError(
                f"{log_dir} is not a log directory of this cluster (its log directories: "
                f"{', '.join(sorted(self._nodes))})", log_dir=str(log_dir),
                log_dirs=sorted(self._nodes)) from None

    def restart_node(self, log_dir: str, timeout_s: float = 300.0) -> NodeRestart:
        """Restart the node actor of ``log_dir`` and return once its directory has loaded again
        (``cluster.runtime.node_restart``): how an offline directory comes back after its disk is
        repaired; the other directories keep serving meanwhile."""
        from cluster.runtime.node_restart import restart_node

        return restart_node(self.node(log_dir), abs_dir(log_dir), timeout_s)

    def _node_of(self, topic: str, partition: int) -> RayHandle:
        return self._routing.node_of(topic, partition)

    # ---- data --------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: Iterable[Record | bytes], *,
                flush: bool = False, batch_bytes: int = DEFAULT_BATCH_BYTES) -> ProduceResult:
        """Append ``records`` (``Record``s, encoded here, or already-encoded v2 batches) to one
        partition, in order. Batches are kept within the topic's ``segment.bytes`` and
        ``max.message.bytes``."""
        limit = min(batch_bytes, self.batch_limit(topic))
        return self.produce_batches(((topic, partition, b) for b in
                                     encode_batches(records, limit)), flush=flush,
                                    batch_bytes=batch_bytes)

    def produce_records(self, items: Iterable[tuple[str, int, Iterable[Record]]], *,
                        flush: bool = False,
                        batch_bytes: int = DEFAULT_BATCH_BYTES) -> ProduceResult:
        """Append records to many partitions, ``(topic, partition, records)`` each, encoded by
        the node that holds the partition (batches of at most ``batch_bytes``, within the topic's
        ``segment.bytes`` and ``max.message.bytes``), one call per directory. For a small
        produce by a process that should not load the encoder, such as ``strata produce``
        (``produce`` encodes here, which pays off for large inputs). Order is kept per
        partition; a partition that moved meanwhile gets its batches where it lives now. The
        first error raises (other directories' records may be stored)."""
        return data_path.produce_records(self._routing, self._nodes, items, flush=flush,
                                         batch_bytes=batch_bytes)

    def batch_limit(self, topic: str) -> int:
        """The largest batch ``topic`` accepts: ``LogConfig.max_batch_bytes`` (``min(segment.bytes,
        max.message.bytes)``) of its effective config (cached per client)."""
        if topic not in self._batch_limits:
            config = self.topic_layout(topic).config
            self._batch_limits[topic] = config.max_batch_bytes
        return self._batch_limits[topic]

    def produce_batches(self, items: Iterable[tuple[str, int, bytes]], *, flush: bool = False,
                        batch_bytes: int = DEFAULT_BATCH_BYTES,
                        window: int = DEFAULT_WINDOW) -> ProduceResult:
        """Append encoded batches to many partitions: items for one directory are packed into
        calls (one buffer each) of ``batch_bytes`` when the directory has no call running, else
        of up to ``data_path.BUSY_CALL_BYTES`` (8 MiB); up to ``window`` calls per directory in
        flight. Order is
        kept per partition: a node may run calls concurrently, so a call never overtakes an
        earlier one holding the same partition (it waits for it). The first error raises
        (earlier calls may be stored). Batches a node did not take because their partition
        moved (or is not there yet) are sent again, in order, where the partition now lives
        (``_resend_moved``)."""
        return data_path.produce_batches(self._routing, self._nodes, items, flush=flush,
                                         batch_bytes=batch_bytes, window=window)

    def consume(self, topic: str, partition: int, from_offset: int = 0,
                max_offset: int | None = None, *,
                max_bytes: int = DEFAULT_BATCH_BYTES,
                isolation: str = READ_UNCOMMITTED) -> Iterator[Record]:
        """Records from ``from_offset`` up to the log end as of the call (or ``max_offset``,
        exclusive); each has ``.offset .key .value .timestamp .headers``. With
        ``isolation="read_committed"`` (Kafka's isolation.level) up to the last stable offset,
        without the records of aborted transactions or transaction markers. Offsets are integers
        >= 0 (``InvalidOffsetError``). A ``from_offset`` below the log start (after retention or
        ``delete_records``) reads from the log start, as a consumer with
        ``auto.offset.reset=earliest``; the node's fetch itself (``read_raw``) refuses such an
        offset with ``OffsetOutOfRangeError``."""
        from_offset = files.validate_offset(from_offset, "from_offset",
                                            partition=f"{topic}-{partition}")
        if max_offset is not None:
            max_offset = files.validate_offset(max_offset, "max_offset",
                                               partition=f"{topic}-{partition}")
        if isolation != READ_UNCOMMITTED:
            yield from self._consume_isolated(topic, partition, from_offset, max_offset,
                                              isolation)
            return
        yield from data_path.consume(self._routing, topic, partition, from_offset, max_offset,
                                     max_bytes)

    def flush(self, topic: str, partition: int) -> int:
        return self._routing.call(topic, partition, "flush", topic, partition, timeout=120)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        return self._routing.call(topic, partition, "offsets", topic, partition)

    # ---- moves between log directories (KIP-113) ---------------------------------------------
    def move_partition(self, topic: str, partition: int, target_dir: str, *,
                       timeout_s: float | None = None) -> MoveResult:
        """Move ``topic``-``partition`` to the log directory ``target_dir`` while it serves
        (Kafka's alterReplicaLogDirs); returns when ``target_dir`` serves it. Producers and
        readers of this client (and of any other, whose old node answers "moved") follow it.

        Refused, with nothing changed (``MoveRefusedError``, its ``reason``): a directory the
        cluster does not have (``unknown-dir``), the partition's own directory (``same-dir``),
        a target without room (``no-room``), a partition being deleted (``being-deleted``);
        an offline target raises its ``LogDirOfflineError``. ``MoveAbortedError``: the move
        started and was abandoned, the source serves every record."""
        return self._routing.move_partition(topic, partition, target_dir, self.namespace,
                                            timeout_s=timeout_s)

    def move_status(self) -> list[MoveStatus]:
        """Moves in progress (Kafka's DescribeLogDirs future replicas): for each, the source and
        target directory, bytes copied of the total, and the offset lag of the copy. A node
        that cannot answer is left out."""
        return self._routing.move_status()

    def refresh_route(self, topic: str, partition: int,
                      error: StorageError | None = None) -> None:
        """Forget the cached route of ``topic``-``partition`` after a node refused a call
        (``error``): a ``PartitionMovedError`` names where it went; otherwise the coordinator
        asks every node. For callers that talk to node actors themselves (the drills)."""
        self._routing.reroute(topic, partition, error or UnknownPartitionError(
            f"route of {topic}-{partition} refreshed", topic=topic, partition=partition))

    # ---- transactions (cluster.client.txn_client states the contract) ----------------------------
    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None, *,
                          tag: str = "", join: bool = False) -> TxnHandle:
        """Begin a transaction of ``transactional_id`` (default timeout: the cluster's
        ``transaction.timeout.ms``); an open transaction of that id is aborted and fenced,
        unless ``join`` and it has the same ``tag`` (then it is returned)."""
        info = self._coordinator.call("begin_transaction", transactional_id, timeout_ms, tag,
                                      join, timeout=300)
        from cluster.client.txn_client import TxnHandle

        return TxnHandle(self, info)

    def describe_transaction(self, transactional_id: str) -> TxnMetadata:
        """The coordinator's state of ``transactional_id`` (``UnknownTransactionError``)."""
        return self._coordinator.call("describe_transaction", transactional_id, timeout=60)

    def list_transactions(self) -> list[TxnMetadata]:
        return self._coordinator.call("list_transactions", timeout=60)

    def abort_expired_transactions(self) -> list[TxnOutcome]:
        """Run the coordinator's periodic round now: complete decided transactions, abort the
        ones past their timeout. Returns what it ended."""
        return self._coordinator.call("abort_expired_transactions", timeout=300)

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """Kafka's LSO of one partition: a ``read_committed`` reader reads below it only."""
        return self._node_of(topic, partition).call("last_stable_offset", topic, partition,
                                                    timeout=60)

    def read_records(self, topic: str, partition: int, from_offset: int = 0,
                     max_records: int = 10_000, *, max_offset: int | None = None,
                     isolation: str = READ_UNCOMMITTED) -> list[Record]:
        """Up to ``max_records`` records from ``from_offset`` (below ``max_offset`` when given),
        as ``consume`` yields them, in one call: the node holding the partition decodes them
        (``consume`` fetches raw batches and decodes here). For small reads by a process that
        should not load the decoder, such as ``strata consume``. Fewer than ``max_records``
        means the read reached the log end (the last stable offset for read_committed)."""
        from_offset = files.validate_offset(from_offset, "from_offset",
                                            partition=f"{topic}-{partition}")
        return self._routing.call(topic, partition, "read_records", topic, partition,
                                 from_offset, max_offset, isolation, max_records)

    def _consume_isolated(self, topic: str, partition: int, from_offset: int,
                          max_offset: int | None, isolation: str) -> Iterator[Record]:
        return data_path.consume_decoded(
            lambda offset, chunk: self.read_records(topic, partition, offset, chunk,
                                                    max_offset=max_offset, isolation=isolation),
            from_offset)

    # ---- monitoring --------------------------------------------------------------------------
    def stats(self) -> list[dict[str, Any]]:
        """One dict per node actor (``kind`` "log_dir"), per partition ("partition") and per
        cleaner worker ("cleaner"); each has ``log_dir``: a cleaner's is the directory it is
        cleaning in (``cleaning`` True), else the one of its last clean among the coordinator's
        recent cleans, else None (it has not cleaned yet). A partition's row says whether its
        topic is ``internal``."""
        return client_monitoring.stats_rows(self._nodes, self.cleaner_status(),
                                            self.partition_dir)

    def cleaner_status(self) -> CleanerStatus:
        return self._coordinator.call("status", timeout=60)

    def explain(self, topic: str, partition: int) -> Explanation:
        partition = files.validate_partition(partition, topic)
        return self._coordinator.call("explain", topic, partition, timeout=60)

    def trigger_clean(self, topic: str, partition: int, *, roll: bool = False,
                      wait: bool = False, timeout_s: float = 120.0) -> int:
        """Clean the partition as soon as a cleaner is free, whatever its dirty ratio (with
        ``roll``, the active segment is rolled first so it can be cleaned too). With ``wait``,
        returns once a clean started after this call has finished (one running already does not
        count; with nothing to clean, at once). Returns the partition's count of finished
        cleans."""
        partition = files.validate_partition(partition, topic)
        if roll:
            self._node_of(topic, partition).call("roll", topic, partition, timeout=60)
        if not wait:
            return self._coordinator.call("trigger_clean", topic, partition, timeout=60)
        ticket = self._coordinator.call("request_clean", topic, partition, timeout=60)
        deadline = time.monotonic() + timeout_s
        while not self._coordinator.call("clean_request_done", topic, partition, ticket,
                                         timeout=60):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no clean of {topic}-{partition} within {timeout_s} s")
            time.sleep(0.05)
        return self._coordinator.call("cleans_completed", topic, partition, timeout=60)

    def pause_cleaning(self, topic: str, partition: int, timeout_s: float = 60.0) -> None:
        """Abort any clean of the partition and keep it from being cleaned until resumed."""
        partition = files.validate_partition(partition, topic)
        self._coordinator.call("abort_and_pause", topic, partition, timeout_s,
                               timeout=timeout_s + 5)

    def resume_cleaning(self, topic: str, partition: int) -> bool:
        partition = files.validate_partition(partition, topic)
        return self._coordinator.call("resume", topic, partition, timeout=60)

    # ---- for the Spark data sources (issue 6) ------------------------------------------------
    def topic_layout(self, name: str) -> TopicLayout:
        """Where ``name``'s partitions live and its effective config (broker defaults plus the
        topic's overrides); ``UnknownTopicError`` when the cluster has no such topic."""
        for info in self.list_topics(include_internal=True):
            if info.name == name:
                return data_path.topic_layout(info, self.description.properties)
        raise UnknownTopicError(f"the cluster (namespace {self.namespace}) has no topic {name}",
                                topic=name)

    def end_offsets(self, layout: TopicLayout) -> dict[int, tuple[int, int]]:
        """(log start offset, log end offset) of every partition, asked of the nodes at once."""
        pendings = {p: self._nodes[d].submit("offsets", layout.name, p)
                    for p, d in layout.partitions.items()}
        return {p: tuple(pending.result(60)) for p, pending in sorted(pendings.items())}

    def worker_statuses(self) -> list[Any]:
        """``cluster.cleaning.worker.WorkerStatus`` of every cleaner worker that answers."""
        return client_monitoring.worker_statuses(self.description)

    def sample_processes(self, interval_s: float = 0.2) -> list[ProcessSample]:
        """Memory and CPU of every Strata actor's process, measured inside it, all at once
        (CPU over ``interval_s``). Actors that do not answer are left out."""
        return client_monitoring.sample_processes(self.description, interval_s)
