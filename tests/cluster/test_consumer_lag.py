"""``strata_consumer_group_lag``: the coordinator's metrics round publishes, per group and
partition, the partition's log end offset minus the group's committed offset, from the committed
offsets of every node's group coordinator and the log end offsets of every node (the group's
coordinator and the partition on different directories, as in a cluster). In one process: real
node servers over real directories, a real group coordinator loaded from a real
``__consumer_offsets`` log, the real cleaner coordinator with a recording metrics sink."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.metrics.consumer_lag import (
    LAG,
    CommittedOffset,
    ConsumerLag,
    LagGauges,
    consumer_lags,
    log_end_offsets,
)
from cluster.metrics.group_offsets import committed_offsets
from cluster.cleaning.coordinator import Coordinator
from cluster.handles import LocalHandle
from cluster.metrics.sink import RecordingMetrics
from node.groups.config import OFFSETS_TOPIC, GroupCoordinatorConfig
from node.groups.coordinator import GroupCoordinator
from node.groups.messages import CommittedOffset as Commit
from node.groups.messages import OffsetCommit
from node.server import LogDirServer
from storage.records import Record, build_batch
from tests.cluster.fakes import SMALL_CLEANER, ManualWorker

GROUP, TOPIC = "readers", "events"


class GroupsNode(LogDirServer):
    """A node server whose directory's group coordinator is ``groups`` (what the node actor's
    body adds to ``LogDirServer`` for the lag, without Ray)."""

    groups: GroupCoordinator | None = None

    def committed_offsets(self) -> tuple[CommittedOffset, ...]:
        return () if self.groups is None else committed_offsets(self.groups, 5.0)

    def log_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return log_end_offsets(self.log_dir, partitions)


class Cluster:
    """Directory ``data`` holds ``TOPIC``-0 with ``records`` records; directory ``offsets``
    holds ``__consumer_offsets``-0 and coordinates the groups."""

    def __init__(self, root: Path, records: int) -> None:
        self.data = GroupsNode(root / "data", start_tasks=False)
        self.offsets = GroupsNode(root / "offsets", start_tasks=False)
        self.data.create_partition(TOPIC, 0)
        for i in range(records):
            self.data.append_batch(TOPIC, 0, build_batch([Record(value=b"v%d" % i)]))
        self.offsets.create_partition(OFFSETS_TOPIC, 0)
        self.groups = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1))
        self.groups.load(0, self.offsets.log_dir.log(OFFSETS_TOPIC, 0))
        self.offsets.groups = self.groups
        self.metrics = RecordingMetrics()
        self.coordinator = Coordinator(
            {str(n.path): LocalHandle(n, n.path.name) for n in (self.data, self.offsets)},
            [ManualWorker()], SMALL_CLEANER, metrics=self.metrics, metrics_interval_ms=0)

    def commit(self, offset: int, group: str = GROUP, topic: str = TOPIC) -> None:
        result = self.groups.commit_offsets(OffsetCommit(
            group, -1, "", None, (Commit(topic, 0, offset),))).result(5)
        assert [p.error_code for p in result.partitions] == [0]

    def lag(self, group: str = GROUP, topic: str = TOPIC) -> float | None:
        self.coordinator.run_once()
        return self.metrics.get(LAG, group=group, topic=topic, partition=0)

    def close(self) -> None:
        self.coordinator.stop(abort_running=False)
        self.groups.close()
        self.data.close()
        self.offsets.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path, records=10)
    yield made
    made.close()


def test_a_group_that_consumed_part_of_a_topic_shows_the_lag_of_the_rest(
        cluster: Cluster) -> None:
    cluster.commit(4)
    assert cluster.lag() == 6


def test_the_lag_falls_to_zero_once_the_group_commits_the_end(cluster: Cluster) -> None:
    cluster.commit(4)
    assert cluster.lag() == 6
    cluster.commit(10)
    assert cluster.lag() == 0


def test_the_lag_follows_records_appended_after_the_commit(cluster: Cluster) -> None:
    cluster.commit(10)
    assert cluster.lag() == 0
    cluster.data.append_batch(TOPIC, 0, build_batch([Record(value=b"more")]))
    assert cluster.lag() == 1


def test_a_partition_no_directory_holds_has_no_lag(cluster: Cluster) -> None:
    cluster.commit(3, topic="elsewhere")
    assert cluster.lag(topic="elsewhere") is None


def test_a_deleted_groups_lag_is_no_longer_exported(cluster: Cluster) -> None:
    cluster.commit(4)
    assert cluster.lag() == 6
    [deleted] = cluster.groups.delete_groups([GROUP]).result(5)
    assert deleted.error_code == 0
    assert cluster.lag() is None


def test_lag_is_the_end_minus_the_committed_offset_where_the_end_is_known() -> None:
    committed = [CommittedOffset("g", "t", 0, 5), CommittedOffset("g", "t", 1, 7),
                 CommittedOffset("h", "t", 0, 9)]
    lags = consumer_lags(committed, {("t", 0): 8})
    assert [(x.group, x.partition, x.lag) for x in lags] == [("g", 0, 3), ("h", 0, -1)]


def test_lag_gauges_forget_the_series_not_published_again() -> None:
    metrics = RecordingMetrics()
    gauges = LagGauges(metrics)
    gauges.publish([ConsumerLag("g", "t", 0, 1, 4), ConsumerLag("g", "t", 1, 2, 2)])
    assert metrics.get(LAG, group="g", topic="t", partition=0) == 3
    assert metrics.get(LAG, group="g", topic="t", partition=1) == 0
    gauges.publish([ConsumerLag("g", "t", 1, 2, 5)])
    assert metrics.get(LAG, group="g", topic="t", partition=0) is None
    assert metrics.get(LAG, group="g", topic="t", partition=1) == 3
