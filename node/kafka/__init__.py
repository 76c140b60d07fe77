"""The Kafka wire protocol in front of one log directory: Kafka's own clients (librdkafka,
kafka-python, aiokafka, the Java client) produce to it, fetch from it, ask it for metadata,
administer its topics, and consume in groups whose offsets it keeps.

``framing`` (sizes, the header's first fields, a connection's frames), ``bounds`` (every
length checked before decoding), ``codec`` (kio decode/encode), ``versions`` (what is
advertised), ``errors`` (typed errors and Kafka error codes), ``config``
(``KafkaServerConfig``), ``broker_view`` (the cluster as one broker sees it), ``context``
(what the handlers share), one module per API family
(``api_versions``, ``metadata`` with DescribeCluster, ``produce``, ``fetch``, ``list_offsets``,
``leader_epoch`` (OffsetForLeaderEpoch), ``init_producer_id``, ``admin``, ``alter_configs``,
``log_dirs`` (DescribeLogDirs, AlterReplicaLogDirs), ``describe_producers``,
``delete_records``), ``producer_ids`` (durable id blocks),
consumer groups: ``find_coordinator``, ``offsets_topic`` (``__consumer_offsets`` created as the
coordinator needs it), ``served_groups`` (the directory's ``GroupCoordinator`` and the
partitions it has loaded), ``groups`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
``offset_commit``, ``offset_fetch``, ``offset_delete``, ``group_admin`` (ListGroups,
DescribeGroups, DeleteGroups), transactions: ``transactions`` (the coordinator as a broker
reaches it), ``txn_apis`` (FindCoordinator of a transactional id, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions),
``txn_offset_commit`` (TxnOffsetCommit), ``pending`` (answers completed later),
``internal_topics``,
``append_signal`` (long-poll wake-ups), ``apis`` (the dispatcher) and ``server`` (the listener).
TLS on an ``SSL`` or ``SASL_SSL`` listener: ``tls`` (Kafka's ``ssl.*`` keys and the server's
context) and ``tls_stores`` (the PEM and PKCS#12 stores they name). SASL on a
``SASL_PLAINTEXT`` or ``SASL_SSL`` listener: ``sasl`` (a connection's authentication),
``sasl_handshake`` (SaslHandshake and SaslAuthenticate responses), ``plain`` and ``scram`` with
``scram_messages`` (the mechanisms), ``credentials`` (what clients are checked against) and
``jaas`` (users from Kafka's JAAS text and ``strata.sasl.scram.users``); ``scram_client`` (SCRAM's
client side, for the operator tools).
"""

from storage.lazy_exports import lazy_exports

# loaded on first use: a module of the package (``node.kafka.transactions``, ``codec``) is
# imported without the server, and so without the storage engine and numba
__getattr__ = lazy_exports(__name__, {"KafkaServer": "node.kafka.server",
                                      "KafkaServerConfig": "node.kafka.config"})

__all__ = ["KafkaServer", "KafkaServerConfig"]
