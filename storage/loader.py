"""Startup loading and recovery of one partition directory (Kafka's LogLoader), in numbered passes.

Every pass is safe to run again after a crash in the middle of it:

1. Remove temporary files: every ``*.deleted``; every ``*.cleaned``; and every ``*.swap`` at or above
   the lowest ``.cleaned`` offset (a swap that was not complete when the clean was cut off).
2. Complete interrupted swaps: a ``.log.swap`` file that is not wholly valid (empty, garbage, a
   bad CRC, offsets out of order: ``swap_problem``) is moved to ``<partition>/quarantine/`` and
   the live segments are kept; for the remaining ``.log.swap`` files, delete the original segment
   files whose offsets fall in the swapped range ``[min swap base, max swap next offset)``.
3. Rename every remaining ``*.swap`` to its final name.
4. Load segments in offset order: delete index files without a ``.log``; a segment whose offset index
   is missing or malformed is recovered (its indexes rebuilt from the ``.log``). Every segment that
   pass 5 will not re-validate (all of them after a clean shutdown) has its indexes checked against
   its ``.log`` (``check_indexes_against_log``: entries monotonic and inside the file, the last one
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
Both modes list their actions in ``LoadResult.actions``.

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
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from storage import files
from storage import txn_index
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.errors import CorruptIndexError, CorruptRecordError, SegmentOffsetOverflowError
from storage.kernels import LEGACY_TIMESTAMP_OFFSET
from storage.producer_state import ProducerStateManager
from storage.quarantine import QuarantinedFile, keep_file, keep_tail, keep_while
from storage.records import (
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_RECORD_OVERHEAD_V0,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    SIZE_OFFSET,
    BatchHeader,
)
from storage.segment import INT32_MAX, LogSegment, checked_batches
from storage.split import split_overflowed_segment

log = logging.getLogger(__name__)
_dry_running = threading.local()     # a dry run does nothing worth a warning: its thread is quiet
log.addFilter(lambda _record: not getattr(_dry_running, "on", False))

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


# the kinds of LoadAction
DELETE_TEMP = "delete-temp"                 # pass 1: a *.deleted, *.cleaned or unfinished *.swap
QUARANTINE_SWAP = "quarantine-swap"         # pass 2: a swap file not fit to complete
DELETE_SWAPPED = "delete-swapped"           # pass 2: a segment file a finished swap replaces
COMPLETE_SWAP = "complete-swap"             # pass 3: a finished swap renamed to its final name
DELETE_ORPHAN_INDEX = "delete-orphan-index"  # pass 4: an index without its .log
REBUILD_INDEXES = "rebuild-indexes"         # pass 4: missing or doubtful indexes
RECOVER_SEGMENT = "recover-segment"         # passes 4, 5: every batch re-validated
TRUNCATE = "truncate"                       # a segment cut at ``position`` (tail to quarantine)
SPLIT = "split"                             # a segment whose offsets overflow its base
QUARANTINE_SEGMENT = "quarantine-segment"   # a segment after a truncated one, moved whole
CREATE_SEGMENT = "create-segment"           # pass 6: the first segment of an empty directory


@dataclass(frozen=True, slots=True)
class LoadAction:
    """One thing the loader did (or, in a dry run, would do) to ``path``: a ``kind`` above,
    ``position`` the byte of ``path`` it starts at (a truncation, a split), ``bytes`` how many
    bytes it concerns (removed, cut or moved), ``reason`` in words."""

    kind: str
    path: Path
    reason: str
    position: int | None = None
    bytes: int = 0


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
    quarantined: tuple[QuarantinedFile, ...] = ()   # what recovery cut, kept in quarantine/
    actions: tuple[LoadAction, ...] = ()    # what it did (a dry run: would do), in order
    dry_run: bool = False                   # nothing was changed; ``segments`` is empty


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
        self._deleted_temp = 0
        self._completed_swaps = 0
        self._rebuilt = 0
        self._truncated_rebuilding = 0   # bytes cut off while rebuilding indexes (pass 4)
        self._quarantined: list[QuarantinedFile] = []
        self._txn_state: ProducerStateManager | None = None   # see _rebuild_txn_indexes
        self._txn_state_last: LogSegment | None = None
        self.dry_run = dry_run
        self._actions: list[LoadAction] = []
        self._gone: set[str] = set()          # dry run: names a real load would have removed
        self._renamed: dict[str, str] = {}    # dry run: final name -> the swap file holding it
        self._planned: dict[int, int] = {}    # dry run: base offset -> next offset after recovery

    def _act(self, kind: str, path: Path, reason: str, position: int | None = None,
             size: int = 0) -> None:
        if kind != COMPLETE_SWAP and path.name.endswith(files.SWAP_SUFFIX) and \
                files.log_file(self.dir, files.offset_from_file_name(path.name)).name \
                in self._renamed:
            path = files.strip_temp_suffix(path)   # a dry run names a swapped-in segment's
            #                                        files as a real load does
        self._actions.append(LoadAction(kind, path, reason, position, size))

    def _listdir(self) -> list[str]:
        """The directory's names as a load would see them at this point (a dry run: minus what
        it would have removed, plus the final names of swaps it would have renamed)."""
        names = [n for n in os.listdir(self.dir) if n not in self._gone]
        return names + [n for n in self._renamed if n not in names]

    def _segment(self, base: int) -> LogSegment:
        """The segment at ``base`` (a dry run: the swap file a real load would have renamed)."""
        name = f"{files.offset_name(base)}{files.LOG_SUFFIX}"
        suffix = files.SWAP_SUFFIX if name in self._renamed else ""
        return LogSegment(self.dir, base, self.config, suffix=suffix, clock=self.clock)

    def load(self) -> LoadResult:
        if not self.dry_run:
            return self._load()
        _dry_running.on = True
        try:
            return self._load()
        finally:
            _dry_running.on = False

    def _load(self) -> LoadResult:
        swaps = self._pass1_remove_temp_files()
        if swaps:
            swaps = self._quarantine_invalid_swaps(swaps)
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
        names = self._listdir()
        cleaned_offsets = [files.offset_from_file_name(n) for n in names
                           if n.endswith(files.CLEANED_SUFFIX) and files.is_segment_file(n)]
        min_cleaned = min(cleaned_offsets) if cleaned_offsets else None
        swaps: list[Path] = []
        for name in names:
            if not name.endswith(files.TEMP_SUFFIXES) or not files.is_segment_file(name):
                continue
            path = self.dir / name
            if name.endswith(files.DELETED_SUFFIX):
                self._unlink(path, DELETE_TEMP, "scheduled for deletion before the shutdown")
            elif name.endswith(files.CLEANED_SUFFIX):
                self._unlink(path, DELETE_TEMP, "unfinished cleaner output; the segments it "
                             "would replace are intact")
            elif name.endswith(files.SWAP_SUFFIX):
                offset = files.offset_from_file_name(name)
                if min_cleaned is not None and offset >= min_cleaned:
                    self._unlink(path, DELETE_TEMP, "an unfinished swap (cleaner output at or "
                                 "below it is unfinished)")
                elif files.strip_temp_suffix(path).name.endswith(files.LOG_SUFFIX):
                    swaps.append(path)
                else:
                    # an index swap: the index is rebuilt from the swapped-in segment
                    self._unlink(path, DELETE_TEMP, "an index of a swapped segment; it is "
                                 "rebuilt from the segment")
        return sorted(swaps)

    # ---- pass 2 and 3 ------------------------------------------------------------------------
    def _quarantine_invalid_swaps(self, swaps: list[Path]) -> list[Path]:
        """The swap files fit to complete a swap; every other one is moved to the partition's
        quarantine folder (and the live segments it would have replaced are kept)."""
        valid = []
        for path in swaps:
            problem = swap_problem(path)
            if problem is None:
                valid.append(path)
                continue
            self._act(QUARANTINE_SWAP, path, f"invalid swap file, live segments kept: {problem}",
                      0, path.stat().st_size)
            if self.dry_run:
                self._gone.add(path.name)
                continue
            kept = keep_file(path, self.clock.milliseconds(),
                             f"invalid swap file, live segments kept: {problem}")
            self._quarantined.append(kept)
            log.warning("%s: %s; moved it to %s and kept the live segments", path, problem,
                        kept.path)
        return valid

    def _pass2_delete_swapped_originals(self, swaps: list[Path]) -> None:
        bases = [files.offset_from_file_name(p.name) for p in swaps]
        next_offsets = []
        for base in bases:
            segment = LogSegment(self.dir, base, self.config, suffix=files.SWAP_SUFFIX,
                                 clock=self.clock)
            next_offsets.append(segment.read_next_offset())
            segment.close()
        low, high = min(bases), max(next_offsets)
        for name in sorted(self._listdir()):
            if not files.is_segment_file(name) or name.endswith(files.TEMP_SUFFIXES):
                continue
            if name.endswith((files.LOG_SUFFIX, *files.INDEX_SUFFIXES)):
                offset = files.offset_from_file_name(name)
                if low <= offset < high:
                    self._unlink(self.dir / name, DELETE_SWAPPED, "replaced by a finished swap "
                                 f"covering offsets {low}..{high - 1}")

    def _pass3_rename_swaps(self, swaps: list[Path]) -> None:
        for path in swaps:
            target = files.strip_temp_suffix(path)
            self._act(COMPLETE_SWAP, path, f"a finished swap; renamed to {target.name}")
            if self.dry_run:
                self._renamed[target.name] = path.name
                self._gone.add(path.name)
            else:
                os.replace(path, target)
            base = files.offset_from_file_name(path.name)
            # indexes of a swapped-in segment are rebuilt: its index swaps were removed in pass 1
            for index in (files.index_file(self.dir, base), files.time_index_file(self.dir, base)):
                self._unlink(index, DELETE_SWAPPED, "an index of a swapped-out segment")
            self._completed_swaps += 1
        if not self.dry_run:
            fsync_dir(self.dir)

    # ---- pass 4 ------------------------------------------------------------------------------
    def _pass4_load_segments(self) -> list[LogSegment]:
        names = set(self._listdir())
        logs: list[int] = []
        for name in names:
            if not files.is_segment_file(name):
                continue
            offset = files.offset_from_file_name(name)
            stem = files.offset_name(offset)
            if name.endswith(files.INDEX_SUFFIXES) and f"{stem}{files.LOG_SUFFIX}" not in names:
                self._unlink(self.dir / name, DELETE_ORPHAN_INDEX, "an index without its .log")
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
                        self._quick_index_check(stem, names, (files.TXN_INDEX_SUFFIX,))
                        end = bases[i + 1] if i + 1 < len(bases) else None
                        check_indexes_against_log(segment, end)
                    else:
                        self._quick_index_check(stem, names)
                except CorruptIndexError as err:
                    log.warning("%s; rebuilding the indexes of %s", err, segment.log_path)
                    needs_rebuild = True
            if needs_rebuild and (self.had_clean_shutdown or base < self.recovery_point):
                log.info("rebuilding missing or corrupt indexes of %s", segment.log_path)
            if needs_rebuild:
                self._act(REBUILD_INDEXES, segment.offset_index.path,
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
            self._act(SPLIT, segment.log_path, str(err),
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
            self._act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
            plan = segment.plan_recovery(next_base)
            self._planned[segment.base_offset] = plan.next_offset
            cut = plan.file_size - plan.valid_bytes
            if cut:
                self._act(TRUNCATE, segment.log_path, f"invalid bytes from position "
                          f"{plan.valid_bytes}: recovery truncates them", plan.valid_bytes, cut)
            return cut
        self._act(RECOVER_SEGMENT, segment.log_path, "every batch re-validated")
        size = segment.log_path.stat().st_size

        def keep_cut(position: int) -> None:
            self._quarantined.append(keep_tail(
                segment.log_path, position, self.clock.milliseconds(),
                f"invalid bytes from position {position}: recovery truncated them"))

        cut = segment.recover(keep_cut=keep_cut, next_base_offset=next_base)
        if cut:
            self._act(TRUNCATE, segment.log_path, f"invalid bytes from position {size - cut}: "
                      "recovery truncates them", size - cut, cut)
        return cut

    def _drop_segment(self, segment: LogSegment, reason: str) -> None:
        """Move ``segment``'s ``.log`` to quarantine and delete its (derived) indexes."""
        segment.close()
        self._act(QUARANTINE_SEGMENT, segment.log_path, reason, 0,
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

    def _quick_index_check(self, stem: str, names: set[str],
                           suffixes: tuple[str, ...] | None = None) -> None:
        """Cheap structural check from the sizes of the index files of segment ``stem`` (among
        ``names``, the directory's listing), or of those with ``suffixes``; full checks happen in
        recovery."""
        directory = str(self.dir)
        for suffix, width in ((files.INDEX_SUFFIX, 8), (files.TIME_INDEX_SUFFIX, 12),
                              (files.TXN_INDEX_SUFFIX, txn_index.ENTRY_SIZE)):
            if suffixes is not None and suffix not in suffixes:
                continue
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
                truncated, parts = self._recover(
                    segment, segments[i + 1].base_offset if i + 1 < len(segments) else None)
            except (CorruptRecordError, CorruptIndexError) as err:
                log.warning("%s; truncating %s to its base offset", err, segment.log_path)
                size = segment.log_path.stat().st_size
                self._act(TRUNCATE, segment.log_path, f"unreadable segment: {err}", 0, size)
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
                          self._rebuilt, self._deleted_temp, self._completed_swaps,
                          self.had_clean_shutdown, tuple(self._quarantined), tuple(self._actions))

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
            self._act(CREATE_SEGMENT, files.log_file(self.dir, log_end), "an empty directory")
        for segment in segments:
            segment.close()
        recovery_point = log_end if self.had_clean_shutdown else min(self.recovery_point, log_end)
        return LoadResult([], log_start, log_end, recovery_point,
                          truncated + self._truncated_rebuilding, recovered, self._rebuilt,
                          self._deleted_temp, self._completed_swaps, self.had_clean_shutdown,
                          (), tuple(self._actions), dry_run=True)

    def _unlink(self, path: Path, kind: str = DELETE_TEMP, reason: str = "") -> None:
        if self.dry_run:
            if path.name in self._gone or not path.exists():
                return
            self._act(kind, path, reason, None, path.stat().st_size)
            self._gone.add(path.name)
            self._deleted_temp += 1
            return
        try:
            size = path.stat().st_size
            path.unlink()
            self._act(kind, path, reason, None, size)
            self._deleted_temp += 1
        except FileNotFoundError:
            pass


