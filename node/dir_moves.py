"""The two ends of a move between log directories as one directory sees them (``node.move`` has
the files and the crash rules, ``node.mover`` drives a move): start a ``-future`` directory, settle
it into a live log once the source committed, seed the checkpoints of a promoted partition, and,
at the source, stop serving a partition that moved away. ``DirMoves`` owns these steps and the
answer ``PartitionMovedError`` for a moved partition; ``LogDir`` delegates to it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

from cleaner.checkpoints import CheckpointChange
from node import move
from node.checkpoints import DirCheckpoints
from node.dir_deletes import IoGuard, LogDeletes
from node.errors import MoveAbortedError, PartitionMovedError
from node.health import DirLog
from node.log_table import LogTable
from storage import files
from storage.durable import fsync_dir
from storage.files import TopicPartition
from storage.log import Log

log = logging.getLogger(__name__)

OpenLog = Callable[..., DirLog]


class DirMoves:
    """Moves into and out of the directory at ``path``. ``open_log(path, tp, **open_args)`` opens
    a partition's log as the directory does (its topic config, clock, scheduler, health)."""

    def __init__(self, path: Path, table: LogTable, checkpoints: DirCheckpoints,
                 deletes: LogDeletes, open_log: OpenLog, io: IoGuard) -> None:
        self.path = path
        self._table = table
        self._checkpoints = checkpoints
        self._deletes = deletes
        self._open_log = open_log
        self._io = io

    def raise_if_moved(self, topic: str, partition: int) -> None:
        target = self._table.moved.get(TopicPartition(topic, partition))
        if target is not None:
            raise PartitionMovedError(
                f"partition {topic}-{partition} moved from {self.path} to {target}",
                topic=topic, partition=partition, target_dir=target)

    def begin_move_in(self, tp: TopicPartition, source_dir: str) -> Path:
        with self._io(f"start moving {tp} in"):
            unique = uuid.uuid4().hex
            future = self.path / files.future_dir_name(tp.topic, tp.partition, unique)
            future.mkdir()
            move.MoveState(tp.topic, tp.partition, os.path.abspath(source_dir), unique).write(
                future)
            fsync_dir(self.path)
            return future

    def interrupted(self) -> dict[str, move.MoveState]:
        """The ``-future`` directories kept to resume (``move.resumable_futures``)."""
        with self._io("list interrupted moves"):
            return move.resumable_futures(self.path)

    def resume_move_in(self, tp: TopicPartition, source_dir: str) -> Path | None:
        """The ``-future`` directory of a copy of ``tp`` from ``source_dir`` left to resume (see
        ``node.move``), or None. Any other future of ``tp`` left to resume (from another source)
        is abandoned: the partition no longer lives there."""
        with self._io(f"resume moving {tp} in"):
            source = Path(os.path.abspath(source_dir))
            found = None
            for name, _ in move.resumable_futures(self.path).items():
                future = self.path / name
                action, state, why = move.settle(self.path, future, resumable=True)
                if action != move.RESUME or state is None or state.topic_partition != tp:
                    continue
                if found is None and Path(state.source_dir) == source:
                    found = future
                    continue
                with move.move_lock(future):
                    move.abandon(self.path, future)
            return found

    def settle_move_in(self, future: Path) -> Log:
        with self._io(f"settle move {future.name}"):
            action, state, why = move.settle(self.path, future)
            if action != move.PROMOTE or state is None:
                raise MoveAbortedError(f"move into {future} abandoned: {why}",
                                       path=str(future), reason=why)
            tp = state.topic_partition
            live = self.path / files.partition_dir_name(tp.topic, tp.partition)
            # the source's switch left every file consistent and the data synced: open it as
            # after a clean shutdown (no segment re-read); a load after a crash recovers it
            opened = self._open_log(live, tp, recovery_point=state.recovery_point,
                                    log_start_offset=state.log_start_offset,
                                    had_clean_shutdown=True)
            with self._table.lock:
                self._table.logs[tp] = opened
                self._table.moved.pop(tp, None)
            self.settle_seeds({tp: state})
            log.info("partition %s moved in from %s (log end %d)", tp, state.source_dir,
                     opened.log_end_offset)
            return opened

    def settle_seeds(self, seeds: Mapping[TopicPartition, move.MoveState]) -> None:
        """Write the checkpoints of partitions promoted from a move (their recovery point, log
        start and cleaner offset), then remove their move states."""
        if not seeds:
            return
        logs = self._table.snapshot()
        self._checkpoints.write_recovery_points(logs)
        self._checkpoints.write_log_start_offsets(logs)
        offsets = {tp: s.cleaner_offset for tp, s in seeds.items()
                   if s.cleaner_offset is not None}
        if offsets:
            self._checkpoints.update_cleaner_offsets(CheckpointChange(defaults=offsets))
        for tp in seeds:
            move.clear_state(self.path / files.partition_dir_name(tp.topic, tp.partition))

    def finish_move_out(self, tp: TopicPartition, removed: Log, target_dir: str) -> None:
        with self._table.lock:
            if self._table.logs.get(tp) is removed:
                del self._table.logs[tp]
            self._table.moved[tp] = target_dir
        due = self._deletes.queue_removed({tp: removed})
        log.info("partition %s moved to %s; %s goes in %d ms", tp, target_dir, removed.dir.name,
                 removed.config.file_delete_delay_ms)
        self._deletes.arm(due)


__all__ = ["DirMoves"]
