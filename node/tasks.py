"""The background work of one log directory (Kafka's LogManager scheduled tasks).

* ``kafka-log-retention``: ``LogDir.cleanup_logs`` every ``log.retention.check.interval.ms``;
* ``kafka-log-flusher``: ``LogDir.flush_dirty_logs`` every ``log.flush.scheduler.interval.ms``;
* ``kafka-recovery-point-checkpoint``: ``LogDir.checkpoint_recovery_points`` every
  ``log.flush.offset.checkpoint.interval.ms``;
* ``kafka-log-start-offset-checkpoint``: ``LogDir.checkpoint_log_start_offsets`` every
  ``log.flush.start.offset.checkpoint.interval.ms``;
* ``PeriodicProducerExpirationCheck``: ``LogDir.remove_expired_producers`` every
  ``producer.id.expiration.check.interval.ms`` (Kafka arms one per log; one per directory here);
* ``kafka-delete-logs``: ``LogDir.delete_queued_logs``, once per queued log when its
  ``file.delete.delay.ms`` is over.

The first run of each periodic task is ``log.initial.task.delay.ms`` after start. A periodic task
re-arms itself after each run instead of using the scheduler's period, so that stopping leaves
nothing behind on a shared scheduler: a stopped task runs at most once more, as a no-op. A period
of ``Long.MAX`` (Kafka's default for the flusher), or anything from ``_NEVER_MS`` up, means one
run, never another.

Every task of the directory, including those its logs schedule (the flush after a roll, the delayed
delete of ``.deleted`` files), runs through ``GuardedScheduler``: nothing runs once the directory is
stopped or offline, an ``OSError`` takes the directory offline, and any other failure is logged and
counted where ``LogDir.stats`` shows it (STYLE.md P11).
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import Callable, Sequence

from node.config import LogDirConfig
from node.errors import LogDirClosedError
from node.health import DirHealth
from storage.errors import LogDirOfflineError
from storage.files import TopicPartition
from storage.log import Log
from storage.scheduler import Scheduler

log = logging.getLogger(__name__)

# periods from this long (~32 years) never re-arm: ThreadScheduler's wait overflows past
# threading.TIMEOUT_MAX (~292 years), and nobody waits that long anyway
_NEVER_MS = 10**12


class GuardedScheduler:
    """Runs one directory's tasks on a (possibly shared) scheduler. Thread-safe."""

    def __init__(self, inner: Scheduler, health: DirHealth) -> None:
        self._inner = inner
        self._health = health
        self._stopped = False
        self._lock = threading.Lock()
        self.failures = 0
        self.last_failure: str | None = None

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        """No task of this directory runs from now on (one already running finishes)."""
        self._stopped = True

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int | None = None) -> None:
        """The ``storage.scheduler.Scheduler`` protocol, for the logs; ``period_ms`` re-arms. A
        task due ``_NEVER_MS`` or more from now is dropped: it would never run, and waiting for it
        would kill a ``ThreadScheduler`` (its wait overflows)."""
        if self._stopped or delay_ms >= _NEVER_MS:
            return
        if period_ms is None:
            self._inner.schedule(name, lambda: self.run(name, fn), delay_ms)
        else:
            self.schedule_periodic(name, fn, delay_ms, period_ms)

    def schedule_periodic(self, name: str, fn: Callable[[], object], delay_ms: int,
                          period_ms: int) -> None:
        def tick() -> None:
            self.run(name, fn)
            if not self._stopped and self._health.online and period_ms < _NEVER_MS:
                self._inner.schedule(name, tick, period_ms)
        if delay_ms < _NEVER_MS and not self._stopped:
            self._inner.schedule(name, tick, delay_ms)

    def run(self, name: str, fn: Callable[[], object]) -> None:
        """Run one task body under the directory's failure policy."""
        if self._stopped or not self._health.online:
            return
        try:
            fn()
        except (LogDirOfflineError, LogDirClosedError):
            pass   # offline: already logged by the guard that raised it; closed: a race with close
        except OSError as err:
            self._health.fail(err, f"task {name}")
        except Exception as err:  # noqa: BLE001 - a failed task must not stop the others
            self.record_failure(name, err)

    def record_failure(self, name: str, err: BaseException) -> None:
        """Count and log a failure that is not an I/O error (it leaves the directory online)."""
        with self._lock:
            self.failures += 1
            self.last_failure = f"{name}: {type(err).__name__}: {err}"
        log.error("%s in log directory %s failed", name, self._health.directory, exc_info=err)


