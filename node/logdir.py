"""``LogDir``: one log directory, the per-directory half of Kafka's LogManager
(kafka-storage.md §5).

Life of a directory::

    LogDir.open(path)   create it if missing and check it is a readable, writable directory;
                        take .lock (node.lock); read recovery-point-offset-checkpoint and
                        log-start-offset-checkpoint (unreadable -> empty, logged); note and delete
                        .kafka_cleanshutdown (a crash while loading must count as unclean; a
                        marker that cannot be read as one counts as unclean too);
                        load every <topic>-<partition> through the recovery pool (node.loading);
                        queue <topic>-<partition>.<uuid>-delete; report names that do not parse;
                        skip (and report in ``problems``) a partition with an entry the loader
                        cannot use or whose load raises a typed error; the others load;
                        start the periodic tasks (node.tasks) unless start_tasks=False
    running             get_or_create_log / delete_log / logs / stats / checkpoint; tasks run
                        retention, flush, both checkpoints and the delayed delete of queued logs
    close()             stop the tasks; flush and close every log; write both checkpoints; write
                        .kafka_cleanshutdown (not when a partition was skipped at load: it
                        was never recovered); release .lock
    offline             after load, the first OSError from this directory (node.health) stops the
                        tasks, closes every file, releases .lock (leaving this process's pid
                        in it); every later call raises LogDirOfflineError stating that error;
                        stats() still answers

Collaborators, each owning one concern: ``node.dir_load`` (the load pass), ``node.log_table`` (the
partitions and their lock), ``node.dir_deletes`` (asyncDelete and the delete task),
``node.dir_moves`` (the two ends of a move), ``node.dir_shutdown`` (the scheduler, clean shutdown,
going offline, release), ``node.tasks`` (the periodic tasks' bodies) and ``node.checkpoints`` (the
checkpoint files). ``LogDir`` keeps the public surface and the topic configs.

After a clean shutdown the next open recovers nothing; after a kill it re-validates each log only
from its checkpointed recovery point. Keys of ``logs()`` are ``(topic, partition)`` tuples
(``PartitionId``), and a ``storage.files.TopicPartition`` works as a lookup key too.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from cleaner.checkpoints import CheckpointChange
from node.checkpoints import DirCheckpoints
from node.config import LogDirConfig
from node.dir_deletes import LogDeletes, PauseCleaning, PauseCleaningMany
from node.dir_load import load_partitions
from node.dir_moves import DirMoves
from node.dir_shutdown import DirShutdown
from node.errors import (InvalidTopicConfigError, LogDirClosedError, PartitionSkippedError,
                         UnknownPartitionError)
from node.health import DirHealth, DirLog
from node.keys import LogMap, PartitionId
from node.loading import PartitionToLoad, RecoveryPool, create_and_validate
from node.lock import DirLock
from node.log_table import LogTable
from node.move import MoveState
from node.stats import (InvalidDir, LoadProgress, LogDirStats, PartitionProblem,
                        all_partition_stats, disk_usage, file_system_id)
from node.tasks import PeriodicTasks, apply_retention, expire_producers, flush_dirty
from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.files import TopicPartition
from storage.log import Log
from storage.quarantine import QuarantinedFile
from storage.scheduler import Scheduler

log = logging.getLogger(__name__)


class LogDir:
    """One log directory and its partition logs. Open with ``LogDir.open``.

    Thread-safe: the actor's append and background threads may call it concurrently. Lock rule:
    ``_lock`` (the ``LogTable``'s) guards only the maps and is never held while waiting for a
    log's lock, so the offline path (which closes every log) cannot deadlock with a caller.
    """

    def __init__(self, path: Path, dir_lock: DirLock, *, default_config: LogConfig,
                 topic_configs: Mapping[str, LogConfig], config: LogDirConfig,
                 recovery_threads: int, clock: Clock, scheduler: Scheduler | None,
                 pause_cleaning: PauseCleaning | None,
                 pause_cleaning_many: PauseCleaningMany | None = None,
                 invalid_topics: Mapping[str, InvalidTopicConfigError] | None = None) -> None:
        self.path = path
        self.config = config
        self.default_config = default_config
        self.clock = clock
        self.recovery_threads = recovery_threads
        self._topic_configs = dict(topic_configs)
        self._invalid_topics = dict(invalid_topics or {})
        self._health = DirHealth(path)
        self._checkpoints = DirCheckpoints(path)
        self._pause_cleaning: PauseCleaning = pause_cleaning or (lambda _tp: nullcontext())
        self._table = LogTable()
        self._lock = self._table.lock
        self._shutdown = DirShutdown(path, dir_lock, self._health, self._table,
                                     self._checkpoints, scheduler, clock, recovery_threads)
        self._health.on_offline = self._shutdown.on_offline
        self._scheduler = self._shutdown.scheduler
        self._deletes = LogDeletes(path, self._table, self._checkpoints, clock, self._scheduler,
                                   self._pause_cleaning, self._io, lambda: self._tasks_started,
                                   pause_cleaning_many)
        self._moves = DirMoves(path, self._table, self._checkpoints, self._deletes,
                               self._open_log, self._io)
        self._pool: RecoveryPool | None = None
        self._tasks_started = False
        self._loaded = False
        self.had_clean_shutdown = False
        self.clean_shutdown_epoch: int | None = None
        self.invalid_dirs: tuple[InvalidDir, ...] = ()
        self.problems: tuple[PartitionProblem, ...] = ()        # partitions skipped at load
        self.quarantined: tuple[QuarantinedFile, ...] = ()      # what recovery cut at load
        self.load_time_ms = 0.0

    # ---- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str, *, default_config: LogConfig | None = None,
             topic_configs: Mapping[str, Mapping[str, Any] | LogConfig] | None = None,
             invalid_topics: Mapping[str, InvalidTopicConfigError] | None = None,
             recovery_threads: int | None = None, config: LogDirConfig | None = None,
             clock: Clock = SYSTEM_CLOCK, scheduler: Scheduler | None = None,
             start_tasks: bool = True, pause_cleaning: PauseCleaning | None = None,
             pause_cleaning_many: PauseCleaningMany | None = None,
             on_load_progress: Callable[[LoadProgress], None] | None = None) -> LogDir:
        """Open (creating if missing), lock, load and start the directory at ``path``.

        ``topic_configs`` maps a topic to its overrides (dotted keys) of ``default_config``.
        ``invalid_topics`` maps a topic whose kept overrides cannot be used to the error saying
        why: its partitions are skipped untouched (a ``PartitionProblem`` each) and creating one
        raises that error; they are never opened with ``default_config`` instead.
        ``recovery_threads`` defaults to ``config.num_recovery_threads_per_data_dir``. Without a
        ``scheduler`` the directory runs its own thread, stopped by ``close``; with one (tests
        pass a ``FakeScheduler``) the caller drives it. ``pause_cleaning(tp)`` is entered around
        retention and deletion of ``tp`` so the cleaner leaves it alone meanwhile;
        ``pause_cleaning_many(tps)`` holds the pauses of many partitions at once (a deletion of
        many; default: ``pause_cleaning`` of each).
        ``on_load_progress`` observes loading (see ``node.loading.RecoveryPool``).

        Raises ``InvalidLogDirError``, ``LogDirLockedError``, or whatever loading raised (an
        ``OSError`` unchanged); on failure nothing stays locked or open.
        """
        config = config or LogDirConfig()
        default_config = default_config or LogConfig()
        resolved = {topic: value if isinstance(value, LogConfig)
                    else default_config.with_overrides(value)
                    for topic, value in (topic_configs or {}).items()}
        threads = (config.num_recovery_threads_per_data_dir if recovery_threads is None
                   else recovery_threads)
        if threads < 1:
            raise ValueError(f"recovery_threads={threads} must be at least 1")
        directory = create_and_validate(Path(os.path.abspath(path)))
        dir_lock = DirLock.acquire(directory)
        try:
            opened = cls(directory, dir_lock, default_config=default_config,
                         topic_configs=resolved, config=config, recovery_threads=threads,
                         clock=clock, scheduler=scheduler, pause_cleaning=pause_cleaning,
                         pause_cleaning_many=pause_cleaning_many,
                         invalid_topics=invalid_topics)
        except BaseException:
            dir_lock.release()
            raise
        try:
            opened._load(on_load_progress)
            if start_tasks:
                opened.start_tasks()
        except BaseException:
            opened._shutdown.stop_scheduler()
            opened._shutdown.release()
            raise
        return opened

    def _load(self, on_progress: Callable[[LoadProgress], None] | None) -> None:
        def open_found(partition: PartitionToLoad, recovery_point: int, log_start_offset: int,
                       had_clean_shutdown: bool) -> DirLog:
            return self._open_log(partition.path, partition.topic_partition,
                                  recovery_point=recovery_point,
                                  log_start_offset=log_start_offset,
                                  had_clean_shutdown=had_clean_shutdown)

        outcome = load_partitions(self.path, self._checkpoints, open_found,
                                  self.recovery_threads, self.clock, on_progress)
        self.had_clean_shutdown = outcome.had_clean_shutdown
        self.clean_shutdown_epoch = outcome.clean_shutdown_epoch
        self.invalid_dirs = outcome.invalid_dirs
        self._pool = outcome.pool
        with self._lock:
            self._table.logs = outcome.logs
            self._table.skipped = outcome.skipped
        self.problems = outcome.problems
        self.quarantined = outcome.quarantined
        self._deletes.queue_found(outcome.to_delete,
                                  lambda topic: self._topic_configs.get(
                                      topic, self.default_config).file_delete_delay_ms)
        self._moves.settle_seeds(outcome.seeds)
        self._loaded = True
        progress = self._pool.progress()
        self.load_time_ms = progress.elapsed_ms
        log.info("loaded %d logs (%d segments) from %s in %.0f ms after a%s shutdown; "
                 "%d partitions skipped, %d files quarantined",
                 progress.total_logs, progress.total_segments, self.path, progress.elapsed_ms,
                 " clean" if self.had_clean_shutdown else "n unclean", len(self.problems),
                 len(self.quarantined))

    def _open_log(self, path: Path, tp: TopicPartition, **open_args: Any) -> DirLog:
        """Open the log of ``tp`` at ``path`` with its topic's config, under this directory's
        clock, scheduler and health (``open_args``: ``Log.open``'s recovery arguments)."""
        opened = DirLog.open(path, self.config_for(tp.topic), clock=self.clock,
                             scheduler=self._scheduler,
                             producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                             **open_args)
        opened.health = self._health
        return opened

    def start_tasks(self) -> None:
        """Start the periodic tasks (``open`` does unless ``start_tasks=False``). Idempotent."""
        with self._io("start tasks"):
            with self._lock:
                if self._tasks_started:
                    return
                self._tasks_started = True
            dues = self._deletes.queue.due_times()
            PeriodicTasks(self._scheduler, self.config).start(
                retention=self.cleanup_logs, flush=self.flush_dirty_logs,
                recovery_points=self.checkpoint_recovery_points,
                log_start_offsets=self.checkpoint_log_start_offsets,
                expire_producers=self.remove_expired_producers)
            for due in dues:
                self._deletes.arm(due)

    # ---- state -------------------------------------------------------------------------------
    @property
    def online(self) -> bool:
        return self._health.online

    @property
    def offline_reason(self) -> str | None:
        return self._health.reason

    @property
    def closed(self) -> bool:
        return self._shutdown.closed

    def load_progress(self) -> LoadProgress:
        assert self._pool is not None
        return self._pool.progress()

    def config_for(self, topic: str) -> LogConfig:
        """``default_config`` with the topic's overrides applied; ``InvalidTopicConfigError``
        for a topic whose kept overrides cannot be used (see ``open``'s ``invalid_topics``)."""
        invalid = self._invalid_topics.get(topic)
        if invalid is not None:
            raise invalid
        return self._topic_configs.get(topic, self.default_config)

    def may_be_compacted(self, topic: str) -> bool:
        """Whether the cleaner may work on ``topic``'s logs: its config is compacted, or cannot
        be told (overrides that cannot be used count as compacted, to hold the cleaner off)."""
        return topic in self._invalid_topics or self.config_for(topic).compact

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for logs of ``topic`` created from now on (persisting it is the
        caller's business: ``node.server`` keeps ``topic-configs.json``)."""
        files.validate_topic(topic)
        with self._lock:
            self._topic_configs[topic] = config

    def update_topic_config(self, topic: str, config: LogConfig) -> int:
        """Kafka's dynamic topic config: use ``config`` for the live logs of ``topic`` now
        (``Log.update_config``: retention, cleaning and the next roll follow it) and for its logs
        created later. Persisting it is the caller's business. Returns how many logs took it."""
        files.validate_topic(topic)
        with self._io(f"update config of {topic}"), self._lock:
            self._topic_configs[topic] = config
            live = [lg for tp, lg in self._table.logs.items() if tp.topic == topic]
            for lg in live:
                lg.update_config(config)
            return len(live)

    def pause_cleaning(self, tp: TopicPartition) -> AbstractContextManager[object]:
        """The ``pause_cleaning`` callback given to ``open`` (a no-op without one), for callers
        that change a log's files themselves (truncation)."""
        return self._pause_cleaning(tp)

    def drop_topic_config(self, topic: str) -> None:
        with self._lock:
            self._topic_configs.pop(topic, None)

    @contextmanager
    def _io(self, action: str) -> Iterator[None]:
        """Every public call: offline first (it names the original error), then closed."""
        self._health.check()
        if self._shutdown.closed:
            raise LogDirClosedError(f"log directory {self.path} is closed",
                                    directory=str(self.path))
        with self._health.guard(action):
            yield

    # ---- partitions --------------------------------------------------------------------------
    def logs(self) -> LogMap:
        """A snapshot ``{(topic, partition): Log}`` of the live logs."""
        with self._io("list logs"), self._lock:
            return LogMap((PartitionId(tp.topic, tp.partition), lg)
                          for tp, lg in self._table.logs.items())

    def held_partitions(self) -> list[PartitionId]:
        """The partitions of the directory, also when it is offline or closed: then the ones it
        held when it went offline (a broker names them unavailable, not unknown)."""
        with self._lock:
            return [PartitionId(tp.topic, tp.partition) for tp in self._table.logs]

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log of ``topic``-``partition``, or None. A name or number that no partition can
        have (``storage.files.validate_topic``/``validate_partition``) raises
        ``InvalidTopicError``: ``True`` is not partition 1."""
        tp = _checked(topic, partition)
        with self._io("get log"), self._lock:
            return self._table.logs.get(tp)

    def log(self, topic: str, partition: int) -> Log:
        """The log of ``topic``-``partition``; ``UnknownPartitionError`` if there is none."""
        found = self.get_log(topic, partition)
        if found is None:
            self.raise_if_moved(topic, partition)
            raise UnknownPartitionError(f"log directory {self.path} has no partition "
                                        f"{topic}-{partition}", topic=topic, partition=partition)
        return found

    def get_or_create_log(self, topic: str, partition: int, *, sync: bool = True) -> Log:
        """The log of ``topic``-``partition``, created empty (``<topic>-<partition>``, with the
        topic's config) if this directory does not hold it yet. An invalid topic name or
        partition number raises ``InvalidTopicError`` and creates nothing. ``sync=False`` leaves
        the fsync of this directory to the caller (``create_logs``: one for a batch)."""
        tp = _checked(topic, partition)
        with self._io(f"create log {tp}"), self._lock:
            existing = self._table.logs.get(tp)
            if existing is not None:
                return existing
            skipped = self._table.skipped.get(tp)
            if skipped is not None:
                raise PartitionSkippedError(
                    f"partition {tp} of log directory {self.path} was skipped at load "
                    f"({skipped.error}: {skipped.reason}); repair it (strata recover) and "
                    "reopen the directory", topic=topic, partition=partition,
                    directory=str(self.path), reason=skipped.reason)
            self.config_for(tp.topic)      # a topic whose kept overrides cannot be used: refused
            path = self.path / files.partition_dir_name(tp.topic, tp.partition)
            path.mkdir(exist_ok=True)
            self._table.moved.pop(tp, None)
            if sync:
                fsync_dir(self.path)
            created = self._open_log(path, tp, recovery_point=0)
            self._table.logs[tp] = created
            log.info("created log %s in %s", tp, self.path)
            return created

    def create_logs(self, topic: str, partitions: Iterable[int]) -> int:
        """``get_or_create_log`` of every partition, this directory fsynced once at the end (not
        once per partition: the fsyncs were most of a 10,000-partition create). Returns how many
        partitions of them the directory holds; they are durable when this returns."""
        count = 0
        try:
            for partition in partitions:
                self.get_or_create_log(topic, partition, sync=False)
                count += 1
        finally:
            if count:
                with self._io(f"create logs of {topic}"):
                    fsync_dir(self.path)
        return count

    def delete_log(self, topic: str, partition: int) -> Log | None:
        """Kafka's asyncDelete: rename the partition to ``<topic>-<partition>.<uuid>-delete``,
        rewrite the checkpoints without it, and delete its files ``file.delete.delay.ms`` later
        (by the delete task). Returns the removed log (closed, its files now under the new name),
        or None if this directory does not hold the partition."""
        return self.delete_logs(topic, [partition]).get(partition)

    def delete_logs(self, topic: str, partitions: Iterable[int]) -> dict[int, Log]:
        """``delete_log`` of many partitions of ``topic`` with the checkpoints rewritten once
        (not once per partition: deleting n partitions costs O(n), not O(n^2)). Returns the
        removed logs by partition; partitions this directory does not hold are left out. A
        failure stops the batch: the partitions renamed before it stay deleted."""
        return self._deletes.delete_logs(topic, [_checked(topic, p) for p in partitions])

    # ---- moves between directories (node.move) ------------------------------------------------
    def raise_if_moved(self, topic: str, partition: int) -> None:
        """``PartitionMovedError`` when ``topic``-``partition`` was moved away from here."""
        self._moves.raise_if_moved(topic, partition)

    def io_guard(self, action: str) -> AbstractContextManager[None]:
        """Work on this directory's files done outside its methods (a move's copy): fails fast
        when offline or closed, and an ``OSError`` inside takes the directory offline."""
        return self._io(action)

    def being_deleted(self, topic: str, partition: int) -> bool:
        """True when ``topic``-``partition`` waits in the delete queue and is not live here."""
        return self._deletes.being_deleted(TopicPartition(topic, partition))

    def begin_move_in(self, topic: str, partition: int, source_dir: str) -> Path:
        """Create ``<topic>-<partition>.<uuid>-future`` with its (incomplete) move state;
        returns its path."""
        return self._moves.begin_move_in(_checked(topic, partition), source_dir)

    def interrupted_moves(self) -> dict[str, MoveState]:
        """The ``-future`` directories of copies a restart interrupted, kept to resume, by name
        (``node.move``)."""
        return self._moves.interrupted()

    def resume_move_in(self, topic: str, partition: int, source_dir: str) -> Path | None:
        """The ``-future`` directory of an interrupted copy of ``topic``-``partition`` from
        ``source_dir`` that this directory kept across a restart (``node.move``), or None."""
        return self._moves.resume_move_in(_checked(topic, partition), source_dir)

    def settle_move_in(self, future: Path) -> Log:
        """After the source's switch (or a failure): promote ``future`` and serve it when the
        source committed, else remove it and raise ``MoveAbortedError``."""
        return self._moves.settle_move_in(future)

    def finish_move_out(self, tp: TopicPartition, removed: Log, target_dir: str) -> None:
        """After the commit (``removed`` renamed ``-delete`` by the switch): stop serving it,
        answer ``PartitionMovedError`` for it from now on, rewrite the checkpoints without it
        and delete its files ``file.delete.delay.ms`` later."""
        self._moves.finish_move_out(tp, removed, target_dir)

    def cleaner_offset(self, tp: TopicPartition) -> int | None:
        return self._checkpoints.read_cleaner_offsets().get(tp)

    # ---- the periodic tasks' bodies (callable directly too) ----------------------------------
    def delete_queued_logs(self) -> int:
        """Delete the files of every queued log whose delay is over; returns how many."""
        return self._deletes.delete_due()

    def cleanup_logs(self) -> int:
        """Retention of every log whose policy does not include compact (compacted logs get theirs
        from the cleaner), each inside ``pause_cleaning``. Returns segments deleted."""
        with self._io("retention"):
            return apply_retention(self._table.snapshot(), self._pause_cleaning,
                                   self._scheduler.record_failure)

    def flush_dirty_logs(self) -> int:
        """Flush every log whose last flush is at least its ``flush.ms`` ago; returns how many."""
        with self._io("flush"):
            return flush_dirty(self._table.snapshot(), self.clock.milliseconds(),
                               self._scheduler.record_failure)

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the producers idle for ``producer.id.expiration.ms``; returns
        how many."""
        with self._io("producer expiration"):
            return expire_producers(self._table.snapshot(), self.clock.milliseconds(),
                                    self._scheduler.record_failure)

    def checkpoint_recovery_points(self) -> bool:
        """Write every log's recovery point; returns False when nothing changed since the last."""
        with self._io("checkpoint recovery points"):
            return self._checkpoints.write_recovery_points(self._table.snapshot())

    def checkpoint_log_start_offsets(self) -> bool:
        with self._io("checkpoint log start offsets"):
            return self._checkpoints.write_log_start_offsets(self._table.snapshot())

    def checkpoint(self) -> None:
        """Write both checkpoints now (each is skipped when unchanged)."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    # ---- the cleaner checkpoint, for a cleaner manager in another process ---------------------
    def read_cleaner_offsets(self) -> dict[TopicPartition, int]:
        """The ``cleaner-offset-checkpoint``; ``FileNotFoundError`` when there is none yet (not an
        I/O failure), ``CheckpointError`` when it cannot be parsed."""
        with self._io("read cleaner checkpoint"):
            try:
                return self._checkpoints.cleaner_offsets.read()
            except FileNotFoundError:
                pass   # outside the guard: a missing file must not take the directory offline
        raise FileNotFoundError(f"{self.path} has no cleaner-offset-checkpoint yet")

    def update_cleaner_offsets(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        """Apply one change to the ``cleaner-offset-checkpoint`` atomically (this directory is the
        file's only writer), keeping only partitions this directory holds: an entry of a
        partition deleted meanwhile is dropped, not resurrected. Returns the entries written."""
        with self._io("update cleaner checkpoint"):
            live = self._table.live_partitions()
            live_change = dataclasses.replace(
                change, live_partitions=live if change.live_partitions is None
                else live & frozenset(change.live_partitions))
            return self._checkpoints.update_cleaner_offsets(live_change)

    # ---- stats -------------------------------------------------------------------------------
    def stats(self) -> LogDirStats:
        """A snapshot; also answers when the directory is offline or closed."""
        live = self._health.online and not self._shutdown.closed
        with self._lock:
            logs = dict(self._table.logs) if live else {}
        queued = len(self._deletes.queue)
        partitions = all_partition_stats(
            logs, self._checkpoints.read_cleaner_offsets() if logs else {})
        total, used, free = disk_usage(str(self.path))
        return LogDirStats(
            directory=str(self.path), online=self._health.online,
            offline_reason=self._health.reason, closed=self._shutdown.closed,
            partitions_count=len(partitions), log_bytes=sum(p.size_bytes for p in partitions),
            disk_total_bytes=total, disk_used_bytes=used, disk_free_bytes=free,
            load_time_ms=self.load_time_ms, had_clean_shutdown=self.had_clean_shutdown,
            logs_to_delete=queued, invalid_dirs=self.invalid_dirs,
            task_failures=self._scheduler.failures, last_task_failure=self._scheduler.last_failure,
            partitions=partitions, problems=self.problems, quarantined=self.quarantined,
            file_system=file_system_id(str(self.path)), pid=os.getpid())

    # ---- shutdown ----------------------------------------------------------------------------
    def close(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: stop the tasks, flush and close every log, write both checkpoints and
        ``.kafka_cleanshutdown`` (with ``broker_epoch``), release ``.lock``. Idempotent.

        On an offline directory this only makes sure everything is released. An I/O error during
        shutdown takes the directory offline, writes no marker, and raises ``LogDirOfflineError``.
        """
        self._shutdown.close(broker_epoch, self._loaded, self.problems)

    def __enter__(self) -> LogDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._shutdown.closed else ("online" if self._health.online else "offline")
        return f"LogDir({self.path}, {state}, logs={len(self._table.logs)})"


def _checked(topic: str, partition: int) -> TopicPartition:
    """The partition a caller names, refused (``InvalidTopicError``) unless Kafka could hold it."""
    files.validate_topic(topic)
    return TopicPartition(topic, files.validate_partition(partition, topic))

