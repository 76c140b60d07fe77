"""Loader passes 1 to 3: stray temporary files and interrupted swaps (Kafka's
``LogLoader.removeTempFilesAndCollectSwapFiles`` and the swap completion after it).

1. Remove temporary files: every ``*.deleted``; every ``*.cleaned``; and every ``*.swap`` at or above
   the lowest ``.cleaned`` offset (a swap that was not complete when the clean was cut off).
2. Complete interrupted swaps: a ``.log.swap`` file that is not wholly valid (``swap_problem``) is
   moved to ``<partition>/quarantine/`` and the live segments are kept; for the remaining
   ``.log.swap`` files, delete the original segment files whose offsets fall in the swapped range
   ``[min swap base, max swap next offset)``.
3. Rename every remaining ``*.swap`` to its final name.

Every removal and rename goes through ``LoadActions``, so a dry run records them and changes
nothing. Each pass is safe to run again after a crash in the middle of it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from storage import files
from storage.clock import Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.load_actions import DELETE_SWAPPED, DELETE_TEMP, QUARANTINE_SWAP, LoadActions
from storage.quarantine import QuarantinedFile, keep_file
from storage.records import INT32_MAX
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


def delete_swapped_originals(actions: LoadActions, swaps: list[Path], config: LogConfig,
                             clock: Clock) -> None:
    """Pass 2: delete the segment files whose offsets the finished ``swaps`` cover."""
    bases = [files.offset_from_file_name(p.name) for p in swaps]
    next_offsets = []
    for base in bases:
        segment = LogSegment(actions.dir, base, config, suffix=files.SWAP_SUFFIX, clock=clock)
        next_offsets.append(segment.read_next_offset())
        segment.close()
    low, high = min(bases), max(next_offsets)
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
