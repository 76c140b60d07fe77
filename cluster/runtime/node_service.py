"""The cluster's parts of a node actor, given to ``node.server.LogDirServer`` (the actor's body)
through its seams by ``cluster.runtime.actors``: ``NodeMetrics`` (its ``observer``: appended bytes
and records, directory gauges, recovery progress, published every few seconds by a loop of its own
so they reach Prometheus without anyone asking for stats), ``CoordinatorPauses`` (its
``cleaning_pauses``: the pause of cleaning asked of the coordinator around truncation, deletion,
retention and moves) and ``RemoteMoveSource`` (its ``move_sources``: the node actor of a move's
source directory).

The actor is built from plain values (the directory, Kafka property dicts) so Ray can rerun the
constructor after a restart: the directory is loaded again on a background thread, taking its
lock back (``node.lock``; a killed holder's lock is released by the kernel) and recovering from
its recovery points. ``load_progress`` answers meanwhile; other calls wait for the load.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable, Protocol

from cluster.handles import Handle
from cluster.loop import ControlLoop
from cluster.metrics.sink import MetricsSink
from node.move import CopyRecord, SourceSnapshot
from node.mover import SwitchResult
from node.stats import LoadProgress, LogDirStats
from storage.files import TopicPartition

logger = logging.getLogger(__name__)


class PauseLink(Protocol):
    """The coordinator's pause API as a node sees it."""

    def abort_and_pause(self, topic: str, partition: int, reason: str = "") -> bool:
        """True when the pause is held (and must be released with ``resume``). ``reason``
        names the node's work holding it (``move``); empty for truncation, deletion, retention."""
        ...

    def resume(self, topic: str, partition: int, reason: str = "") -> None: ...

    def abort_and_pause_many(self, partitions: list[tuple[str, int]]) -> bool:
        """``abort_and_pause`` of every partition of ``partitions`` in one call."""
        ...

    def resume_many(self, partitions: list[tuple[str, int]]) -> None: ...


class NodeMetrics:
    """``node.server.NodeObserver`` over a ``MetricsSink``, every series tagged with the
    directory. ``publish_every(stats, interval_s)`` starts a loop that takes the directory's
    stats at that interval (setting its gauges); ``closed`` stops it."""

    def __init__(self, path: str, metrics: MetricsSink) -> None:
        self._metrics = metrics
        self._tags = {"directory": os.path.abspath(path)}
        self._loop: ControlLoop | None = None

    def publish_every(self, stats: Callable[[], object], interval_s: float,
                      ready: Callable[[], bool]) -> None:
        def publish() -> float:
            if ready():
                stats()
            return interval_s
        self._loop = ControlLoop(f"strata-metrics-{os.path.basename(self._tags['directory'])}",
                                 publish)
        self._loop.start()

    def appended(self, topic: str, partition: int, size: int, records: int) -> None:
        tags = {**self._tags, "topic": topic, "partition": partition}
        self._metrics.inc("strata_appended_bytes", size, tags)
        self._metrics.inc("strata_appended_records", records, tags)

    def stats_taken(self, stats: LogDirStats) -> None:
        m = self._metrics
        m.set("strata_log_dir_offline", 0.0 if stats.online else 1.0, self._tags)
        m.set("strata_log_dir_free_bytes", stats.disk_free_bytes, self._tags)
        for p in stats.partitions:
            tags = {**self._tags, "topic": p.topic, "partition": p.partition}
            m.set("strata_log_size_bytes", p.size_bytes, tags)
            m.set("strata_log_start_offset", p.log_start_offset, tags)
            m.set("strata_log_end_offset", p.log_end_offset, tags)
            m.set("strata_uncleaned_ratio", p.dirty_ratio, tags)

    def load_progress(self, progress: LoadProgress) -> None:
        self._metrics.set("strata_recovery_remaining_logs", progress.remaining_logs, self._tags)
        self._metrics.set("strata_recovery_remaining_segments", progress.remaining_segments,
                          self._tags)

    def closed(self) -> None:
        if self._loop is not None:
            self._loop.stop()


class CoordinatorPauses:
    """``node.server.CleaningPauses`` through the coordinator (``PauseLink``). A coordinator that
    cannot be reached does not stop the node's work: no clean can be running without one, and a
    clean started by a coordinator that is now unreachable fails at its swap (the owner checks the
    segments), never half-applied."""

    def __init__(self, link: PauseLink) -> None:
        self._link = link

    @contextmanager
    def pause(self, tp: TopicPartition, reason: str) -> Iterator[None]:
        link = self._link
        held = False
        try:
            held = (link.abort_and_pause(tp.topic, tp.partition, reason) if reason
                    else link.abort_and_pause(tp.topic, tp.partition))
        except Exception:  # noqa: BLE001 - see the class docstring
            logger.warning("cannot pause cleaning of %s; going on without", tp, exc_info=True)
        try:
            yield
        finally:
            if held:
                try:
                    if reason:
                        link.resume(tp.topic, tp.partition, reason)
                    else:
                        link.resume(tp.topic, tp.partition)
                except Exception:  # noqa: BLE001 - a restarted coordinator holds no pause
                    logger.warning("cannot resume cleaning of %s", tp, exc_info=True)


    @contextmanager
    def pause_many(self, tps: list[TopicPartition]) -> Iterator[None]:
        """``pause`` of every partition of ``tps``, taken in one call and released in one."""
        link = self._link
        partitions = [(tp.topic, tp.partition) for tp in tps]
        held = False
        try:
            held = link.abort_and_pause_many(partitions)
        except Exception:  # noqa: BLE001 - see the class docstring
            logger.warning("cannot pause cleaning of %d partitions; going on without",
                           len(partitions), exc_info=True)
        try:
            yield
        finally:
            if held:
                try:
                    link.resume_many(partitions)
                except Exception:  # noqa: BLE001 - a restarted coordinator holds no pause
                    logger.warning("cannot resume cleaning of %d partitions", len(partitions),
                                   exc_info=True)


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
