"""Retention of a log (Kafka's ``UnifiedLog.deleteOldSegments``): which old segments go.

Owns the three rules, applied in this order, and the walk that picks the segments they delete:

1. the log start offset: a segment whose successor starts at or below the log start offset
   (raised by DeleteRecords or a checkpoint) holds nothing readable;
2. ``retention.bytes`` (``cleanup.policy`` with delete): the oldest segments while the log
   stays at or above the limit without them;
3. ``retention.ms`` (idem): the oldest segments whose largest timestamp (or mtime) is older.

``deletable_segments`` walks from the oldest segment and stops at the first one a rule keeps, at
one not wholly below the high watermark, and at an empty active segment.
``maybe_increment_log_start_offset`` (DeleteRecords) raises the log start offset; the segments
below it go at the next retention, by rule 1.
``delete_segments_while`` removes what it returns, rolling first when every segment goes, and
raises the log start offset to the first segment left.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Sequence

from storage import files
from storage.errors import OffsetOutOfRangeError
from storage.segment import LogSegment

if TYPE_CHECKING:
    from storage.log import Log

_log = logging.getLogger("storage.log")   # retention's lines keep the log's logger name

Predicate = Callable[[LogSegment, "LogSegment | None"], bool]   # (segment, the next one or None)


def delete_old_segments(log: Log) -> int:
    """``Log.delete_old_segments``: the three rules in order; returns the segments deleted."""
    deleted = delete_segments_while(log, 
        lambda _s, following: following is not None
        and following.base_offset <= log.log_start_offset, "log start offset")
    if log.config.delete:
        deleted += _delete_retention_size_breached(log)
        deleted += _delete_retention_ms_breached(log)
    return deleted


def _delete_retention_ms_breached(log: Log) -> int:
    if log.config.retention_ms < 0:
        return 0
    now = log.clock.milliseconds()
    return delete_segments_while(log, 
        lambda s, _n: now - s.largest_timestamp > log.config.retention_ms, "retention.ms")


def _delete_retention_size_breached(log: Log) -> int:
    if log.config.retention_bytes < 0:
        return 0
    diff = log.size_in_bytes - log.config.retention_bytes
    if diff <= 0:
        return 0
    remaining = [diff]

    def over(segment: LogSegment, _next: LogSegment | None) -> bool:
        if remaining[0] - segment.size >= 0:
            remaining[0] -= segment.size
            return True
        return False
    return delete_segments_while(log, over, "retention.bytes")


def delete_segments_while(log: Log, predicate: Predicate, reason: str) -> int:
    """Delete the oldest segments while ``predicate(segment, next segment or None)`` holds
    (``deletable_segments``), rolling first when that is every segment, and raise the log start
    offset to the first segment left. Returns how many went."""
    with log.appends_held():
        log._ensure_open()
        segments = log.segments()
        doomed = deletable_segments(segments, log._log_end_offset, log.high_watermark, predicate)
        if not doomed:
            return 0
        if len(doomed) == len(segments):
            log.roll()
        for segment in doomed:
            log._segments.remove(segment.base_offset)
        log._delete_segment_files(doomed)
        first_base = log._segments.first_base
        log._update_log_start_offset(max(log._log_start_offset, first_base))
        log.producer_state.delete_snapshots_below(first_base)
        _log.info("%s: deleted %d segments by %s; log start offset is now %d", log.name,
                  len(doomed), reason, log._log_start_offset)
        return len(doomed)


def maybe_increment_log_start_offset(log: Log, offset: int) -> bool:
    """``Log.maybe_increment_log_start_offset`` (see its contract): whether it moved."""
    offset = files.validate_offset(offset, "offset", partition=log.name)
    with log.appends_held():
        if offset > log._log_end_offset:
            raise OffsetOutOfRangeError(
                f"{log.name}: log start offset {offset} is above the log end "
                f"{log._log_end_offset}", partition=log.name, offset=offset)
        if offset <= log._log_start_offset:
            return False
        log._update_log_start_offset(offset)
        return True


def deletable_segments(segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int,
                       predicate: Predicate) -> list[LogSegment]:
    """The oldest ``segments`` (in offset order) for which ``predicate`` holds, up to the first
    for which it does not, that lie wholly below ``high_watermark`` (Kafka's deletableSegments);
    an empty last segment is never returned."""
    doomed: list[LogSegment] = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following else log_end_offset
        if high_watermark < upper:
            break
        if following is None and segment.size == 0:
            break
        if not predicate(segment, following):
            break
        doomed.append(segment)
    return doomed
