"""``LogDirServer``: the body of a node actor, the only one (STYLE.md P10, Ray Serve's plain-class
actors): ``cluster.actors`` binds it to Ray and gives it the cluster's parts through three seams,
``observer`` (metrics, ``NodeObserver``), ``cleaning_pauses`` (pauses held by the coordinator,
``CleaningPauses``) and ``move_sources`` (the other node actors, for a move).

A thin adapter over ``LogDir``: every method takes and returns plain, picklable values (topic and
partition instead of ``Log`` objects, bytes, frozen dataclasses) and forwards to the directory.
It imports no ray; ``cluster/`` applies ``ray.remote`` to it and chooses concurrency groups.
Errors are the typed storage/node errors, which pickle through Ray.

What it adds to ``LogDir`` for a cluster:

* topic overrides kept in the directory (``topic-configs.json``, ``node.topic_configs``), read
  before loading, so a restarted node opens every log with its topic's settings;
* optional loading on a background thread (``load_in_background=True``): the constructor returns
  at once, ``load_progress`` answers while the directory loads, every other call waits for the
  load (``DirectoryLoadingError`` after ``load_wait_s``) or raises what the load raised;
* the owner's half of cleaning by another process: snapshots of the compacted logs
  (``node.snapshot``), ``swap_cleaned`` (``Log.replace_cleaned``), ``remove_cleaned_files`` after a
  cleaner died, the ``cleaner-offset-checkpoint`` read and written for a remote manager,
  retention of compacted logs, truncation under ``pause_cleaning``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Protocol

from cleaner.checkpoints import CheckpointChange
from node.errors import (MoveRefusedError, PartitionMovedError, PolicyViolationError,
                         UnknownPartitionError)
from node.logdir import LogDir
from node.move import CopyRecord, SourceSnapshot
from node.mover import MoveResult, MoveSource, MoveStatus, Mover, SwitchResult, \
    source_snapshot_of, switch_out
from node.snapshot import LogSnapshot, snapshot_log
from node.stats import (LoadProgress, LogDirStats, PartitionDescription, PartitionStats,
                        describe_partition, disk_usage, file_system_id, partition_stats)
from node.topic_configs import TopicConfigsFile
from node.topic_deletions import TopicDeletionsFile
from storage import files
from storage.config import LogConfig
from storage.checkpoint import CleanShutdownFile
from storage.errors import (CheckpointError, LogDirOfflineError, OffsetOutOfRangeError,
                            StorageError)
from storage.files import TopicPartition
from storage.log import DEFAULT_FETCH_BYTES, READ_UNCOMMITTED, FetchData, LogAppendInfo
from storage.records import ControlType, Record
from storage.segment import SegmentIdentity

log = logging.getLogger(__name__)

DEFAULT_LOAD_WAIT_S = 600.0
EARLIEST_TIMESTAMP = -2     # Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = -1       # Kafka's ListOffsetsRequest.LATEST_TIMESTAMP


class DirectoryLoadingError(StorageError):
    """A call reached a node whose directory is still loading and gave up waiting (``directory``,
    ``waited_s``). Unlike ``LogDirOfflineError`` nothing failed: try again later, or watch
    ``load_progress``."""


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


class LogDirServer:
    """Owns one ``LogDir`` for the life of the actor. Thread-safe as ``LogDir`` is; topic config
    writes are serialised by one lock.

    The constructor takes ``LogDir.open``'s keyword arguments and opens the directory (locking it);
    a restarted actor therefore recovers from whatever the directory holds. ``observer``,
    ``cleaning_pauses`` and ``move_sources`` (the ``MoveSource`` of another directory's node) are
    the cluster's seams; without them the node runs alone (pauses are the directory's own, and a
    move needs its source given).
    """

    def __init__(self, path: str | Path, *, load_in_background: bool = False,
                 load_wait_s: float = DEFAULT_LOAD_WAIT_S, observer: NodeObserver | None = None,
                 cleaning_pauses: CleaningPauses | None = None,
                 move_sources: Callable[[str], MoveSource] | None = None, host: str = "",
                 **open_kwargs: Any) -> None:
        self.path = Path(os.path.abspath(path))
        self.host = host or socket.gethostname()
        self._observer = observer
        self._cleaning_pauses = cleaning_pauses
        self._move_sources = move_sources
        if cleaning_pauses is not None:
            open_kwargs["pause_cleaning"] = lambda tp: self._held_pause(tp, "")
            open_kwargs["pause_cleaning_many"] = self._held_pauses
        self._last_progress: LoadProgress | None = None
        self._load_wait_s = load_wait_s
        self._loaded = threading.Event()
        self._load_error: BaseException | None = None
        self._dir_or_none: LogDir | None = None
        self._config_lock = threading.Lock()
        self._default_config: LogConfig = open_kwargs.get("default_config") or LogConfig()
        user_callback = open_kwargs.pop("on_load_progress", None)

        def on_progress(progress: LoadProgress) -> None:
            self._last_progress = progress
            if observer is not None:
                observer.load_progress(progress)
            if user_callback is not None:
                user_callback(progress)

        def load() -> None:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                self._overrides = TopicConfigsFile(self.path).read()
                configs: dict[str, Any] = dict(self._overrides)
                configs.update(open_kwargs.pop("topic_configs", None) or {})
                self._dir_or_none = LogDir.open(self.path, on_load_progress=on_progress,
                                                topic_configs=configs, **open_kwargs)
            except BaseException as err:
                self._load_error = err
                if not load_in_background:
                    raise
                log.exception("loading log directory %s failed", self.path)
            finally:
                self._loaded.set()

        self._overrides: dict[str, dict[str, str]] = {}
        self._mover = Mover(lambda: self._dir, pause=lambda tp: self._move_pause(tp),
                            adopt_config=lambda t, c: self._set_topic_overrides(self._dir, t, c))
        self._loader: threading.Thread | None = None
        if load_in_background:
            self._loader = threading.Thread(target=load, name=f"load-{self.path.name}",
                                            daemon=True)
            self._loader.start()
        else:
            load()

    @property
    def _dir(self) -> LogDir:
        if not self._loaded.wait(self._load_wait_s):
            raise DirectoryLoadingError(
                f"log directory {self.path} is still loading after {self._load_wait_s} s",
                directory=str(self.path), waited_s=self._load_wait_s)
        if self._load_error is not None:
            raise self._load_error
        assert self._dir_or_none is not None
        return self._dir_or_none

    # ---- partitions and topics ---------------------------------------------------------------
    def create_partition(self, topic: str, partition: int,
                         config: Mapping[str, Any] | None = None) -> PartitionStats:
        """Create ``topic``-``partition`` (or return the existing one). ``config`` holds the
        topic's overrides (Kafka topic keys); they are written to ``topic-configs.json`` before
        the log is created, and must equal the overrides already kept for the topic, if any.
        A topic name or partition number Kafka refuses raises ``InvalidTopicError`` before
        anything is written."""
        d = self._dir
        files.validate_topic(topic)
        partition = files.validate_partition(partition, topic)
        if config is not None:
            self._set_topic_overrides(d, topic, config)
        return partition_stats(d.get_or_create_log(topic, partition), None)

    def _set_topic_overrides(self, d: LogDir, topic: str, config: Mapping[str, Any]) -> None:
        overrides = {str(k): _text(v) for k, v in config.items()}
        resolved = self._default_config.with_overrides(overrides)   # validates before writing
        with self._config_lock:
            if self._overrides.get(topic, {}) == overrides:
                d.set_topic_config(topic, resolved)
                return
            if any(tp.topic == topic for tp in d.logs()):
                raise StorageError(f"topic {topic} already exists in {self.path} with other "
                                   f"settings {self._overrides.get(topic, {})}", topic=topic)
            updated = {**self._overrides, topic: overrides}
            TopicConfigsFile(self.path).write(updated)
            self._overrides = updated
            d.set_topic_config(topic, resolved)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """The topic overrides this directory keeps."""
        self._dir
        with self._config_lock:
            return {t: dict(o) for t, o in self._overrides.items()}

    def alter_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> dict[str, str]:
        """Replace the overrides of ``topic`` (Kafka's dynamic topic config, the whole set): they
        are checked first (``InvalidConfigError`` naming the key, nothing changed), written to
        ``topic-configs.json``, then applied to the live logs of the topic here
        (``LogDir.update_topic_config``), so a restart opens them with the new settings too.
        ``UnknownPartitionError`` when this directory holds no partition of ``topic``."""
        d = self._dir
        files.validate_topic(topic)
        new = {str(k): _text(v) for k, v in overrides.items()}
        resolved = self._default_config.with_overrides(new)   # validates before writing
        with self._config_lock:
            if not any(tp.topic == topic for tp in d.logs()):
                raise UnknownPartitionError(f"log directory {self.path} holds no partition of "
                                            f"topic {topic}", topic=topic, partition=None)
            updated = {**self._overrides, topic: new}
            TopicConfigsFile(self.path).write(updated)
            self._overrides = updated
            d.update_topic_config(topic, resolved)
        return new

    def describe_partitions(self, topic: str | None = None) -> list[PartitionDescription]:
        """Every partition here (of ``topic`` only, when given), in partition order."""
        d = self._dir
        with self._config_lock:
            overrides = {t: dict(o) for t, o in self._overrides.items()}
        return [describe_partition(lg, str(self.path), overrides.get(t, {}))
                for (t, _p), lg in sorted(d.logs().items())
                if topic is None or t == topic]

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Kafka's asyncDelete of one partition; the topic's overrides go when its last partition
        in this directory does."""
        return self.delete_partitions(topic, [partition]) == 1

    # ---- many partitions in one call (a topic of 10,000 partitions is one call per node) -----
    def create_partitions(self, topic: str, partitions: Iterable[int],
                          config: Mapping[str, Any] | None = None) -> int:
        """``create_partition`` of every partition of ``partitions`` (existing ones are kept);
        returns how many this directory holds of them. A failure stops the batch: the partitions
        created before it stay (the caller deletes them, see ``TopicMetadata.create_topic``)."""
        d = self._dir
        files.validate_topic(topic)
        numbers = [files.validate_partition(p, topic) for p in partitions]
        if config is not None:
            self._set_topic_overrides(d, topic, config)
        return d.create_logs(topic, numbers)

    def delete_partitions(self, topic: str, partitions: Iterable[int]) -> int:
        """``delete_partition`` of many partitions, the checkpoints rewritten once; returns how
        many were deleted. Once this directory holds no partition of ``topic`` its overrides go,
        and so does its entry in ``topic-deletions.json`` (``mark_topic_deleting``)."""
        d = self._dir
        removed = len(d.delete_logs(topic, partitions))
        with self._config_lock:
            if any(tp.topic == topic for tp in d.logs()):
                return removed
            if topic in self._overrides:
                updated = {t: o for t, o in self._overrides.items() if t != topic}
                TopicConfigsFile(self.path).write(updated)
                self._overrides = updated
                d.drop_topic_config(topic)
            deletions = TopicDeletionsFile(self.path)
            pending = deletions.read()
            if topic in pending:
                deletions.write(pending - {topic})
        return removed

    def mark_topic_deleting(self, topic: str) -> None:
        """Record, durably, that ``topic`` is being deleted, before any of its partitions here is:
        ``topic_deletions`` names it until ``delete_partitions`` removed the last one, so a
        delete interrupted by a crash or a stop is finished after the restart."""
        self._dir
        files.validate_topic(topic)
        with self._config_lock:
            deletions = TopicDeletionsFile(self.path)
            pending = deletions.read()
            if topic not in pending:
                deletions.write(pending | {topic})

    def topic_deletions(self) -> list[str]:
        """The topics whose deletion this directory accepted and has not finished."""
        self._dir
        with self._config_lock:
            return sorted(TopicDeletionsFile(self.path).read())

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions held; for an offline directory, those whose directories are on disk
        (so a coordinator that restarts meanwhile still routes them here, and a producer gets
        this directory's ``LogDirOfflineError`` instead of an unknown partition)."""
        try:
            return sorted(tuple(key) for key in self._dir.logs())
        except LogDirOfflineError:
            held = _partition_dirs_on_disk(self.path)
            if held is None:
                raise
            return held

    def info(self) -> dict[str, Any]:
        return {"log_dir": str(self.path), "host": self.host, "pid": os.getpid()}

    def ping(self) -> str:
        return str(self.path)

    # ---- data --------------------------------------------------------------------------------
    def append_batch(self, topic: str, partition: int, data: bytes) -> LogAppendInfo:
        """Append producer-encoded v2 batches to an existing partition."""
        with self._served(topic, partition):
            info = self._dir.log(topic, partition).append_batch(data)
        self._appended(topic, partition, len(data), info)
        return info

    def append_batches(self, items: Iterable[tuple[str, int, bytes]],
                       flush: bool = False) -> list[LogAppendInfo]:
        """Append several partitions' batches in one call, in order; with ``flush`` every
        partition written is flushed before returning (the acknowledgement then means durable).
        The first failure raises: earlier items stay appended."""
        d = self._dir
        infos = []
        written = {}
        for topic, partition, data in items:
            with self._served(topic, partition):
                target = d.log(topic, partition)
                infos.append(target.append_batch(data))
            self._appended(topic, partition, len(data), infos[-1])
            written[(topic, partition)] = target
        if flush:
            for target in written.values():
                target.flush()
        return infos

    def read_raw(self, topic: str, partition: int, offset: int,
                 max_bytes: int = DEFAULT_FETCH_BYTES) -> FetchData | None:
        with self._served(topic, partition):
            return self._dir.log(topic, partition).read_raw(offset, max_bytes)

    def flush(self, topic: str, partition: int) -> int:
        """Flush one partition; returns its recovery point."""
        target = self._dir.log(topic, partition)
        target.flush()
        return target.recovery_point

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset)."""
        target = self._dir.log(topic, partition)
        return target.log_start_offset, target.log_end_offset

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords for one partition: raise the log start offset to
        ``before_offset`` (-1 means the high watermark) and checkpoint it; the segments below go
        at the next retention check. Returns the log start offset after the call (Kafka's low
        watermark; unchanged when ``before_offset`` is below it).

        ``OffsetOutOfRangeError`` for an offset above the log end or negative other than -1,
        ``PolicyViolationError`` when ``cleanup.policy`` does not include delete; either way
        nothing changes."""
        target = self._dir.log(topic, partition)
        offset = files.validate_offset(before_offset, "before_offset", partition=target.name,
                                       minimum=None)
        if not target.config.delete:
            raise PolicyViolationError(
                f"{target.name}: records cannot be deleted, cleanup.policy="
                f"{target.config.cleanup_policy} does not include delete", topic=topic,
                partition=partition, cleanup_policy=target.config.cleanup_policy)
        if offset == -1:
            offset = target.high_watermark
        if offset < 0:
            raise OffsetOutOfRangeError(
                f"{target.name}: cannot delete records before offset {offset} (an offset >= 0, "
                "or -1 for the high watermark)", partition=target.name, offset=offset)
        if target.maybe_increment_log_start_offset(offset):
            self._dir.checkpoint_log_start_offsets()
        return target.log_start_offset

    def list_offset(self, topic: str, partition: int,
                    timestamp: int) -> tuple[int, int | None] | None:
        """Kafka's ListOffsets for one partition: ``timestamp`` -2 (earliest) gives the log
        start offset, -1 (latest) the high watermark, a time in ms >= 0 the first offset whose
        record has a timestamp >= it, with that timestamp (``Log.offset_for_timestamp``), or None
        when no record is that recent. Returns ``(offset, timestamp or None)``."""
        target = self._dir.log(topic, partition)
        ts = files.validate_offset(timestamp, "timestamp", partition=target.name, minimum=-2)
        if ts == EARLIEST_TIMESTAMP:
            return target.log_start_offset, None
        if ts == LATEST_TIMESTAMP:
            return target.high_watermark, None
        return target.offset_for_timestamp(ts)

    def roll(self, topic: str, partition: int) -> int:
        """Roll the active segment if it holds anything; returns the new active base offset."""
        target = self._dir.log(topic, partition)
        if target.active_segment.size > 0:
            target.roll()
        return target.active_segment.base_offset

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """Kafka's LogManager.truncateTo for one partition: cleaning is aborted and paused while
        segments below the active one go, and the cleaner checkpoint is lowered to the new end."""
        d = self._dir
        target = d.log(topic, partition)
        tp = TopicPartition(topic, partition)
        if offset >= target.active_segment.base_offset:
            return target.truncate_to(offset)
        with d.pause_cleaning(tp):
            changed = target.truncate_to(offset)
            try:
                d.update_cleaner_offsets(
                    CheckpointChange(lower={tp: target.active_segment.base_offset}))
            except CheckpointError as err:   # unreadable: left as it is, as at load
                log.warning("could not lower the cleaner checkpoint of %s: %s", tp, err)
        return changed

    # ---- transactions (the coordinator's markers, read_committed) ----------------------------
    def write_txn_markers(self, markers: Iterable[tuple[str, int, int, int, int, int]]
                          ) -> list[tuple[str, int]]:
        """Append end-of-transaction markers as the transaction coordinator (Kafka's
        WriteTxnMarkers, ``origin="coordinator"``): each item is ``(topic, partition, producer
        id, producer epoch, control type (0 abort, 1 commit), coordinator epoch)``; then flush
        every partition written, so a marker acknowledged is durable. A partition this directory
        no longer holds is skipped (deleted meanwhile). Returns the partitions written."""
        d = self._dir
        written: dict[tuple[str, int], Any] = {}
        for topic, partition, producer_id, epoch, control, coordinator_epoch in markers:
            target = d.get_log(topic, partition)
            if target is None:
                log.info("no partition %s-%d for a marker of producer %d: skipped", topic,
                         partition, producer_id)
                continue
            target.append_end_txn_marker(ControlType(control), producer_id=producer_id,
                                         producer_epoch=epoch,
                                         coordinator_epoch=coordinator_epoch)
            written[(topic, partition)] = target
        for target in written.values():
            target.flush()
        return sorted(written)

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """Kafka's LSO: the first offset of the earliest open transaction, else the log end."""
        return self._dir.log(topic, partition).last_stable_offset

    def read_records(self, topic: str, partition: int, offset: int, max_offset: int | None = None,
                     isolation: str = READ_UNCOMMITTED, max_records: int = 10_000
                     ) -> list[Record]:
        """Up to ``max_records`` data records from ``offset`` (``Log.read``: control records
        skipped; with ``isolation="read_committed"`` up to the LSO, aborted batches skipped)."""
        target = self._dir.log(topic, partition)
        return list(itertools.islice(target.read(max(offset, target.log_start_offset),
                                                 max_offset, isolation=isolation), max_records))

    # ---- cleaning by another process ---------------------------------------------------------
    def cleaning_snapshots(self) -> list[LogSnapshot]:
        """Snapshots of every log whose ``cleanup.policy`` includes compact."""
        return [snapshot_log(lg) for lg in self._dir.logs().values() if lg.config.compact]

    def snapshot(self, topic: str, partition: int) -> LogSnapshot:
        return snapshot_log(self._dir.log(topic, partition))

    def swap_cleaned(self, topic: str, partition: int, cleaned_base: int,
                     old_bases: list[int] | list[SegmentIdentity]) -> None:
        """Swap in ``<cleaned_base>.log.cleaned`` written by a cleaner worker in place of the
        segments it was cleaned from, given as their identities when the cleaner read them (or
        bare base offsets). ``Log.replace_cleaned`` refuses the swap, and deletes the cleaned
        files, when the log changed meanwhile: ``SegmentsChangedError`` when one of them was
        truncated or replaced since, e.g. by a truncation done while the coordinator was
        unreachable and cleaning could not be paused."""
        target = self._dir.log(topic, partition)
        if not files.log_file(target.dir, cleaned_base, files.CLEANED_SUFFIX).exists():
            raise StorageError(f"{target.name}: no cleaned segment {cleaned_base} to swap in",
                               partition=target.name, offset=cleaned_base)
        target.replace_cleaned(cleaned_base, old_bases)

    def remove_cleaned_files(self, topic: str | None = None,
                             partition: int | None = None) -> int:
        """Delete the ``.cleaned`` files a dead cleaner left in one partition (or in every
        partition). Only call it when no cleaner works there. Returns how many went."""
        d = self._dir
        logs = d.logs()
        targets = [lg for (t, p), lg in logs.items()
                   if topic is None or (t == topic and (partition is None or p == partition))]
        removed = 0
        for target in targets:
            for name in os.listdir(target.dir):
                if name.endswith(files.CLEANED_SUFFIX):
                    (target.dir / name).unlink(missing_ok=True)
                    removed += 1
        if removed:
            log.info("removed %d stale .cleaned files in %s", removed, self.path)
        return removed

    def read_cleaner_checkpoint(self) -> dict[TopicPartition, int]:
        """``FileNotFoundError`` when there is none yet (see ``LogDir.read_cleaner_offsets``)."""
        return self._dir.read_cleaner_offsets()

    def update_cleaner_checkpoint(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        """Apply a cleaner manager's change to the ``cleaner-offset-checkpoint`` in one step (see
        ``LogDir.update_cleaner_offsets``); returns the entries written."""
        return self._dir.update_cleaner_offsets(change)

    def delete_old_segments(self, partitions: Iterable[tuple[str, int]]) -> int:
        """Retention of the given (compacted) logs, which the cleaner manager runs; partitions
        gone meanwhile are skipped. Returns segments deleted."""
        d = self._dir
        deleted = 0
        for topic, partition in partitions:
            target = d.get_log(topic, partition)
            if target is not None:
                deleted += target.delete_old_segments()
        return deleted

    # ---- moves between directories (node.move, node.mover) ------------------------------------
    @contextmanager
    def _served(self, topic: str, partition: int) -> Iterator[None]:
        """A call that raced a move of its partition away (the log was renamed under it)
        fails with ``PartitionMovedError``, never with the closed log's error."""
        try:
            yield
        except PartitionMovedError:
            raise
        except StorageError:
            d = self._dir_or_none
            if d is not None:
                d.raise_if_moved(topic, partition)
            raise

    def append_batches_or_moved(self, items: Iterable[tuple[str, int, bytes]],
                                flush: bool = False) -> list[LogAppendInfo | StorageError]:
        """``append_batches`` for a client that follows moves: an item whose partition this
        directory does not serve (``PartitionMovedError``: moved away; ``UnknownPartitionError``:
        not here, e.g. still moving in) is not appended, and its error stands in its place in
        the result; so does every later item of that partition in the call, so a partition's
        batches never land out of order. Other errors raise as in ``append_batches``."""
        d = self._dir
        results: list[LogAppendInfo | StorageError] = []
        skipped: dict[tuple[str, int], StorageError] = {}
        written = {}
        for topic, partition, data in items:
            key = (topic, partition)
            if key in skipped:
                results.append(skipped[key])
                continue
            try:
                with self._served(topic, partition):
                    target = d.log(topic, partition)
                    info = target.append_batch(data)
                results.append(info)
                self._appended(topic, partition, len(data), info)
                written[key] = target
            except (PartitionMovedError, UnknownPartitionError) as err:
                if isinstance(err, UnknownPartitionError) and self._mover.moving_in(
                        topic, partition):
                    err = PartitionMovedError(
                        f"partition {topic}-{partition} is moving into {self.path} and is "
                        "not served yet: try again", topic=topic, partition=partition,
                        target_dir=str(self.path))
                skipped[key] = err
                results.append(err)
        if flush:
            for target in written.values():
                target.flush()
        return results

    def move_source(self, topic: str, partition: int) -> SourceSnapshot:
        """The source end of a move: where the partition's files are, how far they reach, and
        the topic's overrides (the target keeps them too, so the log moves with its config)."""
        snapshot = source_snapshot_of(self._dir, topic, partition)
        with self._config_lock:
            overrides = dict(self._overrides.get(topic, {}))
        return dataclasses.replace(snapshot, topic_config=overrides)

    def move_switch_out(self, topic: str, partition: int, future_dir: str, unique: str,
                        target_dir: str, record: CopyRecord) -> SwitchResult:
        """The source end's switch (``node.mover.switch_out``): after it this directory
        answers ``PartitionMovedError`` for the partition."""
        return switch_out(self._dir, topic, partition, Path(future_dir), unique, target_dir,
                          record)

    def move_in(self, topic: str, partition: int, source_dir: str,
                source: MoveSource | None = None) -> MoveResult:
        """Move ``topic``-``partition`` from ``source_dir`` into this directory; returns when
        this directory serves it (``node.mover.Mover.move_in``). Without ``source`` the source
        node is found by ``_move_source``."""
        self._dir
        return self._mover.move_in(topic, partition, source_dir,
                                   source or self._move_source(source_dir))

    def _move_pause(self, tp: TopicPartition) -> AbstractContextManager[object]:
        """Held for a whole move into this directory: with ``cleaning_pauses`` the pause of the
        partition's cleaning has the reason ``move``."""
        if self._cleaning_pauses is not None:
            return self._held_pause(tp, "move")
        return self._dir.pause_cleaning(tp)

    def _move_source(self, source_dir: str) -> MoveSource:
        """The node of ``source_dir`` (``move_sources``)."""
        if self._move_sources is not None:
            return self._move_sources(source_dir)
        raise MoveRefusedError(f"{self.path} knows no node serving {source_dir}",
                               source_dir=source_dir, reason="unknown-dir")

    def _held_pause(self, tp: TopicPartition, reason: str) -> AbstractContextManager[object]:
        """``cleaning_pauses.pause`` for a compacted partition; nothing to hold for the others
        (no cleaner touches them)."""
        loaded = self._dir_or_none
        if self._cleaning_pauses is None or loaded is None \
                or not loaded.config_for(tp.topic).compact:
            return nullcontext()
        return self._cleaning_pauses.pause(tp, reason)

    def _held_pauses(self, tps: list[TopicPartition]) -> AbstractContextManager[object]:
        """``cleaning_pauses.pause_many`` of the compacted partitions of ``tps``."""
        loaded = self._dir_or_none
        compacted = [] if self._cleaning_pauses is None or loaded is None else \
            [tp for tp in tps if loaded.config_for(tp.topic).compact]
        if not compacted:
            return nullcontext()
        return self._cleaning_pauses.pause_many(compacted)

    def _appended(self, topic: str, partition: int, size: int, info: LogAppendInfo) -> None:
        if self._observer is not None:
            self._observer.appended(topic, partition, size, info.records_count)

    def move_status(self) -> list[MoveStatus]:
        """The moves into this directory in progress."""
        return self._mover.status()

    # ---- directory ---------------------------------------------------------------------------
    def stats(self) -> LogDirStats:
        """A snapshot; also answers for an offline directory, and for one whose load failed
        (then ``offline_reason`` holds the load error)."""
        if self._loaded.is_set() and self._load_error is not None:
            stats = _failed_load_stats(str(self.path), self._load_error)
        else:
            stats = self._dir.stats()
        if self._observer is not None:
            self._observer.stats_taken(stats)
        return stats

    def load_progress(self) -> LoadProgress | None:
        """Answers while loading; None before the first report."""
        return self._last_progress

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set() and self._load_error is None

    @property
    def load_finished(self) -> bool:
        """Whether the load has ended, successfully or not (then ``stats`` says why)."""
        return self._loaded.is_set()

    def checkpoint(self) -> None:
        self._dir.checkpoint()

    def cleanup_logs(self) -> int:
        return self._dir.cleanup_logs()

    def close(self, broker_epoch: int = -1) -> bool:
        """Close the directory; True only when it was shut down cleanly (its
        ``.kafka_cleanshutdown`` marker written: the next start recovers nothing). An offline
        directory, one whose load failed or that skipped a partition closes without it."""
        if self._observer is not None:
            self._observer.closed()
        self._loaded.wait()
        if self._dir_or_none is not None:
            self._dir_or_none.close(broker_epoch)
        if self._loader is not None:
            self._loader.join()
        return CleanShutdownFile(self.path).exists()

    @property
    def log_dir(self) -> LogDir:
        """The directory itself, for in-process callers (never sent through Ray)."""
        return self._dir


def _partition_dirs_on_disk(directory: Path) -> list[tuple[str, int]] | None:
    """The live partition directories (not ``-delete``/``-future``) found in ``directory``; None
    when it cannot be listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    held = []
    for name in names:
        try:
            parsed = files.parse_partition_dir(name)
        except StorageError:
            continue
        if not parsed.kind and (directory / name).is_dir():
            held.append((parsed.topic_partition.topic, parsed.topic_partition.partition))
    return sorted(held)


def _failed_load_stats(directory: str, error: BaseException) -> LogDirStats:
    total, used, free = disk_usage(directory)
    return LogDirStats(directory=directory, online=False,
                       offline_reason=f"loading failed: {type(error).__name__}: {error}",
                       closed=False, partitions_count=0, log_bytes=0, disk_total_bytes=total,
                       disk_used_bytes=used, disk_free_bytes=free, load_time_ms=0.0,
                       had_clean_shutdown=False, logs_to_delete=0, invalid_dirs=(),
                       task_failures=0, last_task_failure=None, partitions=(),
                       file_system=file_system_id(directory))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = ["CleaningPauses", "DirectoryLoadingError", "LogDirServer", "NodeObserver",
           "UnknownPartitionError"]
