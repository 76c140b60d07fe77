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
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator, Sequence

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import CorruptRecordError, StorageError
from storage.log import READ_COMMITTED, READ_UNCOMMITTED
from storage.records import RecordBatch
from storage.segment import LogSegment, SegmentIdentity, identity_or_none
from storage.segment_read import walk_batch_bytes
from storage.txn_index import AbortedTxn, collect_aborted_transactions

SwapFn = Callable[[int, list[SegmentIdentity]], None]
"""``swap(cleaned_base, old)``: the owner's ``Log.replace_cleaned``, given the identities of the
segments the cleaned one replaces as this view read them."""


class LogView:
    """Segments of one partition directory, read-only. Not thread-safe."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 swap: SwapFn, clock: Clock,
                 stats: dict[int, tuple[int, int, int]] | None = None) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self._swap = swap
        self._segments = segments
        self._stats = stats or {}   # base offset -> the .log's stat when the view was opened
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
        stats = {}
        segments = []
        for base in bases:
            try:
                stats[base] = _file_stat(files.log_file(directory, base))
            except FileNotFoundError:
                pass          # swapped or deleted since the listing: never ``unchanged``
            segments.append(LogSegment(directory, base, config, clock=clock))
        if config.preallocate:
            # the owner's active segment is preallocated: its file length is not its size
            segments[-1].size_to_written_batches()
        return cls(directory, config, segments, swap, clock, stats)

    def unchanged(self, segment: LogSegment) -> bool:
        """Whether ``segment``'s ``.log`` is still the file this view opened: same inode, and for
        a closed segment the same size and mtime (a swap puts a new file at the same name; the
        owner's active segment only grows)."""
        seen = self._stats.get(segment.base_offset)
        try:
            now = _file_stat(segment.log_path)
        except FileNotFoundError:
            return False
        if seen is None or now[0] != seen[0]:
            return False
        return segment is self.active_segment or (now == seen and seen[1] == segment.size)

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


class AbortedRanges:
    """The batches a ``read_committed`` reader skips, from ``.txnindex`` entries: a transactional
    batch (data or marker) of producer P whose base offset lies in ``[first, last]`` of one of P's
    aborted transactions. A producer has one transaction open at a time, so its transactional
    batches between the first offset of an aborted transaction and that transaction's abort
    marker are exactly the aborted ones.

    Unlike Kafka's consumer, which tracks "aborted producers" until it sees their abort marker,
    this rule needs no marker: a reader whose segments were compacted under it (the cleaner drops
    aborted data first and abort markers later) never skips a later committed transaction of the
    same producer for want of a marker that is gone."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        by_producer: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for txn in aborted:
            by_producer[txn.producer_id].append((txn.first_offset, txn.last_offset))
        self._ranges = {p: sorted(r) for p, r in by_producer.items()}

    def __len__(self) -> int:
        return sum(len(r) for r in self._ranges.values())

    def skips(self, batch: RecordBatch) -> bool:
        ranges = self._ranges.get(batch.producer_id) if self._ranges else None
        if not ranges or not batch.is_transactional:
            return False
        base = batch.base_offset
        i = bisect.bisect_right(ranges, (base, 2**63)) - 1
        return i >= 0 and ranges[i][0] <= base <= ranges[i][1]


def _directory_state(directory: Path) -> tuple[tuple[str, int], ...] | None:
    """(name, inode) of every segment and index file; None while a swap is half done."""
    state = []
    for entry in os.scandir(directory):
        if entry.name.endswith(files.SWAP_SUFFIX):
            return None
        if files.is_segment_file(entry.name) and not entry.name.endswith(files.TEMP_SUFFIXES):
            state.append((entry.name, entry.inode()))
    return tuple(sorted(state))


STABLE_VIEW_ATTEMPTS = 1000
STABLE_VIEW_WAIT_S = 0.005


def open_stable_view(directory: Path, config: LogConfig, *,
                     attempts: int = STABLE_VIEW_ATTEMPTS) -> LogView | None:
    """A ``LogView`` of a directory another process owns, opened from a listing that no swap or
    roll changed while it was taken: the segment and index files (names and inodes) are the same
    before and after, and no swap is half done (a swap renames the old segments away before it
    renames the new one in: a listing in between misses the offsets of both). None when the
    directory holds no segment (deleted)."""
    for _ in range(attempts):
        before = _directory_state(directory)
        if before is not None:
            try:
                view = LogView.open(directory, config, _no_swap)
            except StorageError:
                return None
            if _directory_state(directory) == before:
                return view
            view.close()
        time.sleep(STABLE_VIEW_WAIT_S)
    raise StorageError(f"{directory}: segments kept changing while opening a view of them",
                       path=str(directory))


def collect_aborted_consistently(directory: Path | str, config: LogConfig, start_offset: int,
                                 end_offset: int) -> AbortedRanges:
    """The aborted transactions overlapping ``[start_offset, end_offset)`` of a partition directory
    another process owns, read from one consistent state of its files (``open_stable_view``;
    the ``.txnindex`` files are read before the second listing of that check).

    Entries of aborted transactions are only ever removed by the cleaner after their data (Kafka's
    CleanedTransactionMetadata), and transactions decided after ``end_offset`` was taken as a last
    stable offset start at or above it, so this one state covers every later state of the range."""
    directory = Path(directory)
    for _ in range(STABLE_VIEW_ATTEMPTS):
        before = _directory_state(directory)
        if before is not None:
            view = open_stable_view(directory, config)
            if view is None:
                return AbortedRanges([])
            try:
                found = view.collect_aborted_transactions(start_offset, end_offset)
            finally:
                view.close()
            if _directory_state(directory) == before:
                return AbortedRanges(found)
        time.sleep(STABLE_VIEW_WAIT_S)
    raise StorageError(f"{directory}: segments kept changing while reading its aborted "
                       f"transactions", path=str(directory))


def read_partition_batches(directory: Path | str, config: LogConfig, start_offset: int,
                           end_offset: int, *, fetch_bytes: int = 1 << 20,
                           attempts: int = 10,
                           isolation: str = READ_UNCOMMITTED,
                           relocate: Callable[[], Path | str | None] | None = None
                           ) -> Iterator[RecordBatch]:
    """Every batch holding offsets in ``[start_offset, end_offset)``, read straight from the segment
    files of a partition directory that another process owns (bulk reads, e.g. Spark).

    ``isolation="read_committed"`` leaves out the batches of aborted transactions (and their
    abort markers), as Kafka's fetch with ``abortedTransactions`` does (``AbortedRanges``); the
    caller gives an ``end_offset`` no higher than the last stable offset, so no batch of an open
    transaction is in the range. Other control batches are returned (decoders skip them).

    Safe against a concurrent segment swap or retention: a file renamed or deleted under the read
    makes it list the directory again and go on from the next offset it has not yet returned, so
    every batch comes whole and at most once, and offsets keep increasing.

    Every batch walked is verified (CRC and offsets, ``LogSegment.batches(verify=True)``) and
    returned as a ``VerifiedBatch`` over the very bytes checked: each batch is read from the file
    once and its CRC computed once (a decoder's ``ensure_valid`` has nothing left to do). A
    ``CorruptRecordError`` is raised when the same batch fails twice in a row; a failure that does
    not repeat was a file swapped under the read (new bytes at old positions) and is retried.

    A partition moved to another log directory under the read (its directory gone): with
    ``relocate`` (it returns where the partition lives now, or None while nobody serves it) the
    read goes on there from the next offset; without it ``FileNotFoundError`` is raised, never a
    short read.
    """
    directory = Path(directory)
    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise StorageError(f"{directory}: isolation {isolation!r} is not {READ_UNCOMMITTED!r} or "
                           f"{READ_COMMITTED!r}", path=str(directory), isolation=isolation)
    aborted = AbortedRanges([])
    if isolation == READ_COMMITTED and start_offset < end_offset:
        aborted = collect_aborted_consistently(directory, config, start_offset, end_offset)
    offset = start_offset
    failures = 0
    last_corruption: tuple[object, object] | None = None
    while offset < end_offset:
        try:
            view = open_stable_view(directory, config)
        except FileNotFoundError:
            failures += 1
            directory = _relocated(directory, relocate, failures, attempts)
            continue
        if view is None:
            return
        try:
            progressed = False
            for segment in view.segments_in_range(offset, end_offset):
                index_entry = segment.walk_start(offset)
                # verified walk: CRC and offsets (below the next segment's base) of every batch;
                # the active segment may end in an append still being written
                active = segment is view.active_segment
                next_base = None if active else _next_base(view, segment)
                # each batch is served from the bytes its check read (read once, CRC once)
                for entry, batch in walk_batch_bytes(segment, index_entry.position,
                                                     next_base_offset=next_base,
                                                     target_offset=offset, torn_tail_ok=active,
                                                     index_entry_offset=index_entry.offset):
                    if entry.base_offset >= end_offset:
                        return
                    if entry.last_offset < offset:
                        continue
                    if not (aborted and aborted.skips(batch)):
                        yield batch
                    offset = entry.last_offset + 1
                    progressed = True
                if not view.unchanged(segment):
                    # swapped or deleted under the walk, which may have ended early: list again
                    raise FileNotFoundError(segment.log_path)
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


def _file_stat(path: Path) -> tuple[int, int, int]:
    """(inode, size, mtime in ns) of a file."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


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
