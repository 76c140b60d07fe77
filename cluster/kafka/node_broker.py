"""``NodeBroker``: the Kafka broker of one node actor, its ``KafkaServer`` started and closed with
the actor.

Apart from ``cluster.kafka.brokers`` (the view the server answers from) so that a node actor
builds its broker without loading the Kafka protocol: the server, its view, its config and the
group coordinator's messages pull in the protocol's schemas (kio): 0.4 s of CPU in every node
actor's start, a second on a busy host. They are imported when the broker first serves
(``serve``: a cluster with ``listeners``) or reads its groups (``committed_offsets``, while it
serves); a node of a cluster without listeners never loads them
(``tests/cluster/test_node_process.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cluster.errors import ListenerBindError
from cluster.handles import Handle
from cluster.metrics.consumer_lag import CommittedOffset
from node.errors import LogDirClosedError
from node.meta_properties import read_meta_properties
from node.mover import MoveStatus
from storage.errors import InvalidConfigError, StorageError

if TYPE_CHECKING:   # annotations only: the server is loaded by ``serve``
    from node.kafka.server import KafkaServer
    from node.logdir import LogDir
    from storage.log import Log
    from storage.records import ControlType

logger = logging.getLogger(__name__)


class NodeBroker:
    """The Kafka broker of one node actor (directory ``log_dir``): ``serve`` starts a
    ``KafkaServer`` over the loaded directory with the listener ``properties`` of the directory
    (``cluster.kafka.listeners``) once its ``meta.properties`` gives its ``node.id`` and
    ``cluster.id``; ``close`` stops it. A listener on every interface advertises the host's
    name unless ``advertised.listeners`` says otherwise. Without properties it never serves
    (nor loads the server's code, see the module docstring). Thread-safe; ``serve`` after
    ``close`` raises ``LogDirClosedError``."""

    def __init__(self, log_dir: str, properties: Mapping[str, str], coordinator: Handle,
                 node_handle: Callable[[str, str, str], Handle],
                 moves_in: Callable[[], list[MoveStatus]] = list) -> None:
        self._log_dir = log_dir
        self._moves_in = moves_in
        self._properties = dict(properties)
        self._coordinator = coordinator
        self._node_handle = node_handle
        self._lock = threading.Lock()
        self._server: KafkaServer | None = None
        self._node_id: int | None = None
        self._failure: str | None = None
        self._closed = False

    @property
    def configured(self) -> bool:
        return bool(self._properties)

    @property
    def failure(self) -> str | None:
        """Why the last ``serve`` could not start the broker (a port taken, a TLS store this
        host cannot read), or None."""
        return self._failure

    def identified(self) -> bool:
        """Whether the directory's ``meta.properties`` names its node and cluster."""
        try:
            meta = read_meta_properties(Path(self._log_dir))
        except StorageError:     # malformed: the start's identity check reports it
            return False
        return meta is not None and meta.node_id is not None and meta.cluster_id is not None

    def serve(self, logdir: LogDir) -> tuple[str, int] | None:
        """Start serving (once; later calls return the same); the advertised (host, port), or
        None without listener properties. ``ListenerBindError`` when the port cannot be bound
        or a TLS key store read, ``StorageError`` when the directory carries no identity yet."""
        with self._lock:
            if self._closed:
                raise LogDirClosedError(f"the node of {self._log_dir} is closed",
                                        directory=self._log_dir)
            if self._server is not None:
                return self._advertised(self._server)
            if not self._properties:
                return None
            try:
                return self._start(logdir)
            except ListenerBindError as err:
                self._failure = str(err)
                raise

    def _start(self, logdir: LogDir) -> tuple[str, int]:
        """``serve``'s start of the server, under its lock."""
        meta = read_meta_properties(logdir.path)
        if meta is None or meta.node_id is None or meta.cluster_id is None:
            raise StorageError(f"log directory {self._log_dir} carries no node.id and "
                               "cluster.id yet (meta.properties): not a broker until the "
                               "cluster's start writes them", directory=self._log_dir)
        from cluster.kafka.brokers import ClusterBrokerView, NodeProducerIds
        from node.kafka.config import KafkaServerConfig
        from node.kafka.server import KafkaServer

        config = KafkaServerConfig.from_properties(
            {**self._properties, "node.id": str(meta.node_id)})
        started: list[KafkaServer] = []
        view = ClusterBrokerView(
            node_id=meta.node_id, cluster_id=meta.cluster_id, log_dir=self._log_dir,
            logdir=logdir, endpoint=lambda: self._advertised(started[0]),
            coordinator=self._coordinator, node_handle=self._node_handle,
            moves_in=self._moves_in)
        try:
            server = KafkaServer(logdir, config, view=view,
                                 producer_ids=NodeProducerIds(logdir.path, meta.node_id))
        except InvalidConfigError as err:   # a TLS store this host cannot read
            raise ListenerBindError(
                f"log directory {self._log_dir} (node.id {meta.node_id}) cannot serve "
                f"{config.listeners}: {err}", directory=self._log_dir,
                key=err.fields.get("key"), value=err.fields.get("value")) from None
        started.append(server)
        try:
            server.start()
        except OSError as err:
            raise ListenerBindError(
                f"log directory {self._log_dir} (node.id {meta.node_id}) cannot listen on "
                f"{config.listeners}: {err.strerror or err}; choose other ports "
                "(listeners: directory i takes port + i)", directory=self._log_dir,
                key="listeners", value=config.listeners) from None
        self._server, self._node_id, self._failure = server, meta.node_id, None
        host, port = self._advertised(server)
        logger.info("log directory %s is Kafka broker %d at %s:%d", self._log_dir,
                    meta.node_id, host, port)
        return host, port

    def endpoint(self) -> tuple[int, str, int] | None:
        """(node id, advertised host, port) while serving, else None; None too once the directory
        is offline: Kafka halts a broker whose last log directory fails, so the other brokers
        stop naming it, and its partitions have no leader (LEADER_NOT_AVAILABLE). Its listener
        stays up for the operator's tools (DescribeLogDirs) and answers KAFKA_STORAGE_ERROR."""
        server, node_id = self._server, self._node_id
        if server is None or node_id is None or not server.logdir.online:
            return None
        host, port = self._advertised(server)
        return node_id, host, port

    def committed_offsets(self, timeout_s: float) -> tuple[CommittedOffset, ...]:
        """The committed offsets of the groups this broker coordinates (none while it does not
        serve)."""
        server = self._server
        if server is None:
            return ()
        from cluster.metrics.group_offsets import committed_offsets

        return committed_offsets(server.groups.coordinator, timeout_s)

    def write_marker(self, partition: int, log: Log, control_type: ControlType,
                     producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Append a transaction marker to ``__consumer_offsets``-``partition`` through the
        served group coordinator (which applies it to the producer's pending offset commits),
        or alone while the broker does not serve (the partition's next load replays it)."""
        server = self._server
        if server is None:
            log.append_end_txn_marker(control_type, producer_id=producer_id,
                                      producer_epoch=producer_epoch,
                                      coordinator_epoch=coordinator_epoch)
            return
        server.groups.coordinator.write_marker(partition, log, control_type, producer_id,
                                               producer_epoch, coordinator_epoch)

    @staticmethod
    def _advertised(server: KafkaServer) -> tuple[str, int]:
        """The server's advertised address (a listener on every interface advertises this
        machine's name: ``KafkaServer.advertised_address``)."""
        return server.advertised_address()

    def close(self) -> None:
        """Stop serving (the connections are closed); safe to call twice."""
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
        if server is not None:
            server.close()
