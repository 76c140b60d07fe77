"""The cleaner worker actor's body: ``CleanerWorker`` with its swaps sent to the node actor of
the cleaned directory, built from plain values so Ray can rerun it after a restart.

Apart from ``cluster.runtime.actor_bodies`` (the node's body) so that a node actor's process loads
neither the cleaner (``cleaner.cleaner``, its filters and offset map) nor the worker loop: only a
worker cleans (``tests/cluster/test_node_process.py``).
"""

from __future__ import annotations

import os
from typing import Any

import ray

from cleaner.config import CleanerConfig
from cluster.cleaning.worker import CleanerWorker
from cluster.handles import NamedHandle
from cluster.metrics.sink import RayMetrics
from cluster.naming import node_actor_name


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
