"""``Explanation``: why a log is or is not being cleaned ("why isn't this log cleaning?",
peers.md §3 row 3), from its cleaning state and its dirty range. Built by
``CleanerManager.explain``; pure function of what the manager knows."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cleaner.cleanable import (
    CleanableLog,
    LogToClean,
    SegmentRange,
    cleanable_offsets,
    first_lagging_segment,
    max_compaction_delay,
)
from cleaner.state import CleaningPhase, CleaningState
from storage.files import TopicPartition


class CleaningStatus(str, enum.Enum):
    """The one reason that decides, in the order checked."""

    CLEANER_DISABLED = "cleaner_disabled"
    NOT_COMPACTED = "not_compacted"
    OFFLINE = "offline"
    PAUSED = "paused"
    IN_PROGRESS = "in_progress"
    ABORTED = "aborted"
    UNCLEANABLE = "uncleanable"
    RETRY_BACKOFF = "retry_backoff"
    UNKNOWN = "unknown"                        # the dirty range could not be computed
    EMPTY = "empty"
    HELD_BY_COMPACTION_LAG = "held_by_compaction_lag"
    HELD_BY_LAST_STABLE_OFFSET = "held_by_last_stable_offset"
    ACTIVE_SEGMENT_ONLY = "active_segment_only"
    BELOW_RATIO = "below_ratio"
    ELIGIBLE = "eligible"


@dataclass(frozen=True)
class Explanation:
    """Why one log is (or is not) cleaned. ``reason`` is for people; the other fields for tools.
    Offsets and byte counts are None when the dirty range could not be computed."""

    topic_partition: TopicPartition
    status: CleaningStatus
    reason: str
    cleaning_state: str | None = None
    checkpoint: int | None = None
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    clean_bytes: int | None = None
    cleanable_bytes: int | None = None
    total_bytes: int | None = None
    cleanable_ratio: float | None = None
    min_cleanable_ratio: float = 0.0
    needs_compaction_now: bool = False
    compaction_delay_ms: int = 0
    held_until_ms: int | None = None
    failures: int = 0
    error: str | None = None
    would_be_chosen: bool | None = None

    @property
    def eligible(self) -> bool:
        return self.status is CleaningStatus.ELIGIBLE


def explain_log(log: CleanableLog, now: int, *, enabled: bool, state: CleaningState | None,
                offline: bool, uncleanable: object | None,
                failure: tuple[int, str, int] | None, retries: int, checkpoint: int | None,
                would_be_chosen: bool | None) -> Explanation:
    """``failure`` is ``(failures, error, retry_at_ms)``; ``uncleanable`` an
    ``UncleanablePartition`` (anything with ``failures`` and ``error``)."""
    config = log.config
    ratio_min = config.min_cleanable_dirty_ratio
    fields: dict[str, Any] = dict(topic_partition=log.topic_partition, checkpoint=checkpoint,
                        cleaning_state=None if state is None else str(state),
                        min_cleanable_ratio=ratio_min, would_be_chosen=would_be_chosen)
    if failure is not None:
        fields.update(failures=failure[0], error=failure[1])
    candidate = view = None
    try:
        view = SegmentRange(log)
        offsets = cleanable_offsets(log, checkpoint, now, view)
        delay = max_compaction_delay(log, offsets.first_dirty_offset, now, view)
        candidate = LogToClean.of(log, offsets.first_dirty_offset,
                                  offsets.first_uncleanable_dirty_offset, delay, view)
        fields.update(first_dirty_offset=candidate.first_dirty_offset,
                      first_uncleanable_offset=candidate.first_uncleanable_offset,
                      clean_bytes=candidate.clean_bytes, cleanable_bytes=candidate.cleanable_bytes,
                      total_bytes=candidate.total_bytes, cleanable_ratio=candidate.cleanable_ratio,
                      needs_compaction_now=candidate.needs_compaction_now,
                      compaction_delay_ms=delay)
    except Exception as err:  # explain must answer even for a log that cannot be evaluated
        fields["error"] = f"{type(err).__name__}: {err}"

    def out(status: CleaningStatus, reason: str, **extra: object) -> Explanation:
        return Explanation(status=status, reason=reason, **{**fields, **extra})

    if not enabled:
        return out(CleaningStatus.CLEANER_DISABLED, "the log cleaner is disabled "
                   "(log.cleaner.enable=false): compacted logs get neither compaction nor retention")
    if not config.compact:
        return out(CleaningStatus.NOT_COMPACTED, f"cleanup.policy={config.cleanup_policy} does "
                   "not include compact: only retention applies, run by the log manager")
    if offline:
        return out(CleaningStatus.OFFLINE, f"log directory {log.dir.parent} is offline")
    if state is not None and state.phase is CleaningPhase.PAUSED:
        return out(CleaningStatus.PAUSED, f"cleaning is paused ({state.paused_count} pause(s) "
                   "held by truncation, deletion, a directory move or retention)")
    if state is not None and state.phase is CleaningPhase.IN_PROGRESS:
        return out(CleaningStatus.IN_PROGRESS, "being cleaned (or its retention run) right now")
    if state is not None and state.phase is CleaningPhase.ABORTED:
        return out(CleaningStatus.ABORTED, "the running clean is being aborted")
    if uncleanable is not None:
        return out(CleaningStatus.UNCLEANABLE,
                   f"marked uncleanable after {getattr(uncleanable, 'failures')} failed "
                   f"attempt(s); last error: {getattr(uncleanable, 'error')}. Fix the cause and "
                   "re-enable it with reset_uncleanable", error=getattr(uncleanable, "error"))
    if failure is not None and now < failure[2]:
        return out(CleaningStatus.RETRY_BACKOFF,
                   f"the last clean failed ({failure[1]}); attempt {failure[0] + 1} of "
                   f"{retries + 1} at {failure[2]} (in {failure[2] - now} ms)",
                   held_until_ms=failure[2])
    if candidate is None or view is None:
        return out(CleaningStatus.UNKNOWN, f"cannot compute the dirty range: {fields['error']}")
    return _explain_range(log, now, candidate, view, out, would_be_chosen)


def _explain_range(log: CleanableLog, now: int, c: LogToClean, view: SegmentRange,
                   out: Callable[..., Explanation], would_be_chosen: bool | None) -> Explanation:
    config = log.config
    ratio = (f"dirty ratio {c.cleanable_ratio:.3f} ({c.cleanable_bytes} of {c.total_bytes} bytes)"
             f" vs min.cleanable.dirty.ratio {config.min_cleanable_dirty_ratio}")
    if not any(s.size for s in view.segments):
        return out(CleaningStatus.EMPTY, "the log is empty")
    if c.is_eligible:
        why = (f"max.compaction.lag.ms={config.max_compaction_lag_ms} exceeded by "
               f"{c.compaction_delay_ms} ms" if c.needs_compaction_now and c.cleanable_bytes > 0
               else ratio)
        chosen = {None: "", True: "; it is the dirtiest and would be chosen now",
                  False: "; a dirtier log would be chosen first"}[would_be_chosen]
        return out(CleaningStatus.ELIGIBLE, f"eligible: {why}{chosen}")
    active = view.active_base
    lso = log.last_stable_offset
    lagging = first_lagging_segment(log, view, c.first_dirty_offset, now)
    if lagging is not None and lagging.base_offset < min(lso, active):
        until = lagging.largest_timestamp + config.min_compaction_lag_ms
        return out(CleaningStatus.HELD_BY_COMPACTION_LAG,
                   f"held back by min.compaction.lag.ms={config.min_compaction_lag_ms}: segment "
                   f"{lagging.base_offset} has records up to timestamp "
                   f"{lagging.largest_timestamp} and becomes cleanable at {until} (in "
                   f"{until - now} ms); {ratio}", held_until_ms=until)
    if lso < active:
        return out(CleaningStatus.HELD_BY_LAST_STABLE_OFFSET,
                   f"held back by the last stable offset {lso} (below the active segment "
                   f"{active}); {ratio}")
    if c.cleanable_bytes == 0:
        return out(CleaningStatus.ACTIVE_SEGMENT_ONLY,
                   f"nothing to clean below the active segment: first dirty offset "
                   f"{c.first_dirty_offset}, active segment base {active}. The active segment "
                   f"is cleaned only after it rolls (segment.bytes={config.segment_bytes}, "
                   f"segment.ms={config.segment_ms}, max.compaction.lag.ms="
                   f"{config.max_compaction_lag_ms}); {ratio}")
    return out(CleaningStatus.BELOW_RATIO, f"{ratio}: not dirty enough yet")