class PeriodicTasks:
    """Starts Kafka's periodic log-manager tasks and the producer expiration check for one
    directory (the delete task is armed per queued log by ``LogDir``)."""

    def __init__(self, scheduler: GuardedScheduler, config: LogDirConfig) -> None:
        self._scheduler = scheduler
        self._config = config

    def start(self, *, retention: Callable[[], object], flush: Callable[[], object],
              recovery_points: Callable[[], object],
              log_start_offsets: Callable[[], object],
              expire_producers: Callable[[], object]) -> None:
        c = self._config
        delay = c.log_initial_task_delay_ms
        self._scheduler.schedule_periodic("kafka-log-retention", retention, delay,
                                          c.log_retention_check_interval_ms)
        self._scheduler.schedule_periodic("kafka-log-flusher", flush, delay,
                                          c.log_flush_scheduler_interval_ms)
        self._scheduler.schedule_periodic("kafka-recovery-point-checkpoint", recovery_points, delay,
                                          c.log_flush_offset_checkpoint_interval_ms)
        self._scheduler.schedule_periodic("kafka-log-start-offset-checkpoint", log_start_offsets,
                                          delay, c.log_flush_start_offset_checkpoint_interval_ms)
        # Kafka's first check comes one interval after the log opens, not the initial delay
        interval = c.producer_id_expiration_check_interval_ms
        self._scheduler.schedule_periodic("PeriodicProducerExpirationCheck", expire_producers,
                                          interval, interval)



# ---- what the tasks do to the logs ---------------------------------------------------------------
OnFailure = Callable[[str, BaseException], None]


def apply_retention(logs: Sequence[Log],
                    pause_cleaning: Callable[[TopicPartition], AbstractContextManager[object]],
                    on_failure: OnFailure) -> int:
    """Kafka's cleanupLogs: retention of every log whose policy does not include compact, each
    inside ``pause_cleaning``. Returns the segments deleted."""
    deleted = 0
    for log_ in logs:
        if log_.config.compact:
            continue

        def retain(target: Log = log_) -> int:
            with pause_cleaning(target.topic_partition):
                return target.delete_old_segments()
        deleted += _per_log("retention", log_, retain, on_failure)
    return deleted


def flush_dirty(logs: Sequence[Log], now_ms: int, on_failure: OnFailure) -> int:
    """Kafka's flushDirtyLogs: flush each log whose last flush is ``flush.ms`` or more ago."""
    flushed = 0
    for log_ in logs:
        if now_ms - log_.last_flush_ms >= log_.config.flush_ms:
            _per_log("flush", log_, log_.flush, on_failure)
            flushed += 1
    return flushed


def expire_producers(logs: Sequence[Log], now_ms: int, on_failure: OnFailure) -> int:
    """Kafka's removeExpiredProducers on every log; returns the producers forgotten."""
    removed = 0
    for log_ in logs:
        removed += _per_log("producer expiration", log_,
                            lambda target=log_: target.remove_expired_producers(now_ms), on_failure)
    return removed


def _per_log(task: str, log_: Log, fn: Callable[[], int | None], on_failure: OnFailure) -> int:
    """One log's share of a task: an I/O error has taken the directory offline and stops the task
    (``LogDirOfflineError`` propagates); any other failure is reported and the task goes on with
    the next log (STYLE.md P10)."""
    try:
        return fn() or 0
    except LogDirOfflineError:
        raise
    except Exception as err:  # noqa: BLE001 - one bad log never stops the others
        if not log_.is_closed:   # a log deleted meanwhile is not a failure
            on_failure(f"{task} of {log_.name}", err)
        return 0
