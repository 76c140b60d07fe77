"""Startup loading and recovery of one partition directory (Kafka's LogLoader), in numbered passes.

Every pass is safe to run again after a crash in the middle of it:

1-3. Remove temporary files, complete or roll back interrupted swaps, rename the finished swaps
   (``storage.load_swaps``, which states each pass).
4. Load segments in offset order: delete index files without a ``.log``; a segment whose offset index
   is missing or malformed is recovered (its indexes rebuilt from the ``.log``). Every segment that
   pass 5 will not re-validate (all of them after a clean shutdown) has its indexes checked against
   its ``.log`` (``storage.index_checks``: entries monotonic and inside the file, the last one
   on a batch boundary, the time index not below that batch's timestamp; for the active segment
   the tail after the last index entry scanned with CRCs). The active segment is checked here and
   recovered on any doubt, which also cuts a torn tail left behind a stale clean-shutdown marker.
   A closed segment is checked at the first use of its indexes, as Kafka's ``LazyIndex`` loads an
   index when first used (``LogSegment.check_indexes_at_first_use``), and its indexes are rebuilt
   from the ``.log`` then on any doubt, never served; so a clean open reads no index of a closed
   segment. Except in a compacted log: there a doubt may be a cleaned segment overlapping the
   segments it replaced (``_recover_keeping_cut``), a layout only a load can resolve, so every
   segment is checked here. A segment recovered here that is cut and is not the last drops the
   segments after it, as pass 5 does.
5. After an unclean shutdown only, recover every segment from the recovery point on: re-validate every
   batch (CRC, offsets) and truncate at the first invalid byte; segments after a truncation are
   dropped (they were never flushed in order).

A dry run (``LogLoader(..., dry_run=True)``) takes the same decisions on the same files and
changes none of them: every pass records what it would do as ``LoadAction``s instead of doing it
(``strata recover`` reports them). It differs from a real load only where a decision depends on
a file the load itself writes: the segments a split would write are not recovered again (a split
is reported, its parts are not), and transaction indexes are reported as rebuilt, not rebuilt.
Both modes list their actions in ``LoadResult.actions`` (``storage.load_actions``).

Nothing a recovery cuts is deleted (ours, beyond Kafka): the truncated tail of a segment is copied,
and every segment dropped after it moved, to the partition's ``quarantine/`` folder
(``storage.quarantine``), and ``LoadResult.quarantined`` lists them.

Every segment recovered (passes 4 and 5) also gets its ``.txnindex`` rebuilt by replaying it
through the producer state as of its base offset (snapshot + replay of the segments before it).

A segment whose valid batches overflow its base offset (an old broker's) is split, not truncated,
wherever recovery meets it (passes 4 and 5; see ``storage.split``).
6. Offsets: log end offset from the last segment; the log start offset is the checkpointed one,
   not below the first segment's base (segments below a log start go by retention later). A
   checkpoint beyond the recovered log end (delete-records, then a crash that lost the tail)
   starts the log empty at the checkpointed start, as Kafka does, so deleted records are never
   served again nor their offsets handed out again; the segments move to quarantine, kept whole,
   where Kafka deletes them. An empty directory gets a segment at the log start offset; the recovery point is
   the log end after a clean shutdown, else ``min(recovery point, log end)``; the active segment's
   indexes are re-sized to the maximum for appending.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import CorruptIndexError, CorruptRecordError, SegmentOffsetOverflowError
from storage.load_actions import (
    COMPLETE_SWAP,
    CREATE_SEGMENT,
    DELETE_ORPHAN_INDEX,
    DELETE_SWAPPED,
    DELETE_TEMP,
    QUARANTINE_SEGMENT,
    QUARANTINE_SWAP,
    REBUILD_INDEXES,
    RECOVER_SEGMENT,
    SPLIT,
    TRUNCATE,
    LoadAction,
    LoadActions,
    LoadResult,
)
from storage.load_checks import (
    check_indexes_against_log,
    log_may_hold_transactions,
    quick_index_check,
    txn_index_problem,
)
from storage.load_swaps import (
    delete_swapped_originals,
    quarantine_invalid_swaps,
    quarantine_partial_swaps,
    remove_temp_files,
    rename_swaps,
    swap_problem,
)
from storage.producer_state import ProducerStateManager
from storage.quarantine import QuarantinedFile, keep_file, keep_tail, keep_while
from storage.segment import LogSegment
from storage.split import split_overflowed_segment

__all__ = [   # the loader's names, some defined in the modules of its passes
    "COMPLETE_SWAP", "CREATE_SEGMENT", "DELETE_ORPHAN_INDEX", "DELETE_SWAPPED", "DELETE_TEMP",
    "QUARANTINE_SEGMENT", "QUARANTINE_SWAP", "REBUILD_INDEXES", "RECOVER_SEGMENT", "SPLIT",
    "TRUNCATE", "LoadAction", "LoadResult", "LogLoader", "check_indexes_against_log",
    "swap_problem", "txn_index_problem",
]

log = logging.getLogger(__name__)
_dry_running = threading.local()     # a dry run does nothing worth a warning: its thread is quiet
log.addFilter(lambda _record: not getattr(_dry_running, "on", False))


class LogLoader:
    """Loads one partition directory. Single use; not thread-safe.

    ``dry_run=True``: decide as a load would and record the actions (``LoadResult.actions``)
    without changing a file; the result then holds no open segments."""

    def __init__(self, directory: Path, config: LogConfig, *, recovery_point: int,
                 log_start_offset: int, had_clean_shutdown: bool, clock: Clock = SYSTEM_CLOCK,
                 is_delete_dir: bool = False, dry_run: bool = False) -> None:
        self.dir = directory
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset_checkpoint = log_start_offset
        self.had_clean_shutdown = had_clean_shutdown
        self.clock = clock
        self.is_delete_dir = is_delete_dir
        self._completed_swaps = 0
        self._rebuilt = 0
        self._truncated_rebuilding = 0   # bytes cut off while rebuilding indexes (pass 4)
        self._quarantined: list[QuarantinedFile] = []
        self._txn_state: ProducerStateManager | None = None   # see _rebuild_txn_indexes
        self._txn_state_last: LogSegment | None = None
        self.dry_run = dry_run
        self._actions = LoadActions(directory, dry_run=dry_run)
        self._planned: dict[int, int] = {}    # dry run: base offset -> next offset after recovery
        self._ends: dict[int, int] = {}       # base offset -> offset after its batches (_end_of)

    def _segment(self, base: int) -> LogSegment:
        """The segment at ``base`` (a dry run: the swap file a real load would have renamed)."""
        return LogSegment(self.dir, base, self.config, suffix=self._actions.segment_suffix(base),
                          clock=self.clock)

    def load(self) -> LoadResult:
        if not self.dry_run:
            return self._load()
        _dry_running.on = True
        try:
            return self._load()
        finally:
            _dry_running.on = False

    def _load(self) -> LoadResult:
        swaps = remove_temp_files(self._actions)
        if swaps:
            swaps = quarantine_invalid_swaps(self._actions, swaps, self.clock, self._quarantined)
        if swaps:
            swaps = quarantine_partial_swaps(self._actions, swaps, self.config, self.clock,
                                             self._quarantined)
        if swaps:
            delete_swapped_originals(self._actions, swaps, self.config, self.clock)
            self._completed_swaps += rename_swaps(self._actions, swaps)
        segments = self._pass4_load_segments()
        truncated, recovered = 0, 0
        if not self.had_clean_shutdown and not self.is_delete_dir:
            truncated, recovered, segments = self._pass5_recover(segments)
        return self._pass6_offsets(segments, truncated, recovered)

    # ---- pass 4 ------------------------------------------------------------------------------
    def _pass4_load_segments(self) -> list[LogSegment]:
        names = set(self._actions.listdir())
        logs: list[int] = []
        for name in names:
            if not files.is_segment_file(name):
                continue
            offset = files.offset_from_file_name(name)
            stem = files.offset_name(offset)
            if name.endswith(files.INDEX_SUFFIXES) and f"{stem}{files.LOG_SUFFIX}" not in names:
                self._actions.unlink(self.dir / name, DELETE_ORPHAN_INDEX, "an index without its .log")
            elif name == f"{stem}{files.LOG_SUFFIX}":
                logs.append(offset)
        segments = []
        bases = sorted(logs)
        recovered_later = self._first_base_recovered_later(bases)
        superseded: set[int] = set()
        transactional = log_may_hold_transactions(self.dir, names)
        for i, base in enumerate(bases):
            if base in superseded:
                continue
            segment = self._segment(base)
            stem = files.offset_name(base)
            index_name = f"{stem}{files.INDEX_SUFFIX}"
            needs_rebuild = index_name not in names
            if not needs_rebuild:
                try:
                    if base < recovered_later:   # a full check against the .log
                        quick_index_check(self.dir, stem, names, (files.TXN_INDEX_SUFFIX,))
                        end = bases[i + 1] if i + 1 < len(bases) else None
                        if end is not None and not self.config.compact:
                            segment.check_indexes_at_first_use(end)   # a closed segment
                        else:
                            check_indexes_against_log(segment, end)
                    else:
                        quick_index_check(self.dir, stem, names)
                except CorruptIndexError as err:
                    log.warning("%s; rebuilding the indexes of %s", err, segment.log_path)
                    needs_rebuild = True
            if needs_rebuild and (self.had_clean_shutdown or base < self.recovery_point):
                log.info("rebuilding missing or corrupt indexes of %s", segment.log_path)
            if needs_rebuild:
                self._actions.act(REBUILD_INDEXES, segment.offset_index.path,
                          "missing" if index_name not in names else "malformed or doubtful")
                if not self.dry_run:
                    for index in (segment.offset_index, segment.time_index):
                        index.delete_if_exists()
                later = [b for b in bases[i + 1:] if b not in superseded]
                truncated, recovered, gone = self._recover(segment, later)
                superseded.update(gone)
                self._rebuild_txn_indexes(recovered, segments)
                self._truncated_rebuilding += truncated
                if not self.dry_run:
                    for done in recovered:
                        done.make_read_only()
                self._rebuilt += 1
                segments.extend(recovered)
                remaining = [b for b in bases[i + 1:] if b not in superseded]
                if truncated and remaining:
                    # damage in the middle of the log: what follows was written after bytes that
                    # are gone (a transaction's marker, a producer's sequence), so, as after a
                    # truncation in pass 5, the later segments leave the log (kept in quarantine)
                    for later_base in remaining:
                        self._drop_segment(self._segment(later_base),
                                           f"follows {segment.log_path.name}, truncated")
                    break
            else:
                if base < recovered_later and transactional:
                    problem = txn_index_problem(segment, segments, self.config.compact)
                    if problem is not None:
                        log.warning("%s: %s; rebuilding it from the log", segment.txn_index.path,
                                    problem)
                        self._rebuild_txn_indexes([segment], segments)
                segments.append(segment)
        return segments

    def _first_base_recovered_later(self, bases: list[int]) -> int:
        """The base offset from which pass 5 re-validates every segment anyway (unclean shutdown:
        the segment holding the recovery point); pass 4 checks the indexes of those below it
        against their ``.log``. Everything is checked after a clean shutdown, nothing in a
        directory being deleted."""
        if self.is_delete_dir:
            return -1
        if self.had_clean_shutdown or not bases:
            return 2**63
        return max((b for b in bases if b <= self.recovery_point), default=bases[0])

    def _recover(self, segment: LogSegment,
                 later: list[int]) -> tuple[int, list[LogSegment], list[int]]:
        """``segment.recover`` (``later``: the base offsets of the segments after it); a segment
        whose offsets overflow its base is split first and the parts recovered instead. Returns
        the bytes truncated, the segments now in its place and the later segments it supersedes
        (``_recover_keeping_cut``), which have left the log."""
        next_base = later[0] if later else None
        try:
            truncated, gone = self._recover_keeping_cut(segment, later)
            return truncated, [segment], gone
        except SegmentOffsetOverflowError as err:
            log.warning("%s; splitting the segment", err)
            position = err.fields.get("position")
            self._actions.act(SPLIT, segment.log_path, str(err),
                      position if isinstance(position, int) else None)
            if self.dry_run:
                return 0, [segment], []
        size, name = segment.size, segment.log_path.name
        with keep_while(segment.log_path) as original:        # the split deletes the segment
            parts, left_out = split_overflowed_segment(segment, self.config, clock=self.clock)
            if left_out:          # the bytes it leaves out are a tail: keep them
                self._quarantined.append(keep_tail(
                    original, size - left_out, self.clock.milliseconds(),
                    f"left out of the split of {name}: recovery truncated them", name=name))
        for i, part in enumerate(parts):
            after = [parts[i + 1].base_offset] if i + 1 < len(parts) else \
                ([next_base] if next_base is not None else [])
            truncated, _ = self._recover_keeping_cut(part, after, overlap=False)
            if truncated:
                for later_part in parts[i + 1:]:
                    self._drop_segment(later_part, f"follows {part.log_path.name}, truncated")
                return truncated + left_out, parts[:i + 1], []
        return left_out, parts, []

    # ---- the quarantine hook: what recovery cuts is kept, never deleted ------------------------
    def _recover_keeping_cut(self, segment: LogSegment, later: list[int], *,
                             overlap: bool = True) -> tuple[int, list[int]]:
        """Recover ``segment`` (a dry run: plan it) and return the bytes cut and the later
        segments it supersedes.

        Offsets lie outside the CRC, so a batch whose offsets run past the next segment's base
        is out of place and cut there, with one exception (``overlap``): Kafka's cleaner writes
        one cleaned segment for a group of segments, at the first one's base offset, and a
        broker stopped between the swap's renames leaves the segments it replaced beside it.
        Kafka loads such a partition as it is and its reads take the floor segment of an offset,
        so a reader from the cleaned segment's base reads the cleaned batches and then the first
        segment after them. The same layout is recognised here: the segment's own batches (each
        checked, in order) run past the next base offset into later segments, and end inside the
        last of those (at or after its base, at or before its last offset), as a cleaned group
        does. Those later segments are superseded: they move to quarantine, whole, and the
        reader gets what Kafka's reader from the cleaned base gets. Anything else that runs past
        the next base is cut at the first batch that does."""
        next_base = later[0] if later else None
        bound = next_base
        if overlap and later:
            # batches may run into the later segments, but not beyond the log's end: one that
            # does is out of place (cut), never taken for an overflow to split
            bound = max(next_base, self._end_of(later[-1]))
        if self.dry_run:
            self._actions.act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
            plan = segment.plan_recovery(bound)
            valid, file_size, next_offset = plan.valid_bytes, plan.file_size, plan.next_offset
            gone: list[int] = []
            if overlap and next_base is not None and next_offset > next_base:
                gone = self._superseded(next_offset - 1, later)
                if gone:
                    self._supersede(segment, gone)
                else:
                    plan = segment.plan_recovery(next_base)
                    valid, next_offset = plan.valid_bytes, plan.next_offset
            self._planned[segment.base_offset] = next_offset
            cut = file_size - valid
            if cut:
                self._actions.act(TRUNCATE, segment.log_path, f"invalid bytes from position "
                          f"{valid}: recovery truncates them", valid, cut)
            return cut, gone
        self._actions.act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
        size = segment.log_path.stat().st_size

        def keep_cut(position: int) -> None:
            self._quarantined.append(keep_tail(
                segment.log_path, position, self.clock.milliseconds(),
                f"invalid bytes from position {position}: recovery truncated them"))

        cut = segment.recover(keep_cut=keep_cut, next_base_offset=bound)
        gone = []
        if overlap and next_base is not None and segment.read_next_offset() > next_base:
            gone = self._superseded(segment.read_next_offset() - 1, later)
            if gone:
                self._supersede(segment, gone)
            else:
                cut += self._cut_from(segment, next_base, keep_cut)
        if cut:
            self._actions.act(TRUNCATE, segment.log_path, f"invalid bytes from position "
                      f"{size - cut}: recovery truncates them", size - cut, cut)
        return cut, gone

    def _end_of(self, base: int) -> int:
        """The offset after the batches of the segment at ``base`` by their headers alone (no
        CRC): a bound, not a promise. Read once a load (every recovery in pass 5 asks for the
        last segment's)."""
        if base not in self._ends:
            segment = self._segment(base)
            try:
                self._ends[base] = segment.read_next_offset()
            except (CorruptRecordError, OSError):
                self._ends[base] = base
            finally:
                segment.close()
        return self._ends[base]

    def _superseded(self, last_offset: int, later: list[int]) -> list[int]:
        """The later segments a cleaned segment ending at ``last_offset`` replaced (see
        ``_recover_keeping_cut``), or [] when its batches do not end inside the last segment
        they run into (then they are out of place)."""
        covered = [b for b in later if b <= last_offset]
        if not covered:
            return []
        tail = self._segment(covered[-1])
        after = next((b for b in later if b > covered[-1]), None)
        try:
            tail_end = tail.plan_recovery(after).next_offset
        except (SegmentOffsetOverflowError, OSError):
            return []
        finally:
            tail.close()
        return covered if last_offset < tail_end else []

    def _supersede(self, segment: LogSegment, bases: list[int]) -> None:
        for base in bases:
            later = self._segment(base)
            log.warning("%s is superseded by the cleaned segment %s, whose batches cover its "
                        "offsets (a swap that did not finish); moving it to quarantine",
                        later.log_path, segment.log_path)
            self._drop_segment(later, f"superseded by the cleaned segment "
                                      f"{segment.log_path.name}, which covers its offsets")

    def _cut_from(self, segment: LogSegment, next_base: int,
                  keep_cut: Callable[[int], None]) -> int:
        """Cut ``segment`` at its first batch that runs to ``next_base`` or past it (kept in
        quarantine first); returns the bytes cut."""
        entry = segment.translate_offset(next_base)
        if entry is None:
            return 0
        log.warning("%s: the batch at position %d ends at offset %d, at or past the next "
                    "segment's base %d; truncating there", segment.log_path, entry.position,
                    entry.last_offset, next_base)
        keep_cut(entry.position)
        return segment.truncate_to(next_base)

    def _drop_segment(self, segment: LogSegment, reason: str) -> None:
        """Move ``segment``'s ``.log`` to quarantine and delete its (derived) indexes."""
        segment.close()
        self._actions.act(QUARANTINE_SEGMENT, segment.log_path, reason, 0,
                  segment.log_path.stat().st_size if segment.log_path.exists() else 0)
        if self.dry_run:
            return
        if segment.log_path.exists():
            self._quarantined.append(keep_file(segment.log_path, self.clock.milliseconds(),
                                               reason))
        segment.delete_files()

    def _rebuild_txn_indexes(self, recovered: list[LogSegment], before: list[LogSegment]) -> None:
        """Rebuild the ``.txnindex`` of segments just recovered, replaying them through the
        producer state as of the first one's base offset (Kafka's recoverSegment): the newest
        snapshot at or below it plus the batches of the segments ``before`` it after that
        snapshot. Consecutive recoveries reuse the state the previous one left. A dry run
        rebuilds nothing (and reads no producer state)."""
        if self.dry_run or all(segment.size == 0 for segment in recovered):
            return    # (an empty segment indexes nothing: its .txnindex stays absent)
        state = self._txn_state
        if state is None or not before or before[-1] is not self._txn_state_last:
            state = ProducerStateManager(self.dir)
            start = state.load_latest_snapshot(recovered[0].base_offset,
                                               self.clock.milliseconds())
            try:
                for k, segment in enumerate(before):
                    # a segment followed by one based at or below the snapshot ends below it
                    if k + 1 < len(before) and before[k + 1].base_offset <= start:
                        continue
                    if segment.read_next_offset() > start:
                        segment.replay_producer_state(state, start)
            except (CorruptRecordError, CorruptIndexError) as err:
                # a damaged segment below the recovery point: index what can be known
                log.warning("%s; transactions begun before it are not in the rebuilt "
                            "transaction index of %s", err, recovered[0].log_path)
        for segment in recovered:
            segment.rebuild_txn_index(state)
        self._txn_state, self._txn_state_last = state, recovered[-1]

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
                truncated, parts, gone = self._recover(
                    segment, [s.base_offset for s in segments[i + 1:]])
                if gone:
                    for left in segments[i + 1:]:
                        if left.base_offset in gone:
                            left.close()
                    segments = [s for s in segments if s.base_offset not in gone]
            except (CorruptRecordError, CorruptIndexError) as err:
                log.warning("%s; truncating %s to its base offset", err, segment.log_path)
                size = segment.log_path.stat().st_size
                self._actions.act(TRUNCATE, segment.log_path, f"unreadable segment: {err}", 0, size)
                if self.dry_run:
                    truncated, parts = size, [segment]
                    self._planned[segment.base_offset] = segment.base_offset
                elif segment.log_path.stat().st_size:
                    self._quarantined.append(keep_tail(
                        segment.log_path, 0, self.clock.milliseconds(),
                        f"unreadable segment: {err}"))
                if not self.dry_run:
                    truncated, parts = segment.truncate_fully(), [segment]
            self._rebuild_txn_indexes(parts, segments[:i])
            segments[i:i + 1] = parts
            i += len(parts) - 1
            segment = segments[i]
            if not self.dry_run:
                for part in parts:
                    part.make_read_only()
            recovered += len(parts)
            truncated_total += truncated
            if truncated > 0:
                log.warning("recovery truncated %d invalid bytes from %s", truncated,
                            segment.log_path)
                for later in segments[i + 1:]:
                    log.warning("moving %s, which follows a truncated segment, to quarantine",
                                later.log_path)
                    self._drop_segment(later, f"follows {segment.log_path.name}, truncated")
                segments = segments[: i + 1]
                break
            i += 1
        return truncated_total, recovered, segments

    # ---- pass 6 ------------------------------------------------------------------------------
    def _pass6_offsets(self, segments: list[LogSegment], truncated: int,
                       recovered: int) -> LoadResult:
        if self.dry_run:
            return self._dry_run_result(segments, truncated, recovered)
        log_end = segments[-1].read_next_offset() if segments else self.log_start_offset_checkpoint
        checkpointed_start = self.log_start_offset_checkpoint
        if segments and log_end < checkpointed_start:
            # delete-records raised the log start, then a crash lost the tail after it: Kafka
            # deletes every segment and starts the log at the checkpointed start (LogLoader), so
            # the deleted records never come back and no offset below the start is handed out
            # again. The same here, except that the segments move to quarantine, kept whole.
            log.warning("%s: the checkpointed log start offset %d is beyond the recovered log "
                        "end offset %d; moving every segment to quarantine and starting the log "
                        "at %d", self.dir, checkpointed_start, log_end, checkpointed_start)
            for segment in segments:
                self._drop_segment(segment, f"below the checkpointed log start offset "
                                            f"{checkpointed_start}, beyond the recovered log "
                                            f"end {log_end}")
            segments = []
        if not segments:
            log_end = max(self.log_start_offset_checkpoint, 0)
            segments = [LogSegment.create(self.dir, log_end, self.config, clock=self.clock,
                                          rolling_jitter_ms=self.config.random_segment_jitter())]
        else:
            segments[-1].make_writable()
            segments[-1].rolling_jitter_ms = self.config.random_segment_jitter()
        recovery_point = log_end if self.had_clean_shutdown else min(self.recovery_point, log_end)
        log_start = max(checkpointed_start, segments[0].base_offset)
        return LoadResult(segments, log_start, log_end, recovery_point,
                          truncated + self._truncated_rebuilding, recovered,
                          self._rebuilt, self._actions.deleted_temp, self._completed_swaps,
                          self.had_clean_shutdown, tuple(self._quarantined), tuple(self._actions.actions))

    def _dry_run_result(self, segments: list[LogSegment], truncated: int,
                        recovered: int) -> LoadResult:
        """Pass 6 of a dry run: the offsets a load would end with; the segments are closed."""
        if segments:
            last = segments[-1]
            log_end = self._planned.get(last.base_offset)
            if log_end is None:
                log_end = last.read_next_offset()
            log_start = max(self.log_start_offset_checkpoint, segments[0].base_offset)
            if log_end < self.log_start_offset_checkpoint:
                for segment in segments:
                    self._drop_segment(segment, "below the checkpointed log start offset "
                                                f"{self.log_start_offset_checkpoint}, beyond the "
                                                f"recovered log end {log_end}")
                log_end = log_start = self.log_start_offset_checkpoint
                self._actions.act(CREATE_SEGMENT, files.log_file(self.dir, log_end),
                                  "the log starts at the checkpointed log start offset")
        else:
            log_end = log_start = max(self.log_start_offset_checkpoint, 0)
            self._actions.act(CREATE_SEGMENT, files.log_file(self.dir, log_end), "an empty directory")
        for segment in segments:
            segment.close()
        recovery_point = log_end if self.had_clean_shutdown else min(self.recovery_point, log_end)
        return LoadResult([], log_start, log_end, recovery_point,
                          truncated + self._truncated_rebuilding, recovered, self._rebuilt,
                          self._actions.deleted_temp, self._completed_swaps, self.had_clean_shutdown,
                          (), tuple(self._actions.actions), dry_run=True)
