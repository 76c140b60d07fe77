"""``LogView``: a read-only view of a partition directory, for a cleaner in another process.

The owner of the directory (a node actor holding its ``Log``) is the only process that renames or
deletes files. A cleaner worker opens a ``LogView`` over the same files: it reads closed segments
straight from disk, writes ``.cleaned`` segments beside them, and hands each one to ``swap`` (which
asks the owner to run ``Log.replace_cleaned``) instead of renaming anything itself.

The view never runs recovery and never deletes a file. It is a snapshot taken at ``open``: the
owner must not truncate, delete or swap the segments below the cleaning range while the view is in
use, which the coordinator guarantees by pausing cleaning around those operations.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Callable, Sequence

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import StorageError
from storage.segment import LogSegment

SwapFn = Callable[[int, list[int]], None]


class LogView:
    """Segments of one partition directory, read-only. Not thread-safe."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 swap: SwapFn, clock: Clock) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self._swap = swap
        self._segments = segments
        parsed = files.parse_partition_dir(directory.name).topic_partition \
            if _parses(directory.name) else files.TopicPartition(directory.name, 0)
        self.topic_partition = parsed

    @classmethod
    def open(cls, path: Path | str, config: LogConfig, swap: SwapFn, *,
             clock: Clock = SYSTEM_CLOCK) -> LogView:
        directory = Path(path)
        bases = sorted(files.offset_from_file_name(name) for name in os.listdir(directory)
                       if files.is_segment_file(name) and name.endswith(files.LOG_SUFFIX))
        if not bases:
            raise StorageError(f"{directory} holds no segment", path=str(directory))
        segments = [LogSegment(directory, base, config, clock=clock) for base in bases]
        return cls(directory, config, segments, swap, clock)

    @property
    def name(self) -> str:
        return self.dir.name

    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The last segment at the time of the snapshot; never cleaned."""
        return self._segments[-1]

    def segments_in_range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        bases = [s.base_offset for s in self._segments]
        i = max(bisect.bisect_right(bases, from_offset) - 1, 0)
        return [s for s in self._segments[i:] if s.base_offset < to_offset]

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        for path in (files.log_file(self.dir, base_offset, files.CLEANED_SUFFIX),
                     files.index_file(self.dir, base_offset, files.CLEANED_SUFFIX),
                     files.time_index_file(self.dir, base_offset, files.CLEANED_SUFFIX)):
            path.unlink(missing_ok=True)
        return LogSegment.create(self.dir, base_offset, self.config, suffix=files.CLEANED_SUFFIX,
                                 clock=self.clock)

    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment]) -> None:
        """Ask the owner to swap each cleaned segment in, then follow the swap in this view."""
        old_bases = [s.base_offset for s in old_segments]
        for segment in new_segments:
            segment.close()
            self._swap(segment.base_offset, old_bases)
        for segment in old_segments:
            segment.release()
        kept = [s for s in self._segments if s.base_offset not in old_bases]
        for segment in new_segments:
            kept.append(LogSegment(self.dir, segment.base_offset, self.config, clock=self.clock))
        self._segments = sorted(kept, key=lambda s: s.base_offset)

    def close(self) -> None:
        for segment in self._segments:
            segment.release()


def _parses(name: str) -> bool:
    try:
        files.parse_partition_dir(name)
        return True
    except StorageError:
        return False
