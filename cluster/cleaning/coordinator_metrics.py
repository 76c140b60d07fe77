"""The cleaner's gauges, published by the coordinator every ``metrics_interval_ms``: the max
compaction delay and dirty ratio of the cluster, and per directory its uncleanable partitions and
bytes and each compacted partition's cleanable bytes (Kafka's LogCleanerManager gauges).
``strata_log_dir_offline`` is the node's to publish: one series per fact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cleaner.cleanable import LogToClean, SegmentRange, cleanable_offsets
from cleaner.manager import CleanerManager
from cluster.metrics.sink import MetricsSink
from cluster.naming import abs_dir
from storage.files import TopicPartition

if TYPE_CHECKING:   # an annotation only: the coordinator's process loads no numba
    from node.snapshot import LogSnapshot


def publish_cleaner_metrics(m: MetricsSink, manager: CleanerManager, log_dirs: Sequence[str],
                            logs: Mapping[TopicPartition, LogSnapshot],
                            offline: Mapping[str, str], now: int) -> None:
    """Set the gauges from the manager's state and the compacted logs last polled (``logs``);
    an offline directory publishes nothing, a partition whose numbers fail is skipped."""
    stats = manager.statistics()
    m.set("strata_max_compaction_delay_secs", stats.max_compaction_delay_secs)
    m.set("strata_max_dirty_percent", stats.max_dirty_percent)
    for log_dir in log_dirs:
        tags = {"directory": log_dir}
        if log_dir in offline:     # strata_log_dir_offline is the node's: one series per fact
            continue
        m.set("strata_uncleanable_partitions", manager.uncleanable_partitions_count(log_dir), tags)
        m.set("strata_uncleanable_bytes", manager.uncleanable_bytes(log_dir, logs, now), tags)
        checkpoints = manager.cleaner_checkpoints(log_dir)
        for tp, snap in logs.items():
            if abs_dir(snap.dir.parent) != log_dir:
                continue
            try:
                view = SegmentRange(snap)
                offsets = cleanable_offsets(snap, checkpoints.get(tp), now, view)
                cleanable = LogToClean.of(snap, offsets.first_dirty_offset,
                                          offsets.first_uncleanable_dirty_offset,
                                          segments=view).cleanable_bytes
            except Exception:  # noqa: BLE001 - a metric is never worth a failed round
                continue
            m.set("strata_cleanable_bytes", cleanable,
                  {"directory": log_dir, "topic": tp.topic, "partition": tp.partition})
