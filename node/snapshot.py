"""``LogSnapshot``: what the cleaner manager needs of one partition log, as plain values
(STYLE.md P13), so a node can send it through Ray to a coordinator in another process.

It satisfies ``cleaner.cleanable.CleanableLog`` (and its segments ``SegmentView``). Two segment
fields cost a disk read, so they are filled only when the topic's config makes the manager read
them: ``largest_timestamp`` when ``min.compaction.lag.ms > 0`` and ``first_batch_timestamp`` when
``max.compaction.lag.ms`` is finite; otherwise they hold -1, which the manager's rules ignore.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.config import LONG_MAX, LogConfig
from storage.files import TopicPartition
from storage.log import Log


@dataclass(frozen=True, slots=True)
class SegmentSnapshot:
    base_offset: int
    size: int
    largest_timestamp: int
    first_timestamp: int

    def first_batch_timestamp(self) -> int:
        return self.first_timestamp


@dataclass(frozen=True)
class LogSnapshot:
    """One partition log at the moment of the snapshot. ``dir`` is the partition directory as the
    owning node sees it; ``dir.parent`` is its log directory."""

    topic_partition: TopicPartition
    dir: Path
    config: LogConfig
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    segment_snapshots: tuple[SegmentSnapshot, ...]

    def segments(self) -> tuple[SegmentSnapshot, ...]:
        return self.segment_snapshots

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segment_snapshots)


def snapshot_log(log: Log) -> LogSnapshot:
    config = log.config
    need_largest = config.min_compaction_lag_ms > 0
    need_first = config.max_compaction_lag_ms < LONG_MAX
    segments = log.segments()
    last = len(segments) - 1
    return LogSnapshot(
        topic_partition=log.topic_partition, dir=log.dir, config=config,
        log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
        last_stable_offset=log.last_stable_offset,
        segment_snapshots=tuple(
            SegmentSnapshot(s.base_offset, s.size,
                            s.largest_timestamp if need_largest else -1,
                            s.first_batch_timestamp() if need_first and i < last else -1)
            for i, s in enumerate(segments)))
