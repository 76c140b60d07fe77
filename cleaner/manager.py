"""``CleanerManager``: which partition the cleaner works on next, and every partition's cleaning
state (Kafka's ``LogCleanerManager``), for one set of log directories.

The state machine of each partition (IN_PROGRESS, ABORTED, PAUSED(n)) is ``cleaner.transitions``;
the choice of the filthiest log is ``cleaner.selection``; the checkpoint files are
``cleaner.checkpoints`` and failing partitions ``cleaner.uncleanable``. This class holds them under
one lock and is the API of all of them. The cleaner calls ``check_cleaning_aborted`` at every
chunk and stops with ``LogCleaningAbortedError``.

Unlike Kafka, a failing partition is retried ``uncleanable_retries`` times, each after
``uncleanable_retry_backoff_ms``, before it is marked uncleanable, an exception while evaluating
one log is recorded against that log instead of stopping selection for all, and uncleanable
partitions can be re-enabled without a restart (``reset_uncleanable``). ``explain`` says why a log
is or is not being cleaned.

Thread-safe: every method takes one re-entrant lock; ``abort_and_pause_cleaning`` waits on a
condition of that lock (releasing it) until the cleaner reports back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cleaner.cleanable import (CleanableLog, LogToClean, OffsetsToClean, SegmentView,
                               cleanable_offsets, max_compaction_delay)
from cleaner.checkpoints import (CheckpointFileLike, CleanerCheckpoints, dir_key,
                                 local_checkpoint_file)
from cleaner.config import CleanerConfig
from cleaner.explain import Explanation, explain_log
from cleaner.selection import Selector, filthiest
from cleaner.state import ABORTED, IN_PROGRESS, CleaningPhase, CleaningState, paused
from cleaner.stats import PreCleanStats
from cleaner.transitions import CleanerStateError, CleaningAbortTimeoutError, CleaningStates
from cleaner.uncleanable import UncleanablePartition, UncleanableTracker, describe
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import LogCleaningAbortedError
from storage.files import TopicPartition

__all__ = [
    "ABORTED", "IN_PROGRESS", "CleanableLog", "CleanerManager", "CleanerManagerStats",
    "CleanerStateError", "CleaningAbortTimeoutError", "CleaningPhase", "CleaningState",
    "Explanation", "LogToClean", "OffsetsToClean", "SegmentView", "UncleanablePartition",
    "cleanable_offsets", "max_compaction_delay", "paused",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerManagerStats:
    """Kafka's LogCleanerManager gauges (and ``max-compaction-delay-secs``) as plain values."""

    max_dirty_percent: int
    time_since_last_run_ms: int
    max_compaction_delay_secs: int
    uncleanable_partitions_count: dict[str, int]
    in_progress: int
    paused: int
    aborted: int
    retrying: int


