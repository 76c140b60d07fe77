"""When a segment rolls (Kafka's ``LogSegment.shouldRoll`` and ``RollParams``): what an append
brings, and the decision the active segment makes from it before the append is written.

A segment rolls when the append would take it past ``segment.bytes``; when it has waited
``segment.ms`` (less its jitter) since its first batch's timestamp, or since its creation when it
has none; when either index is full; or when the append's last offset does not fit the
segment's 32-bit relative offsets. ``should_roll`` is the body of ``LogSegment.should_roll``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from storage.records import INT32_MAX

if TYPE_CHECKING:
    from storage.segment import LogSegment


class RollParams(NamedTuple):
    """What an append brings that decides whether the active segment must roll first.

    A NamedTuple, like every value built on each append: it costs a fifth of a frozen dataclass."""

    max_timestamp_in_append: int
    max_offset_in_append: int
    bytes_in_append: int
    now_ms: int


def should_roll(segment: LogSegment, params: RollParams) -> bool:
    """``LogSegment.should_roll``: size, time (with jitter), a full index, or an offset beyond
    the segment's relative offsets."""
    size, config = segment.size, segment.config
    return (
        size > config.segment_bytes - params.bytes_in_append
        or (size > 0
            and time_waited_for_roll(segment, params.now_ms, params.max_timestamp_in_append)
            > config.max_segment_ms - segment.rolling_jitter_ms)
        or segment.offset_index.is_full()
        or segment.time_index.is_full()
        or not 0 <= params.max_offset_in_append - segment.base_offset <= INT32_MAX
    )


def time_waited_for_roll(segment: LogSegment, now_ms: int, max_timestamp_in_append: int) -> int:
    """How long the segment has waited: from its first batch's timestamp to the append's largest,
    or from its creation to ``now_ms`` when it has no timestamp (Kafka's timeWaitedForRoll)."""
    if segment._rolling_based_timestamp is None:
        segment._rolling_based_timestamp = segment.first_batch_timestamp() if segment.size else -1
    if segment._rolling_based_timestamp >= 0:
        return max_timestamp_in_append - segment._rolling_based_timestamp
    return now_ms - segment._created_ms