def swap_problem(path: Path) -> str | None:
    """Why the ``.log.swap`` file ``path`` must not replace live segments, or None when it may:
    it must hold at least one batch, every batch structurally valid with a matching CRC up to the
    very end of the file, offsets strictly increasing from the base offset in its name and within
    ``base + 2^31 - 1`` (what a cleaner or a split writes and fsyncs before the rename to ``.swap``).
    """
    base = files.offset_from_file_name(path.name)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return "the swap file is empty"
        end, previous_last = 0, base - 1
        for batch in checked_batches(fd, 0, size):
            if batch.base_offset <= previous_last or batch.last_offset < batch.base_offset:
                return (f"the batch at position {batch.position} has offsets "
                        f"{batch.base_offset}..{batch.last_offset}, not above {previous_last}")
            if batch.last_offset - base > INT32_MAX:
                return (f"the batch at position {batch.position} ends at offset "
                        f"{batch.last_offset}, beyond the base {base} + 2^31 - 1")
            previous_last, end = batch.last_offset, batch.position + batch.size
        if end != size:
            return f"no valid batch at position {end} of {size} bytes (garbage or a torn write)"
        return None
    finally:
        os.close(fd)


def txn_index_problem(segment: LogSegment, before: list[LogSegment],
                      compacted: bool) -> str | None:
    """Why ``segment``'s ``.txnindex`` cannot be trusted, or None. The file has no checksum (as in
    Kafka), and a flipped producer id or offset in it would make ``read_committed`` serve an
    aborted transaction's records, so each entry is checked against the log: its marker (the
    batch at ``last_offset``) is a control batch of its producer, and the batch at its
    ``first_offset`` (in this segment or one ``before`` it) is a transactional batch of the same
    producer (on a ``compacted`` log that batch may be gone: the cleaner removes aborted batches),
    and its last stable offset is not past the marker.
    A few batch headers a transaction, read only for segments holding aborted transactions."""
    try:
        aborted = segment.txn_index.all_aborted_txns()
    except CorruptIndexError as err:
        return str(err)
    for txn in aborted:
        if not 0 <= txn.first_offset <= txn.last_offset or txn.last_offset < segment.base_offset:
            return f"entry {txn} does not fit the segment"
        if not 0 <= txn.last_stable_offset <= txn.last_offset + 1:
            # the stable offset after an abort is never past the marker; a larger one would end
            # the search for aborted transactions early (Kafka's collectAbortedTxns)
            return f"entry {txn}: its last stable offset is past its marker"
        marker = _header_at(segment, txn.last_offset)
        if marker is None or marker.base_offset != txn.last_offset or not marker.is_control \
                or marker.producer_id != txn.producer_id:
            return f"entry {txn}: no abort marker of producer {txn.producer_id} at its last offset"
        holder = segment
        if txn.first_offset < segment.base_offset:
            holder = next((s for s in reversed(before) if s.base_offset <= txn.first_offset), None)
        first = _header_at(holder, txn.first_offset) if holder is not None else None
        if first is not None and first.base_offset == txn.first_offset:
            if not first.is_transactional or first.producer_id != txn.producer_id:
                return (f"entry {txn}: the batch at its first offset is not a transactional "
                        f"batch of producer {txn.producer_id}")
        elif not compacted:
            return f"entry {txn}: no batch starts at its first offset"
    return None


