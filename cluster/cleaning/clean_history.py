"""``CleanHistory``: what the coordinator's cleans came to, for ``status`` and ``trigger``: the count
of finished cleans per partition, the count of failed ones, and a summary of each of the last
``RECENT_CLEANS`` cleans (cleaned, aborted, failed, offline, or the cleaner died).

Thread-safe: one lock of its own, never held across a call to anything else.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from cluster.status import CleanSummary
from cluster.cleaning.clean_assignment import CleanAssignment
from storage.files import TopicPartition

if TYPE_CHECKING:   # an annotation only: the coordinator's process loads no numba
    from cleaner.cleaner import CleanResult

RECENT_CLEANS = 64


class CleanHistory:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._completed: dict[TopicPartition, int] = {}
        self._failed = 0
        self._recent: deque[CleanSummary] = deque(maxlen=RECENT_CLEANS)

    def cleaned(self, a: CleanAssignment, cleaner_id: int, result: CleanResult,
                now: int) -> None:
        """The clean ``a`` finished with ``result``."""
        tp = a.topic_partition
        stats = result.stats
        summary = CleanSummary(
            topic=tp.topic, partition=tp.partition, log_dir=a.log_dir, cleaner_id=cleaner_id,
            outcome="cleaned", first_dirty_offset=a.first_dirty_offset,
            next_dirty_offset=result.next_dirty_offset, bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written, messages_read=stats.messages_read,
            messages_written=stats.messages_written, elapsed_secs=stats.elapsed_secs,
            error=None, finished_ms=now)
        with self._lock:
            self._completed[tp] = self._completed.get(tp, 0) + 1
            self._recent.append(summary)

    def ended(self, a: CleanAssignment, cleaner_id: int, outcome: str, error: str,
              now: int) -> None:
        """The clean ``a`` ended without a result: ``outcome`` is ``aborted`` (not counted as a
        failure), ``offline``, ``failed`` or ``cleaner died``."""
        tp = a.topic_partition
        summary = CleanSummary(
            topic=tp.topic, partition=tp.partition, log_dir=a.log_dir, cleaner_id=cleaner_id,
            outcome=outcome, first_dirty_offset=a.first_dirty_offset,
            next_dirty_offset=a.first_dirty_offset, bytes_read=0, bytes_written=0,
            messages_read=0, messages_written=0, elapsed_secs=0.0, error=error, finished_ms=now)
        with self._lock:
            if outcome != "aborted":
                self._failed += 1
            self._recent.append(summary)

    def completed(self, tp: TopicPartition) -> int:
        """Finished cleans of ``tp``."""
        with self._lock:
            return self._completed.get(tp, 0)

    def totals(self) -> tuple[int, int, tuple[CleanSummary, ...]]:
        """(finished cleans, failed cleans, the recent summaries, oldest first)."""
        with self._lock:
            return sum(self._completed.values()), self._failed, tuple(self._recent)
