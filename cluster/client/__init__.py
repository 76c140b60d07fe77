"""The client of a running cluster: what a Python program, the ``strata`` command, the Spark data
sources and the drills hold.

Owns: ``client`` (``Cluster``: the facade; starting and attaching, the topic verbs, cleaning
control, the transaction verbs), ``routing`` (cached partition -> directory routes, calls that
follow a moved partition), ``data_path`` (encoding, produce, consume), ``client_monitoring``
(stats, worker statuses, process samples), ``txn_client`` (a transaction's handle and its
members), ``partitioner`` (Kafka's default partitioner as a numba kernel) and ``murmur`` (its
hash as plain Python).

May call: ``cluster.runtime`` (start, connect, deploy, node restart), ``cluster.metadata`` and
``cluster.transactions`` (the answers it unpickles), the shared floor, node and storage. Nothing
below calls the client; ``cluster.spark`` builds on it.

``Cluster`` is imported lazily, so importing a module of this package loads no Ray.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    if name == "Cluster":
        from cluster.client.client import Cluster
        return Cluster
    raise AttributeError(f"module 'cluster.client' has no attribute {name!r}")