def _header_at(segment: LogSegment, offset: int) -> BatchHeader | None:
    """The v2 header of the batch holding ``offset`` (or the next one), None if none or legacy."""
    entry = segment.translate_offset(offset)
    if entry is None or entry.magic != MAGIC:
        return None
    return BatchHeader.parse(segment.read_bytes(entry.position, HEADER_SIZE))


def check_indexes_against_log(segment: LogSegment, end_offset: int | None) -> None:
    """Decide on open whether ``segment``'s indexes can be trusted; ``CorruptIndexError`` (the
    loader then rebuilds them from the ``.log``) on any doubt. ``end_offset`` is the next
    segment's base offset, None for the last (active) segment.

    Every entry of both indexes is checked (``check_entries``: monotonic, inside the file). The
    last offset-index entry (or position 0) must point at a batch boundary consistent with it,
    and the largest timestamp there must not exceed the time index's last entry (a time index
    zeroed by a lost write reads as timestamp 0 and would make retention delete the segment).
    Cheap for a closed segment: one batch header is read. The active segment's tail, from its
    last index entry to the end of the file, is scanned batch by batch with CRCs: garbage after a
    clean shutdown (a stale marker, a torn write) is found here and truncated by the rebuild."""
    size = segment.size
    offsets, times = segment.offset_index, segment.time_index
    try:
        bound = 2**63 if end_offset is None else end_offset
        offsets.check_entries(size, bound)
        times.check_entries(bound)
        entry = offsets.last_entry_or_none()
        last_time = times.last_entry()
        position = entry.position if entry is not None else 0
        if size == 0:
            if entry is not None or times.entries:
                raise CorruptIndexError(f"indexes of the empty segment {segment.log_path} have "
                                        f"entries", path=str(segment.log_path))
            return
        if end_offset is None:
            first, next_offset, max_ts = _scan_tail(segment, position)
        else:
            first, max_ts = _batch_header(segment, position)
            next_offset = end_offset
        # the batch an entry points at starts at or below the entry's offset (an entry names the
        # last offset of the append starting there); without an entry it is the first batch,
        # which compaction may have moved above the segment's base offset
        high = next_offset - 1 if entry is None else min(entry.offset, next_offset - 1)
        if not segment.base_offset <= first <= high:
            raise CorruptIndexError(
                f"{offsets.path}: the batch at position {position} of {segment.log_path} starts "
                f"at offset {first}, inconsistent with the index entry "
                f"{entry.offset if entry is not None else '(none)'} -> {position}",
                path=str(offsets.path), position=position, offset=first)
        if last_time.offset >= next_offset or max_ts > last_time.timestamp:
            raise CorruptIndexError(
                f"{times.path}: its last entry {last_time.timestamp} -> {last_time.offset} "
                f"disagrees with {segment.log_path} (a batch at position {position} or later has "
                f"timestamp {max_ts}; the segment ends before offset {next_offset})",
                path=str(times.path), timestamp=last_time.timestamp, offset=last_time.offset)
    finally:
        offsets.release()
        times.release()


