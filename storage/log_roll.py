"""Rolling and flushing a log (Kafka's ``UnifiedLog.roll`` with ``LocalLog.roll``, and
``UnifiedLog.flush``).

Owns starting a new active segment at the log end offset (the old one sealed: final time-index
entry, trimmed indexes, read-only; a producer snapshot at the new base; the old segment flushed
in the background) and making the log durable up to an offset: the segments below it are
fsynced outside the log's lock, then the recovery point moves.

These functions are the bodies of ``Log.roll`` and ``Log.flush``; they take the log's lock for
what they change.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from storage import files
from storage.errors import StorageError
from storage.segment import LogSegment
from storage.segment_files import remove_segment_files

if TYPE_CHECKING:
    from storage.log import Log

log = logging.getLogger(__name__)


def roll(lg: Log) -> LogSegment:
    """``Log.roll`` (see its contract); returns the new active segment."""
    with lg.appends_held():
        lg._ensure_open()
        new_base = lg._log_end_offset
        active = lg._segments.active
        if active.base_offset == new_base and active.size == 0:
            return active
        if new_base in lg._segments:
            raise StorageError(f"{lg.name}: a segment with base offset {new_base} exists",
                               partition=lg.name, offset=new_base)
        stale = files.log_file(lg.dir, new_base)
        if stale.exists():
            log.warning("deleting stale segment file %s before rolling", stale)
        remove_segment_files(lg.dir, new_base, "")
        active.on_become_inactive()
        segment = LogSegment.create(lg.dir, new_base, lg.config, clock=lg.clock,
                                    rolling_jitter_ms=lg.config.random_segment_jitter())
        lg._segments.add(segment)
        lg.producer_state.take_snapshot(new_base)
        lg._schedule("flush-log", lambda: lg.flush(new_base), 0)
        return segment


def flush(lg: Log, offset: int | None) -> None:
    """``Log.flush`` (see its contract)."""
    if offset is not None:
        offset = files.validate_offset(offset, "offset", partition=lg.name)
    with lg.appends_held():
        if lg._closed:
            return
        target = lg._log_end_offset if offset is None else min(offset, lg._log_end_offset)
        if target <= lg._recovery_point:
            return
        to_flush = lg.segments_in_range(lg._recovery_point, target)
        unflushed_at_start = lg._unflushed_messages
    for segment in to_flush:
        try:
            segment.flush()
        except FileNotFoundError:
            pass   # swapped out or deleted meanwhile; its replacement was flushed by its writer
    with lg.appends_held():
        if target > lg._recovery_point:
            lg._recovery_point = target
        if target >= lg._log_end_offset:
            lg._unflushed_messages = max(0, lg._unflushed_messages - unflushed_at_start)
        lg._last_flush_ms = lg.clock.milliseconds()
