"""What part of a log may be cleaned, and how dirty it is (Kafka's ``LogCleanerManager`` object
methods and ``LogToClean``), as pure functions of a log's segments, offsets and config.

Vocabulary (kafka-storage.md §4):

* first dirty offset: where the last clean stopped (the ``cleaner-offset-checkpoint``), reset to the
  log start offset when the checkpoint is below it or above the log end offset;
* first uncleanable offset: nothing at or above it may be cleaned: the last stable offset, the
  active segment, and with ``min.compaction.lag.ms`` the first dirty segment holding a record newer
  than the lag;
* clean bytes: segments below the first dirty offset; cleanable bytes: segments from the one
  holding the first dirty offset up to the first uncleanable segment. A segment that holds the
  first dirty offset is counted in both, as in Kafka.

``CleanableLog`` and ``SegmentView`` are the only things read from a log; ``storage.log.Log``
provides exactly these names, and tests use small fakes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

from storage.config import LogConfig
from storage.files import TopicPartition


class SegmentView(Protocol):
    """What selection reads from a segment."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` file."""
        ...

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file mtime when the segment has no records."""
        ...

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp; -1 (or any value <= 0) when there is none."""
        ...


class CleanableLog(Protocol):
    """What the cleaner manager reads from a partition log. ``dir.parent`` is its log directory."""

    topic_partition: TopicPartition
    dir: Path
    config: LogConfig

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_stable_offset(self) -> int:
        """Nothing at or above it is cleaned (the log end offset when nothing is in flight)."""
        ...

    def segments(self) -> Sequence[SegmentView]:
        """Segments in ascending base offset; the last one is the active segment."""
        ...


@dataclass(frozen=True)
class OffsetsToClean:
    """Kafka's ``OffsetsToClean``. ``force_update_checkpoint`` is set when the checkpoint was
    invalid and reset; the new first dirty offset is then written even if the log is not chosen."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


class SegmentRange:
    """A snapshot of a log's segments with Kafka's range lookups (``LogSegments.values``)."""

    def __init__(self, log: CleanableLog) -> None:
        self.segments = list(log.segments())
        self.bases = [s.base_offset for s in self.segments]
        self.log_end_offset = log.log_end_offset

    @property
    def active_base(self) -> int:
        return self.bases[-1] if self.bases else self.log_end_offset

    def values(self, from_offset: int, to_offset: int) -> list[SegmentView]:
        """Segments that may hold offsets in ``[from_offset, to_offset)``: from the one holding
        ``from_offset`` (or the first) to the last whose base is below ``to_offset``."""
        if from_offset >= to_offset:
            return []
        start = max(bisect.bisect_right(self.bases, from_offset) - 1, 0)
        stop = bisect.bisect_left(self.bases, to_offset)
        return self.segments[start:stop]

    def non_active_from(self, from_offset: int) -> list[SegmentView]:
        """Kafka's ``nonActiveLogSegmentsFrom``."""
        if not self.segments or from_offset > self.active_base:
            return []
        return self.values(from_offset, self.active_base)

    def below(self, offset: int) -> list[SegmentView]:
        """Segments whose base offset is below ``offset`` (Kafka's ``logSegments(-1, offset)``)."""
        return self.segments[: bisect.bisect_left(self.bases, offset)]


def cleanable_offsets(log: CleanableLog, last_clean_offset: int | None, now_ms: int,
                      segments: SegmentRange | None = None) -> OffsetsToClean:
    """Kafka's ``cleanableOffsets``: the dirty range ``[first dirty, first uncleanable)``."""
    view = segments or SegmentRange(log)
    log_start = log.log_start_offset
    checkpoint = log_start if last_clean_offset is None else last_clean_offset
    force = checkpoint < log_start or checkpoint > log.log_end_offset
    first_dirty = log_start if force else checkpoint
    limits = [log.last_stable_offset, view.active_base]
    lag_segment = first_lagging_segment(log, view, first_dirty, now_ms)
    if lag_segment is not None:
        limits.append(lag_segment.base_offset)
    return OffsetsToClean(first_dirty, max(first_dirty, min(limits)), force)


def first_lagging_segment(log: CleanableLog, view: SegmentRange, first_dirty: int,
                          now_ms: int) -> SegmentView | None:
    """The first dirty non-active segment holding a record newer than ``min.compaction.lag.ms``."""
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag <= 0:
        return None
    for segment in view.non_active_from(first_dirty):
        if segment.largest_timestamp > now_ms - lag:
            return segment
    return None


def max_compaction_delay(log: CleanableLog, first_dirty_offset: int, now_ms: int,
                         segments: SegmentRange | None = None) -> int:
    """How long (ms) the oldest dirty record has been waiting past ``max.compaction.lag.ms``;
    0 when none is overdue. Only first-batch timestamps > 0 count (Kafka's rule)."""
    view = segments or SegmentRange(log)
    stamps = [t for t in (s.first_batch_timestamp() for s in view.non_active_from(first_dirty_offset))
              if t > 0]
    if not stamps:
        return 0
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True)
class LogToClean:
    """A log considered for cleaning and its dirty range (Kafka's ``LogToClean``).

    ``first_uncleanable_offset`` is rounded down to a segment boundary (the base of the segment
    holding the uncleanable offset, or of the active segment); the cleaner cleans below it.
    """

    topic_partition: TopicPartition
    log: CleanableLog = field(compare=False, repr=False)
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    total_bytes: int
    cleanable_ratio: float
    needs_compaction_now: bool
    compaction_delay_ms: int

    @property
    def log_dir(self) -> Path:
        return self.log.dir.parent

    @classmethod
    def of(cls, log: CleanableLog, first_dirty_offset: int, uncleanable_offset: int,
           compaction_delay_ms: int = 0, segments: SegmentRange | None = None) -> LogToClean:
        view = segments or SegmentRange(log)
        clean_bytes = sum(s.size for s in view.below(first_dirty_offset))
        lagging = view.non_active_from(uncleanable_offset)
        first_uncleanable = lagging[0].base_offset if lagging else view.active_base
        cleanable_bytes = sum(
            s.size for s in view.values(min(first_dirty_offset, first_uncleanable), first_uncleanable))
        total = clean_bytes + cleanable_bytes
        ratio = cleanable_bytes / total if total else 0.0
        return cls(log.topic_partition, log, first_dirty_offset, first_uncleanable, clean_bytes,
                   cleanable_bytes, total, ratio, compaction_delay_ms > 0, compaction_delay_ms)

    @property
    def is_eligible(self) -> bool:
        """Kafka's selection rule: overdue with something to clean, or dirtier than
        ``min.cleanable.dirty.ratio`` (strictly)."""
        return ((self.needs_compaction_now and self.cleanable_bytes > 0)
                or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio)