def _batch_header(segment: LogSegment, position: int) -> tuple[int, int]:
    """(first offset field, max timestamp) of the batch at ``position`` of a closed segment, or
    ``CorruptIndexError`` when no plausible batch starts there. Only its header is read."""
    fd = os.open(segment.log_path, os.O_RDONLY)   # not the handle cache: read once at load
    try:
        header = os.pread(fd, min(HEADER_SIZE, segment.size - position), position)
    finally:
        os.close(fd)
    scan = None
    if len(header) >= HEADER_SIZE_UP_TO_MAGIC:
        length = _INT32.unpack_from(header, SIZE_OFFSET)[0]
        magic = header[MAGIC_OFFSET]
        if (length >= LEGACY_RECORD_OVERHEAD_V0 and position + LOG_OVERHEAD + length <= segment.size
                and magic in (0, 1, MAGIC) and (magic != MAGIC or len(header) == HEADER_SIZE)):
            first = _INT64.unpack_from(header, 0)[0]
            if magic == MAGIC:
                scan = first, _INT64.unpack_from(header, MAX_TIMESTAMP_OFFSET)[0]
            elif magic == 1 and len(header) >= LEGACY_TIMESTAMP_OFFSET + 8:
                scan = first, _INT64.unpack_from(header, LEGACY_TIMESTAMP_OFFSET)[0]
            else:
                scan = first, -1
    if scan is None:
        raise CorruptIndexError(
            f"{segment.offset_index.path}: position {position} of {segment.log_path} is not the "
            f"start of a batch", path=str(segment.offset_index.path), position=position)
    return scan


def _scan_tail(segment: LogSegment, position: int) -> tuple[int, int, int]:
    """(first offset, next offset, max timestamp) of the batches from ``position`` to the end of
    the active segment, each checked with its CRC; ``CorruptIndexError`` when they do not reach
    the end of the file exactly with increasing offsets."""
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        first, previous_last, max_ts, end = None, None, -1, position
        for batch in checked_batches(fd, position, size):
            if previous_last is not None and batch.base_offset <= previous_last \
                    or batch.last_offset < batch.base_offset:
                break
            if first is None:
                first = batch.base_offset
            previous_last, end = batch.last_offset, batch.position + batch.size
            max_ts = max(max_ts, batch.max_timestamp)
    finally:
        os.close(fd)
    if first is None or previous_last is None or end != size:
        raise CorruptIndexError(
            f"{segment.log_path}: no valid batch at position {end} of {size} bytes after the "
            f"last index entry (a torn or garbage tail)", path=str(segment.log_path),
            position=end)
    return first, previous_last + 1, max_ts
