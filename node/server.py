"""``LogDirServer``: the body of a node actor, the only one (STYLE.md P10, Ray Serve's plain-class
actors): ``cluster.runtime.actors`` binds it to Ray and gives it the cluster's parts through three
seams, ``observer`` (metrics, ``NodeObserver``), ``cleaning_pauses`` (pauses held by the
coordinator, ``CleaningPauses``) and ``move_sources`` (the other node actors, for a move).

A thin adapter over ``LogDir``: every method takes and returns plain, picklable values (topic and
partition instead of ``Log`` objects, bytes, frozen dataclasses) and forwards to the directory.
Its public methods are the node actor's RPC surface; their bodies live with their concern:
``node.opening`` (loading, possibly in the background), ``node.topic_admin`` (topic overrides and
pending deletions), ``node.appends``, ``node.partition_ops`` (delete records, list offsets,
truncation, transaction markers), ``node.cleaning_calls``, ``node.mover`` (moves) and
``node.seams`` (the protocols of the seams).
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
import os
import socket
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Callable

from cleaner.checkpoints import CheckpointChange
from node import appends, cleaning_calls, partition_ops
from node.cluster_dirs import DirIdentity, KnownDir, read_cluster_dirs, read_identity, \
    write_cluster_dirs
from node.errors import MoveRefusedError, UnknownPartitionError
from node.logdir import LogDir
from node.meta_properties import MetaProperties, write_meta_properties
from node.move import CopyRecord, SourceSnapshot
from node.mover import MoveResult, MoveSource, MoveStatus, Mover, SwitchResult, \
    source_snapshot_of, switch_out
from node.opening import DEFAULT_LOAD_WAIT_S, DirectoryLoadingError, OpeningDir
from node.seams import CleaningPauses, NodeObserver
from node.snapshot import LogSnapshot, snapshot_log
from node.stats import LoadProgress, LogDirStats, PartitionDescription, PartitionStats, \
    partition_stats
from node.topic_admin import TopicAdmin
from storage import files
from storage.config import LogConfig
from storage.checkpoint import CleanShutdownFile
from storage.errors import LogDirOfflineError, StorageError
from storage.files import TopicPartition
from storage.log import DEFAULT_FETCH_BYTES, READ_UNCOMMITTED, FetchData, LogAppendInfo
from storage.records import Record
from storage.segment import SegmentIdentity

EARLIEST_TIMESTAMP = partition_ops.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = partition_ops.LATEST_TIMESTAMP
MAX_TIMESTAMP = partition_ops.MAX_TIMESTAMP


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
        self._opening = OpeningDir(self.path, load_wait_s)
        self._topics = TopicAdmin(self.path,
                                  open_kwargs.get("default_config") or LogConfig())
        user_callback = open_kwargs.pop("on_load_progress", None)

        def on_progress(progress: LoadProgress) -> None:
            self._opening.report(progress)
            if observer is not None:
                observer.load_progress(progress)
            if user_callback is not None:
                user_callback(progress)

        def open_dir() -> LogDir:
            self.path.mkdir(parents=True, exist_ok=True)
            found, invalid = self._topics.load()
            configs: dict[str, Any] = dict(found)
            configs.update(open_kwargs.pop("topic_configs", None) or {})
            return LogDir.open(self.path, on_load_progress=on_progress, topic_configs=configs,
                               invalid_topics={t: e for t, e in invalid.items()
                                               if t not in configs}, **open_kwargs)

        self._marker_writers: dict[str, partition_ops.MarkerWriter] = {}
        self._mover = Mover(lambda: self._dir, pause=lambda tp: self._move_pause(tp),
                            adopt_config=lambda t, c: self._topics.set(self._dir, t, c))
        self._opening.start(open_dir, load_in_background)

    @property
    def _dir(self) -> LogDir:
        return self._opening.wait()

    # ---- partitions and topics (node.topic_admin) --------------------------------------------
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
            self._topics.set(d, topic, config)
        return partition_stats(d.get_or_create_log(topic, partition), None)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """The topic overrides this directory keeps."""
        self._dir
        return self._topics.all()

    def alter_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> dict[str, str]:
        """Replace the overrides of ``topic`` (Kafka's dynamic topic config, the whole set): they
        are checked first (``InvalidConfigError`` naming the key, nothing changed), written to
        ``topic-configs.json``, then applied to the live logs of the topic here
        (``LogDir.update_topic_config``), so a restart opens them with the new settings too.
        ``UnknownPartitionError`` when this directory holds no partition of ``topic``."""
        return self._topics.alter(self._dir, topic, overrides)

    def describe_partitions(self, topic: str | None = None) -> list[PartitionDescription]:
        """Every partition here (of ``topic`` only, when given), in partition order."""
        return self._topics.describe(self._dir, topic)

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
            self._topics.set(d, topic, config)
        return d.create_logs(topic, numbers)

    def delete_partitions(self, topic: str, partitions: Iterable[int]) -> int:
        """``delete_partition`` of many partitions, the checkpoints rewritten once; returns how
        many were deleted. Once this directory holds no partition of ``topic`` its overrides go,
        and so does its entry in ``topic-deletions.json`` (``mark_topic_deleting``)."""
        d = self._dir
        removed = len(d.delete_logs(topic, partitions))
        self._topics.forget_if_gone(d, topic)
        return removed

    def mark_topic_deleting(self, topic: str) -> None:
        """Record, durably, that ``topic`` is being deleted, before any of its partitions here is:
        ``topic_deletions`` names it until ``delete_partitions`` removed the last one, so a
        delete interrupted by a crash or a stop is finished after the restart."""
        self._dir
        self._topics.mark_deleting(topic)

    def topic_deletions(self) -> list[str]:
        """The topics whose deletion this directory accepted and has not finished."""
        self._dir
        return self._topics.deletions()

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions held; for an offline directory, those whose directories are on disk
        (so a coordinator that restarts meanwhile still routes them here, and a producer gets
        this directory's ``LogDirOfflineError`` instead of an unknown partition)."""
        try:
            return sorted(tuple(key) for key in self._dir.logs())
        except LogDirOfflineError:
            held = partition_ops.partition_dirs_on_disk(self.path)
            if held is None:
                raise
            return held

    def info(self) -> dict[str, Any]:
        return {"log_dir": str(self.path), "host": self.host, "pid": os.getpid()}

    # ---- identity (node.meta_properties, node.cluster_dirs) ----------------------------------
    def identity(self) -> DirIdentity:
        """The directory's ``meta.properties`` and ``cluster-log-dirs``, read now, without
        waiting for the load (``InvalidMetaPropertiesError``/``CheckpointError`` for a malformed
        one)."""
        return read_identity(self.path)

    def write_identity(self, meta: MetaProperties | None,
                       known: tuple[KnownDir, ...]) -> None:
        """Write ``meta`` (when given) and ``known`` into the directory, each atomically; waits
        for the load, so the directory's lock is held."""
        self._dir
        if meta is not None:
            write_meta_properties(self.path, meta)
        if read_cluster_dirs(self.path) != tuple(sorted(known, key=lambda k: k.node_id)):
            write_cluster_dirs(self.path, known)

    def ping(self) -> str:
        return str(self.path)

    # ---- data (node.appends, node.partition_ops) ---------------------------------------------
    def append_batch(self, topic: str, partition: int, data: bytes) -> LogAppendInfo:
        """Append producer-encoded v2 batches to an existing partition."""
        return appends.append_batch(self._dir, topic, partition, data, self._observer)

    def append_batches(self, items: Iterable[tuple[str, int, bytes]],
                       flush: bool = False) -> list[LogAppendInfo]:
        """Append several partitions' batches in one call, in order; with ``flush`` every
        partition written is flushed before returning (the acknowledgement then means durable).
        The first failure raises: earlier items stay appended."""
        return appends.append_batches(self._dir, items, flush, self._observer)

    def append_buffer_or_moved(self, spans: list[tuple[str, int, int, int]], buffer: Any,
                               flush: bool = False) -> list[LogAppendInfo | StorageError]:
        """``append_batches_or_moved`` of batches packed in one buffer (a ``uint8`` array, which
        Ray hands over from its object store without a copy): batch i is
        ``buffer[start:end]`` of ``spans[i] = (topic, partition, start, end)``."""
        return appends.append_buffer_or_moved(self._dir, spans, buffer, flush, self._observer,
                                              self._mover.moving_in)

    def read_raw(self, topic: str, partition: int, offset: int,
                 max_bytes: int = DEFAULT_FETCH_BYTES) -> FetchData | None:
        d = self._dir
        with appends.served(d, topic, partition):
            return d.log(topic, partition).read_raw(offset, max_bytes)

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
        return partition_ops.delete_records(self._dir, topic, partition, before_offset)

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation: str = "read_uncommitted") -> tuple[int, int | None] | None:
        """Kafka's ListOffsets for one partition: ``timestamp`` -2 (earliest) gives the log
        start offset, -1 (latest) the last fetchable offset (the high watermark, or the last
        stable offset when ``isolation`` is ``read_committed``), -3 (max timestamp, KIP-734) the
        first record with the largest timestamp, a time in ms >= 0 the first offset whose record
        has a timestamp >= it; the last two with that timestamp, and only below the last
        fetchable offset (``Log.fetch_offset_by_timestamp``), else None. Returns ``(offset,
        timestamp or None)``."""
        return partition_ops.list_offset(self._dir, topic, partition, timestamp, isolation)

    def last_sequence(self, topic: str, partition: int, producer_id: int) -> int:
        """The last sequence the partition holds of ``producer_id``, -1 for none (a retried
        idempotent writer skips what it already sent)."""
        return self._dir.log(topic, partition).last_sequence(producer_id)

    def roll(self, topic: str, partition: int) -> int:
        """Roll the active segment if it holds anything; returns the new active base offset."""
        return partition_ops.roll(self._dir, topic, partition)

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """Kafka's LogManager.truncateTo for one partition: cleaning is aborted and paused while
        segments below the active one go, and the cleaner checkpoint is lowered to the new end."""
        return partition_ops.truncate_to(self._dir, topic, partition, offset)

    # ---- transactions (the coordinator's markers, read_committed) ----------------------------
    def write_txn_markers(self, markers: Iterable[tuple[str, int, int, int, int, int]]
                          ) -> list[tuple[str, int]]:
        """Append end-of-transaction markers as the transaction coordinator (Kafka's
        WriteTxnMarkers, ``origin="coordinator"``): each item is ``(topic, partition, producer
        id, producer epoch, control type (0 abort, 1 commit), coordinator epoch)``; then flush
        every partition written, so a marker acknowledged is durable. A partition this directory
        no longer holds is skipped (deleted meanwhile). A topic with a marker writer
        (``route_txn_markers``) gets its markers through it. Returns the partitions written."""
        return partition_ops.write_txn_markers(self._dir, markers, self._marker_writers)

    def route_txn_markers(self, topic: str, writer: partition_ops.MarkerWriter) -> None:
        """The markers of ``topic`` go through ``writer`` from now on (the group coordinator
        appends those of ``__consumer_offsets`` and applies them to its pending offsets)."""
        self._marker_writers[topic] = writer

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """Kafka's LSO: the first offset of the earliest open transaction, else the log end."""
        return self._dir.log(topic, partition).last_stable_offset

    def read_records(self, topic: str, partition: int, offset: int, max_offset: int | None = None,
                     isolation: str = READ_UNCOMMITTED, max_records: int = 10_000
                     ) -> list[Record]:
        """Up to ``max_records`` data records from ``offset`` (``Log.read``: control records
        skipped; with ``isolation="read_committed"`` up to the LSO, aborted batches skipped)."""
        return partition_ops.read_records(self._dir, topic, partition, offset, max_offset,
                                          isolation, max_records)

    # ---- cleaning by another process (node.cleaning_calls) -----------------------------------
    def cleaning_snapshots(self) -> list[LogSnapshot]:
        """Snapshots of every log whose ``cleanup.policy`` includes compact."""
        return cleaning_calls.cleaning_snapshots(self._dir)

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
        cleaning_calls.swap_cleaned(self._dir, topic, partition, cleaned_base, old_bases)

    def remove_cleaned_files(self, topic: str | None = None,
                             partition: int | None = None) -> int:
        """Delete the ``.cleaned`` files a dead cleaner left in one partition (or in every
        partition). Only call it when no cleaner works there. Returns how many went."""
        return cleaning_calls.remove_cleaned_files(self._dir, topic, partition)

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
        return cleaning_calls.delete_old_segments(self._dir, partitions)

    # ---- moves between directories (node.move, node.mover) ------------------------------------
    def append_batches_or_moved(self, items: Iterable[tuple[str, int, bytes]],
                                flush: bool = False) -> list[LogAppendInfo | StorageError]:
        """``append_batches`` for a client that follows moves: an item whose partition this
        directory does not serve (``PartitionMovedError``: moved away; ``UnknownPartitionError``:
        not here, e.g. still moving in) is not appended, and its error stands in its place in
        the result; so does every later item of that partition in the call, so a partition's
        batches never land out of order. Other errors raise as in ``append_batches``."""
        return appends.append_batches_or_moved(self._dir, items, flush, self._observer,
                                               self._mover.moving_in)

    def append_records_or_moved(self, items: Iterable[tuple[str, int, list[Record]]],
                                flush: bool = False, batch_bytes: int = 1 << 20,
                                ) -> tuple[list[LogAppendInfo],
                                           list[tuple[tuple[str, int, bytes], StorageError]]]:
        """Records of several partitions encoded here (``encode_batches``, batches of at most
        ``batch_bytes`` and the log's ``segment.bytes``/``max.message.bytes``) and appended as
        ``append_batches_or_moved`` appends them: for a client that should not load the encoder
        (``Cluster.produce_records``). Returns the appends, and the batches not appended, each
        with the error that refused it (moved, or not here yet), to be sent where the partition
        lives now."""
        return appends.append_records_or_moved(self._dir, items, flush, batch_bytes,
                                               self._observer, self._mover.moving_in)

    def move_source(self, topic: str, partition: int) -> SourceSnapshot:
        """The source end of a move: where the partition's files are, how far they reach, and
        the topic's overrides (the target keeps them too, so the log moves with its config)."""
        snapshot = source_snapshot_of(self._dir, topic, partition)
        return dataclasses.replace(snapshot, topic_config=self._topics.of(topic))

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
        loaded = self._opening.opened
        if self._cleaning_pauses is None or loaded is None \
                or not loaded.may_be_compacted(tp.topic):
            return nullcontext()
        return self._cleaning_pauses.pause(tp, reason)

    def _held_pauses(self, tps: list[TopicPartition]) -> AbstractContextManager[object]:
        """``cleaning_pauses.pause_many`` of the compacted partitions of ``tps``."""
        loaded = self._opening.opened
        compacted = [] if self._cleaning_pauses is None or loaded is None else \
            [tp for tp in tps if loaded.may_be_compacted(tp.topic)]
        if not compacted:
            return nullcontext()
        return self._cleaning_pauses.pause_many(compacted)

    def move_status(self) -> list[MoveStatus]:
        """The moves into this directory in progress, then (once the directory is loaded) the
        copies a restart interrupted, kept to resume (phase ``interrupted``)."""
        moving = self._mover.status()
        loaded = self._opening.opened
        return moving if loaded is None else moving + self._mover.interrupted(loaded)

    # ---- directory (node.opening) ------------------------------------------------------------
    def stats(self) -> LogDirStats:
        """A snapshot; also answers for an offline directory, and for one whose load failed
        (then ``offline_reason`` holds the load error)."""
        stats = self._opening.failed_stats() if self._opening.failed else self._dir.stats()
        if self._observer is not None:
            self._observer.stats_taken(stats)
        return stats

    def load_progress(self) -> LoadProgress | None:
        """Answers while loading; None before the first report."""
        return self._opening.last_progress

    @property
    def loaded(self) -> bool:
        return self._opening.finished and not self._opening.failed

    @property
    def load_finished(self) -> bool:
        """Whether the load has ended, successfully or not (then ``stats`` says why)."""
        return self._opening.finished

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
        self._opening.close(broker_epoch)
        return CleanShutdownFile(self.path).exists()

    @property
    def log_dir(self) -> LogDir:
        """The directory itself, for in-process callers (never sent through Ray)."""
        return self._dir


__all__ = ["CleaningPauses", "DirectoryLoadingError", "LogDirServer", "NodeObserver",
           "UnknownPartitionError"]
