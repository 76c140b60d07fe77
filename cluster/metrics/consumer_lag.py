"""Consumer lag: per group and partition, the partition's log end offset minus the group's
committed offset (kafka-consumer-groups' LAG column, Burrow's lag). Kafka's broker exports no
such metric: tools compute it from the committed offsets (OffsetFetch) and the log end offsets
(ListOffsets). The cluster computes it in the coordinator actor's metrics round, because no
single node knows both: a node's group coordinator holds the committed offsets of the groups of
the ``__consumer_offsets`` partitions its directory holds, and a node holds the logs of its own
partitions only. The round asks every node for its committed offsets (``committed_offsets``,
in ``cluster.metrics.group_offsets``), then every node for the log end offsets of the partitions
those name (``log_end_offsets``), and publishes ``strata_consumer_group_lag`` for each committed offset whose partition's log end
offset some node gave. A series not published again (its group deleted, its offset expired, its
partition's node unreachable this round) is forgotten, so Prometheus drops it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cluster.metrics.sink import MetricsSink

if TYPE_CHECKING:   # annotations only: the coordinator's process loads no numba
    from node.logdir import LogDir

LAG = "strata_consumer_group_lag"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's committed offset of one partition, as OffsetFetch answers it."""

    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ConsumerLag:
    """``lag`` is ``log_end_offset - committed_offset`` (Kafka's ConsumerGroupCommand.getLag:
    negative when the committed offset is past the end, as after a truncation)."""

    group: str
    topic: str
    partition: int
    committed_offset: int
    log_end_offset: int

    @property
    def lag(self) -> int:
        return self.log_end_offset - self.committed_offset


def log_end_offsets(logdir: LogDir, partitions: Iterable[tuple[str, int]]
                    ) -> dict[tuple[str, int], int]:
    """The log end offsets of those of ``partitions`` the directory holds."""
    logs = logdir.logs()
    ends = {}
    for topic, partition in partitions:
        log = logs.get((topic, partition))
        if log is not None:
            ends[(topic, partition)] = log.log_end_offset
    return ends


def consumer_lags(committed: Iterable[CommittedOffset],
                  ends: Mapping[tuple[str, int], int]) -> list[ConsumerLag]:
    """The lag of each committed offset whose partition's log end offset is in ``ends``."""
    return [ConsumerLag(c.group, c.topic, c.partition, c.offset, ends[(c.topic, c.partition)])
            for c in committed if (c.topic, c.partition) in ends]


class LagGauges:
    """Publishes ``strata_consumer_group_lag`` per group, topic and partition; a series of the
    previous round not published again is forgotten (see the module docstring). Owned by one
    metrics loop: not thread-safe."""

    def __init__(self, metrics: MetricsSink) -> None:
        self._metrics = metrics
        self._published: set[tuple[str, str, int]] = set()

    def publish(self, lags: Iterable[ConsumerLag]) -> None:
        published = set()
        for lag in lags:
            key = (lag.group, lag.topic, lag.partition)
            self._metrics.set(LAG, lag.lag, _tags(key))
            published.add(key)
        for key in self._published - published:
            self._metrics.forget(LAG, _tags(key))
        self._published = published


def _tags(key: tuple[str, str, int]) -> dict[str, object]:
    group, topic, partition = key
    return {"group": group, "topic": topic, "partition": partition}
