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
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import CorruptRecordError, StorageError
from storage.records import RecordBatch
from storage.segment import LogSegment, SegmentIdentity, identity_or_none
from storage.txn_index import AbortedTxn, collect_aborted_transactions

SwapFn = Callable[[int, list[SegmentIdentity]], None]
"""``swap(cleaned_base, old)``: the owner's ``Log.replace_cleaned``, given the identities of the
segments the cleaned one replaces as this view read them."""


class LogView:
    """Segments of one partition directory, read-only. Not thread-safe."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 swap: SwapFn, clock: Clock) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self._swap = swap
        self._segments = segments
        self._identities = {s.base_offset: i for s in segments
                            if (i := identity_or_none(s)) is not None}
        self.topic_partition = files.topic_partition_of(directory)

    @classmethod
    def open(cls, path: Path | str, config: LogConfig, swap: SwapFn, *,
             clock: Clock = SYSTEM_CLOCK) -> LogView:
        directory = Path(path)
        bases = sorted(files.offset_from_file_name(name) for name in os.listdir(directory)
                       if files.is_segment_file(name) and name.endswith(files.LOG_SUFFIX))
        if not bases:
            raise StorageError(f"{directory} holds no segment", path=str(directory))
        segments = [LogSegment(directory, base, config, clock=clock) for base in bases]
        if config.preallocate:
            # the owner's active segment is preallocated: its file length is not its size
            segments[-1].size_to_written_batches()
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

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from
        the ``.txnindex`` files of the view's segments (as ``Log.collect_aborted_transactions``)."""
        return collect_aborted_transactions(
            self.segments_in_range(start_offset, 2**63 - 1), start_offset, upper_bound_offset)

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create_cleaned(self.dir, base_offset, self.config, clock=self.clock)

    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment],
                         expected: Sequence[SegmentIdentity] | None = None) -> None:
        """Ask the owner to swap each cleaned segment in, then follow the swap in this view. The
        owner checks the old segments against ``expected`` (default: the identities this view saw
        at ``open``) and refuses the swap when one changed (``SegmentsChangedError``)."""
        old_bases = [s.base_offset for s in old_segments]
        seen = list(expected) if expected is not None else [
            self._identities.get(s.base_offset) or s.identity for s in old_segments]
        for segment in new_segments:
            segment.close()
            self._swap(segment.base_offset, seen)
        for segment in old_segments:
            segment.release()
        kept = [s for s in self._segments if s.base_offset not in old_bases]
        for segment in new_segments:
            swapped = LogSegment(self.dir, segment.base_offset, self.config, clock=self.clock)
            kept.append(swapped)
            self._identities[swapped.base_offset] = swapped.identity
        self._segments = sorted(kept, key=lambda s: s.base_offset)

    def close(self) -> None:
        for segment in self._segments:
            segment.release()


def read_partition_batches(directory: Path | str, config: LogConfig, start_offset: int,
                           end_offset: int, *, fetch_bytes: int = 1 << 20,
                           attempts: int = 10,
                           relocate: Callable[[], Path | str | None] | None = None
                           ) -> Iterator[RecordBatch]:
    """Every batch holding offsets in ``[start_offset, end_offset)``, read straight from the segment
    files of a partition directory that another process owns (bulk reads, e.g. Spark).

    Safe against a concurrent segment swap or retention: a file renamed or deleted under the read
    makes it list the directory again and go on from the next offset it has not yet returned, so
    every batch comes whole and at most once, and offsets keep increasing.

    Every batch walked is verified (CRC and offsets, ``LogSegment.batches(verify=True)``). A
    ``CorruptRecordError`` is raised when the same batch fails twice in a row; a failure that does
    not repeat was a file swapped under the read (new bytes at old positions) and is retried.

    A partition moved to another log directory under the read (its directory gone): with
    ``relocate`` (it returns where the partition lives now, or None while nobody serves it) the
    read goes on there from the next offset; without it ``FileNotFoundError`` is raised, never a
    short read.
    """
    directory = Path(directory)
    offset = start_offset
    failures = 0
    last_corruption: tuple[object, object] | None = None
    while offset < end_offset:
        try:
            view = LogView.open(directory, config, _no_swap)
        except StorageError:
            return
        except FileNotFoundError:
            failures += 1
            directory = _relocated(directory, relocate, failures, attempts)
            continue
        try:
            progressed = False
            for segment in view.segments_in_range(offset, end_offset):
                index_entry = segment.walk_start(offset)
                # verified walk: CRC and offsets (below the next segment's base) of every batch;
                # the active segment may end in an append still being written
                active = segment is view.active_segment
                next_base = None if active else _next_base(view, segment)
                for entry in segment.batches(index_entry.position, verify=True,
                                             next_base_offset=next_base, target_offset=offset,
                                             torn_tail_ok=active,
                                             index_entry_offset=index_entry.offset):
                    if entry.base_offset >= end_offset:
                        return
                    if entry.last_offset < offset:
                        continue
                    data = segment.read_bytes(entry.position, entry.size)
                    if len(data) < entry.size:
                        raise FileNotFoundError(segment.log_path)
                    yield RecordBatch(data, entry.position, segment.log_path)
                    offset = entry.last_offset + 1
                    progressed = True
                if offset < end_offset and segment is not view.active_segment:
                    offset = max(offset, _next_base(view, segment))
            if not progressed:
                return
        except FileNotFoundError:
            failures += 1
            if failures > attempts:
                raise
            if not directory.is_dir():
                directory = _relocated(directory, relocate, failures, attempts)
        except CorruptRecordError as err:
            failures += 1
            where = (getattr(err, "path", None), getattr(err, "position", None))
            if where == last_corruption or failures > attempts:
                raise
            last_corruption = where
        finally:
            view.close()


def _relocated(directory: Path, relocate: Callable[[], Path | str | None] | None,
               failures: int, attempts: int) -> Path:
    """Where a partition whose ``directory`` is gone lives now (``relocate``), after a short
    wait while nobody serves it; ``FileNotFoundError`` without ``relocate`` or after
    ``attempts``."""
    if relocate is None or failures > attempts:
        raise FileNotFoundError(f"partition directory {directory} is gone")
    found = relocate()
    if found is None or Path(found) == directory:
        time.sleep(min(0.01 * 2 ** failures, 1.0))   # between a move's commit and promotion
        return directory
    return Path(found)


def _next_base(view: LogView, segment: LogSegment) -> int:
    later = [s.base_offset for s in view.segments() if s.base_offset > segment.base_offset]
    return later[0] if later else segment.base_offset


def _no_swap(_base: int, _old: list[int]) -> None:
    raise StorageError("a read-only view cannot swap segments")
