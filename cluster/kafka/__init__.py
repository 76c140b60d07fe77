"""Every log directory of a cluster is a Kafka broker: what the cluster plugs into
``node.kafka``.

Owns: ``brokers`` (``ClusterBrokerView``: what one broker reports of the cluster in Metadata and
where its topic admin goes; ``NodeProducerIds``), ``node_broker`` (``NodeBroker``: the
``KafkaServer`` of one node actor, its code loaded only when it serves), ``listeners`` (each directory's listener settings from the cluster's broker config),
``keys`` (the names of Kafka's broker settings, so a ``server.properties`` written for Kafka is
accepted) and ``txns`` (``ClusterTransactions``: the brokers' transaction APIs forwarded to the
cluster's one transaction coordinator).

May call: the cluster's shared floor (``cluster.errors``, ``cluster.handles``,
``cluster.naming``), ``cluster.metrics`` (consumer lag), ``cluster.transactions.txn_state``
(the answers of the coordinator), node and storage.
"""
