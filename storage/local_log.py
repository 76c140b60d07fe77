"""One partition directory's segments (Kafka's ``LocalLog``): the segments in offset order, the
log end offset, the recovery point, rolling, flushing, truncation, deleting segment files,
swapping cleaned segments in, and renaming or deleting the directory.

Offsets: every batch lies below ``log_end_offset``; everything below ``recovery_point`` is
flushed. ``LocalLog`` knows nothing of the log start offset, the high watermark, the producer
state or transactions: the partition log above it (``storage.log.Log``) owns those and calls it
with what it decided (the offsets to truncate to, the segments that retention deletes).

A segment leaving the log (retention, truncation, a swap) is renamed ``.deleted`` at once, so a
reader that opens it by name fails and retries, and a restart removes it (loader pass 1); its
files are removed after ``file.delete.delay.ms`` by the scheduler, or at once with a delay of 0
(``storage.log_files``).

Thread-safety: ``LocalLog`` shares its owner's lock (``lock``, reentrant). Every method that
changes it takes the lock; reads take a snapshot of the segments under it and read without it,
retrying on the new segments when one they took was cut or removed meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Sequence

from storage import files, log_swap
from storage.clock import Clock
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    SegmentsChangedError,
    StorageError,
)
from storage.log_files import delete_partition_dir, delete_segment_files, rename_partition_dir
from storage.log_read import READ_CANDIDATES, FetchData
from storage.log_segments import LogSegments
from storage.scheduler import Scheduler, default_scheduler
from storage.segment import LogSegment, SegmentIdentity, identity_or_none
from storage.segment_files import remove_segment_files
from storage.txn_index import AbortedTxn, collect_aborted_transactions

log = logging.getLogger(__name__)

TRUNCATED_IDENTITIES_KEPT = 1024   # truncations are rare: this covers any clean in flight


class LocalLog:
    """The segments of one partition directory and the offsets they define. See the module
    docstring for the contract; made by the partition log from what the loader found."""

    def __init__(self, directory: Path, config: LogConfig, segments: Iterable[LogSegment], *,
                 log_end_offset: int, recovery_point: int, lock: threading.RLock, clock: Clock,
                 scheduler: Scheduler | None) -> None:
        self._dir = directory
        self._config = config
        self._segments = LogSegments(segments)
        self._log_end_offset = log_end_offset
        self._recovery_point = recovery_point
        self._lock = lock
        self._clock = clock
        self._scheduler = scheduler
        self._unflushed_messages = 0
        self._last_flush_ms = clock.milliseconds()
        # what segments looked like before a truncation changed or removed them: a swap of
        # segments cleaned from one of these is refused (``replace_segments``)
        self._truncated: deque[SegmentIdentity] = deque(maxlen=TRUNCATED_IDENTITIES_KEPT)
        self._closed = False

    # ---- state -------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def name(self) -> str:
        return self._dir.name

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def is_closed(self) -> bool:
        return self._closed

    def ensure_open(self) -> None:
        """``StorageError`` once the log was closed, renamed or deleted."""
        if self._closed:
            raise StorageError(f"log {self._dir} is closed", partition=self.name)

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on; the active segment takes it for its roll decision
        (``LogSegment.update_config``)."""
        with self._lock:
            self.ensure_open()
            self._config = config
            self._segments.active.update_config(config)

    def raise_recovery_point(self, offset: int) -> None:
        """Move the recovery point up to ``offset`` when it is below (the log start offset was
        raised there: what lies below it is never recovered)."""
        with self._lock:
            if self._recovery_point < offset:
                self._recovery_point = offset

    # ---- segments ----------------------------------------------------------------------------
    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments in offset order; the last one is the active segment."""
        with self._lock:
            return self._segments.all()

    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return self._segments.bases()

    def segment_at(self, base_offset: int) -> LogSegment | None:
        with self._lock:
            return self._segments.get(base_offset)

    @property
    def active_segment(self) -> LogSegment:
        with self._lock:
            return self._segments.active

    @property
    def first_segment_base_offset(self) -> int:
        with self._lock:
            return self._segments.first_base

    @property
    def number_of_segments(self) -> int:
        with self._lock:
            return len(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments())

    def segments_in_range(self, from_offset: int, to_offset: int,
                          limit: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments(from,
        to)); the first ``limit`` of them when given."""
        with self._lock:
            return self._segments.in_range(from_offset, to_offset, limit)

    def note_indexed(self, segment: LogSegment) -> None:
        """Keep the indexes of at most ``INDEXED_SEGMENTS_KEPT`` closed segments loaded."""
        with self._lock:
            self._segments.note_indexed(segment)

    def release_idle(self) -> None:
        """Drop descriptors and index maps of every closed segment."""
        with self._lock:
            self._segments.release_idle()

    # ---- append, roll, flush -----------------------------------------------------------------
    def append(self, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int,
               pieces: list[bytes | memoryview], size: int, records: int) -> LogSegment:
        """Write validated batches with offsets up to ``last_offset`` to the active segment and
        move the log end past them; returns the segment written. The caller rolled first when
        the active segment had to (``LogSegment.should_roll``)."""
        with self._lock:
            segment = self._segments.active
            segment.append(last_offset, max_timestamp, offset_of_max_timestamp, pieces, size)
            self._log_end_offset = last_offset + 1
            self._unflushed_messages += records
            return segment

    def roll(self) -> LogSegment:
        """Seal the active segment (final time-index entry, trimmed indexes, read-only) and start
        a new one at the log end offset; an empty active segment at that offset is returned as
        it is. Stale files in the way of the new segment are removed. Returns the active
        segment."""
        with self._lock:
            self.ensure_open()
            new_base = self._log_end_offset
            active = self._segments.active
            if active.base_offset == new_base and active.size == 0:
                return active
            if new_base in self._segments:
                raise StorageError(f"{self.name}: a segment with base offset {new_base} exists",
                                   partition=self.name, offset=new_base)
            stale = files.log_file(self._dir, new_base)
            if stale.exists():
                log.warning("deleting stale segment file %s before rolling", stale)
            remove_segment_files(self._dir, new_base, "")
            active.on_become_inactive()
            segment = LogSegment.create(self._dir, new_base, self._config, clock=self._clock,
                                        rolling_jitter_ms=self._config.random_segment_jitter())
            self._segments.add(segment)
            return segment

    def flush(self, offset: int | None = None) -> None:
        """Make every batch below ``offset`` (default: the log end) durable and move the recovery
        point there. The segments are fsynced outside the lock; a segment swapped out or deleted
        meanwhile was flushed by whoever wrote its replacement."""
        if offset is not None:
            offset = files.validate_offset(offset, "offset", partition=self.name)
        with self._lock:
            if self._closed:
                return
            target = self._log_end_offset if offset is None else min(offset,
                                                                     self._log_end_offset)
            if target <= self._recovery_point:
                return
            to_flush = self._segments.in_range(self._recovery_point, target)
            unflushed_at_start = self._unflushed_messages
        for segment in to_flush:
            try:
                segment.flush()
            except FileNotFoundError:
                pass   # swapped out or deleted meanwhile; its replacement was flushed by its writer
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = target
            if target >= self._log_end_offset:
                self._unflushed_messages = max(0, self._unflushed_messages - unflushed_at_start)
            self._last_flush_ms = self._clock.milliseconds()

    # ---- read --------------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int, min_one_message: bool, *,
             log_start_offset: Callable[[], int]) -> FetchData | None:
        """Whole batches from the one holding ``start_offset`` (see ``Log.read_raw``), None at
        the log end; ``OffsetOutOfRangeError`` outside ``[log_start_offset(), log end]``.

        The segments that may hold ``start_offset`` are taken under the lock,
        ``READ_CANDIDATES`` at a time (a fetch costs O(log segments) whatever the log's length),
        and read without it. Each segment holds its file open for the length of its read, so a
        retention delete or a swap that removes it meanwhile costs nothing; a read that finds
        the file gone before it began, or the segment truncated since it was taken, retries on
        the new segment list (three times, then ``StorageError``)."""
        retries = 0
        lookup = start_offset    # where the segments still to read begin
        while retries < 3:
            with self._lock:
                end = self._log_end_offset
                start = log_start_offset()
                if start_offset < start or start_offset > end:
                    raise OffsetOutOfRangeError(
                        f"{self.name}: offset {start_offset} is outside [{start}, {end}]",
                        partition=self.name, offset=start_offset, log_start_offset=start,
                        log_end_offset=end)
                if start_offset == end:
                    return None
                # one more than read: its base bounds the offsets of the last one read
                candidates = self._segments.in_range(lookup, end, READ_CANDIDATES + 1)
                cuts = [segment.cuts for segment in candidates]
                active = self._segments.active
                active_size = active.size
            try:
                result = self._read_candidates(candidates, cuts, start_offset, end, max_bytes,
                                               active, active_size, min_one_message)
            except (FileNotFoundError, _SegmentCut):
                retries += 1       # raced a truncation, or a delete before the read began
                lookup = start_offset
                continue
            if result is not None or len(candidates) <= READ_CANDIDATES:
                return result
            lookup = candidates[READ_CANDIDATES].base_offset   # nothing yet: the next segments
        raise StorageError(f"{self.name}: segments kept changing under a read at {start_offset}",
                           partition=self.name, offset=start_offset)

    def _read_candidates(self, candidates: list[LogSegment], cuts: list[int],
                         start_offset: int, end: int, max_bytes: int, active: LogSegment,
                         active_size: int, min_one_message: bool) -> FetchData | None:
        """Read the first of ``candidates`` (all but the last when they are more than
        ``READ_CANDIDATES``) that holds a batch at or after ``start_offset``."""
        for i, segment in enumerate(candidates[:READ_CANDIDATES]):
            limit = active_size if segment is active else None
            # offsets a batch may hold: below the next segment's base, and below the log end
            # offset in the active (or last) segment
            next_base = candidates[i + 1].base_offset if i + 1 < len(candidates) else end
            try:
                result = segment.read(start_offset, max_bytes, limit, min_one_message,
                                      next_base_offset=next_base)
            except CorruptRecordError:
                if segment.cuts != cuts[i]:
                    raise _SegmentCut() from None
                raise
            if segment.cuts != cuts[i]:
                raise _SegmentCut()
            self.note_indexed(segment)
            if result is not None:
                return FetchData(segment.base_offset, result[0], result[1], str(segment.log_path))
        return None

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        ``.txnindex`` of the segment holding ``start_offset`` and of the later ones until an entry
        shows no later one can add to the range (Kafka's collectAbortedTransactions)."""
        for _ in range(3):
            with self._lock:
                removals = self._segments.removals
                segments = self._segments.in_range(start_offset, self._log_end_offset + 1)
            found = collect_aborted_transactions(segments, start_offset, upper_bound_offset)
            with self._lock:
                if self._segments.removals == removals:
                    return found
            # a segment left the log while its index was read (a swap renames the index it
            # replaces: read in between, it looked empty): read the new segments
        raise StorageError(f"{self.name}: segments kept changing while the aborted "
                           f"transactions from {start_offset} were read",
                           partition=self.name, offset=start_offset)

    # ---- truncation and deletion -------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> None:
        """Remove every batch with offsets >= ``target_offset``, which lies at or above the first
        segment's base and below the log end: the segments above it go, the segment holding it
        is cut, and the log ends at the target even when the batch holding it went whole (Kafka's
        ``LocalLog.truncateTo``), so the next append takes the target offset. The recovery point
        follows the log end down."""
        with self._lock:
            self.ensure_open()
            doomed = self._segments.above(target_offset)
            self._remember_truncated(doomed)
            self.remove_and_delete_segments(doomed)
            active = self._segments.active
            before = identity_or_none(active)
            if not active.is_open_for_writes:
                active.make_writable()
            if active.truncate_to(target_offset) and before is not None:
                self._truncated.append(before)
            active.size_indexes_for_appends()
            self._log_end_offset = target_offset
            self._recovery_point = min(self._recovery_point, self._log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment (their files at once) and restart empty at ``offset``: log end,
        recovery point and a new active segment there."""
        with self._lock:
            self.ensure_open()
            doomed = self._segments.all()
            self._remember_truncated(doomed)
            self.remove_and_delete_segments(doomed, sync=True)
            segment = LogSegment.create(self._dir, offset, self._config, clock=self._clock,
                                        rolling_jitter_ms=self._config.random_segment_jitter())
            self._segments.add(segment)
            self._log_end_offset = offset
            self._recovery_point = offset
            self._unflushed_messages = 0

    def _remember_truncated(self, segments: Sequence[LogSegment]) -> None:
        self._truncated.extend(i for s in segments if (i := identity_or_none(s)) is not None)

    def remove_and_delete_segments(self, segments: Sequence[LogSegment], *,
                                   sync: bool = False) -> None:
        """Take ``segments`` out of the log and delete their files: renamed ``.deleted`` now,
        removed after ``file.delete.delay.ms`` (at once with ``sync``)."""
        with self._lock:
            for segment in segments:
                self._segments.remove(segment.base_offset)
            self._delete_segment_files(segments, sync=sync)

    def _delete_segment_files(self, segments: Sequence[LogSegment], sync: bool = False) -> None:
        delete_segment_files(segments, self._config.file_delete_delay_ms, self.schedule,
                             sync=sync)

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int) -> None:
        """Run ``fn`` after ``delay_ms`` on the log's scheduler (the process's default without
        one), as the task ``<name>:<partition>``."""
        scheduler = self._scheduler or default_scheduler()
        scheduler.schedule(f"{name}:{self.name}", fn, delay_ms)

    # ---- swaps -------------------------------------------------------------------------------
    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment],
                         expected: Sequence[SegmentIdentity] | None = None, *,
                         on_removed: Callable[[list[LogSegment]], None] = lambda _: None
                         ) -> None:
        """Swap cleaned segments in, crash-safely (``storage.log_swap`` for the order of renames);
        ``on_removed`` gets the old segments removed (not those replaced at the same base
        offset) before the final renames. Refused with ``SegmentsChangedError``, the new
        segments' files deleted, when a segment of ``expected`` was truncated or changed since
        the cleaner read it."""
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        with self._lock:
            self.ensure_open()
            if expected is not None:
                self._refuse_changed(expected, new_sorted, require_all=False)
            log_swap.replace_segments(self._segments, new_sorted, old_segments, self._dir,
                                      self._delete_segment_files, self.name, on_removed)

    def segments_cleaned_into(self, cleaned: LogSegment,
                              old_segments: Sequence[int | SegmentIdentity]) -> list[LogSegment]:
        """The log's segments that ``cleaned`` (a ``.cleaned`` segment written by a cleaner in
        another process) replaces: ``old_segments`` as the cleaner read them (identities) or by
        base offset. ``SegmentsChangedError``, and the cleaned files deleted, when they are no
        longer exactly the log's: gone, active, or (for identities) truncated or otherwise
        changed since, even if regrown to the same size. Call under the lock, then swap."""
        identities = [o for o in old_segments if isinstance(o, tuple)]
        old_bases = [o.base_offset if isinstance(o, tuple) else o for o in old_segments]
        cleaned_base = cleaned.base_offset
        with self._lock:
            self.ensure_open()
            old = [self._segments.get(base) for base in old_bases]
            active_base = self._segments.active.base_offset
            if (not cleaned.log_path.exists() or any(s is None for s in old)
                    or active_base in old_bases or not old_bases
                    or cleaned_base != min(old_bases)):
                cleaned.delete_files()
                raise SegmentsChangedError(
                    f"{self.name}: cannot swap cleaned segment {cleaned_base} for {old_bases}"
                    f": the log changed meanwhile", partition=self.name, offset=cleaned_base,
                    changed=[b for b, s in zip(old_bases, old) if s is None])
            self._refuse_changed([SegmentIdentity(*i) for i in identities], [cleaned],
                                 require_all=True)
            return [s for s in old if s is not None]

    def _refuse_changed(self, expected: Sequence[SegmentIdentity],
                        new_segments: Sequence[LogSegment], *, require_all: bool) -> None:
        """Raise ``SegmentsChangedError`` (after deleting ``new_segments``' files) when a segment
        of ``expected`` was truncated since it was read, or is now different; a segment that is
        gone counts only with ``require_all``."""
        truncated = set(self._truncated)
        changed = []
        for seen in expected:
            current = self._segments.get(seen.base_offset)
            if seen in truncated or (current is None and require_all) or (
                    current is not None and current.identity != seen):
                changed.append(seen.base_offset)
        if changed:
            for segment in new_segments:
                segment.delete_files()
            base = min(s.base_offset for s in new_segments) if new_segments else -1
            raise SegmentsChangedError(
                f"{self.name}: cannot swap cleaned segment {base} in: segments {changed} were "
                f"truncated or changed after the cleaner read them (the log changed meanwhile)",
                partition=self.name, offset=base, changed=changed)

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close every segment's files and mark the log closed (a second close does nothing)."""
        with self._lock:
            if self._closed:
                return
            for segment in self._segments.all():
                segment.close()
            self._closed = True

    def rename_dir(self, name: str, *, sync: bool = True) -> None:
        """Rename the partition directory to ``name`` beside it (the ``-delete`` rename) and mark
        the log closed. ``sync=False`` leaves the fsync of the parent directory to the caller."""
        with self._lock:
            self._dir = rename_partition_dir(self._dir, name, self._segments.all(), sync=sync)
            self._closed = True

    def delete(self) -> None:
        """Close every segment, mark the log closed, delete the directory and its files."""
        with self._lock:
            for segment in self._segments.all():
                segment.close()
            self._closed = True
            delete_partition_dir(self._dir)


class _SegmentCut(Exception):
    """A segment read was truncated between the moment the read took it and the read (never
    escapes ``LocalLog.read``, which retries)."""
