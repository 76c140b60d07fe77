"""Deleting partitions of one log directory (Kafka LogManager's asyncDelete and its
``kafka-delete-logs`` task): rename ``<topic>-<partition>`` to ``<topic>-<partition>.<uuid>-delete``
under the partition's cleaning pause, rewrite the checkpoints once per batch without them, and
delete their files ``file.delete.delay.ms`` later. ``LogDeletes`` owns the delete queue
(``node.deletion``) and the scheduling of the delete task; ``LogDir`` delegates to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Callable

from node.checkpoints import DirCheckpoints
from node.deletion import DeleteQueue, QueuedDelete
from node.log_table import LogTable
from node.tasks import GuardedScheduler
from storage import files
from storage.clock import Clock
from storage.durable import fsync_dir
from storage.files import TopicPartition
from storage.log import Log

log = logging.getLogger(__name__)

PauseCleaning = Callable[[TopicPartition], AbstractContextManager[object]]
# the pauses of many partitions held at once (a topic deletion): one call, not one per partition
PauseCleaningMany = Callable[[list[TopicPartition]], AbstractContextManager[object]]
IoGuard = Callable[[str], AbstractContextManager[None]]


class LogDeletes:
    """The deletions of the directory at ``path``. ``io(action)`` is the directory's guard of
    every call (offline and closed checks, an ``OSError`` takes it offline); ``armed()`` says
    whether its periodic tasks run (until then nothing is scheduled: ``start_tasks`` arms the
    queue's due times)."""

    def __init__(self, path: Path, table: LogTable, checkpoints: DirCheckpoints, clock: Clock,
                 scheduler: GuardedScheduler, pause_cleaning: PauseCleaning, io: IoGuard,
                 armed: Callable[[], bool],
                 pause_cleaning_many: PauseCleaningMany | None = None) -> None:
        self.path = path
        self.queue = DeleteQueue()
        self._table = table
        self._checkpoints = checkpoints
        self._clock = clock
        self._scheduler = scheduler
        self._pause_cleaning = pause_cleaning
        self._pause_cleaning_many: PauseCleaningMany = pause_cleaning_many or self._pause_each
        self._io = io
        self._armed = armed

    def delete_logs(self, topic: str, tps: list[TopicPartition]) -> dict[int, Log]:
        """``LogDir.delete_logs`` of the already checked partitions ``tps``."""
        with self._table.lock:
            held = [tp for tp in tps if tp in self._table.logs]
        removed: dict[TopicPartition, Log] = {}
        try:
            # the cleaning pauses of the whole batch in one call, taken before any rename and
            # released after the last (not one call per partition: see pause_cleaning_many)
            with self._pause_cleaning_many(held):
                for tp in held:
                    gone = self._unlist_and_rename(tp, paused=True)
                    if gone is not None:
                        removed[tp] = gone
        finally:
            if removed:
                with self._io(f"delete logs of {topic}"):
                    fsync_dir(self.path)       # every rename of the batch made durable at once
                    due = self.queue_removed(removed)
                self.arm(due)
        return {tp.partition: gone for tp, gone in removed.items()}

    @contextmanager
    def _pause_each(self, tps: list[TopicPartition]) -> Iterator[None]:
        """``pause_cleaning`` of every partition of ``tps``, held together."""
        with ExitStack() as stack:
            for tp in tps:
                stack.enter_context(self._pause_cleaning(tp))
            yield

    def _unlist_and_rename(self, tp: TopicPartition, *, paused: bool = False) -> Log | None:
        """Unlist ``tp`` and rename its directory ``-delete``, inside its cleaning pause (taken
        here unless the caller holds it: ``paused``)."""
        table = self._table
        with self._io(f"delete log {tp}"):
            with table.lock:
                if tp not in table.logs:
                    return None
            # pause first, then unlist: a clean finishing meanwhile still finds its log to swap
            # into (and the rename waits for it), instead of failing on a missing partition
            with nullcontext() if paused else self._pause_cleaning(tp):
                with table.lock:
                    removed = table.logs.pop(tp, None)
                if removed is None:
                    return None
                try:
                    removed.rename_dir(files.delete_dir_name(tp.topic, tp.partition),
                                       sync=False)
                except Exception:
                    if not removed.is_closed:   # refused before the rename: the log stays
                        with table.lock:
                            table.logs[tp] = removed
                    raise
            log.info("log %s renamed to %s; its files go in %d ms", tp, removed.dir.name,
                     removed.config.file_delete_delay_ms)
            return removed

    def queue_removed(self, removed: Mapping[TopicPartition, Log]) -> int:
        """After the logs of ``removed`` (no longer listed) were renamed ``-delete``: queue their
        files for the delete task and rewrite the checkpoints once without them (deleting n
        partitions costs O(n), not O(n^2)). Returns when the last files are due."""
        now = self._clock.milliseconds()
        due = 0
        for tp, gone in removed.items():
            gone_due = now + gone.config.file_delete_delay_ms
            self.queue.add(QueuedDelete(tp, gone.dir, gone_due, gone))
            due = max(due, gone_due)
        logs = self._table.snapshot()
        self._checkpoints.write_recovery_points(logs)
        self._checkpoints.write_log_start_offsets(logs)
        self._checkpoints.drop_cleaner_offsets(list(removed))
        return due

    def queue_found(self, found: Iterable[tuple[TopicPartition, Path]],
                    delay_ms: Callable[[str], int]) -> None:
        """Queue the ``-delete`` directories found at load, each due ``delay_ms(topic)`` from
        now."""
        now = self._clock.milliseconds()
        for tp, path in found:
            self.queue.add(QueuedDelete(tp, path, now + delay_ms(tp.topic), None))

    def arm(self, due_ms: int) -> None:
        """Schedule the delete task at ``due_ms`` (once the directory's tasks run)."""
        if self._armed():
            delay = max(0, due_ms - self._clock.milliseconds())
            self._scheduler.schedule("kafka-delete-logs", self.delete_due, delay)

    def delete_due(self) -> int:
        """Delete the files of every queued log whose delay is over; returns how many."""
        with self._io("delete queued logs"):
            due = self.queue.take_due(self._clock.milliseconds())
            for queued in due:
                queued.remove()
                log.info("deleted log %s (%s)", queued.topic_partition, queued.path.name)
            if due:
                fsync_dir(self.path)
            return len(due)

    def being_deleted(self, tp: TopicPartition) -> bool:
        with self._table.lock:
            return tp not in self._table.logs and self.queue.holds(tp)


__all__ = ["LogDeletes"]
