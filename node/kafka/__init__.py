"""The Kafka wire protocol in front of one log directory: Kafka's own clients (librdkafka,
kafka-python, aiokafka, the Java client) produce to it, fetch from it and ask it for metadata.

``framing`` (sizes, the header's first fields), ``codec`` (kio decode/encode), ``versions`` (what
is advertised), ``errors`` (typed errors and Kafka error codes), ``broker_view`` (the cluster as
one broker sees it), one module per API (``api_versions``, ``metadata``, ``produce``, ``fetch``,
``list_offsets``, ``init_producer_id``), ``producer_ids`` (durable id blocks), ``append_signal``
(long-poll wake-ups), ``apis`` (the dispatcher) and ``server`` (the listener).
"""

from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer

__all__ = ["KafkaServer", "KafkaServerConfig"]
