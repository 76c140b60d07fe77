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
                        tasks, closes every file, releases .lock; every later call raises
                        LogDirOfflineError stating that error; stats() still answers

After a clean shutdown the next open recovers nothing; after a kill it re-validates each log only
from its checkpointed recovery point. Keys of ``logs()`` are ``(topic, partition)`` tuples
(``PartitionId``), and a ``storage.files.TopicPartition`` works as a lookup key too.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, cast

from cleaner.checkpoints import CheckpointChange
from node.checkpoints import DirCheckpoints
from node.config import LogDirConfig
from node.deletion import DeleteQueue, QueuedDelete
from node import move
from node.errors import (LogDirClosedError, MoveAbortedError, PartitionMovedError,
                         PartitionSkippedError, UnknownPartitionError)
from node.health import DirHealth, DirLog
from node.keys import LogMap, PartitionId
from node.loading import PartitionToLoad, RecoveryPool, create_and_validate, scan
from node.lock import DirLock
from node.stats import (
    InvalidDir,
    LoadProgress,
    LogDirStats,
    PartitionProblem,
    all_partition_stats,
    disk_usage,
    file_system_id,
)
from node.tasks import (
    GuardedScheduler,
    PeriodicTasks,
    apply_retention,
    expire_producers,
    flush_dirty,
)
from storage import files
from storage.checkpoint import CleanShutdownFile
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.files import TopicPartition
from storage.log import Log
from storage.quarantine import QuarantinedFile
from storage.scheduler import Scheduler, ThreadScheduler

log = logging.getLogger(__name__)

PauseCleaning = Callable[[TopicPartition], AbstractContextManager[object]]
# the pauses of many partitions held at once (a topic deletion): one call, not one per partition
PauseCleaningMany = Callable[[list[TopicPartition]], AbstractContextManager[object]]


