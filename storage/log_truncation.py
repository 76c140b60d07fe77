"""Truncation of a log (Kafka's ``UnifiedLog.truncateTo`` and ``truncateFullyAndStartAt``).

Owns cutting the log back to an offset (segments above it leave, the segment holding it is cut)
or emptying it to restart at an offset, and the record of what a truncation changed: the
identities of the segments it removed or cut go into the log's ``_truncated`` ring, and a swap
of segments cleaned from one of them is refused (``storage.log_swap``), even if a segment of that
name regrew to the same size since.

These functions are the bodies of ``Log.truncate_to`` and ``Log.truncate_fully_and_start_at``;
they run under the log's lock and set its offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from storage import files
from storage.segment import LogSegment, identity_or_none

if TYPE_CHECKING:
    from storage.log import Log


def truncate_to(log: Log, target_offset: int) -> bool:
    """``Log.truncate_to`` (see its contract)."""
    target_offset = files.validate_offset(target_offset, "target_offset", partition=log.name)
    with log.appends_held():
        log._ensure_open()
        if target_offset >= log._log_end_offset:
            return False
        if log._segments.first_base > target_offset:
            log.truncate_fully_and_start_at(target_offset)
            return True
        doomed = log._segments.above(target_offset)
        _remember_truncated(log, doomed)
        for segment in doomed:
            log._segments.remove(segment.base_offset)
        log._delete_segment_files(doomed)
        active = log._segments.active
        before = identity_or_none(active)
        if not active.is_open_for_writes:
            active.make_writable()
        if active.truncate_to(target_offset) and before is not None:
            log._truncated.append(before)
        active.size_indexes_for_appends()
        # the batch holding the target went whole; the log ends at the target all the same
        # (Kafka's LocalLog.truncateTo), so the next append takes the target offset and never
        # one below a log start offset raised up to it
        log._log_end_offset = target_offset
        log._recovery_point = min(log._recovery_point, log._log_end_offset)
        log._log_start_offset = min(log._log_start_offset, target_offset)
        log.producer_state.delete_snapshots_above(log._log_end_offset)
        log._rebuild_producer_state(had_clean_shutdown=False)
        return True


def truncate_fully_and_start_at(log: Log, offset: int) -> None:
    """``Log.truncate_fully_and_start_at`` (see its contract)."""
    offset = files.validate_offset(offset, "offset", partition=log.name)
    with log.appends_held():
        log._ensure_open()
        doomed = log.segments()
        _remember_truncated(log, doomed)
        for segment in doomed:
            log._segments.remove(segment.base_offset)
        log._delete_segment_files(doomed, sync=True)
        segment = LogSegment.create(log.dir, offset, log.config, clock=log.clock,
                                    rolling_jitter_ms=log.config.random_segment_jitter())
        log._segments.add(segment)
        log._log_end_offset = offset
        log._log_start_offset = offset
        log._recovery_point = offset
        log._unflushed_messages = 0
        log.producer_state.delete_snapshots_above(-1)
        log._rebuild_producer_state(had_clean_shutdown=False)


def _remember_truncated(log: Log, segments: Sequence[LogSegment]) -> None:
    log._truncated.extend(i for s in segments if (i := identity_or_none(s)) is not None)
