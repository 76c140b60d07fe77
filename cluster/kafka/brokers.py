"""Every log directory of a cluster is a Kafka broker: ``ClusterBrokerView`` (what one broker
reports of the cluster in Metadata, and where its topic admin goes) and ``NodeProducerIds``
(producer ids that no two brokers share); ``cluster.kafka.node_broker.NodeBroker`` starts the
``KafkaServer`` of one node actor over them.

The view answers from a table of the cluster — each partition's log directory (the
coordinator's routes, placement included), each directory's ``node.id`` (``meta.properties``,
through the coordinator's description) and each serving broker's advertised address (asked of
the node actors) — kept for ``METADATA_TTL_S`` and taken again at once after a topic change made
through it. A partition is led by the broker of the directory holding it: this broker leads
what its own directory holds (asked of the directory, never of the table), and a table that
still routes here a partition this directory no longer holds (moved away), or does not route
a partition asked for (created since), is taken again, the coordinator asking every node, at
most every ``FORCED_REFRESH_S``. Topic changes go through the
coordinator's paths (``Cluster.create_topic``'s placement over every directory). Internal topics
(``cluster.naming.INTERNAL_TOPICS``) are not reported.

Calls to the coordinator and to other node actors are made from the server's request threads,
never from one of the actor's concurrency groups, so none waits for a group it holds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cluster.errors import TopicExistsError, UnknownTopicError
from cluster.handles import Handle
from cluster.kafka.txns import ClusterTransactions
from cluster.naming import is_internal
from node.errors import (
    LogDirNotFoundError,
    MoveRefusedError,
    UnknownPartitionError,
)
from node.kafka.broker_view import (
    BrokerEndpoint,
    LogDirDescription,
    ReplicaDescription,
    describe_log_dir,
)
from node.kafka.errors import TopicAlreadyExistsError
from node.kafka.producer_ids import ProducerIdAllocator
from node.logdir import LogDir
from node.mover import MoveStatus
from storage import files
from storage.errors import InvalidConfigError, StorageError

logger = logging.getLogger(__name__)

METADATA_TTL_S = 1.0
FORCED_REFRESH_S = 0.2
CALL_TIMEOUT_S = 30.0
NODE_ID_SHIFT = 40                   # a broker's producer ids: node.id << 40 | its own counter
MAX_NODE_ID = (1 << (63 - NODE_ID_SHIFT)) - 1


@dataclass(frozen=True)
class ClusterTable:
    """The cluster as a broker last saw it: ``routes`` (topic -> partition -> log directory),
    ``node_ids`` (log directory -> node id) and ``endpoints`` (node id -> advertised address of
    every broker serving), taken at ``taken`` (monotonic seconds)."""

    taken: float
    routes: dict[str, dict[int, str]] = field(default_factory=dict)
    node_ids: dict[str, int] = field(default_factory=dict)
    endpoints: dict[int, BrokerEndpoint] = field(default_factory=dict)


class ClusterBrokerView:
    """``node.kafka.broker_view.BrokerView`` of the broker ``node_id`` serving ``logdir`` (the
    directory ``log_dir`` of the cluster whose coordinator is ``coordinator``); ``endpoint``
    gives its own advertised address, ``node_handle(log_dir, actor name, host)`` the handle of
    another directory's node actor. See the module docstring for the rules.

    Thread-safe: the table is replaced whole; one thread takes a new one at a time while the
    others answer from the one they find (they wait only when there is none yet)."""

    def __init__(self, *, node_id: int, cluster_id: str, log_dir: str, logdir: LogDir,
                 endpoint: Callable[[], tuple[str, int]], coordinator: Handle,
                 node_handle: Callable[[str, str, str], Handle],
                 moves_in: Callable[[], list[MoveStatus]] = list,
                 ttl_s: float = METADATA_TTL_S, forced_s: float = FORCED_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic,
                 call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._log_dir = log_dir
        self._logdir = logdir
        self._endpoint = endpoint
        self._coordinator = coordinator
        self._node_handle = node_handle
        self._moves_in = moves_in
        self._moving: dict[tuple[str, int], str] = {}    # moves out started here: their target
        self._moving_lock = threading.Lock()
        self._ttl = ttl_s
        self._forced = forced_s
        self._clock = clock
        self._timeout = call_timeout_s
        self._nodes: dict[str, Handle] | None = None
        self._node_ids: dict[str, int] = {}
        self._table: ClusterTable | None = None
        self._forced_at = float("-inf")
        self._refreshing = threading.Lock()
        self._transactions = ClusterTransactions(coordinator, self._node_of_dir,
                                                 call_timeout_s)

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def brokers(self) -> list[BrokerEndpoint]:
        return [e for _, e in sorted(self.table().endpoints.items())]

    def controller_id(self) -> int:
        """The lowest node id serving (every broker may take the controller's requests: topic
        changes go through the coordinator whoever receives them)."""
        return min(self.table().endpoints, default=self._node_id)

    def topics(self) -> dict[str, int]:
        return {topic: max(parts) + 1 for topic, parts in self.table().routes.items() if parts}

    def partition_count(self, topic: str) -> int | None:
        """From the table, taken again from the coordinator when it does not know ``topic``
        (unless a table taken since the question is there): a topic created through another
        broker or the Python API within the table's TTL exists for the admin APIs at once."""
        if is_internal(topic):
            return None
        asked = self._clock()
        parts = self.table().routes.get(topic)
        if not parts:
            parts = self.table(taken_after=asked).routes.get(topic)
        return max(parts) + 1 if parts else None

    def leader(self, topic: str, partition: int) -> int | None:
        if self._logdir.get_log(topic, partition) is not None:
            return self._node_id
        table = self.table()
        leader = self._leader_in(table, topic, partition)
        if leader == self._node_id or not self._routed(table, topic, partition):
            # routed here but not held (moved away), or created since the table was taken
            table = self.table(force=True)
            leader = self._leader_in(table, topic, partition)
            if leader == self._node_id:
                return None
        return leader

    def create_topic(self, topic: str, num_partitions: int,
                     configs: Mapping[str, str] | None = None) -> None:
        """``TopicAlreadyExistsError`` for a topic created meanwhile (not in the table yet)."""
        files.validate_topic(topic)
        try:
            self._coordinator.call("create_topic", topic, num_partitions, dict(configs or {}),
                                   timeout=120 + num_partitions / 100)
        except TopicExistsError as err:
            raise TopicAlreadyExistsError(str(err), topic=topic) from None
        finally:
            self.invalidate()

    def add_partitions(self, topic: str, count: int) -> None:
        try:
            self._coordinator.call("add_partitions", topic, count, timeout=120)
        finally:
            self.invalidate()

    def delete_topic(self, topic: str) -> None:
        try:
            self._coordinator.call("delete_topic", topic, timeout=3600)
        finally:
            self.invalidate()

    def topic_config(self, topic: str) -> dict[str, tuple[str, bool]]:
        try:
            overrides = self._coordinator.call("topic_overrides", topic, timeout=self._timeout)
        except UnknownTopicError:
            overrides = {}      # deleted since the handler found it: the defaults
        defaults = self._logdir.default_config.to_properties()
        values = self._logdir.default_config.with_overrides(overrides).to_properties()
        return {key: (value, defaults.get(key) != value) for key, value in values.items()}

    def alter_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Through the coordinator (``Cluster.alter_topic_config``: every directory holding the
        topic, durably): the keys of ``overrides`` set, every other override removed."""
        try:
            current = self._coordinator.call("topic_overrides", topic, timeout=self._timeout)
            removed = [key for key in current if key not in overrides]
            self._coordinator.call("alter_topic_config", topic, dict(overrides), removed,
                                   timeout=120)
        except UnknownTopicError as err:
            raise UnknownPartitionError(str(err), topic=topic) from None
        finally:
            self.invalidate()

    def log_dirs(self) -> list[LogDirDescription]:
        """This broker's one directory: its replicas, then the copies of the moves into it
        (``is_future``, with their offset lag)."""
        futures = [ReplicaDescription(m.topic, m.partition, m.bytes_copied, m.offset_lag,
                                      is_future=True)
                   for m in self._moves_in() if m.phase != "interrupted"]
        return [describe_log_dir(self._logdir, futures)]

    def alter_replica_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """A move to this broker's own directory changes nothing; a move to another directory
        of the cluster is a KIP-113 move between brokers (``Cluster.move_partition``: the
        target's node copies the partition while this one serves it, then takes over, and
        clients see a leader change), started here and run in the background; any other path
        is LOG_DIR_NOT_FOUND."""
        target = os.path.normpath(log_dir) if os.path.isabs(log_dir) else None
        self._other_nodes()
        if target != self._log_dir and target not in self._node_ids:
            raise LogDirNotFoundError(
                f"log directory {log_dir} is no directory of this cluster (broker "
                f"{self._node_id} has {self._log_dir})", log_dir=log_dir)
        self._logdir.log(topic, partition)      # UnknownPartitionError, LogDirOfflineError
        if target == self._log_dir:
            return
        with self._moving_lock:
            if self._moving.get((topic, partition)) == target:
                return                          # the same move asked again
            if (topic, partition) in self._moving:
                raise MoveRefusedError(
                    f"{topic}-{partition} is already moving to "
                    f"{self._moving[(topic, partition)]}", topic=topic, partition=partition,
                    target_dir=target, reason="in-progress")
            self._moving[(topic, partition)] = target
        threading.Thread(target=self._move_out, args=(topic, partition, target), daemon=True,
                         name=f"kafka-move-{topic}-{partition}").start()

    def _move_out(self, topic: str, partition: int, target: str) -> None:
        """Run one move to ``target`` (its node copies from this directory), then route the
        partition there; a move that fails is logged (the partition serves here on)."""
        try:
            self._other_nodes()[target].call("move_in", topic, partition, self._log_dir,
                                              timeout=None)
            self._coordinator.call("partition_moved", topic, partition, target,
                                   timeout=self._timeout)
            logger.info("broker %d: %s-%d moved to %s", self._node_id, topic, partition,
                        target)
        except Exception:  # noqa: BLE001 - the request was answered; the log says what failed
            logger.warning("broker %d: the move of %s-%d to %s failed", self._node_id, topic,
                           partition, target, exc_info=True)
        finally:
            with self._moving_lock:
                self._moving.pop((topic, partition), None)
            self.invalidate()

    def transactions(self) -> ClusterTransactions:
        """The cluster's transaction coordinator (``cluster.kafka.txns``)."""
        return self._transactions

    def _node_of_dir(self, log_dir: str) -> int | None:
        if log_dir == self._log_dir:
            return self._node_id
        self._other_nodes()
        return self._node_ids.get(log_dir)

    # ---- the table ---------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Take the table again at the next question (a topic changed)."""
        table = self._table
        if table is not None:
            self._table = ClusterTable(float("-inf"), table.routes, table.node_ids,
                                       table.endpoints)

    def table(self, *, force: bool = False, taken_after: float | None = None) -> ClusterTable:
        """The current table: taken again when older than the TTL, or with ``force`` (the
        coordinator asking every node) unless a forced one was taken within
        ``FORCED_REFRESH_S``. A refresh that fails keeps the old table (logged) until the next
        TTL; with no table at all it raises. Only a first or invalidated table, or one older
        than ``taken_after`` (begun before that clock reading), is waited for while another
        thread takes one."""
        table = self._table
        if table is not None and not self._stale(table, force, taken_after):
            return table
        outdated = (table is None or table.taken == float("-inf")     # none yet, or invalidated
                    or (taken_after is not None and table.taken < taken_after))
        if not outdated and not self._refreshing.acquire(blocking=False):
            return table                     # another thread is taking it
        if outdated:
            self._refreshing.acquire()
        try:
            current = self._table
            if current is not None and current is not table \
                    and not self._stale(current, force, taken_after):
                return current
            if force:
                self._forced_at = self._clock()
            try:
                self._table = self._take(refresh=force)
            except Exception:
                if current is None:
                    raise
                logger.warning("broker %d: cannot take the cluster's table; answering from "
                               "the last one", self._node_id, exc_info=True)
                self._table = ClusterTable(self._clock(), current.routes, current.node_ids,
                                           current.endpoints)
            return self._table
        finally:
            self._refreshing.release()

    def _stale(self, table: ClusterTable, force: bool, taken_after: float | None = None) -> bool:
        if taken_after is not None and table.taken < taken_after:
            return True
        now = self._clock()
        if force:
            return now - self._forced_at >= self._forced
        return now - table.taken >= self._ttl

    def _take(self, refresh: bool) -> ClusterTable:
        began = self._clock()   # the table is as of its beginning: a later change may be missing
        nodes = self._other_nodes()
        asked = {d: h.submit("kafka_endpoint") for d, h in nodes.items()}
        routes = self._coordinator.call("refresh_routes" if refresh else "routes",
                                        timeout=self._timeout)
        host, port = self._endpoint()
        endpoints = {self._node_id: BrokerEndpoint(self._node_id, host, port)}
        for log_dir, pending in asked.items():
            try:
                found = pending.result(self._timeout)
            except Exception:  # noqa: BLE001 - a node down or restarting: not a broker now
                logger.info("broker %d: no endpoint from %s", self._node_id, log_dir,
                            exc_info=True)
                continue
            if found is not None:
                node_id, other_host, other_port = found
                endpoints[node_id] = BrokerEndpoint(node_id, other_host, other_port)
        return ClusterTable(began,
                            {t: dict(p) for t, p in routes.items() if not is_internal(t)},
                            dict(self._node_ids), endpoints)

    def _other_nodes(self) -> dict[str, Handle]:
        if self._nodes is None:
            description = self._coordinator.call("describe", timeout=self._timeout)
            self._node_ids = dict(description.node_ids)
            self._nodes = {d: self._node_handle(d, name, description.node_hosts.get(d, ""))
                           for d, name in description.node_names.items() if d != self._log_dir}
        return self._nodes

    @staticmethod
    def _routed(table: ClusterTable, topic: str, partition: int) -> bool:
        return partition in table.routes.get(topic, {})

    @staticmethod
    def _leader_in(table: ClusterTable, topic: str, partition: int) -> int | None:
        log_dir = table.routes.get(topic, {}).get(partition)
        leader = None if log_dir is None else table.node_ids.get(log_dir)
        return leader if leader in table.endpoints else None


class NodeProducerIds(ProducerIdAllocator):
    """The producer ids of broker ``node_id``: ``node_id << 40 | k``, ``k`` from the directory's
    own durable blocks (``ProducerIdAllocator``), so no two brokers of a cluster hand out the
    same id and a partition moved between directories keeps its producers apart. A node id
    above ``MAX_NODE_ID`` is ``InvalidConfigError``."""

    def __init__(self, directory: Path, node_id: int) -> None:
        if not 0 <= node_id <= MAX_NODE_ID:
            raise InvalidConfigError(f"node.id {node_id} of {directory} is outside 0.."
                                     f"{MAX_NODE_ID}, the ids producer ids can carry",
                                     key="node.id", value=node_id)
        super().__init__(directory)
        self._base = node_id << NODE_ID_SHIFT

    def allocate(self) -> int:
        local = super().allocate()
        if local >> NODE_ID_SHIFT:
            raise StorageError(f"the producer ids of this broker are used up ({local})",
                               producer_id=local)
        return self._base | local