class LogDir:
    """One log directory and its partition logs. Open with ``LogDir.open``.

    Thread-safe: the actor's append and background threads may call it concurrently. Lock rule:
    ``_lock`` guards only the maps and the delete queue and is never held while waiting for a log's
    lock, so the offline path (which closes every log) cannot deadlock with a caller.
    """

    def __init__(self, path: Path, dir_lock: DirLock, *, default_config: LogConfig,
                 topic_configs: Mapping[str, LogConfig], config: LogDirConfig,
                 recovery_threads: int, clock: Clock, scheduler: Scheduler | None,
                 pause_cleaning: PauseCleaning | None,
                 pause_cleaning_many: PauseCleaningMany | None = None) -> None:
        self.path = path
        self.config = config
        self.default_config = default_config
        self.clock = clock
        self.recovery_threads = recovery_threads
        self._topic_configs = dict(topic_configs)
        self._dir_lock = dir_lock
        self._health = DirHealth(path)
        self._health.on_offline = self._on_offline
        self._owned_scheduler = (None if scheduler is not None
                                 else ThreadScheduler(f"logdir-{path.name}", clock=clock))
        self._scheduler = GuardedScheduler(scheduler or self._owned_scheduler, self._health)
        self._checkpoints = DirCheckpoints(path)
        self._pause_cleaning: PauseCleaning = pause_cleaning or (lambda _tp: nullcontext())
        self._pause_cleaning_many: PauseCleaningMany = (pause_cleaning_many
                                                        or self._pause_each)
        self._lock = threading.RLock()
        self._release_lock = threading.Lock()
        self._logs: dict[TopicPartition, DirLog] = {}
        self._queued = DeleteQueue()
        self._pool: RecoveryPool | None = None
        self._tasks_started = False
        self._loaded = False
        self._closed = False
        self._released = False
        self.had_clean_shutdown = False
        self.clean_shutdown_epoch: int | None = None
        self.invalid_dirs: tuple[InvalidDir, ...] = ()
        self.problems: tuple[PartitionProblem, ...] = ()        # partitions skipped at load
        self.quarantined: tuple[QuarantinedFile, ...] = ()      # what recovery cut at load
        self._skipped: dict[TopicPartition, PartitionProblem] = {}
        self._moved: dict[TopicPartition, str] = {}     # moved away -> the directory they went to
        self.load_time_ms = 0.0

    # ---- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str, *, default_config: LogConfig | None = None,
             topic_configs: Mapping[str, Mapping[str, Any] | LogConfig] | None = None,
             recovery_threads: int | None = None, config: LogDirConfig | None = None,
             clock: Clock = SYSTEM_CLOCK, scheduler: Scheduler | None = None,
             start_tasks: bool = True, pause_cleaning: PauseCleaning | None = None,
             pause_cleaning_many: PauseCleaningMany | None = None,
             on_load_progress: Callable[[LoadProgress], None] | None = None) -> LogDir:
        """Open (creating if missing), lock, load and start the directory at ``path``.

        ``topic_configs`` maps a topic to its overrides (dotted keys) of ``default_config``.
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
                         pause_cleaning_many=pause_cleaning_many)
        except BaseException:
            dir_lock.release()
            raise
        try:
            opened._load(on_load_progress)
            if start_tasks:
                opened.start_tasks()
        except BaseException:
            opened._scheduler.stop()
            opened._shutdown_scheduler()
            opened._release()
            raise
        return opened

    def _load(self, on_progress: Callable[[LoadProgress], None] | None) -> None:
        marker = CleanShutdownFile(self.path)
        state = marker.read()
        self.had_clean_shutdown = state.clean
        self.clean_shutdown_epoch = state.epoch
        if state.clean or state.problem is not None:
            marker.delete()
        recovery_points = self._checkpoints.read(self._checkpoints.recovery_points)
        log_start_offsets = self._checkpoints.read(self._checkpoints.log_start_offsets)
        move.resolve_futures(self.path)     # before the scan: a promoted future loads as live
        seeds = move.seeded_states(self.path)
        for tp, seed in seeds.items():
            recovery_points.setdefault(tp, seed.recovery_point)
            log_start_offsets.setdefault(tp, seed.log_start_offset)
        found = scan(self.path)
        self.invalid_dirs = found.invalid

        def open_log(partition: PartitionToLoad) -> Log:
            tp = partition.topic_partition
            opened = DirLog.open(partition.path, self.config_for(tp.topic),
                                 recovery_point=recovery_points.get(tp, 0),
                                 log_start_offset=log_start_offsets.get(tp, 0),
                                 had_clean_shutdown=self.had_clean_shutdown, clock=self.clock,
                                 scheduler=self._scheduler,
                                 producer_id_expiration_ms=self.config.producer_id_expiration_ms)
            opened.health = self._health
            return opened

        # After a clean shutdown nothing is re-validated: loading is Python bookkeeping under the
        # GIL, where a second thread only adds hand-offs (3,000 segments: 405 ms on one thread,
        # 562 ms on two, medians of 7). The configured count serves recovery, whose CRC kernels
        # release the GIL.
        threads = 1 if self.had_clean_shutdown else self.recovery_threads
        self._pool = RecoveryPool(self.path, threads, open_log, clock=self.clock,
                                  on_progress=on_progress)
        self._pool.add_problems(found.skipped)
        loaded = self._pool.run(found.partitions)
        now = self.clock.milliseconds()
        with self._lock:
            self._logs = cast("dict[TopicPartition, DirLog]", loaded)
            self._skipped = dict(self._pool.skipped)
        self.problems = tuple(problem for _, problem in sorted(
            self._skipped.items(), key=lambda item: (item[0].topic, item[0].partition)))
        self.quarantined = tuple(kept for tp in sorted(loaded, key=lambda t: (t.topic, t.partition))
                                 for kept in loaded[tp].load_result.quarantined)
        for tp, path in found.to_delete:
            delay = self.config_for(tp.topic).file_delete_delay_ms
            self._queued.add(QueuedDelete(tp, path, now + delay, None))
        self._settle_seeds({tp: seed for tp, seed in seeds.items() if tp in loaded})
        self._loaded = True
        progress = self._pool.progress()
        self.load_time_ms = progress.elapsed_ms
        log.info("loaded %d logs (%d segments) from %s in %.0f ms after a%s shutdown; "
                 "%d partitions skipped, %d files quarantined",
                 progress.total_logs, progress.total_segments, self.path, progress.elapsed_ms,
                 " clean" if self.had_clean_shutdown else "n unclean", len(self.problems),
                 len(self.quarantined))

    def start_tasks(self) -> None:
        """Start the periodic tasks (``open`` does unless ``start_tasks=False``). Idempotent."""
        with self._io("start tasks"):
            with self._lock:
                if self._tasks_started:
                    return
                self._tasks_started = True
            dues = self._queued.due_times()
            PeriodicTasks(self._scheduler, self.config).start(
                retention=self.cleanup_logs, flush=self.flush_dirty_logs,
                recovery_points=self.checkpoint_recovery_points,
                log_start_offsets=self.checkpoint_log_start_offsets,
                expire_producers=self.remove_expired_producers)
            for due in dues:
                self._arm_delete(due)

    # ---- state -------------------------------------------------------------------------------
    @property
    def online(self) -> bool:
        return self._health.online

    @property
    def offline_reason(self) -> str | None:
        return self._health.reason

    @property
    def closed(self) -> bool:
        return self._closed

    def load_progress(self) -> LoadProgress:
        assert self._pool is not None
        return self._pool.progress()

    def config_for(self, topic: str) -> LogConfig:
        """``default_config`` with the topic's overrides applied."""
        return self._topic_configs.get(topic, self.default_config)

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
            live = [lg for tp, lg in self._logs.items() if tp.topic == topic]
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
        if self._closed:
            raise LogDirClosedError(f"log directory {self.path} is closed",
                                    directory=str(self.path))
        with self._health.guard(action):
            yield

    def _snapshot(self) -> list[DirLog]:
        with self._lock:
            return list(self._logs.values())

    # ---- partitions --------------------------------------------------------------------------
    def logs(self) -> LogMap:
        """A snapshot ``{(topic, partition): Log}`` of the live logs."""
        with self._io("list logs"), self._lock:
            return LogMap((PartitionId(tp.topic, tp.partition), lg)
                          for tp, lg in self._logs.items())

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log of ``topic``-``partition``, or None. A name or number that no partition can
        have (``storage.files.validate_topic``/``validate_partition``) raises
        ``InvalidTopicError``: ``True`` is not partition 1."""
        tp = _checked(topic, partition)
        with self._io("get log"), self._lock:
            return self._logs.get(tp)

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
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            skipped = self._skipped.get(tp)
            if skipped is not None:
                raise PartitionSkippedError(
                    f"partition {tp} of log directory {self.path} was skipped at load "
                    f"({skipped.error}: {skipped.reason}); repair it (strata recover) and "
                    "reopen the directory", topic=topic, partition=partition,
                    directory=str(self.path), reason=skipped.reason)
            path = self.path / files.partition_dir_name(tp.topic, tp.partition)
            path.mkdir(exist_ok=True)
            self._moved.pop(tp, None)
            if sync:
                fsync_dir(self.path)
            created = DirLog.open(path, self.config_for(topic), recovery_point=0, clock=self.clock,
                                  scheduler=self._scheduler,
                                  producer_id_expiration_ms=self.config.producer_id_expiration_ms)
            created.health = self._health
            self._logs[tp] = created
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
        tps = [_checked(topic, p) for p in partitions]
        with self._lock:
            held = [tp for tp in tps if tp in self._logs]
        removed: dict[TopicPartition, Log] = {}
        try:
            # the cleaning pauses of the whole batch in one call, taken before any rename and
            # released after the last (not one call per partition: see pause_cleaning_many)
            with self._pause_cleaning_many(held):
                for tp in held:
                    gone = self._unlist_and_rename(tp, paused=True)
                    if gone is not None:
                        removed[tp] = gone
        finally:
            if removed:
                with self._io(f"delete logs of {topic}"):
                    fsync_dir(self.path)       # every rename of the batch made durable at once
                    due = self._queue_deletes(removed)
                self._arm_delete(due)
        return {tp.partition: gone for tp, gone in removed.items()}

    @contextmanager
    def _pause_each(self, tps: list[TopicPartition]) -> Iterator[None]:
        """``pause_cleaning`` of every partition of ``tps``, held together."""
        with ExitStack() as stack:
            for tp in tps:
                stack.enter_context(self._pause_cleaning(tp))
            yield

    def _unlist_and_rename(self, tp: TopicPartition, *, paused: bool = False) -> Log | None:
        """Unlist ``tp`` and rename its directory ``-delete``, inside its cleaning pause (taken
        here unless the caller holds it: ``paused``)."""
        with self._io(f"delete log {tp}"):
            with self._lock:
                if tp not in self._logs:
                    return None
            # pause first, then unlist: a clean finishing meanwhile still finds its log to swap
            # into (and the rename waits for it), instead of failing on a missing partition
            with nullcontext() if paused else self._pause_cleaning(tp):
                with self._lock:
                    removed = self._logs.pop(tp, None)
                if removed is None:
                    return None
                try:
                    removed.rename_dir(files.delete_dir_name(tp.topic, tp.partition),
                                       sync=False)
                except Exception:
                    if not removed.is_closed:   # refused before the rename: the log stays
                        with self._lock:
                            self._logs[tp] = removed
                    raise
            log.info("log %s renamed to %s; its files go in %d ms", tp, removed.dir.name,
                     removed.config.file_delete_delay_ms)
            return removed

    def _queue_deletes(self, removed: Mapping[TopicPartition, Log]) -> int:
        """After the logs of ``removed`` (no longer listed) were renamed ``-delete``: queue their
        files for the delete task and rewrite the checkpoints once without them (deleting n
        partitions costs O(n), not O(n^2)). Returns when the last files are due."""
        now = self.clock.milliseconds()
        due = 0
        for tp, gone in removed.items():
            gone_due = now + gone.config.file_delete_delay_ms
            self._queued.add(QueuedDelete(tp, gone.dir, gone_due, gone))
            due = max(due, gone_due)
        logs = self._snapshot()
        self._checkpoints.write_recovery_points(logs)
        self._checkpoints.write_log_start_offsets(logs)
        self._checkpoints.drop_cleaner_offsets(list(removed))
        return due

    def _arm_delete(self, due_ms: int) -> None:
        if self._tasks_started:
            delay = max(0, due_ms - self.clock.milliseconds())
            self._scheduler.schedule("kafka-delete-logs", self.delete_queued_logs, delay)

    # ---- moves between directories (node.move) ------------------------------------------------
    def raise_if_moved(self, topic: str, partition: int) -> None:
        """``PartitionMovedError`` when ``topic``-``partition`` was moved away from here."""
        target = self._moved.get(TopicPartition(topic, partition))
        if target is not None:
            raise PartitionMovedError(
                f"partition {topic}-{partition} moved from {self.path} to {target}",
                topic=topic, partition=partition, target_dir=target)

    def io_guard(self, action: str) -> AbstractContextManager[None]:
        """Work on this directory's files done outside its methods (a move's copy): fails fast
        when offline or closed, and an ``OSError`` inside takes the directory offline."""
        return self._io(action)

    def being_deleted(self, topic: str, partition: int) -> bool:
        """True when ``topic``-``partition`` waits in the delete queue and is not live here."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            return tp not in self._logs and self._queued.holds(tp)

    def begin_move_in(self, topic: str, partition: int, source_dir: str) -> Path:
        """Create ``<topic>-<partition>.<uuid>-future`` with its (incomplete) move state;
        returns its path."""
        tp = _checked(topic, partition)
        with self._io(f"start moving {tp} in"):
            unique = uuid.uuid4().hex
            future = self.path / files.future_dir_name(tp.topic, tp.partition, unique)
            future.mkdir()
            move.MoveState(tp.topic, tp.partition, os.path.abspath(source_dir), unique).write(
                future)
            fsync_dir(self.path)
            return future

    def settle_move_in(self, future: Path) -> Log:
        """After the source's switch (or a failure): promote ``future`` and serve it when the
        source committed, else remove it and raise ``MoveAbortedError``."""
        with self._io(f"settle move {future.name}"):
            action, state, why = move.settle(self.path, future)
            if action != move.PROMOTE or state is None:
                raise MoveAbortedError(f"move into {future} abandoned: {why}",
                                       path=str(future), reason=why)
            tp = state.topic_partition
            live = self.path / files.partition_dir_name(tp.topic, tp.partition)
            # the source's switch left every file consistent and the data synced: open it as
            # after a clean shutdown (no segment re-read); a load after a crash recovers it
            opened = DirLog.open(live, self.config_for(tp.topic),
                                 recovery_point=state.recovery_point,
                                 log_start_offset=state.log_start_offset,
                                 had_clean_shutdown=True, clock=self.clock,
                                 scheduler=self._scheduler,
                                 producer_id_expiration_ms=self.config.producer_id_expiration_ms)
            opened.health = self._health
            with self._lock:
                self._logs[tp] = opened
                self._moved.pop(tp, None)
            self._settle_seeds({tp: state})
            log.info("partition %s moved in from %s (log end %d)", tp, state.source_dir,
                     opened.log_end_offset)
            return opened

    def _settle_seeds(self, seeds: Mapping[TopicPartition, move.MoveState]) -> None:
        """Write the checkpoints of partitions promoted from a move (their recovery point, log
        start and cleaner offset), then remove their move states."""
        if not seeds:
            return
        logs = self._snapshot()
        self._checkpoints.write_recovery_points(logs)
        self._checkpoints.write_log_start_offsets(logs)
        offsets = {tp: s.cleaner_offset for tp, s in seeds.items()
                   if s.cleaner_offset is not None}
        if offsets:
            self._checkpoints.update_cleaner_offsets(CheckpointChange(defaults=offsets))
        for tp in seeds:
            move.clear_state(self.path / files.partition_dir_name(tp.topic, tp.partition))

    def finish_move_out(self, tp: TopicPartition, removed: Log, target_dir: str) -> None:
        """After the commit (``removed`` renamed ``-delete`` by the switch): stop serving it,
        answer ``PartitionMovedError`` for it from now on, rewrite the checkpoints without it
        and delete its files ``file.delete.delay.ms`` later."""
        with self._lock:
            if self._logs.get(tp) is removed:
                del self._logs[tp]
            self._moved[tp] = target_dir
        due = self._queue_deletes({tp: removed})
        log.info("partition %s moved to %s; %s goes in %d ms", tp, target_dir, removed.dir.name,
                 removed.config.file_delete_delay_ms)
        self._arm_delete(due)

    def cleaner_offset(self, tp: TopicPartition) -> int | None:
        return self._checkpoints.read_cleaner_offsets().get(tp)

    # ---- the periodic tasks' bodies (callable directly too) ----------------------------------
    def delete_queued_logs(self) -> int:
        """Delete the files of every queued log whose delay is over; returns how many."""
        with self._io("delete queued logs"):
            due = self._queued.take_due(self.clock.milliseconds())
            for queued in due:
                queued.remove()
                log.info("deleted log %s (%s)", queued.topic_partition, queued.path.name)
            if due:
                fsync_dir(self.path)
            return len(due)

    def cleanup_logs(self) -> int:
        """Retention of every log whose policy does not include compact (compacted logs get theirs
        from the cleaner), each inside ``pause_cleaning``. Returns segments deleted."""
        with self._io("retention"):
            return apply_retention(self._snapshot(), self._pause_cleaning,
                                   self._scheduler.record_failure)

    def flush_dirty_logs(self) -> int:
        """Flush every log whose last flush is at least its ``flush.ms`` ago; returns how many."""
        with self._io("flush"):
            return flush_dirty(self._snapshot(), self.clock.milliseconds(),
                               self._scheduler.record_failure)

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the producers idle for ``producer.id.expiration.ms``; returns
        how many."""
        with self._io("producer expiration"):
            return expire_producers(self._snapshot(), self.clock.milliseconds(),
                                    self._scheduler.record_failure)

    def checkpoint_recovery_points(self) -> bool:
        """Write every log's recovery point; returns False when nothing changed since the last."""
        with self._io("checkpoint recovery points"):
            return self._checkpoints.write_recovery_points(self._snapshot())

    def checkpoint_log_start_offsets(self) -> bool:
        with self._io("checkpoint log start offsets"):
            return self._checkpoints.write_log_start_offsets(self._snapshot())

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
            with self._lock:
                live = frozenset(TopicPartition(tp.topic, tp.partition) for tp in self._logs)
            live_change = dataclasses.replace(
                change, live_partitions=live if change.live_partitions is None
                else live & frozenset(change.live_partitions))
            return self._checkpoints.update_cleaner_offsets(live_change)

    # ---- stats -------------------------------------------------------------------------------
    def stats(self) -> LogDirStats:
        """A snapshot; also answers when the directory is offline or closed."""
        live = self._health.online and not self._closed
        with self._lock:
            logs = dict(self._logs) if live else {}
        queued = len(self._queued)
        partitions = all_partition_stats(
            logs, self._checkpoints.read_cleaner_offsets() if logs else {})
        total, used, free = disk_usage(str(self.path))
        return LogDirStats(
            directory=str(self.path), online=self._health.online,
            offline_reason=self._health.reason, closed=self._closed,
            partitions_count=len(partitions), log_bytes=sum(p.size_bytes for p in partitions),
            disk_total_bytes=total, disk_used_bytes=used, disk_free_bytes=free,
            load_time_ms=self.load_time_ms, had_clean_shutdown=self.had_clean_shutdown,
            logs_to_delete=queued, invalid_dirs=self.invalid_dirs,
            task_failures=self._scheduler.failures, last_task_failure=self._scheduler.last_failure,
            partitions=partitions, problems=self.problems, quarantined=self.quarantined,
            file_system=file_system_id(str(self.path)))

    # ---- shutdown ----------------------------------------------------------------------------
    def close(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: stop the tasks, flush and close every log, write both checkpoints and
        ``.kafka_cleanshutdown`` (with ``broker_epoch``), release ``.lock``. Idempotent.

        On an offline directory this only makes sure everything is released. An I/O error during
        shutdown takes the directory offline, writes no marker, and raises ``LogDirOfflineError``.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._scheduler.stop()
        self._shutdown_scheduler()
        try:
            if self._health.online:
                self._clean_shutdown(broker_epoch)
        finally:
            self._release()

    def _clean_shutdown(self, broker_epoch: int) -> None:
        logs = self._snapshot()
        with self._health.guard("clean shutdown"):
            with ThreadPoolExecutor(max_workers=self.recovery_threads,
                                    thread_name_prefix=f"log-shutdown-{self.path.name}") as pool:
                for done in [pool.submit(_flush_and_close, lg) for lg in logs]:
                    done.result()
            self._checkpoints.write_recovery_points(logs)
            self._checkpoints.write_log_start_offsets(logs)
            if self._loaded and not self._skipped:
                CleanShutdownFile(self.path).write(broker_epoch)
            elif self._skipped:
                # a skipped partition was not recovered: once it is fixed, the next open must
                # recover it (its recovery point is gone, so from its first segment)
                log.warning("no clean-shutdown marker for %s: partitions %s were skipped at load",
                            self.path, ", ".join(p.name for p in self.problems))
        log.info("log directory %s shut down cleanly (%d logs)", self.path, len(logs))

    def _on_offline(self) -> None:
        """``DirHealth`` calls this once, on the thread that hit the error. It must not join the
        scheduler thread: that thread may be waiting for a log lock the failing thread holds."""
        self._scheduler.stop()
        owned = self._owned_scheduler
        if owned is not None and owned.is_running:
            owned.schedule("shutdown", owned.shutdown, 0)   # it stops itself, unjoined
        self._release()

    def _shutdown_scheduler(self) -> None:
        if self._owned_scheduler is not None:
            self._owned_scheduler.shutdown()

    def _release(self) -> None:
        """Close every log's files and drop ``.lock``. Idempotent; errors are logged, not raised."""
        with self._release_lock:
            if self._released:
                return
            self._released = True
        for lg in self._snapshot():
            try:
                lg.close()
            except Exception:  # noqa: BLE001 - releasing is best effort
                log.exception("closing %s while releasing %s", lg.dir, self.path)
        self._dir_lock.release()

    def __enter__(self) -> LogDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("online" if self._health.online else "offline")
        return f"LogDir({self.path}, {state}, logs={len(self._logs)})"


def _checked(topic: str, partition: int) -> TopicPartition:
    """The partition a caller names, refused (``InvalidTopicError``) unless Kafka could hold it."""
    files.validate_topic(topic)
    return TopicPartition(topic, files.validate_partition(partition, topic))


def _flush_and_close(lg: Log) -> None:
    lg.flush()
    lg.close()