class CleanerManager:
    """Cleaning state and ``cleaner-offset-checkpoint`` files of a set of log directories.

    ``on_dir_failure(log_dir, error)`` is called when a checkpoint cannot be read or written
    because of an ``OSError`` (Kafka's LogDirFailureChannel); the manager itself only logs. It
    runs under the manager's lock, on the calling thread (calling ``handle_log_dir_failure`` from
    it is fine; handing work to another thread that waits on the manager is not).
    ``checkpoint_file(log_dir)`` opens a directory's checkpoint (see ``cleaner.checkpoints``); the
    default reads and writes the local file.
    """

    def __init__(self, log_dirs: Iterable[Path | str], config: CleanerConfig | None = None, *,
                 clock: Clock = SYSTEM_CLOCK,
                 on_dir_failure: Callable[[Path, BaseException], None] | None = None,
                 checkpoint_file: Callable[[Path], CheckpointFileLike] = local_checkpoint_file
                 ) -> None:
        self.config = config or CleanerConfig()
        self._clock = clock
        self._lock = threading.RLock()
        self._checkpoints = CleanerCheckpoints(log_dirs, on_dir_failure, checkpoint_file)
        self._failures = UncleanableTracker(self.config.uncleanable_retries,
                                            self.config.uncleanable_retry_backoff_ms)
        self._states = CleaningStates(self._lock)
        self._selector = Selector(self._checkpoints, self._failures)
        self._dirs = self._selector.dirs
        self._dirtiest_ratio = 0.0
        self._time_of_last_run = clock.milliseconds()
        self._pre_clean = PreCleanStats()

    # ---- checkpoints -------------------------------------------------------------------------
    @property
    def log_dirs(self) -> list[Path]:
        with self._lock:
            return self._checkpoints.log_dirs

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """Every live directory's checkpoint merged; an unreadable one is logged and skipped."""
        with self._lock:
            return self._checkpoints.read_all()

    def cleaner_checkpoints(self, log_dir: Path | str) -> dict[TopicPartition, int]:
        with self._lock:
            return self._checkpoints.read(dir_key(log_dir))

    def update_checkpoints(self, log_dir: Path | str,
                           update: tuple[TopicPartition, int] | None = None,
                           partition_to_remove: TopicPartition | None = None,
                           live_partitions: Collection[TopicPartition] | None = None) -> None:
        """Rewrite ``log_dir``'s checkpoint: drop ``partition_to_remove``, set ``update``, and with
        ``live_partitions`` drop every other partition not in it (Kafka keeps only live logs).
        I/O errors are logged (an ``OSError`` also goes to ``on_dir_failure``), not raised; an
        offline directory is skipped; a directory this manager does not own is a ValueError."""
        with self._lock:
            self._checkpoints.update(dir_key(log_dir), update, partition_to_remove,
                                     live_partitions)

    def maybe_truncate_checkpoint(self, log_dir: Path | str, tp: TopicPartition,
                                  offset: int) -> None:
        """After a truncation: lower ``tp``'s checkpoint to ``offset``; never raises it."""
        with self._lock:
            self._checkpoints.truncate(dir_key(log_dir), tp, offset)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path | str,
                             destination: Path | str) -> None:
        """Move ``tp``'s checkpoint entry to another directory (the partition moved there)."""
        with self._lock:
            offset = self._checkpoints.read(dir_key(source)).get(tp)
            if offset is None:
                return
            self._checkpoints.update(dir_key(source), remove=tp)
            self._checkpoints.update(dir_key(destination), update=(tp, offset))
            self._dirs[tp] = dir_key(destination)

    def add_log_dir(self, log_dir: Path | str) -> None:
        """Manage one more directory (or one back online): its checkpoint is used again."""
        with self._lock:
            self._checkpoints.add_dir(dir_key(log_dir))

    def handle_log_dir_failure(self, log_dir: Path | str) -> None:
        """Stop using an offline directory: forget its checkpoint, uncleanable partitions and
        failure records. Cleaning states stay with their owners: a running clean is told to stop
        by ``check_cleaning_aborted`` and its ``done_cleaning`` then skips the checkpoint."""
        key = dir_key(log_dir)
        logger.warning("Stopping cleaning logs in dir %s", key)
        with self._lock:
            self._checkpoints.take_offline(key)
            self._failures.forget_dir(key)

    # ---- cleaning state ----------------------------------------------------------------------
    def cleaning_state(self, tp: TopicPartition) -> CleaningState | None:
        with self._lock:
            return self._states.get(tp)

    def is_cleaning_in_state(self, tp: TopicPartition, state: CleaningState | None) -> bool:
        with self._lock:
            return self._states.get(tp) == state

    def is_cleaning_in_state_paused(self, tp: TopicPartition) -> bool:
        with self._lock:
            state = self._states.get(tp)
            return state is not None and state.phase is CleaningPhase.PAUSED

    def set_cleaning_state(self, tp: TopicPartition, state: CleaningState | None) -> None:
        """Kafka's ``setCleaningState``: bypasses the transition rules. For tests."""
        with self._lock:
            self._states.force(tp, state)

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Pause cleaning of ``tp``, first aborting a clean in progress and waiting (up to
        ``timeout`` seconds, default forever) until the cleaner has stopped. Each call takes one
        pause; ``resume_cleaning`` releases one."""
        with self._lock:
            self._states.pause(tp)
            self.wait_until_paused(tp, timeout)

    def wait_until_paused(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Block until ``tp`` is PAUSED; ``CleaningAbortTimeoutError`` after ``timeout`` s."""
        with self._lock:
            self._states.wait_until_paused(tp, timeout)

    def resume_cleaning(self, partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Release one pause of each partition (PAUSED(1) -> none, PAUSED(n) -> PAUSED(n-1)).
        All are checked before any is changed."""
        tps = [partitions] if isinstance(partitions, TopicPartition) else list(partitions)
        with self._lock:
            self._states.resume(tps)

    def abort_cleaning(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Abort a clean in progress (waiting for it to stop) without leaving a pause behind."""
        with self._lock:
            self.abort_and_pause_cleaning(tp, timeout)
            self.resume_cleaning(tp)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Called by the cleaner at every segment and chunk: raises ``LogCleaningAbortedError``
        when the clean of ``tp`` was aborted or its directory went offline."""
        with self._lock:
            if self._states.get(tp) == ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted", topic_partition=tp)
            if self._selector.is_offline(tp):
                raise LogCleaningAbortedError(
                    f"cleaning of {tp} stopped: log directory {self._dirs[tp]} is offline",
                    topic_partition=tp)

    def done_cleaning(self, tp: TopicPartition, log_dir: Path | str, end_offset: int) -> None:
        """The cleaner finished with ``tp`` (successfully or not). IN_PROGRESS: the checkpoint
        becomes ``end_offset`` and, if it moved forward, the partition's failure count is reset.
        ABORTED: PAUSED(1), waking the aborter."""
        key = dir_key(log_dir)
        with self._lock:
            state = self._states.get(tp)
            if state == IN_PROGRESS:
                if self._checkpoints.is_offline(key):
                    logger.warning("Not checkpointing %s: log directory %s is offline", tp, key)
                else:
                    self._checkpoints.update(key, update=(tp, end_offset))
                started = self._states.cleaning_from(tp)
                if end_offset > (end_offset if started is None else started):
                    self._failures.succeeded(tp)
                self._states.finish(tp)
            else:
                self._states.done_not_in_progress(tp)

    def done_deleting(self, partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Retention of compacted logs (``deletable_logs``) finished."""
        tps = [partitions] if isinstance(partitions, TopicPartition) else list(partitions)
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state == IN_PROGRESS:
                    self._states.finish(tp)
                else:
                    self._states.done_not_in_progress(tp)

    # ---- selection ---------------------------------------------------------------------------
    def grab_filthiest_compacted_log(self, logs: Mapping[TopicPartition, CleanableLog],
                                     now_ms: int | None = None, *,
                                     update_stats: bool = True) -> LogToClean | None:
        """The dirtiest eligible compacted log, now IN_PROGRESS; None when there is none.

        Skips logs in any cleaning state, uncleanable, in retry backoff or in an offline
        directory. Rewrites checkpoints that had to be reset even for logs not chosen. A log whose
        evaluation raises is recorded as a failed clean and the others are still considered.
        ``update_stats=False`` leaves the gauges of the last selection (``max_dirty_percent``,
        ``last_pre_clean_stats``) alone: for a choice among some logs only, such as a clean
        triggered by hand.
        """
        now = self._clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            dirty, delays = self._selector.dirty_logs(logs, now, self._states,
                                                      write_checkpoints=True)
            cleanable = [l for l in dirty if l.is_eligible]
            if update_stats:
                self._time_of_last_run = now
                self._dirtiest_ratio = max((l.cleanable_ratio for l in dirty), default=0.0)
                self._pre_clean = PreCleanStats(len(cleanable), sum(1 for d in delays if d > 0),
                                                max(delays, default=0))
            if not cleanable:
                return None
            chosen = filthiest(cleanable)
            assert chosen is not None
            self._states.start(chosen.topic_partition, chosen.first_dirty_offset)
            return chosen

    def preview_filthiest(self, logs: Mapping[TopicPartition, CleanableLog],
                          now_ms: int | None = None) -> LogToClean | None:
        """What ``grab_filthiest_compacted_log`` would choose now, without any side effect."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            dirty, _ = self._selector.dirty_logs(logs, now, self._states,
                                                 write_checkpoints=False)
            return filthiest(dirty)

    def deletable_logs(self, logs: Mapping[TopicPartition, CleanableLog],
                       now_ms: int | None = None) -> list[CleanableLog]:
        """Compacted logs (compact and compact,delete) not in any cleaning state, not uncleanable
        and not in retry backoff, now IN_PROGRESS: the caller runs their retention and then
        calls ``done_deleting``."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            chosen = []
            for tp, log in logs.items():
                if not log.config.compact or tp in self._states:
                    continue
                if self._selector.blocked(tp, self._selector.note_dir(tp, log), now):
                    continue
                chosen.append(log)
            for log in chosen:
                self._states.start(log.topic_partition)
            return chosen

    def pause_cleaning_for_non_compacted_partitions(
            self, logs: Mapping[TopicPartition, CleanableLog]) -> list[CleanableLog]:
        """PAUSED(1) for every non-compacted log not in a cleaning state, while the log manager
        runs their retention; it then calls ``resume_cleaning`` for the returned logs."""
        with self._lock:
            chosen = [log for tp, log in logs.items()
                      if not log.config.compact and tp not in self._states]
            for log in chosen:
                self._states.force(log.topic_partition, paused(1))
            return chosen

    # ---- failures and uncleanable partitions -------------------------------------------------
    def record_cleaning_failure(self, tp: TopicPartition, log_dir: Path | str,
                                error: BaseException | str, now_ms: int | None = None) -> bool:
        """A clean of ``tp`` failed. Selection skips it for ``uncleanable_retry_backoff_ms``; at
        failure number ``uncleanable_retries + 1`` in a row it is marked uncleanable. Returns
        whether it now is."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            self._dirs[tp] = dir_key(log_dir)
            return self._failures.record_failure(tp, dir_key(log_dir), error, now)

    def mark_partition_uncleanable(self, log_dir: Path | str, tp: TopicPartition,
                                   error: BaseException | str = "marked uncleanable") -> None:
        """Kafka's ``markPartitionUncleanable``: skip ``tp`` until ``reset_uncleanable``."""
        with self._lock:
            self._dirs.setdefault(tp, dir_key(log_dir))
            self._failures.mark(dir_key(log_dir), tp, describe(error), self._clock.milliseconds())

    def is_uncleanable(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self._failures.is_uncleanable(tp)

    def uncleanable_partitions(self, log_dir: Path | str) -> dict[TopicPartition,
                                                                  UncleanablePartition]:
        with self._lock:
            return self._failures.partitions(dir_key(log_dir))

    def uncleanable_partitions_count(self, log_dir: Path | str) -> int:
        with self._lock:
            return len(self._failures.partitions(dir_key(log_dir)))

    def uncleanable_bytes(self, log_dir: Path | str, logs: Mapping[TopicPartition, CleanableLog],
                          now_ms: int | None = None) -> int:
        """Cleanable bytes of ``log_dir``'s uncleanable partitions (Kafka's gauge)."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        key = dir_key(log_dir)
        with self._lock:
            return self._selector.uncleanable_bytes(key, logs, now)

    def reset_uncleanable(self, tp: TopicPartition | None = None) -> list[TopicPartition]:
        """Re-enable one uncleanable partition (or all, and forget every failure); returns the
        partitions re-enabled."""
        with self._lock:
            return self._failures.reset(tp)

    def maintain_uncleanable_partitions(self, live: Collection[TopicPartition]) -> None:
        """Forget uncleanable marks and failure records of partitions that no longer exist."""
        with self._lock:
            self._failures.keep_only(live)
            for tp in [tp for tp in self._dirs if tp not in live and tp not in self._states]:
                del self._dirs[tp]

    def failure_count(self, tp: TopicPartition) -> int:
        with self._lock:
            failure = self._failures.failure(tp)
            return failure.failures if failure else 0

    # ---- diagnostics and metrics -------------------------------------------------------------
    def explain(self, log: CleanableLog, now_ms: int | None = None,
                logs: Mapping[TopicPartition, CleanableLog] | None = None) -> Explanation:
        """Why ``log`` is or is not being cleaned; with ``logs``, also whether selection would
        pick it now. No side effects."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        tp = log.topic_partition
        with self._lock:
            log_dir = dir_key(log.dir.parent)
            failure = self._failures.failure(tp)
            chosen = None
            if logs is not None:
                best = self.preview_filthiest(logs, now)
                chosen = best is not None and best.topic_partition == tp
            return explain_log(
                log, now, enabled=self.config.enable_cleaner, state=self._states.get(tp),
                offline=self._checkpoints.is_offline(log_dir),
                uncleanable=self._failures.uncleanable(log_dir, tp),
                failure=None if failure is None else (failure.failures, failure.error,
                                                      failure.retry_at_ms),
                retries=self.config.uncleanable_retries,
                checkpoint=self._checkpoints.read(log_dir).get(tp), would_be_chosen=chosen)

    @property
    def max_dirty_percent(self) -> int:
        with self._lock:
            return int(100 * self._dirtiest_ratio)

    @property
    def time_since_last_run_ms(self) -> int:
        with self._lock:
            return self._clock.milliseconds() - self._time_of_last_run

    @property
    def last_pre_clean_stats(self) -> PreCleanStats:
        with self._lock:
            return self._pre_clean

    @property
    def max_compaction_delay_secs(self) -> int:
        with self._lock:
            return self._pre_clean.max_compaction_delay_ms // 1000

    def statistics(self) -> CleanerManagerStats:
        with self._lock:
            phases = [s.phase for s in self._states.values()]
            now = self._clock.milliseconds()
            return CleanerManagerStats(
                max_dirty_percent=self.max_dirty_percent,
                time_since_last_run_ms=now - self._time_of_last_run,
                max_compaction_delay_secs=self.max_compaction_delay_secs,
                uncleanable_partitions_count={
                    str(d): len(self._failures.partitions(d)) for d in self._checkpoints.log_dirs},
                in_progress=phases.count(CleaningPhase.IN_PROGRESS),
                paused=phases.count(CleaningPhase.PAUSED),
                aborted=phases.count(CleaningPhase.ABORTED),
                retrying=self._failures.retrying())
