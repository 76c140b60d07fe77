"""Startup of a log directory (Kafka's LogManager.loadLogs): sort what is in the directory, then
load every partition through a pool of threads (``num.recovery.threads.per.data.dir`` after an
unclean shutdown, one after a clean one).

What ``scan`` does with each entry of the directory:

* a file (checkpoints, ``.lock``, ``meta.properties``, ``*.tmp``): ignored;
* ``<topic>-<partition>``: loaded, unless an entry named like a segment file cannot be used
  (``storage.files.check_partition_entries``: a directory, FIFO or symlink loop under a segment
  name, a base offset beyond int64, a name that is not 20 digits, a file we may not read and
  write): then the partition is skipped — reported as a ``PartitionProblem``, neither loaded nor
  changed — and the rest of the directory loads;
* ``<topic>-<partition>.<uuid>-delete``: queued for deletion, not loaded;
* a ``-future`` directory of a copy ``node.move.resolve_futures`` left to resume: skipped, not
  reported (the next move of its partition resumes it);
* anything else — a name that does not parse, a ``-stray`` directory, a ``-future`` directory
  left after ``node.move.resolve_futures`` (its move could not be settled), a partition under a name that is not its own (``t-01`` for ``t-1``): reported
  as an ``InvalidDir`` and left alone, neither loaded nor deleted.

``RecoveryPool.run`` skips a partition whose load raises a typed ``StorageError`` (damage the
loader refuses to repair): it becomes a ``PartitionProblem`` and the others load. Any other
failure (an ``OSError``: the disk) stops it: partitions not started are skipped, the logs
already loaded are closed, and the error propagates (an ``OSError`` unchanged, STYLE.md P7) with a
note naming the partition.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from node.errors import InvalidLogDirError
from node.stats import InvalidDir, LoadProgress, PartitionProblem
from storage import files
from storage.clock import Clock
from storage.durable import fsync_dir
from storage.errors import (
    InvalidSegmentFileError,
    InvalidTopicError,
    LogDirOfflineError,
    StorageError,
)
from storage.files import TopicPartition
from storage.log import Log

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionToLoad:
    topic_partition: TopicPartition
    path: Path
    segments: int


@dataclass(frozen=True, slots=True)
class DirScan:
    """What ``scan`` found, each list in name order."""

    partitions: tuple[PartitionToLoad, ...]
    to_delete: tuple[tuple[TopicPartition, Path], ...]
    invalid: tuple[InvalidDir, ...]
    skipped: tuple[tuple[TopicPartition, PartitionProblem], ...] = ()


def create_and_validate(directory: Path) -> Path:
    """Kafka's createAndValidateLogDirs for one directory: create it (and fsync its parent) if
    missing; refuse it unless it is a readable, writable directory."""
    if directory.exists() and not directory.is_dir():
        raise InvalidLogDirError(f"log directory {directory} exists and is not a directory",
                                 directory=str(directory))
    if not directory.exists():
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            pass   # created meanwhile; checked below
        fsync_dir(directory.parent)
    if not directory.is_dir():
        raise InvalidLogDirError(f"log directory {directory} is not a directory",
                                 directory=str(directory))
    if not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
        raise InvalidLogDirError(f"log directory {directory} is not readable and writable",
                                 directory=str(directory))
    return directory


def scan(directory: Path, resumable: Collection[str] = ()) -> DirScan:
    """Sort the subdirectories of ``directory`` (see the module docstring); ``resumable`` names
    the ``-future`` directories of moves left to resume (``node.move.resumable_futures``),
    neither loaded nor reported."""
    partitions: list[PartitionToLoad] = []
    to_delete: list[tuple[TopicPartition, Path]] = []
    invalid: list[InvalidDir] = []
    skipped: list[tuple[TopicPartition, PartitionProblem]] = []
    subdirs: list[tuple[str, Path]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if entry.is_dir():
                    subdirs.append((entry.name, Path(entry.path)))
            except OSError as err:     # a symlink loop: neither a file nor a directory
                invalid.append(InvalidDir(entry.name, f"cannot stat it: {err.strerror}"))
    subdirs.sort()
    for name, path in subdirs:
        try:
            parsed = files.parse_partition_dir(name)
        except InvalidTopicError as err:
            invalid.append(InvalidDir(name, err.message))
            continue
        tp = parsed.topic_partition
        if parsed.is_delete:
            to_delete.append((tp, path))
        elif parsed.is_future and name in resumable:
            continue
        elif parsed.kind:
            invalid.append(InvalidDir(name, f"a {parsed.kind} directory whose move could not "
                                            "be settled (node.move); left alone, not loaded"))
        elif name != str(tp):
            invalid.append(InvalidDir(name, f"not the canonical name {str(tp)!r} of partition "
                                            f"{tp.partition} of topic {tp.topic!r}"))
        else:
            try:
                files.check_partition_entries(path)
            except InvalidSegmentFileError as err:
                skipped.append((tp, problem_of(name, err)))
                continue
            partitions.append(PartitionToLoad(tp, path, _count_segments(path)))
    invalid.sort(key=lambda bad: bad.name)
    for bad in invalid:
        log.warning("not loading directory %s in %s: %s", bad.name, directory, bad.reason)
    for _, problem in skipped:
        log.error("skipping partition %s in %s: %s", problem.name, directory, problem.reason)
    return DirScan(tuple(partitions), tuple(to_delete), tuple(invalid), tuple(skipped))


def problem_of(name: str, err: StorageError) -> PartitionProblem:
    """The ``PartitionProblem`` of partition directory ``name`` skipped for ``err``."""
    path = err.fields.get("path")
    return PartitionProblem(name, type(err).__name__, str(path) if path is not None else name,
                            err.message)


def _count_segments(path: Path) -> int:
    return sum(1 for name in os.listdir(path)
               if name.endswith(files.LOG_SUFFIX) and files.is_segment_file(name))


class RecoveryPool:
    """Loads partitions on ``threads`` worker threads, one job per partition.

    ``progress()`` may be called from any thread while ``run`` works; ``on_progress`` (if given)
    receives a snapshot when loading starts and after every partition, on the worker thread that
    loaded it, so it must be quick (it may block to hold a worker, as tests do). A failing
    ``on_progress`` is logged and otherwise ignored.
    """

    def __init__(self, directory: Path, threads: int, open_log: Callable[[PartitionToLoad], Log],
                 *, clock: Clock,
                 on_progress: Callable[[LoadProgress], None] | None = None) -> None:
        self._directory = directory
        self._threads = threads
        self._open_log = open_log
        self._clock = clock
        self._on_progress = on_progress
        self._lock = threading.Lock()
        self._total_logs = self._remaining_logs = 0
        self._total_segments = self._remaining_segments = 0
        self._started_ns = clock.nanoseconds()
        self._elapsed_ms: float | None = None
        self._problems: list[PartitionProblem] = []
        self.skipped: dict[TopicPartition, PartitionProblem] = {}

    def progress(self) -> LoadProgress:
        with self._lock:
            done = self._elapsed_ms is not None
            elapsed = (self._elapsed_ms if self._elapsed_ms is not None
                       else (self._clock.nanoseconds() - self._started_ns) / 1e6)
            return LoadProgress(str(self._directory), self._total_logs, self._remaining_logs,
                                self._total_segments, self._remaining_segments, elapsed, done,
                                tuple(self._problems))

    def add_problems(self, skipped: tuple[tuple[TopicPartition, PartitionProblem], ...]) -> None:
        """Partitions skipped before loading (by ``scan``), to report with the others."""
        with self._lock:
            for tp, problem in skipped:
                self.skipped[tp] = problem
                self._problems.append(problem)

    def run(self, partitions: tuple[PartitionToLoad, ...]) -> dict[TopicPartition, Log]:
        """Load ``partitions``; the logs of those not skipped (see ``skipped``)."""
        with self._lock:
            self._started_ns = self._clock.nanoseconds()
            self._total_logs = self._remaining_logs = len(partitions)
            self._total_segments = self._remaining_segments = sum(p.segments for p in partitions)
        self._notify()
        pool = ThreadPoolExecutor(max_workers=self._threads,
                                  thread_name_prefix=f"log-recovery-{self._directory.name}")
        try:
            futures = [pool.submit(self._load_one, p) for p in partitions]
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        loaded: dict[TopicPartition, Log] = {}
        error: BaseException | None = None
        for future, partition in zip(futures, partitions):
            if future.cancelled():
                continue
            failure = future.exception()
            if failure is None:
                opened = future.result()
                if opened is not None:
                    loaded[partition.topic_partition] = opened
            elif error is None:
                failure.add_note(f"while loading partition directory {partition.path}")
                error = failure
        with self._lock:
            self._elapsed_ms = (self._clock.nanoseconds() - self._started_ns) / 1e6
        if error is not None:
            for opened in loaded.values():
                try:
                    opened.close()
                except Exception:  # noqa: BLE001 - already failing; the first error wins
                    log.exception("closing %s after a failed load", opened.dir)
            raise error
        self._notify()
        return loaded

    def _load_one(self, partition: PartitionToLoad) -> Log | None:
        opened: Log | None
        try:
            opened = self._open_log(partition)
        except LogDirOfflineError:
            raise
        except StorageError as err:   # this partition's damage, typed: skip it, load the others
            problem = problem_of(partition.path.name, err)
            log.error("skipping partition %s in %s: %s: %s", problem.name, self._directory,
                      problem.error, problem.reason)
            self.add_problems(((partition.topic_partition, problem),))
            opened = None
        with self._lock:
            self._remaining_logs -= 1
            self._remaining_segments -= partition.segments
        self._notify()
        return opened

    def _notify(self) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress(self.progress())
        except Exception:  # noqa: BLE001 - an observer must not break loading
            log.exception("load progress callback failed for %s", self._directory)
