"""Cutting a segment (Kafka's ``LogSegment.truncateTo`` and, after recovery decided what to keep,
the truncation and index rebuild of ``LogSegment.recover``): the ``.log`` is cut, its indexes
follow, and the segment's state (size, next offset, largest timestamp, roll time) is reset to
what is left.

These functions are the bodies of ``LogSegment.recover``, ``truncate_to`` and ``truncate_fully``;
``storage.segment_recovery`` decides which bytes recovery keeps.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

from storage.index import TimestampOffset
from storage.segment_io import HANDLES
from storage.segment_recovery import RecoveryIndexer, recover_file

if TYPE_CHECKING:
    from storage.segment import LogSegment


def recover(segment: LogSegment, keep_cut: Callable[[int], None] | None,
            next_base_offset: int | None) -> int:
    """``LogSegment.recover`` (see its contract); returns the bytes truncated."""
    segment.make_writable()
    segment.offset_index.reset()
    segment.time_index.reset()
    indexer = RecoveryIndexer(segment)
    valid, prev_last, truncated = recover_file(segment, indexer, keep_cut, next_base_offset)
    max_ts, max_ts_offset = indexer.max_timestamp, indexer.offset_of_max_timestamp
    last_index_entry = indexer.last_index_position
    HANDLES.forget_when_unpinned(segment.file_key)
    segment._cuts += 1
    segment._size = valid
    segment._next_offset = prev_last + 1
    segment._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
    segment._rolling_based_timestamp = None
    segment._bytes_since_last_index_entry = valid - last_index_entry if valid else 0
    segment.offset_index.trim_to_valid_size()
    segment.time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
    segment.time_index.trim_to_valid_size()
    return truncated


def truncate_to(segment: LogSegment, offset: int) -> int:
    """``LogSegment.truncate_to`` (see its contract); returns the bytes removed."""
    entry = segment.translate_offset(offset)
    if entry is None:
        return 0
    removed = segment._size - entry.position
    segment.offset_index.truncate_to(offset)
    segment.time_index.truncate_to(offset)
    segment.txn_index.truncate_to(offset)
    fd = segment._writer()
    HANDLES.forget_when_unpinned(segment.file_key)   # no read in flight sees the cut
    segment._cuts += 1
    os.ftruncate(fd, entry.position)
    segment._size = entry.position
    segment._next_offset = None
    segment._max_timestamp_and_offset = load_largest_timestamp(segment)
    segment._bytes_since_last_index_entry = 0
    if segment._size == 0:
        segment._created_ms = segment.clock.milliseconds()
    segment._rolling_based_timestamp = None
    return removed


def load_largest_timestamp(segment: LogSegment) -> TimestampOffset:
    """The largest timestamp and its offset: the time index's last entry, raised by any batch
    after it (Kafka's loadLargestTimestamp; the index only samples every interval)."""
    largest = segment.time_index.last_entry()
    start = segment.offset_index.lookup(largest.offset).position
    for batch in segment.batches(start):
        if batch.max_timestamp > largest.timestamp:
            largest = TimestampOffset(batch.max_timestamp, batch.last_offset)
    return largest


def truncate_fully(segment: LogSegment) -> int:
    """``LogSegment.truncate_fully`` (see its contract); returns the bytes removed."""
    removed = segment.log_path.stat().st_size
    segment.offset_index.reset()
    segment.time_index.reset()
    segment.txn_index.reset()
    HANDLES.forget_when_unpinned(segment.file_key)
    segment._cuts += 1
    os.truncate(segment.log_path, 0)
    segment._size = 0
    segment._next_offset = segment.base_offset
    segment._max_timestamp_and_offset = TimestampOffset(-1, segment.base_offset)
    segment._bytes_since_last_index_entry = 0
    segment._rolling_based_timestamp = None
    segment._created_ms = segment.clock.milliseconds()
    return removed
