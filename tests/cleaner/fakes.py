"""Small fake logs for the cleaner manager tests (the ``CleanableLog`` boundary), on real dirs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from storage.config import LogConfig
from storage.files import TopicPartition

BATCH_BYTES = 100  # every fake batch holds one record and takes 100 bytes
T0 = 1_700_000_000_000


@dataclass
class FakeSegment:
    base_offset: int
    size: int
    largest_timestamp: int = T0
    first_timestamp: int = T0

    def first_batch_timestamp(self) -> int:
        return self.first_timestamp


@dataclass
class FakeLog:
    topic_partition: TopicPartition
    dir: Path
    config: LogConfig
    segs: list[FakeSegment] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    stable_offset: int | None = None
    fail_with: Exception | None = None

    @property
    def last_stable_offset(self) -> int:
        return self.log_end_offset if self.stable_offset is None else self.stable_offset

    def segments(self) -> list[FakeSegment]:
        if self.fail_with is not None:
            raise self.fail_with
        return list(self.segs)

    def append(self, count: int = 1, timestamp: int = T0) -> None:
        """``count`` one-record batches into the active segment."""
        if not self.segs:
            self.segs.append(FakeSegment(self.log_end_offset, 0, -1, -1))
        active = self.segs[-1]
        if active.size == 0:
            active.first_timestamp = timestamp
        active.size += count * BATCH_BYTES
        active.largest_timestamp = max(active.largest_timestamp, timestamp)
        self.log_end_offset += count

    def roll(self) -> None:
        """Start a new active segment at the log end (replacing an empty active one)."""
        if self.segs and self.segs[-1].size == 0:
            self.segs[-1].base_offset = self.log_end_offset
            return
        self.segs.append(FakeSegment(self.log_end_offset, 0, -1, -1))


def compacted_config(ratio: float = 0.05, policy: str = "compact", **overrides: object) -> LogConfig:
    return LogConfig(cleanup_policy=policy, min_cleanable_dirty_ratio=ratio, **overrides)


def make_log(log_dir: Path, tp: TopicPartition, config: LogConfig | None = None) -> FakeLog:
    directory = log_dir / str(tp)
    directory.mkdir(parents=True, exist_ok=True)
    return FakeLog(tp, directory, config or compacted_config())


def batches_log(log_dir: Path, tp: TopicPartition, num_batches: int, batches_per_segment: int = 5,
                config: LogConfig | None = None, timestamp: int = T0) -> FakeLog:
    """Kafka's ``writeRecords``: roll after batch 0 and every ``batches_per_segment`` batches,
    then roll once more, so the active segment is empty at ``num_batches``."""
    log = make_log(log_dir, tp, config)
    for i in range(num_batches):
        log.append(1, timestamp)
        if i % batches_per_segment == 0:
            log.roll()
    log.roll()
    return log
