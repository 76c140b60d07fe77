"""The body of the node actor: the plain class (``LogDirServer``) with the cluster's seams plugged
in (metrics, the coordinator's pauses, the other nodes as move sources, the node's Kafka broker),
built from plain values so Ray can rerun it after a restart. The cleaner worker's and the
coordinator's bodies have modules of their own (``cluster.runtime.worker_body``,
``cluster.runtime.coordinator_body``): a node's process loads no cleaner, and the coordinator's
neither the storage engine nor numba.

Only actor processes import this module: the actor classes of ``cluster.runtime.actors`` are light
shells that build their body here on construction, so a driver that merely looks an actor up (every
``strata`` command does) never loads the directory code, the cleaner or numba. What a node needs
only once it serves Kafka (the protocol's schemas, the server) is loaded then
(``cluster.kafka.node_broker``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import ray

from cluster.runtime.hosts import current_host
from cluster.metrics.consumer_lag import CommittedOffset, log_end_offsets
from cluster.handles import CoordinatorLink, NamedHandle
from cluster.kafka.node_broker import NodeBroker
from cluster.metrics.sink import RayMetrics
from cluster.naming import COORDINATOR_NAME, node_actor_name
from cluster.runtime.node_service import CoordinatorPauses, NodeMetrics, RemoteMoveSource
from cluster.status import ClusterDescription
from node.config import LogDirConfig
from node.groups.config import OFFSETS_TOPIC
from node.opening import DirectoryLoadingError
from node.server import LogDirServer
from storage.config import LogConfig
from storage.errors import StorageError

logger = logging.getLogger(__name__)

NODE_METRICS_INTERVAL_S = 5.0
COMMITTED_OFFSETS_TIMEOUT_S = 5.0


class NodeBody(LogDirServer):
    """A node actor's body: ``LogDirServer`` with the cluster's seams; the directory loads again
    on a background thread after a restart.

    With ``kafka_properties`` (``cluster.kafka.listeners``) the node is a Kafka broker
    (``cluster.kafka.node_broker.NodeBroker``): ``serve_kafka`` starts it (the cluster's start calls
    it once the directories carry their identity), and a restarted actor whose directory already
    carries it serves again by itself once loaded. ``close`` stops it before the directory."""

    def __init__(self, path: str, topic_defaults: dict[str, str],
                 log_dir_properties: dict[str, str], namespace: str,
                 kafka_properties: dict[str, str] | None = None) -> None:
        host, declared = current_host()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.host_declared = declared
        metrics = NodeMetrics(path, RayMetrics())
        super().__init__(path, load_in_background=True, observer=metrics,
                         cleaning_pauses=CoordinatorPauses(
                             CoordinatorLink(COORDINATOR_NAME, namespace)),
                         move_sources=lambda d: RemoteMoveSource(
                             NamedHandle(node_actor_name(d), namespace)),
                         host=host,
                         default_config=LogConfig.from_properties(topic_defaults),
                         config=LogDirConfig.from_properties(log_dir_properties))
        metrics.publish_every(self.stats, NODE_METRICS_INTERVAL_S, lambda: self.load_finished)
        self._broker = NodeBroker(
            str(self.path), kafka_properties or {}, NamedHandle(COORDINATOR_NAME, namespace),
            lambda _dir, name, node_host: NamedHandle(name, namespace, node_host),
            moves_in=self.move_status)
        self.route_txn_markers(OFFSETS_TOPIC, self._broker.write_marker)
        self._broker_start: threading.Thread | None = None
        if self._broker.configured and self._broker.identified():
            self._broker_start = threading.Thread(target=self._serve_once_loaded,
                                                  name=f"kafka-start-{self.path.name}",
                                                  daemon=True)
            self._broker_start.start()

    def info(self) -> dict[str, Any]:
        return {**super().info(), "node_id": self.node_id, "host_declared": self.host_declared}

    def serve_kafka(self) -> tuple[str, int] | None:
        """Start this directory's Kafka broker once loaded (see the class docstring); its
        advertised (host, port), or None when the cluster has no ``listeners``."""
        return self._broker.serve(self.log_dir)

    def kafka_endpoint(self) -> tuple[int, str, int] | None:
        """(node id, advertised host, port) of this directory's broker while it serves."""
        return self._broker.endpoint()

    def kafka_state(self) -> tuple[bool, tuple[int, str, int] | None, str | None]:
        """(whether the cluster serves Kafka, this broker's endpoint while it serves, why its
        last start failed): what a node restart reports of its broker."""
        return self._broker.configured, self._broker.endpoint(), self._broker.failure

    def committed_offsets(self) -> tuple[CommittedOffset, ...]:
        """The committed offsets of the groups this directory's broker coordinates
        (``cluster.metrics.consumer_lag``)."""
        return self._broker.committed_offsets(COMMITTED_OFFSETS_TIMEOUT_S)

    def log_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The log end offsets of those of ``partitions`` this directory holds."""
        return log_end_offsets(self.log_dir, partitions)

    def close(self, broker_epoch: int = -1) -> bool:
        self._broker.close()
        closed = super().close(broker_epoch)
        if self._broker_start is not None:
            self._broker_start.join()
        return closed

    def _serve_once_loaded(self) -> None:
        """A restarted actor's broker: serve once the directory has loaded (a failed load, a
        close meanwhile or a port taken is logged; the cluster's next start says why)."""
        while True:
            try:
                self.serve_kafka()
                return
            except DirectoryLoadingError:
                continue
            except StorageError:
                logger.warning("the Kafka broker of %s did not start", self.path, exc_info=True)
                return
