"""The per-directory offset checkpoints a ``LogDir`` reads at load and writes while running:
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (owned here), and
``cleaner-offset-checkpoint`` (this object is its only writer: the directory's own changes, an entry
dropped when its partition is deleted or lowered by a truncation, and the changes a cleaner manager
in another process sends, each applied as one read-modify-write, ``update_cleaner_offsets``).
The file format is ``storage.checkpoint.OffsetCheckpointFile``.

A checkpoint that cannot be parsed reads as empty, with a warning (Kafka's loadLogs): recovery then
starts from offset 0 of every log, which is slow but loses nothing. A write whose entries equal the
last ones written (or read) is skipped, so an idle directory does not fsync every minute.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path
from typing import Iterable, Mapping

from cleaner.checkpoints import CheckpointChange
from storage.checkpoint import OffsetCheckpointFile
from storage.errors import CheckpointError
from storage.files import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
)
from storage.log import Log

log = logging.getLogger(__name__)


class DirCheckpoints:
    """Reads and writes the offset checkpoints of one directory. Thread-safe: one lock serialises
    the writes (a periodic task and a ``delete_log`` may race)."""

    def __init__(self, directory: Path) -> None:
        self.recovery_points = OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets = OffsetCheckpointFile(directory / CLEANER_OFFSET_CHECKPOINT)
        self._lock = threading.RLock()
        self._last: dict[Path, dict[TopicPartition, int]] = {}
        self.writes = 0

    # ---- reading -----------------------------------------------------------------------------
    def read(self, file: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        """The entries of ``file``; empty when it is missing or malformed, or no regular file (a
        FIFO would block the open, a directory fail it; logged)."""
        try:
            mode = os.stat(file.path).st_mode
        except FileNotFoundError:
            return {}
        except OSError as err:             # a symlink loop
            log.warning("ignoring unreadable checkpoint %s: %s", file.path, err.strerror)
            return {}
        if not stat.S_ISREG(mode):
            log.warning("ignoring checkpoint %s: not a regular file", file.path)
            return {}
        try:
            entries = file.read()
        except FileNotFoundError:
            return {}
        except CheckpointError as err:
            log.warning("ignoring unreadable checkpoint: %s", err)
            return {}
        with self._lock:
            self._last.setdefault(file.path, dict(entries))
        return entries

    def read_cleaner_offsets(self) -> dict[TopicPartition, int]:
        """The cleaner checkpoint, for stats; any failure reads as empty."""
        try:
            return self.cleaner_offsets.read()
        except (OSError, CheckpointError):
            return {}

    # ---- writing -----------------------------------------------------------------------------
    def write_recovery_points(self, logs: Iterable[Log]) -> bool:
        """Every log's recovery point. Returns whether the file was rewritten."""
        return self._write(self.recovery_points,
                           {lg.topic_partition: lg.recovery_point for lg in logs})

    def write_log_start_offsets(self, logs: Iterable[Log]) -> bool:
        """The start offset of every log whose start is above its first segment's base (the others
        are implied by their files). Returns whether the file was rewritten."""
        entries = {}
        for lg in logs:
            bases = lg.segment_base_offsets()
            if bases and lg.log_start_offset > bases[0]:
                entries[lg.topic_partition] = lg.log_start_offset
        return self._write(self.log_start_offsets, entries)

    def update_cleaner_offsets(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        """Apply ``change`` to the cleaner checkpoint in one step (read, change, write under this
        object's lock) and return the entries written. A missing file reads as empty; one that
        cannot be parsed raises ``CheckpointError`` and is left as it is."""
        with self._lock:
            try:
                current = self.cleaner_offsets.read()
            except FileNotFoundError:
                current = {}
            updated = change.apply(current)
            self._write(self.cleaner_offsets, updated)
            return updated

    def drop_cleaner_offsets(self, tps: Iterable[TopicPartition]) -> None:
        """Remove deleted partitions from the cleaner checkpoint in one update (an unreadable
        checkpoint is logged and left as it is)."""
        try:
            self.update_cleaner_offsets(CheckpointChange(remove=frozenset(tps)))
        except (OSError, CheckpointError) as err:
            log.warning("could not drop partitions from the cleaner checkpoint: %s", err)

    def _write(self, file: OffsetCheckpointFile, entries: Mapping[TopicPartition, int]) -> bool:
        entries = dict(entries)
        with self._lock:
            if self._last.get(file.path) == entries and file.path.exists():
                return False
            file.write(entries)
            self._last[file.path] = entries
            self.writes += 1
            return True
