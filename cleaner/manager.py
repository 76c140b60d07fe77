"""``CleanerManager``: which partition the cleaner works on next, and every partition's cleaning
state (Kafka's ``LogCleanerManager``), for one set of log directories.

State machine (one entry per partition; no entry = none):

    call                    from            to
    grab/deletable_logs     none            IN_PROGRESS
    abort_and_pause         none            PAUSED(1)
                            IN_PROGRESS     ABORTED, then blocks until the cleaner's done_* call
                            PAUSED(n)       PAUSED(n+1)
    resume_cleaning         PAUSED(1)       none
                            PAUSED(n>1)     PAUSED(n-1)
    done_cleaning           IN_PROGRESS     none, and the checkpoint becomes the end offset
                            ABORTED         PAUSED(1), waking the aborter (no checkpoint update)
    done_deleting           as done_cleaning, without the checkpoint

Any other transition raises ``CleanerStateError``. The cleaner calls ``check_cleaning_aborted`` at
every chunk and stops with ``LogCleaningAbortedError``.

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
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cleaner.cleanable import (
    CleanableLog,
    LogToClean,
    OffsetsToClean,
    SegmentRange,
    SegmentView,
    cleanable_offsets,
    max_compaction_delay,
)
from cleaner.checkpoints import (
    CheckpointFileLike,
    CleanerCheckpoints,
    dir_key,
    local_checkpoint_file,
)
from cleaner.config import CleanerConfig
from cleaner.explain import Explanation, explain_log
from cleaner.state import ABORTED, IN_PROGRESS, CleaningPhase, CleaningState, paused
from cleaner.stats import PreCleanStats
from cleaner.uncleanable import UncleanablePartition, UncleanableTracker, describe
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import LogCleaningAbortedError, StorageError
from storage.files import TopicPartition

__all__ = [
    "ABORTED", "IN_PROGRESS", "CleanableLog", "CleanerManager", "CleanerManagerStats",
    "CleanerStateError", "CleaningAbortTimeoutError", "CleaningPhase", "CleaningState",
    "Explanation", "LogToClean", "OffsetsToClean", "SegmentView", "UncleanablePartition",
    "cleanable_offsets", "max_compaction_delay", "paused",
]

logger = logging.getLogger(__name__)


class CleanerStateError(StorageError):
    """An illegal transition of a partition's cleaning state (Kafka's IllegalStateException):
    finishing a clean nobody started, resuming a partition that is not paused, aborting a clean
    that is already being aborted. A bug in the caller, unlike ``LogCleaningAbortedError``, which
    is the normal way a running clean is told to stop."""


class CleaningAbortTimeoutError(StorageError):
    """``abort_and_pause_cleaning`` gave up waiting for the running clean to stop. The partition
    stays ABORTED and becomes PAUSED(1) when the cleaner reports back; the caller owns that pause
    (``wait_until_paused`` again, then ``resume_cleaning``)."""


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
        self._paused_cond = threading.Condition(self._lock)
        self._checkpoints = CleanerCheckpoints(log_dirs, on_dir_failure, checkpoint_file)
        self._failures = UncleanableTracker(self.config.uncleanable_retries,
                                            self.config.uncleanable_retry_backoff_ms)
        self._states: dict[TopicPartition, CleaningState] = {}
        self._cleaning_from: dict[TopicPartition, int] = {}
        self._dirs: dict[TopicPartition, Path] = {}
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
            if state is None:
                self._states.pop(tp, None)
            else:
                self._states[tp] = state

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Pause cleaning of ``tp``, first aborting a clean in progress and waiting (up to
        ``timeout`` seconds, default forever) until the cleaner has stopped. Each call takes one
        pause; ``resume_cleaning`` releases one."""
        with self._lock:
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = paused(1)
            elif state == IN_PROGRESS:
                self._states[tp] = ABORTED
            elif state.phase is CleaningPhase.PAUSED:
                self._states[tp] = paused(state.paused_count + 1)
            else:
                raise CleanerStateError(
                    f"compaction for partition {tp} cannot be aborted and paused since it is in "
                    f"{state} state", topic_partition=tp, state=str(state))
            self.wait_until_paused(tp, timeout)

    def wait_until_paused(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Block until ``tp`` is PAUSED; ``CleaningAbortTimeoutError`` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not self.is_cleaning_in_state_paused(tp):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise CleaningAbortTimeoutError(
                        f"cleaning of {tp} did not stop within {timeout} s; it is still "
                        f"{self._states.get(tp)}", topic_partition=tp, timeout=timeout)
                self._paused_cond.wait(remaining)

    def resume_cleaning(self, partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Release one pause of each partition (PAUSED(1) -> none, PAUSED(n) -> PAUSED(n-1)).
        All are checked before any is changed."""
        tps = [partitions] if isinstance(partitions, TopicPartition) else list(partitions)
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state is None or state.phase is not CleaningPhase.PAUSED:
                    what = "it is not paused" if state is None else f"it is in {state} state"
                    raise CleanerStateError(
                        f"compaction for partition {tp} cannot be resumed since {what}",
                        topic_partition=tp, state=str(state))
            for tp in tps:
                count = self._states[tp].paused_count
                if count <= 1:
                    del self._states[tp]
                else:
                    self._states[tp] = paused(count - 1)

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
            if self._is_offline(tp):
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
                if end_offset > self._cleaning_from.get(tp, end_offset):
                    self._failures.succeeded(tp)
                self._finish(tp)
            else:
                self._done_aborted_or_raise(tp, state)

    def done_deleting(self, partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Retention of compacted logs (``deletable_logs``) finished."""
        tps = [partitions] if isinstance(partitions, TopicPartition) else list(partitions)
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state == IN_PROGRESS:
                    self._finish(tp)
                else:
                    self._done_aborted_or_raise(tp, state)

    def _finish(self, tp: TopicPartition) -> None:
        del self._states[tp]
        self._cleaning_from.pop(tp, None)

    def _done_aborted_or_raise(self, tp: TopicPartition, state: CleaningState | None) -> None:
        if state == ABORTED:
            self._states[tp] = paused(1)
            self._cleaning_from.pop(tp, None)
            self._paused_cond.notify_all()
            return
        if state is None:
            raise CleanerStateError(f"state for partition {tp} should exist", topic_partition=tp,
                                    state=None)
        raise CleanerStateError(f"in-progress partition {tp} cannot be in {state} state",
                                topic_partition=tp, state=str(state))

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
            dirty, delays = self._dirty_logs(logs, now, write_checkpoints=True)
            cleanable = [l for l in dirty if l.is_eligible]
            if update_stats:
                self._time_of_last_run = now
                self._dirtiest_ratio = max((l.cleanable_ratio for l in dirty), default=0.0)
                self._pre_clean = PreCleanStats(len(cleanable), sum(1 for d in delays if d > 0),
                                                max(delays, default=0))
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda l: l.cleanable_ratio)
            tp = filthiest.topic_partition
            self._states[tp] = IN_PROGRESS
            self._cleaning_from[tp] = filthiest.first_dirty_offset
            return filthiest

    def preview_filthiest(self, logs: Mapping[TopicPartition, CleanableLog],
                          now_ms: int | None = None) -> LogToClean | None:
        """What ``grab_filthiest_compacted_log`` would choose now, without any side effect."""
        now = self._clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            dirty, _ = self._dirty_logs(logs, now, write_checkpoints=False)
            return max((l for l in dirty if l.is_eligible), key=lambda l: l.cleanable_ratio,
                       default=None)

    def _dirty_logs(self, logs: Mapping[TopicPartition, CleanableLog], now: int,
                    write_checkpoints: bool) -> tuple[list[LogToClean], list[int]]:
        checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        dirty: list[LogToClean] = []
        delays: list[int] = []
        for tp, log in logs.items():
            log_dir = None
            try:
                if not log.config.compact:
                    continue
                log_dir = self._note_dir(tp, log)
                if tp in self._states or self._blocked(tp, log_dir, now):
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
                    log_dir = log_dir or self._dirs.get(tp)
                    if log_dir is not None:
                        self._failures.record_failure(tp, log_dir, err, now)
        return dirty, delays

    def _note_dir(self, tp: TopicPartition, log: CleanableLog) -> Path:
        log_dir = dir_key(log.dir.parent)
        self._dirs[tp] = log_dir
        return log_dir

    def _blocked(self, tp: TopicPartition, log_dir: Path, now: int) -> bool:
        return self._checkpoints.is_offline(log_dir) or self._failures.blocked(tp, log_dir, now)

    def _is_offline(self, tp: TopicPartition) -> bool:
        log_dir = self._dirs.get(tp)
        return log_dir is not None and self._checkpoints.is_offline(log_dir)

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
                if self._blocked(tp, self._note_dir(tp, log), now):
                    continue
                chosen.append(log)
            for log in chosen:
                self._states[log.topic_partition] = IN_PROGRESS
            return chosen

    def pause_cleaning_for_non_compacted_partitions(
            self, logs: Mapping[TopicPartition, CleanableLog]) -> list[CleanableLog]:
        """PAUSED(1) for every non-compacted log not in a cleaning state, while the log manager
        runs their retention; it then calls ``resume_cleaning`` for the returned logs."""
        with self._lock:
            chosen = [log for tp, log in logs.items()
                      if not log.config.compact and tp not in self._states]
            for log in chosen:
                self._states[log.topic_partition] = paused(1)
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
