"""``NodeService``: the body of a node actor: ``LogDirServer`` plus what only a cluster has —
metrics, and the pause of cleaning asked of the coordinator around truncation and deletion.

Built from plain values (the directory, Kafka property dicts) so Ray can rerun the constructor
after a restart: the directory is loaded again on a background thread, taking its lock back
(``node.lock``; a killed holder's lock is released by the kernel) and recovering from its
recovery points. ``load_progress`` answers meanwhile; other calls wait for the load.

With ``metrics_interval_s`` a loop of its own publishes the directory's gauges (sizes, dirty
ratios, free bytes, offline) at that interval, so they reach Prometheus without anyone asking for
stats; ``close`` stops it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Callable, Protocol

from cluster.handles import Handle
from cluster.loop import ControlLoop
from cluster.metrics import MetricsSink, NullMetrics
from node.config import LogDirConfig
from node.move import CopyRecord, SourceSnapshot
from node.mover import MoveSource, SwitchResult
from node.server import LogDirServer
from node.stats import LoadProgress, LogDirStats
from storage import files
from storage.checkpoint import CleanShutdownFile
from storage.config import LogConfig
from storage.errors import LogDirOfflineError, StorageError
from storage.files import TopicPartition
from storage.log import LogAppendInfo

logger = logging.getLogger(__name__)


class PauseLink(Protocol):
    """The coordinator's pause API as a node sees it."""

    def abort_and_pause(self, topic: str, partition: int, reason: str = "") -> bool:
        """True when the pause is held (and must be released with ``resume``). ``reason``
        names the node's work holding it (``move``); empty for truncation, deletion, retention."""
        ...

    def resume(self, topic: str, partition: int, reason: str = "") -> None: ...


