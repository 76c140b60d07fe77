"""The queue of deleted partitions waiting for ``file.delete.delay.ms`` (Kafka's logsToBeDeleted).

A partition enters it renamed ``<topic>-<partition>.<uuid>-delete``, either by ``LogDir.delete_log``
(with its closed ``Log``) or found so at load (without one). When its delay is over its files and
directory are removed. A crash before that leaves the ``-delete`` directory, which the next load
queues again, so the queue itself needs no checkpoint.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from storage.files import TopicPartition
from storage.log import Log


@dataclass(frozen=True, slots=True)
class QueuedDelete:
    topic_partition: TopicPartition
    path: Path
    due_ms: int
    log: Log | None

    def remove(self) -> None:
        """Delete the files and the directory (an already missing directory is fine)."""
        if self.log is not None:
            self.log.delete()
            return
        try:
            shutil.rmtree(self.path)
        except FileNotFoundError:
            pass


class DeleteQueue:
    """Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[QueuedDelete] = []

    def add(self, entry: QueuedDelete) -> None:
        with self._lock:
            self._entries.append(entry)

    def take_due(self, now_ms: int) -> list[QueuedDelete]:
        """Remove and return the entries whose delay is over."""
        with self._lock:
            due = [e for e in self._entries if e.due_ms <= now_ms]
            self._entries = [e for e in self._entries if e.due_ms > now_ms]
            return due

    def holds(self, tp: TopicPartition) -> bool:
        """True when a deleted log of ``tp`` waits in the queue."""
        with self._lock:
            return any(e.topic_partition == tp for e in self._entries)

    def due_times(self) -> list[int]:
        with self._lock:
            return [e.due_ms for e in self._entries]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
