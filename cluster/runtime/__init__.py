"""The cluster on Ray: the actors, the Ray head, and bringing a cluster up and down.

Owns: ``actors`` (the one module that makes classes Ray actors: the actor shells, their method
tables, retries and placement), ``actor_bodies``, ``worker_body`` and ``coordinator_body`` (the
plain class each actor runs, with the cluster's seams plugged in; imported by actor processes
only), ``node_service`` (the cluster's
parts of a node actor: its metrics, the coordinator's pauses, move sources),
``coordinator_service`` (the coordinator actor's body: cleaning, topic metadata and
transactions of one cluster), ``head`` (finding or starting the Ray cluster), ``deploy``
(deploying the actors of a cluster and shutting them down), ``attach`` (how a client comes to be:
start or connect) and ``node_restart`` (restarting the node actor of one directory).

May call: every other role below the client (``cluster.cleaning``, ``cluster.transactions``,
``cluster.kafka``, ``cluster.metadata``, ``cluster.metrics``), the shared floor, node, cleaner
and storage. ``cluster.client`` calls it; it never calls the client.
"""
