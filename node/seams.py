"""The seams through which a cluster gives a node actor its parts (``node.server.LogDirServer``):
``NodeObserver`` (what the node reports, published as metrics) and ``CleaningPauses`` (pauses of
cleaning held by a cleaner manager in another process). The third seam, ``move_sources``, is a
plain callable returning a ``node.mover.MoveSource``. This module owns these protocols only.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from node.stats import LoadProgress, LogDirStats
from storage.files import TopicPartition


class NodeObserver(Protocol):
    """What a node reports as it works; a cluster publishes it as metrics. Called on the node's
    threads: an observer must be thread-safe and quick, and must not raise."""

    def appended(self, topic: str, partition: int, size: int, records: int) -> None: ...

    def stats_taken(self, stats: LogDirStats) -> None: ...

    def load_progress(self, progress: LoadProgress) -> None: ...

    def closed(self) -> None: ...


class CleaningPauses(Protocol):
    """Pauses of cleaning held by a cleaner manager in another process (the cluster's
    coordinator). ``pause`` returns a context manager that holds the pause of ``tp`` while it is
    entered; ``reason`` names the node's work (``move``), empty for truncation, deletion and
    retention. A manager that cannot be reached must not stop the work (a clean it started fails
    at its swap instead)."""

    def pause(self, tp: TopicPartition, reason: str) -> AbstractContextManager[object]: ...

    def pause_many(self, tps: list[TopicPartition]) -> AbstractContextManager[object]:
        """The pauses of every partition of ``tps`` (a deletion), taken and released in one
        call each."""
        ...


__all__ = ["CleaningPauses", "NodeObserver"]
