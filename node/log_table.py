"""The partitions of one log directory as a table (Kafka LogManager's ``currentLogs`` pool, with
the partitions skipped at load and those moved away beside it). ``LogTable`` owns the three maps
and the one lock that guards them; ``LogDir`` and its collaborators (``node.dir_deletes``,
``node.dir_moves``) share one table.

Lock rule: the lock guards only the maps (and the topic configs ``LogDir`` keeps under it) and is
never held while waiting for a log's lock, so the offline path (which closes every log) cannot
deadlock with a caller. It is re-entrant.
"""

from __future__ import annotations

import threading

from node.health import DirLog
from node.stats import PartitionProblem
from storage.files import TopicPartition


class LogTable:
    """``logs``: the live logs; ``skipped``: partitions skipped at load, with why; ``moved``:
    partitions moved away, to the directory they went to. Read or change them under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.logs: dict[TopicPartition, DirLog] = {}
        self.skipped: dict[TopicPartition, PartitionProblem] = {}
        self.moved: dict[TopicPartition, str] = {}

    def snapshot(self) -> list[DirLog]:
        """The live logs now."""
        with self.lock:
            return list(self.logs.values())

    def live_partitions(self) -> frozenset[TopicPartition]:
        with self.lock:
            return frozenset(TopicPartition(tp.topic, tp.partition) for tp in self.logs)


__all__ = ["LogTable"]