class NodeService(LogDirServer):
    """Thread-safe as ``LogDirServer`` is."""

    def __init__(self, path: str | Path, *, topic_defaults: Mapping[str, str] | None = None,
                 log_dir_properties: Mapping[str, str] | None = None,
                 pause_link: PauseLink | None = None, metrics: MetricsSink | None = None,
                 host: str = "", load_in_background: bool = True,
                 start_tasks: bool = True, metrics_interval_s: float | None = None,
                 peer: Callable[[str], Handle] | None = None) -> None:
        self._metrics = metrics or NullMetrics()
        self._link = pause_link
        self._peer = peer
        self.host = host or socket.gethostname()
        self._tags = {"directory": os.path.abspath(path)}
        super().__init__(path, load_in_background=load_in_background,
                         default_config=LogConfig.from_properties(topic_defaults or {}),
                         config=LogDirConfig.from_properties(log_dir_properties or {}),
                         pause_cleaning=self._pause, on_load_progress=self._on_progress,
                         start_tasks=start_tasks)
        self._metrics_loop: ControlLoop | None = None
        if metrics_interval_s is not None:
            interval = metrics_interval_s

            def publish() -> float:
                if self._loaded.is_set():
                    self.stats()
                return interval
            self._metrics_loop = ControlLoop(f"strata-metrics-{self.path.name}", publish)
            self._metrics_loop.start()

    def close(self, broker_epoch: int = -1) -> bool:  # type: ignore[override]
        """``LogDirServer.close``; True only when the directory was shut down cleanly (its
        ``.kafka_cleanshutdown`` marker written: the next start recovers nothing). An offline
        directory, one whose load failed or that skipped a partition closes without it."""
        if self._metrics_loop is not None:
            self._metrics_loop.stop()
        super().close(broker_epoch)
        return CleanShutdownFile(self.path).exists()

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions held; for an offline directory, those whose directories are on disk
        (so a coordinator that restarts meanwhile still routes them here, and a producer gets
        this directory's ``LogDirOfflineError`` instead of an unknown partition)."""
        try:
            return super().partitions()
        except LogDirOfflineError:
            held = _partition_dirs_on_disk(self.path)
            if held is None:
                raise
            return held

    def info(self) -> dict[str, Any]:
        return {"log_dir": str(self.path), "host": self.host, "pid": os.getpid()}

    def ping(self) -> str:
        return str(self.path)

    # ---- data, counted -----------------------------------------------------------------------
    def append_batch(self, topic: str, partition: int, data: bytes) -> LogAppendInfo:
        info = super().append_batch(topic, partition, data)
        self._count(topic, partition, len(data), info.records_count)
        return info

    def append_batches(self, items: Iterable[tuple[str, int, bytes]],
                       flush: bool = False) -> list[LogAppendInfo]:
        items = list(items)
        infos = super().append_batches(items, flush)
        for (topic, partition, data), info in zip(items, infos):
            self._count(topic, partition, len(data), info.records_count)
        return infos

    def append_batches_or_moved(self, items: Iterable[tuple[str, int, bytes]],
                                flush: bool = False) -> list[LogAppendInfo | StorageError]:
        items = list(items)
        results = super().append_batches_or_moved(items, flush)
        for (topic, partition, data), info in zip(items, results):
            if isinstance(info, LogAppendInfo):
                self._count(topic, partition, len(data), info.records_count)
        return results

    # ---- moves: the source node is another actor ----------------------------------------------
    def _move_source(self, source_dir: str) -> MoveSource:
        if self._peer is None:
            return super()._move_source(source_dir)
        return RemoteMoveSource(self._peer(source_dir))

    def _move_pause(self, tp: TopicPartition) -> AbstractContextManager[object]:
        return self._pause(tp, reason="move")

    def _count(self, topic: str, partition: int, size: int, records: int) -> None:
        tags = {**self._tags, "topic": topic, "partition": partition}
        self._metrics.inc("strata_appended_bytes", size, tags)
        self._metrics.inc("strata_appended_records", records, tags)

    # ---- stats, published --------------------------------------------------------------------
    def stats(self) -> LogDirStats:
        """A snapshot; also answers for an offline directory, and for one that failed to load
        (then ``offline_reason`` holds the load error)."""
        if self._loaded.is_set() and self._load_error is not None:
            stats = _failed_load_stats(str(self.path), self._load_error)
        else:
            stats = super().stats()
        m = self._metrics
        m.set("strata_log_dir_offline", 0.0 if stats.online else 1.0, self._tags)
        m.set("strata_log_dir_free_bytes", stats.disk_free_bytes, self._tags)
        for p in stats.partitions:
            tags = {**self._tags, "topic": p.topic, "partition": p.partition}
            m.set("strata_log_size_bytes", p.size_bytes, tags)
            m.set("strata_dirty_ratio", p.dirty_ratio, tags)
        return stats

    def _on_progress(self, progress: LoadProgress) -> None:
        self._metrics.set("strata_recovery_remaining_logs", progress.remaining_logs, self._tags)
        self._metrics.set("strata_recovery_remaining_segments", progress.remaining_segments,
                          self._tags)

    # ---- cleaning pauses ---------------------------------------------------------------------
    @contextmanager
    def _pause(self, tp: TopicPartition, reason: str = "") -> Iterator[None]:
        link = self._link
        loaded = self._dir_or_none
        compact = loaded is not None and loaded.config_for(tp.topic).compact
        held = False
        if link is not None and compact:
            try:
                held = (link.abort_and_pause(tp.topic, tp.partition, reason) if reason
                        else link.abort_and_pause(tp.topic, tp.partition))
            except Exception:  # noqa: BLE001 - see below
                # No coordinator: no clean can be running. A clean started by a coordinator that
                # is now unreachable fails at its swap (the owner checks the segments), never
                # half-applied.
                logger.warning("cannot pause cleaning of %s; going on without", tp, exc_info=True)
        try:
            yield
        finally:
            if held and link is not None:
                try:
                    if reason:
                        link.resume(tp.topic, tp.partition, reason)
                    else:
                        link.resume(tp.topic, tp.partition)
                except Exception:  # noqa: BLE001 - a restarted coordinator holds no pause
                    logger.warning("cannot resume cleaning of %s", tp, exc_info=True)


class RemoteMoveSource:
    """``node.mover.MoveSource`` over the node actor of the source directory. The switch may
    wait for the coordinator to pause cleaning and holds appends while it copies; a dead
    source surfaces as ``ActorUnavailableError`` and the target settles the move."""

    def __init__(self, handle: Handle, timeout_s: float = 600.0) -> None:
        self._handle = handle
        self._timeout = timeout_s

    def move_source(self, topic: str, partition: int) -> SourceSnapshot:
        return self._handle.call("move_source", topic, partition, timeout=60)

    def move_switch_out(self, topic: str, partition: int, future_dir: str, unique: str,
                        target_dir: str, record: CopyRecord) -> SwitchResult:
        return self._handle.call("move_switch_out", topic, partition, future_dir, unique,
                                 target_dir, record, timeout=self._timeout)


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
    from node.stats import disk_usage, file_system_id

    total, used, free = disk_usage(directory)
    return LogDirStats(directory=directory, online=False,
                       offline_reason=f"loading failed: {type(error).__name__}: {error}",
                       closed=False, partitions_count=0, log_bytes=0, disk_total_bytes=total,
                       disk_used_bytes=used, disk_free_bytes=free, load_time_ms=0.0,
                       had_clean_shutdown=False, logs_to_delete=0, invalid_dirs=(),
                       task_failures=0, last_task_failure=None, partitions=(),
                       file_system=file_system_id(directory))
