"""The Ray cluster: node actors (one per log directory), the coordinator, cleaner workers, the
client API (``Cluster``) and the Spark data sources, one subpackage per role. Each subpackage's
docstring says what it owns and what it may call; none imports one that calls it:

* ``metrics`` and ``metadata`` (the topic table, placement, the directories' identity);
* ``cleaning`` (the cleaning coordinator and the cleaner workers), ``transactions`` (the
  transaction coordinator) and ``kafka`` (every directory a Kafka broker), on those;
* ``runtime`` (the actors, the Ray head, deploying and attaching), wiring all of them;
* ``client`` (``Cluster``), on the runtime; ``spark``, on the client.

They stand on a shared floor in this package: ``errors`` (the typed errors), ``naming`` (every
name given to Ray), ``handles`` (every Ray call of a plain class), ``status`` (the frozen
answers), ``loop`` (``ControlLoop``) and ``config`` (``BrokerConfig``, which reads the settings
of ``kafka.keys`` and ``transactions.txn_state`` too).

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
