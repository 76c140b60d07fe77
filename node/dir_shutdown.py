"""How a log directory stops (Kafka LogManager.shutdown and the offline path of its
LogDirFailureChannel): its scheduler (owned or given), a clean shutdown (flush and close every log
on ``recovery_threads`` threads, write both checkpoints and ``.kafka_cleanshutdown``), going
offline on the first I/O error, and releasing every file and ``.lock``. ``DirShutdown`` owns the
scheduler, the closed and released states and the directory lock; ``LogDir`` delegates to it.

Going offline lets ``.lock`` go as Kafka's ``LogManager.handleLogDirFailure`` destroys the
directory's lock (so the offline tools, ``strata recover --dry-run`` first, can look at it while
the node lives on), but leaves the node's pid in it: the file names the process whose restart
(``strata log-dirs restart``) brings the directory back, until another owner writes its own.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from node.checkpoints import DirCheckpoints
from node.health import DirHealth
from node.lock import DirLock
from node.log_table import LogTable
from node.stats import PartitionProblem
from node.tasks import GuardedScheduler
from storage.checkpoint import CleanShutdownFile
from storage.clock import Clock
from storage.log import Log
from storage.scheduler import Scheduler, ThreadScheduler

log = logging.getLogger(__name__)


class DirShutdown:
    """The stopping of the directory at ``path``. Without a ``scheduler`` the directory runs its
    own thread (``logdir-<dir>``), stopped here; a given one (tests pass a ``FakeScheduler``) is
    only stopped from scheduling. ``scheduler`` is the guarded one every task goes through."""

    def __init__(self, path: Path, dir_lock: DirLock, health: DirHealth, table: LogTable,
                 checkpoints: DirCheckpoints, scheduler: Scheduler | None, clock: Clock,
                 recovery_threads: int) -> None:
        self.path = path
        self._dir_lock = dir_lock
        self._health = health
        self._table = table
        self._checkpoints = checkpoints
        self._recovery_threads = recovery_threads
        self._owned_scheduler = (None if scheduler is not None
                                 else ThreadScheduler(f"logdir-{path.name}", clock=clock))
        self.scheduler = GuardedScheduler(scheduler or self._owned_scheduler, health)
        self._release_lock = threading.Lock()
        self.closed = False
        self._released = False

    def close(self, broker_epoch: int, loaded: bool,
              problems: tuple[PartitionProblem, ...]) -> None:
        """``LogDir.close``; ``problems`` are the partitions skipped at load (then no marker)."""
        with self._table.lock:
            if self.closed:
                return
            self.closed = True
        self.stop_scheduler()
        try:
            if self._health.online:
                self._clean_shutdown(broker_epoch, loaded, problems)
        finally:
            self.release()

    def _clean_shutdown(self, broker_epoch: int, loaded: bool,
                        problems: tuple[PartitionProblem, ...]) -> None:
        logs = self._table.snapshot()
        with self._health.guard("clean shutdown"):
            with ThreadPoolExecutor(max_workers=self._recovery_threads,
                                    thread_name_prefix=f"log-shutdown-{self.path.name}") as pool:
                for done in [pool.submit(_flush_and_close, lg) for lg in logs]:
                    done.result()
            self._checkpoints.write_recovery_points(logs)
            self._checkpoints.write_log_start_offsets(logs)
            if loaded and not problems:
                CleanShutdownFile(self.path).write(broker_epoch)
            elif problems:
                # a skipped partition was not recovered: once it is fixed, the next open must
                # recover it (its recovery point is gone, so from its first segment)
                log.warning("no clean-shutdown marker for %s: partitions %s were skipped at load",
                            self.path, ", ".join(p.name for p in problems))
        log.info("log directory %s shut down cleanly (%d logs)", self.path, len(logs))

    def on_offline(self) -> None:
        """``DirHealth`` calls this once, on the thread that hit the error. It must not join the
        scheduler thread: that thread may be waiting for a log lock the failing thread holds."""
        self.scheduler.stop()
        owned = self._owned_scheduler
        if owned is not None and owned.is_running:
            owned.schedule("shutdown", owned.shutdown, 0)   # it stops itself, unjoined
        self.release(keep_pid=True)

    def stop_scheduler(self) -> None:
        """Stop scheduling tasks, and the owned scheduler's thread (joined)."""
        self.scheduler.stop()
        if self._owned_scheduler is not None:
            self._owned_scheduler.shutdown()

    def release(self, keep_pid: bool = False) -> None:
        """Close every log's files and drop ``.lock`` (leaving this process's pid in it with
        ``keep_pid``). Idempotent; errors are logged, not raised. A clean shutdown closed its
        logs already (each with its producer snapshot); the logs left here (the directory failed,
        or its load did) are closed writing nothing, as Kafka's ``handleLogDirFailure`` closes
        their handlers."""
        with self._release_lock:
            if self._released:
                return
            self._released = True
        for lg in self._table.snapshot():
            try:
                lg.close_handlers()
            except Exception:  # noqa: BLE001 - releasing is best effort
                log.exception("closing %s while releasing %s", lg.dir, self.path)
        self._dir_lock.release(keep_pid=keep_pid)


def _flush_and_close(lg: Log) -> None:
    lg.flush()
    lg.close()


__all__ = ["DirShutdown"]
