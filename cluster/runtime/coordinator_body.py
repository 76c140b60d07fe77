"""The coordinator actor's body: ``CoordinatorService`` with the nodes and workers reached
through named handles, built from the cluster's description so Ray can rerun it after a restart.

Apart from ``cluster.runtime.actor_bodies`` and ``worker_body`` (the node and cleaner bodies) so
that the coordinator's process loads neither the storage engine, the cleaner's kernels, numba nor
the protocol's schemas: it starts while the node actors load, and a start of the cluster waits
for it (``tests/cluster/test_coordinator_process.py``).
"""

from __future__ import annotations

from cluster.handles import NamedHandle
from cluster.metrics.sink import RayMetrics
from cluster.runtime.coordinator_service import CoordinatorService
from cluster.status import ClusterDescription


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
