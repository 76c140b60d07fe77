"""Startup loading and recovery of one partition directory (Kafka's LogLoader), in numbered passes.

Every pass is safe to run again after a crash in the middle of it:

1. Remove temporary files: every ``*.deleted``; every ``*.cleaned``; and every ``*.swap`` at or above
   the lowest ``.cleaned`` offset (a swap that was not complete when the clean was cut off).
2. Complete interrupted swaps: for the remaining ``.log.swap`` files, delete the original segment
   files whose offsets fall in the swapped range ``[min swap base, max swap next offset)``.
3. Rename every remaining ``*.swap`` to its final name.
4. Load segments in offset order: delete index files without a ``.log``; a segment whose offset index
   is missing or malformed is recovered (its indexes rebuilt from the ``.log``).
5. After an unclean shutdown only, recover every segment from the recovery point on: re-validate every
   batch (CRC, offsets) and truncate at the first invalid byte; segments after a truncation are
   deleted (they were never flushed in order).

Every segment recovered (passes 4 and 5) also gets its ``.txnindex`` rebuilt by replaying it
through the producer state as of its base offset (snapshot + replay of the segments before it).

A segment whose valid batches overflow its base offset (an old broker's) is split, not truncated,
wherever recovery meets it (passes 4 and 5; see ``storage.split``).
6. Offsets: log end offset from the last segment; a log end below the checkpointed log start offset
   empties the log; an empty directory gets a segment at the log start offset; the recovery point is
   the log end after a clean shutdown, else ``min(recovery point, log end)``; the active segment's
   indexes are re-sized to the maximum for appending.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from storage import files
from storage import txn_index
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.errors import CorruptIndexError, CorruptRecordError, SegmentOffsetOverflowError
from storage.producer_state import ProducerStateManager
from storage.segment import LogSegment
from storage.split import split_overflowed_segment

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What the loader found and did."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    truncated_bytes: int
    recovered_segments: int
    rebuilt_indexes: int
    deleted_temp_files: int
    completed_swaps: int
    clean_shutdown: bool = False   # loaded after a clean shutdown: nothing was re-validated


class LogLoader:
    """Loads one partition directory. Single use; not thread-safe."""

    def __init__(self, directory: Path, config: LogConfig, *, recovery_point: int,
                 log_start_offset: int, had_clean_shutdown: bool, clock: Clock = SYSTEM_CLOCK,
                 is_delete_dir: bool = False) -> None:
        self.dir = directory
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset_checkpoint = log_start_offset
        self.had_clean_shutdown = had_clean_shutdown
        self.clock = clock
        self.is_delete_dir = is_delete_dir
        self._deleted_temp = 0
        self._completed_swaps = 0
        self._rebuilt = 0
        self._truncated_rebuilding = 0   # bytes cut off while rebuilding indexes (pass 4)
        self._txn_state: ProducerStateManager | None = None   # see _rebuild_txn_indexes
        self._txn_state_last: LogSegment | None = None

    def load(self) -> LoadResult:
        swaps = self._pass1_remove_temp_files()
        if swaps:
            self._pass2_delete_swapped_originals(swaps)
            self._pass3_rename_swaps(swaps)
        segments = self._pass4_load_segments()
        truncated, recovered = 0, 0
        if not self.had_clean_shutdown and not self.is_delete_dir:
            truncated, recovered, segments = self._pass5_recover(segments)
        return self._pass6_offsets(segments, truncated, recovered)

    # ---- pass 1 ------------------------------------------------------------------------------
    def _pass1_remove_temp_files(self) -> list[Path]:
        names = os.listdir(self.dir)
        cleaned_offsets = [files.offset_from_file_name(n) for n in names
                           if n.endswith(files.CLEANED_SUFFIX) and files.is_segment_file(n)]
        min_cleaned = min(cleaned_offsets) if cleaned_offsets else None
        swaps: list[Path] = []
        for name in names:
            if not name.endswith(files.TEMP_SUFFIXES) or not files.is_segment_file(name):
                continue
            path = self.dir / name
            if name.endswith(files.DELETED_SUFFIX) or name.endswith(files.CLEANED_SUFFIX):
                self._unlink(path)
            elif name.endswith(files.SWAP_SUFFIX):
                offset = files.offset_from_file_name(name)
                if min_cleaned is not None and offset >= min_cleaned:
                    self._unlink(path)
                elif files.strip_temp_suffix(path).name.endswith(files.LOG_SUFFIX):
                    swaps.append(path)
                else:
                    # an index swap: the index is rebuilt from the swapped-in segment
                    self._unlink(path)
        return sorted(swaps)

    # ---- pass 2 and 3 ------------------------------------------------------------------------
    def _pass2_delete_swapped_originals(self, swaps: list[Path]) -> None:
        bases = [files.offset_from_file_name(p.name) for p in swaps]
        next_offsets = []
        for base in bases:
            segment = LogSegment(self.dir, base, self.config, suffix=files.SWAP_SUFFIX,
                                 clock=self.clock)
            next_offsets.append(segment.read_next_offset())
            segment.close()
        low, high = min(bases), max(next_offsets)
        for name in os.listdir(self.dir):
            if not files.is_segment_file(name) or name.endswith(files.TEMP_SUFFIXES):
                continue
            if name.endswith((files.LOG_SUFFIX, *files.INDEX_SUFFIXES)):
                offset = files.offset_from_file_name(name)
                if low <= offset < high:
                    self._unlink(self.dir / name)

    def _pass3_rename_swaps(self, swaps: list[Path]) -> None:
        for path in swaps:
            target = files.strip_temp_suffix(path)
            os.replace(path, target)
            base = files.offset_from_file_name(path.name)
            # indexes of a swapped-in segment are rebuilt: its index swaps were removed in pass 1
            for index in (files.index_file(self.dir, base), files.time_index_file(self.dir, base)):
                self._unlink(index)
            self._completed_swaps += 1
        fsync_dir(self.dir)

    # ---- pass 4 ------------------------------------------------------------------------------
    def _pass4_load_segments(self) -> list[LogSegment]:
        names = set(os.listdir(self.dir))
        logs: list[int] = []
        for name in names:
            if not files.is_segment_file(name):
                continue
            offset = files.offset_from_file_name(name)
            stem = files.offset_name(offset)
            if name.endswith(files.INDEX_SUFFIXES) and f"{stem}{files.LOG_SUFFIX}" not in names:
                self._unlink(self.dir / name)
            elif name == f"{stem}{files.LOG_SUFFIX}":
                logs.append(offset)
        segments = []
        for base in sorted(logs):
            segment = LogSegment(self.dir, base, self.config, clock=self.clock)
            stem = files.offset_name(base)
            index_name = f"{stem}{files.INDEX_SUFFIX}"
            needs_rebuild = index_name not in names
            if not needs_rebuild:
                try:
                    self._quick_index_check(stem, names)
                except CorruptIndexError as err:
                    log.warning("%s; rebuilding the indexes of %s", err, segment.log_path)
                    needs_rebuild = True
            if needs_rebuild and (self.had_clean_shutdown or base < self.recovery_point):
                log.info("rebuilding missing or corrupt indexes of %s", segment.log_path)
            if needs_rebuild:
                for index in (segment.offset_index, segment.time_index):
                    index.delete_if_exists()
                truncated, recovered = self._recover(segment)
                self._rebuild_txn_indexes(recovered, segments)
                self._truncated_rebuilding += truncated
                for done in recovered:
                    done.make_read_only()
                self._rebuilt += 1
                segments.extend(recovered)
            else:
                segments.append(segment)
        return segments

    def _recover(self, segment: LogSegment) -> tuple[int, list[LogSegment]]:
        """``segment.recover``; a segment whose offsets overflow its base is split first and the
        parts recovered instead. Returns the bytes truncated and the segments now in its place."""
        try:
            return segment.recover(self.config.max_message_bytes), [segment]
        except SegmentOffsetOverflowError as err:
            log.warning("%s; splitting the segment", err)
        parts, left_out = split_overflowed_segment(segment, self.config, clock=self.clock)
        for i, part in enumerate(parts):
            truncated = part.recover(self.config.max_message_bytes)
            if truncated:
                for later in parts[i + 1:]:
                    later.delete_files()
                return truncated + left_out, parts[:i + 1]
        return left_out, parts

    def _rebuild_txn_indexes(self, recovered: list[LogSegment], before: list[LogSegment]) -> None:
        """Rebuild the ``.txnindex`` of segments just recovered, replaying them through the
        producer state as of the first one's base offset (Kafka's recoverSegment): the newest
        snapshot at or below it plus the batches of the segments ``before`` it after that
        snapshot. Consecutive recoveries reuse the state the previous one left."""
        state = self._txn_state
        if state is None or not before or before[-1] is not self._txn_state_last:
            state = ProducerStateManager(self.dir)
            start = state.load_latest_snapshot(recovered[0].base_offset,
                                               self.clock.milliseconds())
            try:
                for segment in before:
                    if segment.read_next_offset() > start:
                        segment.replay_producer_state(state, start)
            except (CorruptRecordError, CorruptIndexError) as err:
                # a damaged segment below the recovery point: index what can be known
                log.warning("%s; transactions begun before it are not in the rebuilt "
                            "transaction index of %s", err, recovered[0].log_path)
        for segment in recovered:
            segment.rebuild_txn_index(state)
        self._txn_state, self._txn_state_last = state, recovered[-1]

    def _quick_index_check(self, stem: str, names: set[str]) -> None:
        """Cheap structural check from the sizes of the index files of segment ``stem`` (among
        ``names``, the directory's listing); full checks happen in recovery."""
        directory = str(self.dir)
        for suffix, width in ((files.INDEX_SUFFIX, 8), (files.TIME_INDEX_SUFFIX, 12),
                              (files.TXN_INDEX_SUFFIX, txn_index.ENTRY_SIZE)):
            name = f"{stem}{suffix}"
            if name not in names:
                continue
            path = os.path.join(directory, name)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                continue
            if size % width:
                raise CorruptIndexError(
                    f"index file {path} has size {size}, not a multiple of {width}", path=path)

    # ---- pass 5 ------------------------------------------------------------------------------
    def _pass5_recover(self, segments: list[LogSegment]) -> tuple[int, int, list[LogSegment]]:
        truncated_total, recovered = 0, 0
        start = 0
        for i, segment in enumerate(segments):
            if segment.base_offset <= self.recovery_point:
                start = i
        i = start
        while i < len(segments):
            segment = segments[i]
            try:
                truncated, parts = self._recover(segment)
            except (CorruptRecordError, CorruptIndexError) as err:
                log.warning("%s; truncating %s to its base offset", err, segment.log_path)
                truncated, parts = segment.truncate_fully(), [segment]
            self._rebuild_txn_indexes(parts, segments[:i])
            segments[i:i + 1] = parts
            i += len(parts) - 1
            segment = segments[i]
            for part in parts:
                part.make_read_only()
            recovered += len(parts)
            truncated_total += truncated
            if truncated > 0:
                log.warning("recovery truncated %d invalid bytes from %s", truncated,
                            segment.log_path)
                for later in segments[i + 1:]:
                    log.warning("deleting %s, which follows a truncated segment", later.log_path)
                    later.delete_files()
                segments = segments[: i + 1]
                break
            i += 1
        return truncated_total, recovered, segments

    # ---- pass 6 ------------------------------------------------------------------------------
    def _pass6_offsets(self, segments: list[LogSegment], truncated: int,
                       recovered: int) -> LoadResult:
        log_end = segments[-1].read_next_offset() if segments else self.log_start_offset_checkpoint
        if segments and log_end < self.log_start_offset_checkpoint:
            for segment in segments:
                segment.delete_files()
            segments = []
        if not segments:
            log_end = max(self.log_start_offset_checkpoint, 0)
            segments = [LogSegment.create(self.dir, log_end, self.config, clock=self.clock,
                                          rolling_jitter_ms=self.config.random_segment_jitter())]
        else:
            segments[-1].make_writable()
            segments[-1].rolling_jitter_ms = self.config.random_segment_jitter()
        recovery_point = log_end if self.had_clean_shutdown else min(self.recovery_point, log_end)
        log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
        return LoadResult(segments, log_start, log_end, recovery_point,
                          truncated + self._truncated_rebuilding, recovered,
                          self._rebuilt, self._deleted_temp, self._completed_swaps,
                          self.had_clean_shutdown)

    def _unlink(self, path: Path) -> None:
        try:
            path.unlink()
            self._deleted_temp += 1
        except FileNotFoundError:
            pass
