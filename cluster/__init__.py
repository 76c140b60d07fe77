"""The Ray cluster: node actors (one per log directory), the coordinator, cleaner workers, the
client API (``Cluster``) and the ``strata`` command.

``Cluster`` is imported lazily so that ``import cluster`` (done by ``strata --help``) loads
neither ray nor numba.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    if name == "Cluster":
        from cluster.client.client import Cluster
        return Cluster
    raise AttributeError(f"module 'cluster' has no attribute {name!r}")
