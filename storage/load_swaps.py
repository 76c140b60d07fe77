"""Loader passes 1 to 3: stray temporary files and interrupted swaps (Kafka's
``LogLoader.removeTempFilesAndCollectSwapFiles`` and the swap completion after it).

1. Remove temporary files: every ``*.deleted``; every ``*.cleaned``; and every ``*.swap`` at or above
   the lowest ``.cleaned`` offset (a swap that was not complete when the clean was cut off).
2. Complete interrupted swaps: a ``.log.swap`` file that is not wholly valid (``swap_problem``) is
   moved to ``<partition>/quarantine/`` and the live segments are kept; so are the remaining ones
   when they do not cover whole segments (``partial_swap_problem``: a stale swap covering part of a
   segment, which Kafka would complete and lose the records only the live segment held); for the
   remaining ``.log.swap`` files, delete the original segment files whose offsets fall in the
   swapped range ``[min swap base, max swap next offset)``.
3. Rename every remaining ``*.swap`` to its final name.

Every removal and rename goes through ``LoadActions``, so a dry run records them and changes
nothing. Each pass is safe to run again after a crash in the middle of it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

from storage import files
from storage.clock import Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.load_actions import DELETE_SWAPPED, DELETE_TEMP, QUARANTINE_SWAP, LoadActions
from storage.quarantine import QuarantinedFile, keep_file
from storage.records import INT32_MAX, Record, RecordBatch
from storage.segment import LogSegment
from storage.segment_recovery import checked_batches

log = logging.getLogger("storage.loader")   # the loader's logger: a dry run silences it


def remove_temp_files(actions: LoadActions) -> list[Path]:
    """Pass 1: remove the temporary files; return the ``.log.swap`` files that may complete a
    swap, in name order."""
    names = actions.listdir()
    cleaned_offsets = [files.offset_from_file_name(n) for n in names
                       if n.endswith(files.CLEANED_SUFFIX) and files.is_segment_file(n)]
    min_cleaned = min(cleaned_offsets) if cleaned_offsets else None
    swaps: list[Path] = []
    for name in names:
        if not name.endswith(files.TEMP_SUFFIXES) or not files.is_segment_file(name):
            continue
        path = actions.dir / name
        if name.endswith(files.DELETED_SUFFIX):
            actions.unlink(path, DELETE_TEMP, "scheduled for deletion before the shutdown")
        elif name.endswith(files.CLEANED_SUFFIX):
            actions.unlink(path, DELETE_TEMP, "unfinished cleaner output; the segments it "
                           "would replace are intact")
        elif name.endswith(files.SWAP_SUFFIX):
            offset = files.offset_from_file_name(name)
            if min_cleaned is not None and offset >= min_cleaned:
                actions.unlink(path, DELETE_TEMP, "an unfinished swap (cleaner output at or "
                               "below it is unfinished)")
            elif files.strip_temp_suffix(path).name.endswith(files.LOG_SUFFIX):
                swaps.append(path)
            else:
                # an index swap: the index is rebuilt from the swapped-in segment
                actions.unlink(path, DELETE_TEMP, "an index of a swapped segment; it is "
                               "rebuilt from the segment")
    return sorted(swaps)


def quarantine_invalid_swaps(actions: LoadActions, swaps: list[Path], clock: Clock,
                             quarantined: list[QuarantinedFile]) -> list[Path]:
    """Pass 2, first half: the swap files fit to complete a swap; every other one is moved to
    the partition's quarantine folder (appended to ``quarantined``) and the live segments it
    would have replaced are kept."""
    valid = []
    for path in swaps:
        problem = swap_problem(path)
        if problem is None:
            valid.append(path)
            continue
        actions.act(QUARANTINE_SWAP, path, f"invalid swap file, live segments kept: {problem}",
                    0, path.stat().st_size)
        if actions.dry_run:
            actions.gone.add(path.name)
            continue
        kept = keep_file(path, clock.milliseconds(),
                         f"invalid swap file, live segments kept: {problem}")
        quarantined.append(kept)
        log.warning("%s: %s; moved it to %s and kept the live segments", path, problem,
                    kept.path)
    return valid


def quarantine_partial_swaps(actions: LoadActions, swaps: list[Path], config: LogConfig,
                             clock: Clock, quarantined: list[QuarantinedFile]) -> list[Path]:
    """Pass 2, second half: the valid ``swaps`` complete a swap only if they cover whole
    segments (``partial_swap_problem``); otherwise every one of them goes to quarantine and the
    live segments stay. Returns the swaps that complete."""
    problem = partial_swap_problem(actions, swaps, config, clock)
    if problem is None:
        return swaps
    for path in swaps:
        reason = f"a swap that does not cover whole segments, live segments kept: {problem}"
        actions.act(QUARANTINE_SWAP, path, reason, 0, path.stat().st_size)
        if actions.dry_run:
            actions.gone.add(path.name)
            continue
        kept = keep_file(path, clock.milliseconds(), reason)
        quarantined.append(kept)
        log.warning("%s: %s; moved it to %s and kept the live segments", path, problem,
                    kept.path)
    return []


def partial_swap_problem(actions: LoadActions, swaps: list[Path], config: LogConfig,
                         clock: Clock) -> str | None:
    """Why the valid ``swaps`` must not complete, or None. Completing them deletes every live
    segment whose base offset lies in their range ``[lowest swap base, highest swap next
    offset)`` (Kafka's rule), which is right only for what a clean or a split writes: output
    that replaces whole segments. So no live segment it deletes may hold offsets past the range
    (its records after the swap's end would be lost: a stale swap covering part of a segment),
    and the live segment before the range must end at its start (else the swap would overlap
    it). Each live segment's end is read from its batch headers."""
    low, high = _swapped_range(actions, swaps, config, clock)
    bases = sorted(files.offset_from_file_name(n) for n in actions.listdir()
                   if files.is_segment_file(n) and n.endswith(files.LOG_SUFFIX))
    before = [b for b in bases if b < low]
    for base in ([before[-1]] if before else []) + [b for b in bases if low <= b < high]:
        segment = LogSegment(actions.dir, base, config, clock=clock)
        try:
            end = segment.read_next_offset()
            if base < low and end > low:
                return (f"the live segment {files.offset_name(base)} holds offsets up to "
                        f"{end - 1}, past {low}, where the swapped range starts")
            if base >= low and end > high:
                kept = _unsuperseded_key(segment, high, bases, actions, config, clock)
                if kept is not None:
                    return (f"the live segment {files.offset_name(base)} holds offsets up to "
                            f"{end - 1}, past {high - 1}, where the swapped range ends, and its "
                            f"record at offset {kept} is not superseded by a later one")
        finally:
            segment.close()
    return None


def _unsuperseded_key(segment: LogSegment, high: int, bases: list[int], actions: LoadActions,
                      config: LogConfig, clock: Clock) -> int | None:
    """The offset of a record of ``segment`` at or after ``high`` that a clean could not have
    dropped, or None. A clean's output may end before its group's last segment does: the records
    it dropped there were superseded (a later record of the same key), tombstones past their
    horizon, unkeyed, or control records. Any other record past the swap's end would be lost by
    completing it, and only a compacted log has a cleaner: in a log that is not compacted every
    record counts. Reads the later segments' keys (a rare path: a swap pending at startup)."""
    tail: dict[bytes, int] = {}
    for record in _records_from(segment, high):
        if not config.compact:
            return record.offset
        if record.key is not None and record.value is not None:
            tail[record.key] = record.offset
        elif record.key is not None:
            tail.pop(record.key, None)       # a tombstone supersedes, and may itself be dropped
    for base in (b for b in bases if b > segment.base_offset):
        if not tail:
            break
        later = LogSegment(actions.dir, base, config, clock=clock)
        try:
            for record in _records_from(later, base):
                if record.key is not None:
                    tail.pop(record.key, None)
        finally:
            later.close()
    return min(tail.values()) if tail else None


def _records_from(segment: LogSegment, start: int) -> Iterator[Record]:
    """The data records of ``segment`` at or after ``start`` (control batches skipped)."""
    for entry in segment.batches():
        if entry.last_offset < start:
            continue
        batch = RecordBatch(segment.read_bytes(entry.position, entry.size), entry.position,
                            segment.log_path)
        if batch.is_control:
            continue
        for record in batch.records():
            if record.offset >= start:
                yield record


def _swapped_range(actions: LoadActions, swaps: list[Path], config: LogConfig,
                   clock: Clock) -> tuple[int, int]:
    """``[lowest swap base, highest swap next offset)``."""
    bases = [files.offset_from_file_name(p.name) for p in swaps]
    next_offsets = []
    for base in bases:
        segment = LogSegment(actions.dir, base, config, suffix=files.SWAP_SUFFIX, clock=clock)
        next_offsets.append(segment.read_next_offset())
        segment.close()
    return min(bases), max(next_offsets)


def delete_swapped_originals(actions: LoadActions, swaps: list[Path], config: LogConfig,
                             clock: Clock) -> None:
    """Pass 2: delete the segment files whose offsets the finished ``swaps`` cover."""
    low, high = _swapped_range(actions, swaps, config, clock)
    for name in sorted(actions.listdir()):
        if not files.is_segment_file(name) or name.endswith(files.TEMP_SUFFIXES):
            continue
        if name.endswith((files.LOG_SUFFIX, *files.INDEX_SUFFIXES)):
            offset = files.offset_from_file_name(name)
            if low <= offset < high:
                actions.unlink(actions.dir / name, DELETE_SWAPPED, "replaced by a finished swap "
                               f"covering offsets {low}..{high - 1}")


def rename_swaps(actions: LoadActions, swaps: list[Path]) -> int:
    """Pass 3: rename each finished swap to its final name; returns how many."""
    for path in swaps:
        actions.rename_swap(path, files.strip_temp_suffix(path))
        base = files.offset_from_file_name(path.name)
        # indexes of a swapped-in segment are rebuilt: its index swaps were removed in pass 1
        for index in (files.index_file(actions.dir, base),
                      files.time_index_file(actions.dir, base)):
            actions.unlink(index, DELETE_SWAPPED, "an index of a swapped-out segment")
    if not actions.dry_run:
        fsync_dir(actions.dir)
    return len(swaps)


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
