"""The bodies of the Strata actors: the plain classes (``LogDirServer``, ``CleanerWorker``,
``CoordinatorService``) with the cluster's seams plugged in (metrics, the coordinator's pauses,
the other nodes as move sources), built from plain values so Ray can rerun them after a restart.

Only actor processes import this module: the actor classes of ``cluster.actors`` are light shells
that build their body here on construction, so a driver that merely looks an actor up (every
``strata`` command does) never loads the directory code, the cleaner or numba.
"""

from __future__ import annotations

import os
from typing import Any

import ray

from cleaner.config import CleanerConfig
from cluster.actors import current_host
from cluster.coordinator_service import CoordinatorService
from cluster.handles import CoordinatorLink, NamedHandle
from cluster.metrics import RayMetrics
from cluster.naming import COORDINATOR_NAME, node_actor_name
from cluster.node_service import CoordinatorPauses, NodeMetrics, RemoteMoveSource
from cluster.status import ClusterDescription
from cluster.worker import CleanerWorker
from node.config import LogDirConfig
from node.server import LogDirServer
from storage.config import LogConfig

NODE_METRICS_INTERVAL_S = 5.0


class NodeBody(LogDirServer):
    """A node actor's body: ``LogDirServer`` with the cluster's seams; the directory loads again
    on a background thread after a restart."""

    def __init__(self, path: str, topic_defaults: dict[str, str],
                 log_dir_properties: dict[str, str], namespace: str) -> None:
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

    def info(self) -> dict[str, Any]:
        return {**super().info(), "node_id": self.node_id, "host_declared": self.host_declared}


class WorkerBody(CleanerWorker):
    """A cleaner worker actor's body: swaps go to the node actor of the cleaned directory."""

    def __init__(self, cleaner_id: int, cleaner_properties: dict[str, str], namespace: str,
                 host: str) -> None:
        def swap_for(log_dir: str):
            node = NamedHandle(node_actor_name(log_dir), namespace)
            return lambda topic, partition, base, old: node.call(
                "swap_cleaned", topic, partition, base, old, timeout=600)
        super().__init__(cleaner_id, CleanerConfig.from_properties(cleaner_properties),
                         swap_for, host=host, metrics=RayMetrics())

    def info(self) -> dict[str, Any]:
        return {"cleaner_id": self.cleaner_id, "host": self.host, "pid": os.getpid(),
                "node_id": ray.get_runtime_context().get_node_id()}


class CoordinatorBody(CoordinatorService):
    """The coordinator actor's body: nodes and workers reached through named handles."""

    def __init__(self, description: ClusterDescription) -> None:
        namespace = description.namespace
        super().__init__(
            description,
            node_handle=lambda name, d: NamedHandle(name, namespace,
                                                    description.node_hosts.get(d, "")),
            worker_handle=lambda name, host: NamedHandle(name, namespace, host),
            metrics=RayMetrics())
