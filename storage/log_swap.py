"""Swapping cleaned segments into a log, crash-safely (Kafka's ``LocalLog.replaceSegments``).

Owns the order of renames that lets the loader finish or roll back a swap cut by a crash
(``storage.load_swaps``), and the refusal of a swap whose old segments changed after the cleaner
read them (``SegmentsChangedError``): truncated since (the log remembers the identities of the
segments a truncation changed), gone, active, or otherwise different.

These functions are the bodies of ``Log.replace_segments`` and ``Log.replace_cleaned`` and run
under the log's lock; they use its segment container and its file-deletion schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from storage import files
from storage.durable import fsync_dir
from storage.errors import SegmentsChangedError, StorageError
from storage.segment import LogSegment, SegmentIdentity

if TYPE_CHECKING:
    from storage.log import Log


def replace_segments(log: Log, new_segments: Sequence[LogSegment],
                     old_segments: Sequence[LogSegment],
                     expected: Sequence[SegmentIdentity] | None) -> None:
    """``Log.replace_segments`` (see its contract for the order of renames)."""
    new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
    with log.appends_held():
        log._ensure_open()
        segments = log._segments
        if expected is not None:
            refuse_changed(log, expected, new_sorted, require_all=False)
        live = [s for s in old_segments if segments.get(s.base_offset) is s]
        active_base = segments.active.base_offset
        if any(s.base_offset == active_base for s in live):
            raise StorageError(f"{log.name}: the active segment cannot be replaced",
                               partition=log.name)
        for segment in reversed(new_sorted):
            segment.change_file_suffixes(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
        fsync_dir(log.dir)
        first_new = new_sorted[0].base_offset if new_sorted else None
        for segment in live:
            if segment.base_offset != first_new:
                segments.remove(segment.base_offset)
        for segment in reversed(new_sorted):
            segment.make_read_only()
            segments.add(segment)
        log._delete_segment_files(live)
        for segment in live:
            if segment.base_offset != first_new:
                log.producer_state.delete_snapshot(segment.base_offset)
        for segment in new_sorted:
            segment.change_file_suffixes(files.SWAP_SUFFIX, "")
        fsync_dir(log.dir)


def replace_cleaned(log: Log, cleaned_base: int,
                    old_segments: Sequence[int | SegmentIdentity]) -> None:
    """``Log.replace_cleaned`` (see its contract)."""
    cleaned = LogSegment(log.dir, cleaned_base, log.config, suffix=files.CLEANED_SUFFIX,
                         clock=log.clock)
    identities = [o for o in old_segments if isinstance(o, tuple)]
    old_bases = [o.base_offset if isinstance(o, tuple) else o for o in old_segments]
    with log.appends_held():
        log._ensure_open()
        old = [log._segments.get(base) for base in old_bases]
        active_base = log._segments.active.base_offset
        if (not cleaned.log_path.exists() or any(s is None for s in old)
                or active_base in old_bases or not old_bases
                or cleaned_base != min(old_bases)):
            cleaned.delete_files()
            raise SegmentsChangedError(
                f"{log.name}: cannot swap cleaned segment {cleaned_base} for {old_bases}"
                f": the log changed meanwhile", partition=log.name, offset=cleaned_base,
                changed=[b for b, s in zip(old_bases, old) if s is None])
        refuse_changed(log, [SegmentIdentity(*i) for i in identities], [cleaned],
                       require_all=True)
        log.replace_segments([cleaned], [s for s in old if s is not None])


def refuse_changed(log: Log, expected: Sequence[SegmentIdentity],
                   new_segments: Sequence[LogSegment], *, require_all: bool) -> None:
    """Raise ``SegmentsChangedError`` (after deleting ``new_segments``' files) when a segment
    of ``expected`` was truncated since it was read, or is now different; a segment that is
    gone counts only with ``require_all``. Call under the log's lock."""
    truncated = set(log._truncated)
    changed = []
    for seen in expected:
        current = log._segments.get(seen.base_offset)
        if seen in truncated or (current is None and require_all) or (
                current is not None and current.identity != seen):
            changed.append(seen.base_offset)
    if changed:
        for segment in new_segments:
            segment.delete_files()
        base = min(s.base_offset for s in new_segments) if new_segments else -1
        raise SegmentsChangedError(
            f"{log.name}: cannot swap cleaned segment {base} in: segments {changed} were "
            f"truncated or changed after the cleaner read them (the log changed meanwhile)",
            partition=log.name, offset=base, changed=changed)
