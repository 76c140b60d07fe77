"""Choosing what to clean (Kafka LogCleanerManager.grabFilthiestCompactedLog): for every compacted
log that is idle, cleanable (not uncleanable, not in retry backoff) and in an online directory, its
cleanable offsets from the checkpoint (``cleaner.cleanable``), its max compaction delay and its
cleanable ratio; the dirtiest eligible log is the filthiest. Also the cleanable bytes of the
uncleanable partitions (Kafka's ``uncleanable-bytes`` gauge).

``Selector`` owns these rules and the directory each partition was last seen in; the manager
calls it under its lock and owns the states it consults.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Mapping
from pathlib import Path

from cleaner.cleanable import (CleanableLog, LogToClean, SegmentRange, cleanable_offsets,
                               max_compaction_delay)
from cleaner.checkpoints import CleanerCheckpoints, dir_key
from cleaner.uncleanable import UncleanableTracker
from storage.files import TopicPartition

logger = logging.getLogger("cleaner.manager")   # the manager's lines, under its name as before


class Selector:
    """Selection over ``checkpoints`` and ``failures`` (shared with the manager). ``dirs`` maps
    each partition seen to its directory (``dir_key``)."""

    def __init__(self, checkpoints: CleanerCheckpoints, failures: UncleanableTracker) -> None:
        self._checkpoints = checkpoints
        self._failures = failures
        self.dirs: dict[TopicPartition, Path] = {}

    def dirty_logs(self, logs: Mapping[TopicPartition, CleanableLog], now: int,
                   busy: Container[TopicPartition], write_checkpoints: bool
                   ) -> tuple[list[LogToClean], list[int]]:
        """The compacted logs with something to clean (not in ``busy``, not blocked), and the
        compaction delay of each log considered. With ``write_checkpoints`` a checkpoint that had
        to be reset is rewritten and a log whose evaluation raised is recorded as failed."""
        checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        dirty: list[LogToClean] = []
        delays: list[int] = []
        for tp, log in logs.items():
            log_dir = None
            try:
                if not log.config.compact:
                    continue
                log_dir = self.note_dir(tp, log)
                if tp in busy or self.blocked(tp, log_dir, now):
                    continue
                if log_dir not in checkpoints:
                    checkpoints[log_dir] = self._checkpoints.read(log_dir)
                view = SegmentRange(log)
                offsets = cleanable_offsets(log, checkpoints[log_dir].get(tp), now, view)
                if offsets.force_update_checkpoint and write_checkpoints:
                    self._checkpoints.update(log_dir, update=(tp, offsets.first_dirty_offset))
                    checkpoints[log_dir][tp] = offsets.first_dirty_offset
                delay = max_compaction_delay(log, offsets.first_dirty_offset, now, view)
                delays.append(delay)
                candidate = LogToClean.of(log, offsets.first_dirty_offset,
                                          offsets.first_uncleanable_dirty_offset, delay, view)
                if candidate.total_bytes > 0:
                    dirty.append(candidate)
            except Exception as err:
                logger.warning("Failed to calculate log cleaning stats for partition %s", tp,
                               exc_info=True)
                if write_checkpoints:
                    log_dir = log_dir or self.dirs.get(tp)
                    if log_dir is not None:
                        self._failures.record_failure(tp, log_dir, err, now)
        return dirty, delays

    def note_dir(self, tp: TopicPartition, log: CleanableLog) -> Path:
        log_dir = dir_key(log.dir.parent)
        self.dirs[tp] = log_dir
        return log_dir

    def blocked(self, tp: TopicPartition, log_dir: Path, now: int) -> bool:
        """Its directory is offline, or it is uncleanable or in retry backoff."""
        return self._checkpoints.is_offline(log_dir) or self._failures.blocked(tp, log_dir, now)

    def is_offline(self, tp: TopicPartition) -> bool:
        log_dir = self.dirs.get(tp)
        return log_dir is not None and self._checkpoints.is_offline(log_dir)

    def uncleanable_bytes(self, key: Path, logs: Mapping[TopicPartition, CleanableLog],
                          now: int) -> int:
        checkpoint = self._checkpoints.read(key)
        total = 0
        for tp in self._failures.partitions(key):
            log = logs.get(tp)
            if log is None:
                continue
            try:
                view = SegmentRange(log)
                offsets = cleanable_offsets(log, checkpoint.get(tp), now, view)
                total += LogToClean.of(log, offsets.first_dirty_offset,
                                       offsets.first_uncleanable_dirty_offset,
                                       segments=view).cleanable_bytes
            except Exception:
                logger.debug("cannot size uncleanable partition %s", tp, exc_info=True)
        return total


def filthiest(dirty: list[LogToClean]) -> LogToClean | None:
    """The eligible log with the highest cleanable ratio."""
    return max((l for l in dirty if l.is_eligible), key=lambda l: l.cleanable_ratio,
               default=None)


__all__ = ["Selector", "filthiest"]
