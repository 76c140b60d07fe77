"""When a segment rolls (Kafka's ``RollParams``): what an append brings that decides whether the
active segment must roll before the append is written.

``LogSegment.should_roll`` makes the decision: the append would take the segment past
``segment.bytes``; it has waited ``segment.ms`` (less its jitter) since its first batch's
timestamp, or since its creation when it has none; either index is full; or the append's last
offset does not fit the segment's 32-bit relative offsets.
"""

from __future__ import annotations

from typing import NamedTuple


class RollParams(NamedTuple):
    """What an append brings that decides whether the active segment must roll first.

    A NamedTuple, like every value built on each append: it costs a fifth of a frozen dataclass."""

    max_timestamp_in_append: int
    max_offset_in_append: int
    bytes_in_append: int
    now_ms: int
