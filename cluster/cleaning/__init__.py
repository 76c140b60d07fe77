"""Log compaction across the cluster: the cleaning coordinator and the cleaner workers.

Owns: ``coordinator`` (``Coordinator``: the cleaning state of every partition of every directory,
Kafka's LogCleanerManager for the whole cluster, and the loop that hands the filthiest log to an
idle worker) with its parts ``coordinator_nodes`` (its view of the node actors),
``coordinator_metrics`` (the cleaner's gauges), ``pauses`` (who holds a pause of cleaning),
``clean_requests`` (cleans asked for by an operator), ``clean_history`` (what past cleans came
to) and ``slots`` (what it knows of each worker); ``clean_assignment`` (one clean handed to a
worker) and ``worker`` (``CleanerWorker``: one cleaner of the pool, Kafka's CleanerThread).

May call: the cluster's shared floor (``cluster.errors``, ``cluster.handles``, ``cluster.naming``,
``cluster.status``, ``cluster.loop``), ``cluster.metrics``, cleaner, node and storage. The
coordinator's modules import the cleaner's algorithm, node snapshots and node logs for
annotations only, so the coordinator's process does not load numba; only ``worker`` cleans.
Plain classes: the node actors and workers are reached through ``cluster.handles``; the Ray
actors around them belong to ``cluster.runtime``.
"""
