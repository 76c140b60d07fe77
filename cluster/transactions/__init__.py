"""The cluster's transactions: one transaction coordinator for every directory.

Owns: ``coordinator`` (``TransactionCoordinator``: Kafka's TransactionCoordinator and
TransactionStateManager for the whole cluster, hosted by the coordinator actor), ``txn_state``
(one transaction's state, its settings and the records of its state log), ``txn_kafka`` (the
rules of a Kafka client's transaction: InitProducerId, AddPartitionsToTxn, EndTxn) and
``txn_store`` (the state log ``__strata_transactions`` and the marker writer on the node
actors).

May call: the cluster's shared floor (``cluster.errors``, ``cluster.handles``,
``cluster.naming``), ``cluster.metadata`` (where the state log's partitions go), node and
storage. The client's side of a transaction is ``cluster.client.txn_client``; the brokers' door
to the coordinator is ``cluster.kafka.txns``.
"""
