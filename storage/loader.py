"""Startup loading and recovery of one partition directory (Kafka's LogLoader), in numbered passes.

Every pass is safe to run again after a crash in the middle of it:

1-3. Remove temporary files, complete or roll back interrupted swaps, rename the finished swaps
   (``storage.load_swaps``, which states each pass).
4. Load segments in offset order: delete index files without a ``.log``; a segment whose offset index
   is missing or malformed is recovered (its indexes rebuilt from the ``.log``). Every segment that
   pass 5 will not re-validate (all of them after a clean shutdown) has its indexes checked against
   its ``.log`` (``storage.load_checks``: entries monotonic and inside the file, the last one
   on a batch boundary, the time index not below that batch's timestamp; for the active segment
   the tail after the last index entry scanned with CRCs) and is recovered on any doubt, which
   also cuts a torn tail left behind a stale clean-shutdown marker. A segment cut there that is
   not the last drops the segments after it, as pass 5 does.
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
6. Offsets: log end offset from the last segment; the log start offset is the checkpointed one
   clamped to ``[first segment's base, log end]``: a checkpoint beyond the log end is ignored with a
   warning (never does a checkpoint alone delete a segment; segments below a valid log start go by
   retention later); an empty directory gets a segment at the log start offset; the recovery point is
   the log end after a clean shutdown, else ``min(recovery point, log end)``; the active segment's
   indexes are re-sized to the maximum for appending.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

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
from storage.load_checks import check_indexes_against_log, quick_index_check, txn_index_problem
from storage.load_swaps import (
    delete_swapped_originals,
    quarantine_invalid_swaps,
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
        for i, base in enumerate(bases):
            segment = self._segment(base)
            stem = files.offset_name(base)
            index_name = f"{stem}{files.INDEX_SUFFIX}"
            needs_rebuild = index_name not in names
            if not needs_rebuild:
                try:
                    if base < recovered_later:   # a full check against the .log
                        quick_index_check(self.dir, stem, names, (files.TXN_INDEX_SUFFIX,))
                        end = bases[i + 1] if i + 1 < len(bases) else None
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
                truncated, recovered = self._recover(
                    segment, bases[i + 1] if i + 1 < len(bases) else None)
                self._rebuild_txn_indexes(recovered, segments)
                self._truncated_rebuilding += truncated
                if not self.dry_run:
                    for done in recovered:
                        done.make_read_only()
                self._rebuilt += 1
                segments.extend(recovered)
                if truncated and i + 1 < len(bases):
                    # damage in the middle of the log: what follows was written after bytes that
                    # are gone (a transaction's marker, a producer's sequence), so, as after a
                    # truncation in pass 5, the later segments leave the log (kept in quarantine)
                    for later in bases[i + 1:]:
                        self._drop_segment(self._segment(later),
                                           f"follows {segment.log_path.name}, truncated")
                    break
            else:
                if base < recovered_later and f"{stem}{files.TXN_INDEX_SUFFIX}" in names:
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
                 next_base: int | None) -> tuple[int, list[LogSegment]]:
        """``segment.recover`` (``next_base``: the next segment's base offset, if any); a segment
        whose offsets overflow its base is split first and the parts recovered instead. Returns
        the bytes truncated and the segments now in its place."""
        try:
            return self._recover_keeping_cut(segment, next_base), [segment]
        except SegmentOffsetOverflowError as err:
            log.warning("%s; splitting the segment", err)
            position = err.fields.get("position")
            self._actions.act(SPLIT, segment.log_path, str(err),
                      position if isinstance(position, int) else None)
            if self.dry_run:
                return 0, [segment]
        size, name = segment.size, segment.log_path.name
        with keep_while(segment.log_path) as original:        # the split deletes the segment
            parts, left_out = split_overflowed_segment(segment, self.config, clock=self.clock)
            if left_out:          # the bytes it leaves out are a tail: keep them
                self._quarantined.append(keep_tail(
                    original, size - left_out, self.clock.milliseconds(),
                    f"left out of the split of {name}: recovery truncated them", name=name))
        for i, part in enumerate(parts):
            after = parts[i + 1].base_offset if i + 1 < len(parts) else next_base
            truncated = self._recover_keeping_cut(part, after)
            if truncated:
                for later in parts[i + 1:]:
                    self._drop_segment(later, f"follows {part.log_path.name}, truncated")
                return truncated + left_out, parts[:i + 1]
        return left_out, parts

    # ---- the quarantine hook: what recovery cuts is kept, never deleted ------------------------
    def _recover_keeping_cut(self, segment: LogSegment, next_base: int | None) -> int:
        if self.dry_run:
            self._actions.act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
            plan = segment.plan_recovery(next_base)
            self._planned[segment.base_offset] = plan.next_offset
            cut = plan.file_size - plan.valid_bytes
            if cut:
                self._actions.act(TRUNCATE, segment.log_path, f"invalid bytes from position "
                          f"{plan.valid_bytes}: recovery truncates them", plan.valid_bytes, cut)
            return cut
        self._actions.act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
        size = segment.log_path.stat().st_size

        def keep_cut(position: int) -> None:
            self._quarantined.append(keep_tail(
                segment.log_path, position, self.clock.milliseconds(),
                f"invalid bytes from position {position}: recovery truncated them"))

        cut = segment.recover(keep_cut=keep_cut, next_base_offset=next_base)
        if cut:
            self._actions.act(TRUNCATE, segment.log_path, f"invalid bytes from position {size - cut}: "
                      "recovery truncates them", size - cut, cut)
        return cut

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
        if self.dry_run:
            return
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
                truncated, parts = self._recover(
                    segment, segments[i + 1].base_offset if i + 1 < len(segments) else None)
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
            # Kafka deletes every segment here; a wrong checkpoint would then empty a healthy log.
            # A checkpoint alone never deletes data: the log start falls back to the first segment.
            log.warning("%s: ignoring the checkpointed log start offset %d, which is beyond the "
                        "log end offset %d", self.dir, checkpointed_start, log_end)
            checkpointed_start = segments[0].base_offset
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
                log_start = segments[0].base_offset
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
