"""What a broker knows of the cluster it belongs to, and the topic changes it can ask for:
itself, the other brokers, the topics, who leads each partition, topic configs, and topic
creation and deletion; the log directories it can see and the replica moves between them.
Metadata and the admin APIs answer from it; produce and fetch serve one directory.

``BrokerView`` is the interface (a cluster provides one naming every directory's broker);
``LogDirBrokerView`` is the single-directory cluster: one broker, leader of every partition its
``LogDir`` holds, whose topic overrides it keeps in the directory's ``topic-configs.json``
(``node.topic_admin``), so a server restarted over the directory reports and uses them again.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from node.errors import LogDirNotFoundError, LogDirOfflineError
from node.logdir import LogDir
from node.stats import disk_usage
from node.kafka.transactions import TransactionService
from node.topic_admin import TopicAdmin
from storage import files

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A broker as clients reach it (Metadata's brokers entry): the advertised host and port."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One replica in a log directory as DescribeLogDirs reports it: ``size_bytes`` of its
    segments; ``is_future`` for the copy a KIP-113 move is filling (its ``offset_lag`` is how
    far its log end is behind the current replica's, 0 for every current replica)."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker (``path``, absolute). ``offline_reason`` is None while it
    serves; an offline directory is reported with it (KAFKA_STORAGE_ERROR), no replicas and
    unknown sizes (-1). ``total_bytes``/``usable_bytes`` are its file system's (KIP-827)."""

    path: str
    replicas: tuple[ReplicaDescription, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1
    offline_reason: str | None = None


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

    def partition_count(self, topic: str) -> int | None:
        """The partition count of ``topic``, or None when no broker holds it: what the admin
        APIs check a topic's existence with (a view that caches what it knows asks again
        before it answers None or a count another broker changed)."""
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

    def alter_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace the whole override set of ``topic`` by ``overrides`` (Kafka topic keys; an
        empty mapping drops every override), as IncrementalAlterConfigs and AlterConfigs leave
        it: kept durably (a restart uses them), applied to the topic's live logs at once
        (retention, cleaning and the next roll follow them) and to its logs created later.
        ``UnknownPartitionError`` when no broker holds a partition of ``topic``;
        ``InvalidConfigError`` naming the key for an override Kafka refuses (nothing changed).
        The handler has already checked the keys and values."""
        ...

    def log_dirs(self) -> list[LogDirDescription]:
        """Every log directory of this broker (DescribeLogDirs), each with the replicas it holds
        (current ones, and the future copies of moves into it, ``is_future``); an offline
        directory is listed with its ``offline_reason`` and no replicas."""
        ...

    def alter_replica_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Move this broker's replica of ``topic``-``partition`` to its directory ``log_dir``
        (an absolute path; AlterReplicaLogDirs, KIP-113). Returns once the move is accepted,
        not done: while it copies, ``log_dirs`` reports the copy in ``log_dir`` as
        ``is_future``; then the replica lives in ``log_dir``. A move to the directory already
        holding the replica returns at once, changing nothing; a second call for a replica
        moving to the same directory too. Raises, checked in this order (Kafka's
        ``ReplicaManager.alterReplicaLogDirs``):

        * ``LogDirNotFoundError`` (LOG_DIR_NOT_FOUND): ``log_dir`` is no directory of this
          broker (another broker's too);
        * ``LogDirOfflineError`` (KAFKA_STORAGE_ERROR): ``log_dir`` or the replica's directory
          is offline;
        * ``UnknownPartitionError`` (UNKNOWN_TOPIC_OR_PARTITION): this broker holds no replica
          of ``topic``-``partition``;
        * any other ``StorageError`` (``MoveRefusedError`` for a directory without room, for
          instance) for a move that cannot start; its code is ``error_code_for``'s.
        """
        ...

    def transactions(self) -> TransactionService | None:
        """The transaction coordinator this broker forwards the transaction APIs to, or None
        when it has none (``node.kafka.transactions``)."""
        ...


class LogDirBrokerView:
    """A cluster of one broker (``node_id``) serving one ``LogDir``: it leads every partition
    the directory holds. ``endpoint()`` gives its advertised address (known once the listener is
    bound). The cluster id is derived from the directory's path, so it is the same after a
    restart from the same path."""

    def __init__(self, logdir: LogDir, node_id: int,
                 endpoint: Callable[[], tuple[str, int]],
                 cluster_id: str | None = None) -> None:
        """Reads the directory's ``topic-configs.json`` (``CheckpointError`` naming it when it
        cannot be read as a whole) and gives each topic whose logs still use the directory's
        defaults its kept overrides (``LogDir.update_topic_config``: the directory must be
        online); a topic whose entry cannot be used is logged and left alone (``TopicAdmin``
        refuses to change it)."""
        self._logdir = logdir
        self._node_id = node_id
        self._endpoint = endpoint
        self._cluster_id = cluster_id or _cluster_id_of(str(logdir.path))
        self._topics = TopicAdmin(logdir.path, logdir.default_config)
        kept, invalid = self._topics.load()
        for topic, overrides in kept.items():
            if logdir.config_for(topic) == logdir.default_config:
                logdir.update_topic_config(topic, logdir.default_config.with_overrides(overrides))
        for topic, err in invalid.items():
            log.warning("%s: topic %s keeps overrides that cannot be used: %s", logdir.path,
                        topic, err)

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
        """The directory's topics and partition counts; an offline directory's are the ones it
        held when it went offline (their partitions have no leader: ``leader``)."""
        counts: dict[str, int] = {}
        for topic, partition in self._logdir.held_partitions():
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def partition_count(self, topic: str) -> int | None:
        return self.topics().get(topic)

    def leader(self, topic: str, partition: int) -> int | None:
        """This broker when its directory holds the partition and is online, else None (a
        partition of an offline directory is LEADER_NOT_AVAILABLE, as Kafka's controller leaves
        a partition whose one replica is on a failed directory without a leader)."""
        try:
            held = self._logdir.get_log(topic, partition) is not None
        except LogDirOfflineError:
            return None
        return self._node_id if held else None

    def create_topic(self, topic: str, num_partitions: int,
                     configs: Mapping[str, str] | None = None) -> None:
        """Overrides are written to ``topic-configs.json`` before the logs are created."""
        files.validate_topic(topic)
        if configs:
            self._topics.set(self._logdir, topic, configs)
        self._logdir.create_logs(topic, range(num_partitions))

    def add_partitions(self, topic: str, count: int) -> None:
        self._logdir.create_logs(topic, range(self.topics().get(topic, 0), count))

    def delete_topic(self, topic: str) -> None:
        partitions = [p for t, p in self._logdir.logs() if t == topic]
        self._logdir.delete_logs(topic, partitions)
        self._logdir.drop_topic_config(topic)
        self._topics.forget_if_gone(self._logdir, topic)

    def topic_config(self, topic: str) -> dict[str, tuple[str, bool]]:
        """A key counts as overridden when the topic keeps an override of it, or when its value
        differs from the directory's default (overrides the ``LogDir`` was opened with)."""
        defaults = self._logdir.default_config.to_properties()
        kept = self._topics.of(topic)
        return {key: (value, key in kept or defaults.get(key) != value)
                for key, value in self._logdir.config_for(topic).to_properties().items()}

    def alter_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Through ``TopicAdmin.alter``: ``topic-configs.json`` first, then the live logs."""
        self._topics.alter(self._logdir, topic, overrides)

    def log_dirs(self) -> list[LogDirDescription]:
        """This one directory; it has no moves in or out (no future replicas)."""
        return [describe_log_dir(self._logdir)]

    def alter_replica_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """A move to this directory is done already; any other directory is not this broker's.
        """
        path = str(self._logdir.path)
        if not os.path.isabs(log_dir) or os.path.normpath(log_dir) != path:
            raise LogDirNotFoundError(f"log directory {log_dir} is not a directory of broker "
                                      f"{self._node_id} (it has {path})", log_dir=log_dir)
        self._logdir.log(topic, partition)      # UnknownPartitionError, LogDirOfflineError

    def transactions(self) -> TransactionService | None:
        """None: a directory served without a cluster has no transaction coordinator (why:
        ``node.kafka.transactions``)."""
        return None


def describe_log_dir(logdir: LogDir, futures: Sequence[ReplicaDescription] = ()
                     ) -> LogDirDescription:
    """``logdir`` as DescribeLogDirs reports it: its replicas with their sizes, then ``futures``
    (the copies of moves into it), and its file system's sizes; an offline directory with its
    reason alone."""
    path = str(logdir.path)
    try:
        replicas = tuple(ReplicaDescription(t, p, lg.size_in_bytes)
                         for (t, p), lg in sorted(logdir.logs().items()))
    except LogDirOfflineError:
        return LogDirDescription(path, offline_reason=logdir.offline_reason)
    total, _used, free = disk_usage(path)
    return LogDirDescription(path, replicas + tuple(futures), total, free)


def _cluster_id_of(path: str) -> str:
    """A Kafka-style cluster id (22 characters of URL-safe base64) derived from ``path``."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"strata:{path}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
