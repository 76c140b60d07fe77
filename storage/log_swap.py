"""Swapping cleaned segments into a log, crash-safely (Kafka's static ``LocalLog.replaceSegments``).

Owns the order of renames that lets the loader finish or roll back a swap cut by a crash
(``storage.load_swaps``):

1. rename each new segment ``.cleaned`` -> ``.swap``, highest offset first, and fsync the
   directory;
2. remove each old segment (unless the first new one replaced it at the same base), add the new
   ones, and rename the old ones ``.deleted`` for the async delete; the owner forgets what it
   kept of the removed ones (the partition log: their producer snapshots, Kafka's
   deleteProducerSnapshots);
3. rename each new segment ``.swap`` -> final name, then fsync the directory.

A crash anywhere leaves files from which the loader restores the log as before or as after. Old
segments already gone (retention) are skipped, as Kafka does. Which swaps are refused because the
old segments changed since the cleaner read them is the owner's decision (``LocalLog``), made
before this runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from storage import files
from storage.durable import fsync_dir
from storage.errors import StorageError
from storage.log_segments import LogSegments
from storage.segment import LogSegment


def replace_segments(segments: LogSegments, new_segments: Sequence[LogSegment],
                     old_segments: Sequence[LogSegment], directory: Path,
                     delete_segment_files: Callable[[Sequence[LogSegment]], None],
                     name: str, on_removed: Callable[[list[LogSegment]], None]) -> None:
    """Swap ``new_segments`` (``.cleaned``, in ``directory``) into ``segments`` for
    ``old_segments`` in the order of the module docstring; ``delete_segment_files`` renames the
    old ones ``.deleted`` and deletes them, then ``on_removed`` gets the old segments removed
    (not those replaced at the same base offset). ``StorageError`` (naming the partition
    ``name``) when an old segment is the active one. Call under the owner's lock."""
    new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
    live = [s for s in old_segments if segments.get(s.base_offset) is s]
    active_base = segments.active.base_offset
    if any(s.base_offset == active_base for s in live):
        raise StorageError(f"{name}: the active segment cannot be replaced", partition=name)
    for segment in reversed(new_sorted):
        segment.change_file_suffixes(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    fsync_dir(directory)
    first_new = new_sorted[0].base_offset if new_sorted else None
    for segment in live:
        if segment.base_offset != first_new:
            segments.remove(segment.base_offset)
    for segment in reversed(new_sorted):
        segment.make_read_only()
        segments.add(segment)
    delete_segment_files(live)
    on_removed([s for s in live if s.base_offset != first_new])
    for segment in new_sorted:
        segment.change_file_suffixes(files.SWAP_SUFFIX, "")
    fsync_dir(directory)
