"""``CleanerWorker``: one cleaner of the pool (Kafka's CleanerThread, as a process of its own).

For each assignment it opens a ``LogView`` on the partition directory (the worker runs on the host
of the disk), runs ``Cleaner.clean`` over the dirty range the coordinator chose, and hands every
cleaned segment to the owning node (``swap(topic, partition, cleaned_base, old_bases)``), which is
the only process that renames or deletes files there. Memory: one offset map of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes, allocated once, plus the I/O
buffers.

Abort: ``abort(assignment_id)`` sets a flag that ``check_done`` reads at every chunk; the clean
then raises ``LogCleaningAbortedError`` and leaves no ``.cleaned`` file. A flag for an assignment
that has not started yet stops it at its first check. Thread-safe: ``clean`` runs one assignment at
a time (callers on other threads wait); ``abort``, ``reset`` and ``status`` may run meanwhile.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cleaner.config import CleanerConfig
from cluster.cleaning.clean_assignment import CleanAssignment
from cluster.metrics.sink import MetricsSink, NullMetrics
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.errors import LogCleaningAbortedError
from storage.files import TopicPartition
from storage.view import LogView

if TYPE_CHECKING:
    from cleaner.cleaner import Cleaner, CleanResult

logger = logging.getLogger(__name__)

SwapFor = Callable[[str], Callable[[str, int, int, list[int]], None]]
"""``swap_for(log_dir)`` -> ``swap(topic, partition, cleaned_base, old_bases)`` on its node."""


@dataclass(frozen=True)
class WorkerStatus:
    cleaner_id: int
    host: str
    busy_with: TopicPartition | None
    assignment_id: int | None
    cleans: int
    aborted: int
    last_result: CleanResult | None


class CleanerWorker:
    """One cleaner: cleans one assignment at a time and reports each result.

    Contract: ``clean`` returns the ``CleanResult`` of a finished clean, whose every cleaned
    segment the owning node has already swapped in (through ``swap_for(log_dir)``), or raises
    ``LogCleaningAbortedError`` (aborted: no ``.cleaned`` file is left, nothing was swapped after
    the abort was seen) or the error of the clean (the coordinator then counts a failure for the
    partition); the worker never renames or deletes a file of a partition itself. ``abort``,
    ``reset`` and ``status`` answer while a clean runs. Memory is the offset map sized from
    ``config`` at the first clean, whatever the size of the logs. The cleaner (and numba, its
    kernels') loads at that first clean too, so a cluster's cleaner actors start as fast as its
    other actors.
    """

    def __init__(self, cleaner_id: int, config: CleanerConfig, swap_for: SwapFor, *,
                 host: str = "", metrics: MetricsSink | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.cleaner_id = cleaner_id
        self.host = host
        self._swap_for = swap_for
        self._metrics = metrics or NullMetrics()
        self._clock = clock
        self._state = threading.Condition()
        self._run_lock = threading.Lock()
        self._aborted: set[int] = set()
        self._current: CleanAssignment | None = None
        self._cleans = 0
        self._aborts = 0
        self._last: CleanResult | None = None
        self._config = config
        self._cleaner: Cleaner | None = None
        self._cleaner_lock = threading.Lock()

    def clean(self, assignment: CleanAssignment) -> CleanResult:
        """Clean the assignment's range; ``LogCleaningAbortedError`` when aborted."""
        with self._run_lock:
            with self._state:
                self._current = assignment
            try:
                result = self._clean(assignment)
            except LogCleaningAbortedError:
                with self._state:
                    self._aborts += 1
                raise
            finally:
                with self._state:
                    self._current = None
                    self._aborted.discard(assignment.assignment_id)
                    self._state.notify_all()
            with self._state:
                self._cleans += 1
                self._last = result
            self._report(result)
            return result

    def _clean(self, a: CleanAssignment) -> CleanResult:
        swap = self._swap_for(a.log_dir)
        tp = a.topic_partition
        view = LogView.open(Path(a.partition_dir), a.config,
                            lambda base, old: swap(tp.topic, tp.partition, base, old),
                            clock=self._clock)
        try:
            result = self._loaded_cleaner().clean(
                view, a.first_dirty_offset, self._clock.milliseconds(),
                first_uncleanable_offset=a.first_uncleanable_offset)
        finally:
            view.close()
        logger.info(result.stats.log_line(self.cleaner_id, view.name, a.first_dirty_offset,
                                          result.next_dirty_offset))
        return result

    def _loaded_cleaner(self) -> Cleaner:
        """The cleaner, made once, at the first clean (or the first call of any thread)."""
        with self._cleaner_lock:
            if self._cleaner is None:
                from cleaner.cleaner import Cleaner

                self._cleaner = Cleaner(self._config, clock=self._clock,
                                        check_done=self._check_done,
                                        cleaner_id=self.cleaner_id)
            return self._cleaner

    def _check_done(self, tp: TopicPartition) -> None:
        with self._state:
            current = self._current
            if current is not None and current.assignment_id in self._aborted:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted",
                                              topic_partition=tp)

    def abort(self, assignment_id: int) -> bool:
        """Stop that assignment at its next check (or at its start). Returns whether it is the
        one running now."""
        with self._state:
            self._aborted.add(assignment_id)
            current = self._current
            return current is not None and current.assignment_id == assignment_id

    def reset(self, timeout: float = 60.0) -> bool:
        """Abort whatever runs and wait until idle (a new coordinator does this before it hands
        out work). Returns whether the worker is idle."""
        with self._state:
            if self._current is not None:
                self._aborted.add(self._current.assignment_id)
            return self._state.wait_for(lambda: self._current is None, timeout)

    def status(self) -> WorkerStatus:
        with self._state:
            current = self._current
            return WorkerStatus(self.cleaner_id, self.host,
                                None if current is None else current.topic_partition,
                                None if current is None else current.assignment_id,
                                self._cleans, self._aborts, self._last)

    def ping(self) -> int:
        return self.cleaner_id

    def _report(self, result: CleanResult) -> None:
        stats = result.stats
        tags = {"cleaner": str(self.cleaner_id)}
        elapsed = max(stats.elapsed_secs, 1e-3)
        self._metrics.set("strata_cleaner_mb_per_sec", stats.bytes_read / elapsed / 1e6, tags)
        self._metrics.set("strata_cleaner_records_per_sec", stats.messages_read / elapsed, tags)
        self._metrics.set("strata_cleaner_buffer_utilization_percent",
                          100.0 * stats.buffer_utilization, tags)
        self._metrics.set("strata_cleaner_recopy_percent",
                          100.0 * stats.bytes_written / stats.bytes_read if stats.bytes_read
                          else 0.0, tags)
        self._metrics.inc("strata_cleaner_cleans", 1, tags)
