"""The Kafka wire protocol in front of one log directory: Kafka's own clients (librdkafka,
kafka-python, aiokafka, the Java client) produce to it, fetch from it, ask it for metadata and
administer its topics.

``framing`` (sizes, the header's first fields), ``bounds`` (every length checked before
decoding), ``codec`` (kio decode/encode), ``versions`` (what is advertised), ``errors`` (typed
errors and Kafka error codes), ``config`` (``KafkaServerConfig``), ``broker_view`` (the cluster
as one broker sees it), ``context`` (what the handlers share), one module per API family
(``api_versions``, ``metadata`` with DescribeCluster, ``produce``, ``fetch``, ``list_offsets``,
``leader_epoch`` (OffsetForLeaderEpoch), ``init_producer_id``, ``admin``, ``alter_configs``,
``log_dirs`` (DescribeLogDirs, AlterReplicaLogDirs), ``describe_producers``,
``delete_records``), ``producer_ids`` (durable id blocks),
``append_signal`` (long-poll wake-ups), ``apis`` (the dispatcher) and ``server`` (the listener).
SASL on a ``SASL_PLAINTEXT`` listener: ``sasl`` (a connection's authentication),
``sasl_handshake`` (SaslHandshake and SaslAuthenticate responses), ``plain`` and ``scram`` with
``scram_messages`` (the mechanisms), ``credentials`` (what clients are checked against) and
``jaas`` (users from Kafka's JAAS text and ``strata.sasl.scram.users``).
"""

from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer

__all__ = ["KafkaServer", "KafkaServerConfig"]
