"""Retention of a log (Kafka's ``UnifiedLog.deleteOldSegments``): which old segments go.

Owns the three rules, applied in this order by ``Log.delete_old_segments``, and the walk that
picks the segments they delete:

1. the log start offset (``below_log_start``): a segment whose successor starts at or below the
   log start offset (raised by DeleteRecords or a checkpoint) holds nothing readable;
2. ``retention.bytes`` (``over_retention_bytes``, with ``cleanup.policy`` delete): the oldest
   segments while the log stays at or above the limit without them;
3. ``retention.ms`` (``older_than_retention_ms``, idem): the oldest segments whose largest
   timestamp (or mtime) is older.

``deletable_segments`` walks from the oldest segment and stops at the first one a rule keeps, at
one not wholly below the high watermark, and at an empty active segment. The partition log
removes what it returns (rolling first when every segment goes) and raises the log start offset
to the first segment left.
"""

from __future__ import annotations

from typing import Callable, Sequence

from storage.segment import LogSegment

Predicate = Callable[[LogSegment, "LogSegment | None"], bool]   # (segment, the next one or None)


def below_log_start(log_start_offset: int) -> Predicate:
    """Rule 1: the segment's successor starts at or below ``log_start_offset``."""
    return lambda _s, following: following is not None \
        and following.base_offset <= log_start_offset


def over_retention_bytes(size_in_bytes: int, retention_bytes: int) -> Predicate | None:
    """Rule 2: the oldest segments while a log of ``size_in_bytes`` stays at or above
    ``retention_bytes`` without them; None when nothing is over (or no limit)."""
    if retention_bytes < 0:
        return None
    diff = size_in_bytes - retention_bytes
    if diff <= 0:
        return None
    remaining = [diff]

    def over(segment: LogSegment, _next: LogSegment | None) -> bool:
        if remaining[0] - segment.size >= 0:
            remaining[0] -= segment.size
            return True
        return False
    return over


def older_than_retention_ms(now_ms: int, retention_ms: int) -> Predicate | None:
    """Rule 3: the segment's largest timestamp (or mtime) is more than ``retention_ms`` before
    ``now_ms``; None without a limit."""
    if retention_ms < 0:
        return None
    return lambda s, _n: now_ms - s.largest_timestamp > retention_ms


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
