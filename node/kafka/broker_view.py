"""What a broker knows of the cluster it belongs to, and the topic changes it can ask for:
itself, the other brokers, the topics, who leads each partition, topic configs, and topic
creation and deletion. Metadata and the admin APIs answer from it; produce and fetch serve one
directory.

``BrokerView`` is the interface (a cluster provides one naming every directory's broker);
``LogDirBrokerView`` is the single-directory cluster: one broker, leader of every partition its
``LogDir`` holds.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from node.logdir import LogDir
from storage import files


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A broker as clients reach it (Metadata's brokers entry): the advertised host and port."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class BrokerView(Protocol):
    """The cluster as one broker reports it in Metadata. Implementations are thread-safe: the
    server calls them from its request threads."""

    @property
    def node_id(self) -> int:
        """This broker's ``node.id``."""
        ...

    @property
    def cluster_id(self) -> str:
        """The cluster's id, stable across restarts."""
        ...

    def brokers(self) -> list[BrokerEndpoint]:
        """Every live broker, this one included."""
        ...

    def controller_id(self) -> int:
        """The node id reported as the controller."""
        ...

    def topics(self) -> dict[str, int]:
        """Every topic and its partition count."""
        ...

    def leader(self, topic: str, partition: int) -> int | None:
        """The node id leading ``topic``-``partition``, or None when no broker holds it."""
        ...

    def create_topic(self, topic: str, num_partitions: int,
                     configs: Mapping[str, str] | None = None) -> None:
        """Create ``topic`` with ``num_partitions`` partitions and the topic config overrides
        ``configs`` (Metadata's auto-creation, CreateTopics); ``InvalidTopicError`` for a name
        Kafka refuses, ``InvalidConfigError`` for a bad override."""
        ...

    def add_partitions(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions (CreatePartitions)."""
        ...

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of ``topic`` (DeleteTopics)."""
        ...

    def topic_config(self, topic: str) -> dict[str, tuple[str, bool]]:
        """Every config key of ``topic``: its value and whether the topic overrides the
        default (DescribeConfigs)."""
        ...


class LogDirBrokerView:
    """A cluster of one broker (``node_id``) serving one ``LogDir``: it leads every partition
    the directory holds. ``endpoint()`` gives its advertised address (known once the listener is
    bound). The cluster id is derived from the directory's path, so it is the same after a
    restart from the same path."""

    def __init__(self, logdir: LogDir, node_id: int,
                 endpoint: Callable[[], tuple[str, int]],
                 cluster_id: str | None = None) -> None:
        self._logdir = logdir
        self._node_id = node_id
        self._endpoint = endpoint
        self._cluster_id = cluster_id or _cluster_id_of(str(logdir.path))

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def brokers(self) -> list[BrokerEndpoint]:
        host, port = self._endpoint()
        return [BrokerEndpoint(self._node_id, host, port)]

    def controller_id(self) -> int:
        return self._node_id

    def topics(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, partition in self._logdir.logs():
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def leader(self, topic: str, partition: int) -> int | None:
        return self._node_id if self._logdir.get_log(topic, partition) is not None else None

    def create_topic(self, topic: str, num_partitions: int,
                     configs: Mapping[str, str] | None = None) -> None:
        """Overrides are kept in memory for this directory's life (persisting them comes with
        the cluster wiring: ``node.topic_admin`` keeps ``topic-configs.json``)."""
        files.validate_topic(topic)
        if configs:
            self._logdir.set_topic_config(
                topic, self._logdir.default_config.with_overrides(configs))
        self._logdir.create_logs(topic, range(num_partitions))

    def add_partitions(self, topic: str, count: int) -> None:
        self._logdir.create_logs(topic, range(self.topics().get(topic, 0), count))

    def delete_topic(self, topic: str) -> None:
        partitions = [p for t, p in self._logdir.logs() if t == topic]
        self._logdir.delete_logs(topic, partitions)
        self._logdir.drop_topic_config(topic)

    def topic_config(self, topic: str) -> dict[str, tuple[str, bool]]:
        defaults = self._logdir.default_config.to_properties()
        return {key: (value, defaults.get(key) != value)
                for key, value in self._logdir.config_for(topic).to_properties().items()}


def _cluster_id_of(path: str) -> str:
    """A Kafka-style cluster id (22 characters of URL-safe base64) derived from ``path``."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"strata:{path}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
