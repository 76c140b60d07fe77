"""``ServedDir``: what the request handlers of one served directory share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from node.appends import served
from node.errors import UnknownPartitionError
from node.kafka.append_signal import AppendSignal
from node.kafka.broker_view import BrokerView
from node.kafka.config import KafkaServerConfig
from node.kafka.errors import NotLeaderOrFollowerError
from node.kafka.producer_ids import ProducerIdAllocator
from node.kafka.served_groups import ServedGroups
from node.logdir import LogDir
from storage.log import Log


@dataclass(frozen=True)
class ServedDir:
    """The directory a server serves (``logdir``), the cluster as this broker sees it
    (``view``), the settings, the producer id allocator, the append signal long-polling
    fetches wait on, and the group coordinator of the directory's ``__consumer_offsets``
    partitions (``groups``)."""

    logdir: LogDir
    view: BrokerView
    config: KafkaServerConfig
    producer_ids: ProducerIdAllocator
    signal: AppendSignal
    groups: ServedGroups

    @contextmanager
    def leading(self, topic: str, partition: int) -> Iterator[Log]:
        """The log of ``topic``-``partition`` for one partition's work of a request (Kafka's
        ``ReplicaManager.getPartitionOrError``): a partition this directory does not hold is
        ``NotLeaderOrFollowerError`` when the cluster has it (``view``), else
        ``UnknownPartitionError``; work that raced a move of the partition away ends in
        ``PartitionMovedError`` (NOT_LEADER_OR_FOLLOWER too), never in the closed log's error."""
        try:
            with served(self.logdir, topic, partition):
                log = self.logdir.log(topic, partition)
                yield log
        except UnknownPartitionError as err:
            leader = self.view.leader(topic, partition)
            if leader is None and partition >= (self.view.partition_count(topic) or 0):
                raise
            raise NotLeaderOrFollowerError(
                f"broker {self.view.node_id} does not hold {topic}-{partition}; its leader is "
                f"{'not available' if leader is None else f'broker {leader}'}", topic=topic,
                partition=partition) from err
