"""``Coordinator``: the cleaning state of every partition of every directory (Kafka's
LogCleanerManager, one for the whole cluster) and the loop that hands the filthiest log to an idle
cleaner worker (Kafka's CleanerThread.doWork, split across processes).

Each round of the control loop (``run_once``):

1. start-up, once per node: make every worker idle (a previous coordinator may have left cleans
   running) and have each node remove ``.cleaned`` files left by dead cleaners;
2. collect finished cleans: success -> ``done_cleaning`` (the owning node writes the
   ``cleaner-offset-checkpoint``); abort -> ``done_cleaning`` without progress (an aborter is
   woken); a dead worker or a failed clean -> the node removes the partition's ``.cleaned`` files,
   the failure is counted (retried after ``log.cleaner.uncleanable.retry.backoff.ms``, uncleanable
   after ``log.cleaner.uncleanable.retries``) and the partition is free again;
3. poll every node for snapshots of its compacted logs (an offline directory is reported and
   skipped; an unreachable node is skipped this round);
4. give the filthiest log of each host to each idle worker of that host (a triggered partition
   first, whatever its dirty ratio);
5. every ``log.retention.check.interval.ms``: retention of the compacted logs (``deletable_logs``);
6. metrics.

Nodes call ``abort_and_pause`` / ``resume`` around truncation, deletion and retention: the running
clean of that partition is told to stop (the worker's flag, read at every chunk) and the call
returns once it has. After a restart the coordinator starts empty: checkpoints are read from the
nodes on demand, so cleaning resumes where the last clean stopped.

The pauses' bookkeeping (an operator's against a node's, named reasons, many at once) is
``cluster.pauses.PauseBook``; the gauges are ``cluster.coordinator_metrics``.

Thread-safe: the loop runs on its own thread; the API methods run on the actor's threads.
``_lock`` guards the slots and tables and is never held across a call to a node or worker.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cleaner.checkpoints import CheckpointChange
from cleaner.cleanable import LogToClean
from cleaner.cleaner import CleanResult
from cleaner.config import CleanerConfig
from cleaner.explain import CleaningStatus, Explanation
from cleaner.manager import CleanerManager, CleanerStateError
from cluster.errors import ActorUnavailableError, PartitionPausedError, UnknownTopicError
from cluster.handles import Handle
from cluster.loop import ControlLoop
from cluster.metrics import MetricsSink, NullMetrics
from cluster.coordinator_metrics import publish_cleaner_metrics
from cluster.pauses import PauseBook, pause_holders
from cluster.naming import abs_dir
from cluster.slots import CleanerSlot
from cluster.status import CleanerStatus, CleanSummary, UncleanableInfo
from cluster.worker import CleanAssignment
from node.snapshot import LogSnapshot
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import CheckpointError, LogCleaningAbortedError, LogDirOfflineError
from storage.files import TopicPartition

logger = logging.getLogger(__name__)

BUSY_POLL_S = 0.05
RECENT_CLEANS = 64


class _NodeCheckpoint:
    """The ``cleaner.checkpoints.CheckpointFileLike`` of a directory owned by a node actor."""

    def __init__(self, handle: Handle, timeout: float) -> None:
        self._handle = handle
        self._timeout = timeout

    def read(self) -> dict[TopicPartition, int]:
        return self._translate("read_cleaner_checkpoint")

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        return self._translate("update_cleaner_checkpoint", change)

    def _translate(self, method: str, *args: Any) -> Any:
        try:
            return self._handle.call(method, *args, timeout=self._timeout)
        except LogDirOfflineError as err:   # the manager's policy: OSError = directory failed
            raise OSError(f"{self._handle.name}: {err}") from err
        except ActorUnavailableError as err:   # transient: logged by the manager, not offline
            raise CheckpointError(f"{self._handle.name} unreachable: {err}") from err


class Coordinator:
    def __init__(self, nodes: Mapping[str, Handle], workers: Sequence[Handle],
                 config: CleanerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 metrics: MetricsSink | None = None,
                 retention_check_interval_ms: int = 300_000, metrics_interval_ms: int = 5_000,
                 call_timeout_s: float = 60.0) -> None:
        self.config = config or CleanerConfig()
        self._nodes = {abs_dir(d): h for d, h in nodes.items()}
        self._clock = clock
        self._metrics = metrics or NullMetrics()
        self._timeout = call_timeout_s
        self._retention_interval_ms = retention_check_interval_ms
        self._metrics_interval_ms = metrics_interval_ms
        self._manager = CleanerManager(
            [Path(d) for d in self._nodes], self.config, clock=clock,
            on_dir_failure=lambda d, e: self._mark_offline(str(d), str(e)),
            checkpoint_file=lambda d: _NodeCheckpoint(self._nodes[str(d)], call_timeout_s))
        self._lock = threading.Lock()
        self._slots = [CleanerSlot(i, h) for i, h in enumerate(workers)]
        self._snapshots: dict[TopicPartition, LogSnapshot] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._offline: dict[str, str] = {}
        self._pauses = PauseBook(self._manager, self._stop_cleans, call_timeout_s)
        self._unreachable: set[str] = set()
        self._needs_startup: set[str] = set(self._nodes)
        self._workers_reset = False
        self._forced: dict[TopicPartition, tuple[int, int]] = {}   # -> (ticket, polls then)
        self._tickets = itertools.count(1)
        self._requests_done: dict[TopicPartition, int] = {}
        self._polls = 0
        self._completed: dict[TopicPartition, int] = {}
        self._failed = 0
        self._recent: deque[CleanSummary] = deque(maxlen=RECENT_CLEANS)
        self._ids = itertools.count(1)
        self._last_retention_ms = clock.milliseconds()
        self._last_metrics_ms = 0
        self.loop = ControlLoop("strata-coordinator", self.run_once)

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.loop.start()

    def stop(self, abort_running: bool = True) -> None:
        """Stop the loop; with ``abort_running`` also stop the cleans in flight (the workers stay
        up; the next coordinator finds them idle)."""
        self.loop.stop()
        if abort_running:
            for slot in self._slots:
                try:
                    slot.handle.call("reset", 10.0, timeout=self._timeout)
                except Exception:  # noqa: BLE001 - best effort at shutdown
                    logger.warning("cannot reset cleaner %s", slot.handle.name, exc_info=True)

    @property
    def manager(self) -> CleanerManager:
        return self._manager

    # ---- the loop ----------------------------------------------------------------------------
    def run_once(self) -> float:
        """One round; returns the seconds to wait before the next."""
        now = self._clock.milliseconds()
        self._startup()
        self._collect(now)
        self._recover_workers()
        self._poll()
        started = self._assign(now) if self.config.enable_cleaner else 0
        if self.config.enable_cleaner and now - self._last_retention_ms >= \
                self._retention_interval_ms:
            self._last_retention_ms = now
            self._retention(now)
        if now - self._last_metrics_ms >= self._metrics_interval_ms:
            self._last_metrics_ms = now
            self._publish_metrics(now)
        with self._lock:
            busy = not all(s.idle for s in self._slots)
            requested = list(self._forced)
        # a requested clean of a paused partition waits for the resume, not in a busy loop
        busy = busy or any(self._manager.cleaning_state(tp) is None for tp in requested)
        if busy or started:
            return BUSY_POLL_S
        return self.config.backoff_ms / 1000.0

    def _startup(self) -> None:
        if not self._workers_reset:
            for slot in self._slots:
                try:
                    slot.handle.call("reset", self._timeout, timeout=self._timeout)
                except ActorUnavailableError:
                    with self._lock:
                        slot.lost()
            self._workers_reset = True
        for log_dir in sorted(self._needs_startup):
            try:
                self._nodes[log_dir].call("remove_cleaned_files", timeout=self._timeout)
            except LogDirOfflineError as err:
                self._mark_offline(log_dir, str(err))
            except ActorUnavailableError as err:
                logger.info("node of %s not reachable yet: %s", log_dir, err)
                continue
            self._needs_startup.discard(log_dir)

    def _collect(self, now: int) -> None:
        for slot in self._slots:
            if not slot.finished():
                continue
            assignment = slot.assignment
            assert assignment is not None and slot.pending is not None
            try:
                result = slot.pending.result(0)
            except BaseException as err:  # noqa: BLE001 - every failure is handled below
                self._clean_failed(slot, assignment, err, now)
            else:
                self._clean_done(slot, assignment, result, now)

    def _clean_done(self, slot: CleanerSlot, a: CleanAssignment, result: CleanResult,
                    now: int) -> None:
        tp = a.topic_partition
        self._manager.done_cleaning(tp, a.log_dir, result.next_dirty_offset)
        stats = result.stats
        with self._lock:
            self._completed[tp] = self._completed.get(tp, 0) + 1
            if slot.ticket:
                self._requests_done[tp] = max(self._requests_done.get(tp, 0), slot.ticket)
            self._recent.append(CleanSummary(
                topic=tp.topic, partition=tp.partition, log_dir=a.log_dir,
                cleaner_id=slot.index, outcome="cleaned",
                first_dirty_offset=a.first_dirty_offset,
                next_dirty_offset=result.next_dirty_offset, bytes_read=stats.bytes_read,
                bytes_written=stats.bytes_written, messages_read=stats.messages_read,
                messages_written=stats.messages_written, elapsed_secs=stats.elapsed_secs,
                error=None, finished_ms=now))
            slot.free()

    def _clean_failed(self, slot: CleanerSlot, a: CleanAssignment, err: BaseException,
                      now: int) -> None:
        tp = a.topic_partition
        text = f"{type(err).__name__}: {err}"
        if isinstance(err, LogCleaningAbortedError):
            outcome = "aborted"
        elif isinstance(err, LogDirOfflineError):
            outcome = "offline"
            self._mark_offline(a.log_dir, str(err))
        else:
            outcome = "cleaner died" if isinstance(err, ActorUnavailableError) else "failed"
            logger.warning("cleaning %s by cleaner %d failed: %s", tp, slot.index, text)
            self._remove_cleaned(a)
            self._manager.record_cleaning_failure(tp, a.log_dir, err, now)
        try:
            self._manager.done_cleaning(tp, a.log_dir, a.first_dirty_offset)
        except CleanerStateError:
            logger.warning("cleaning state of %s was reset meanwhile", tp, exc_info=True)
        with self._lock:
            if outcome != "aborted":
                self._failed += 1
            elif slot.ticket and tp not in self._forced:   # asked for: clean once unpaused
                self._forced[tp] = (slot.ticket, self._polls)
            self._recent.append(CleanSummary(
                topic=tp.topic, partition=tp.partition, log_dir=a.log_dir,
                cleaner_id=slot.index, outcome=outcome,
                first_dirty_offset=a.first_dirty_offset,
                next_dirty_offset=a.first_dirty_offset, bytes_read=0, bytes_written=0,
                messages_read=0, messages_written=0, elapsed_secs=0.0, error=text,
                finished_ms=now))
            if isinstance(err, ActorUnavailableError):
                slot.lost()
            else:
                slot.free()

    def _remove_cleaned(self, a: CleanAssignment) -> None:
        tp = a.topic_partition
        try:
            self._nodes[a.log_dir].call("remove_cleaned_files", tp.topic, tp.partition,
                                        timeout=self._timeout)
        except Exception as err:  # noqa: BLE001 - done again when the node is back
            logger.warning("cannot remove .cleaned files of %s now (%s); the node does it at the "
                           "next start-up round", tp, err)
            with self._lock:
                self._needs_startup.add(a.log_dir)

    def _recover_workers(self) -> None:
        with self._lock:
            for slot in self._slots:
                slot.poll_recovery()

    def _poll(self) -> None:
        with self._lock:
            skip = set(self._needs_startup)
        asked = {d: h.submit("cleaning_snapshots") for d, h in self._nodes.items()
                 if d not in skip}
        snapshots: dict[TopicPartition, LogSnapshot] = {}
        unreachable = set(skip)
        for log_dir, pending in asked.items():
            try:
                found = pending.result(self._timeout)
            except LogDirOfflineError as err:
                self._mark_offline(log_dir, str(err))
                continue
            except Exception as err:  # noqa: BLE001 - a node restarting; try next round
                logger.info("node of %s unreachable this round: %s", log_dir, err)
                unreachable.add(log_dir)
                continue
            if log_dir in self._offline:
                self._mark_online(log_dir)
            for snapshot in found:
                snapshots[snapshot.topic_partition] = snapshot
        with self._lock:
            self._snapshots = snapshots
            self._unreachable = unreachable
            self._polls += 1
            for tp, snap in snapshots.items():
                self._dir_of[tp] = abs_dir(snap.dir.parent)

    def _assign(self, now: int) -> int:
        started = 0
        for slot in self._slots:
            if not slot.idle:
                continue
            logs = self._logs_for(slot.handle.host)
            chosen, ticket = self._grab_forced(logs, now)
            if chosen is None:
                chosen = self._manager.grab_filthiest_compacted_log(logs, now)
            if chosen is None:
                continue
            tp = chosen.topic_partition
            snapshot = logs[tp]
            assignment = CleanAssignment(
                next(self._ids), tp, abs_dir(snapshot.dir.parent), str(snapshot.dir),
                snapshot.config, chosen.first_dirty_offset, chosen.first_uncleanable_offset)
            with self._lock:
                slot.assign(assignment, ticket)
            started += 1
            logger.debug("cleaner %d cleans %s [%d, %d)", slot.index, tp,
                         chosen.first_dirty_offset, chosen.first_uncleanable_offset)
        return started

    def _logs_for(self, host: str) -> dict[TopicPartition, LogSnapshot]:
        with self._lock:
            return {tp: s for tp, s in self._snapshots.items()
                    if not host or self._nodes[abs_dir(s.dir.parent)].host in ("", host)}

    def _grab_forced(self, logs: Mapping[TopicPartition, LogSnapshot],
                     now: int) -> tuple[LogToClean | None, int]:
        """A requested partition and the ticket it serves, chosen whatever its dirty ratio (a
        copy of its snapshot with ``min.cleanable.dirty.ratio`` 0 goes through the manager's
        selection, so every state rule still applies). Only a snapshot polled after the request
        is used, so a segment rolled just before the request is cleaned too. A request for a
        partition with nothing to clean, or no longer compacted or present, is done at once."""
        with self._lock:
            polls = self._polls
            forced = [(tp, ticket) for tp, (ticket, asked) in self._forced.items()
                      if asked < polls]
            known = set(self._snapshots)
        for tp, ticket in forced:
            if tp not in logs:
                if tp not in known:
                    logger.info("clean of %s requested, but it is not a compacted log here", tp)
                    self._request_done(tp, ticket)
                continue   # another host's log
            if self._manager.cleaning_state(tp) is not None:
                continue   # busy or paused: try again next round
            snapshot = logs[tp]
            eager = replace(snapshot, config=replace(snapshot.config,
                                                     min_cleanable_dirty_ratio=0.0))
            chosen = self._manager.grab_filthiest_compacted_log({tp: eager}, now,
                                                                update_stats=False)
            if chosen is not None:
                with self._lock:
                    if self._forced.get(tp, (0, 0))[0] == ticket:
                        del self._forced[tp]
                return chosen, ticket
            logger.info("clean of %s requested but nothing below its active segment is dirty", tp)
            self._request_done(tp, ticket)
        return None, 0

    def _request_done(self, tp: TopicPartition, ticket: int) -> None:
        with self._lock:
            if self._forced.get(tp, (0, 0))[0] == ticket:
                del self._forced[tp]
            self._requests_done[tp] = max(self._requests_done.get(tp, 0), ticket)

    def _retention(self, now: int) -> None:
        with self._lock:
            logs = dict(self._snapshots)
        chosen = self._manager.deletable_logs(logs, now)
        by_dir: dict[str, list[TopicPartition]] = {}
        for lg in chosen:
            by_dir.setdefault(abs_dir(lg.dir.parent), []).append(lg.topic_partition)
        try:
            for log_dir, tps in by_dir.items():
                try:
                    self._nodes[log_dir].call("delete_old_segments",
                                              [(tp.topic, tp.partition) for tp in tps],
                                              timeout=self._timeout)
                except Exception as err:  # noqa: BLE001 - one directory never stops the others
                    logger.warning("retention of compacted logs in %s failed: %s", log_dir, err)
        finally:
            self._manager.done_deleting([lg.topic_partition for lg in chosen])

    # ---- directories -------------------------------------------------------------------------
    def _mark_offline(self, log_dir: str, reason: str) -> None:
        log_dir = abs_dir(log_dir)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline[log_dir] = reason
        logger.error("log directory %s is offline: %s", log_dir, reason)
        self._manager.handle_log_dir_failure(log_dir)

    def _mark_online(self, log_dir: str) -> None:
        with self._lock:
            self._offline.pop(log_dir, None)
        self._manager.add_log_dir(log_dir)
        logger.info("log directory %s is online again", log_dir)

    # ---- API for nodes and clients -----------------------------------------------------------
    def abort_and_pause(self, topic: str, partition: int, timeout_s: float | None = None, *,
                        operator: bool = True) -> None:
        """Stop any clean of the partition and keep it from starting until ``resume``; an
        ``operator`` pause (``strata cleaner pause``, ``Cluster.pause_cleaning``) is counted
        apart from the node's own (``operator=False``)."""
        self._pauses.pause([TopicPartition(topic, partition)], timeout_s, operator=operator)

    def pause_many(self, partitions: Iterable[tuple[str, int]],
                   timeout_s: float | None = None) -> None:
        """A node's pause (``operator=False``) of every partition of ``partitions`` at once (a
        topic deletion): their cleans are told to stop together, then each abort is waited
        for."""
        self._pauses.pause([TopicPartition(t, p) for t, p in partitions], timeout_s,
                           operator=False)

    def resume_many(self, partitions: Iterable[tuple[str, int]]) -> list[bool]:
        """Release a node's pause of every partition of ``partitions`` (see ``resume``)."""
        return self._pauses.resume_node([TopicPartition(t, p) for t, p in partitions])

    def resume(self, topic: str, partition: int, *, operator: bool = True) -> bool:
        """Release one pause: with ``operator``, one an operator took; False (logged) when the
        operator holds none: the pauses of truncation, deletion, a directory move or retention
        are the node's to release, and a restarted coordinator forgot the operator's."""
        tp = TopicPartition(topic, partition)
        if not operator:
            return self._pauses.resume_node([tp])[0]
        return self._pauses.resume_operator(tp)

    def pause_for(self, topic: str, partition: int, reason: str,
                  timeout_s: float | None = None) -> None:
        """A node's pause (``operator=False``) held for a named ``reason`` (``move``: the
        partition is moving between directories), reported by ``pause_reasons``."""
        self._pauses.pause([TopicPartition(topic, partition)], timeout_s, operator=False,
                           reason=reason)

    def resume_for(self, topic: str, partition: int, reason: str) -> bool:
        """Release a pause ``pause_for`` took for ``reason``."""
        return self._pauses.resume_node([TopicPartition(topic, partition)], reason)[0]

    def pause_reasons(self, topic: str, partition: int) -> dict[str, int]:
        """The named reasons of the node pauses held on the partition, with their counts."""
        return self._pauses.reasons(TopicPartition(topic, partition))

    def pauses(self, topic: str, partition: int) -> tuple[int, int]:
        """(pauses an operator holds, all pauses held) of the partition's cleaning."""
        return self._pauses.held(TopicPartition(topic, partition))

    def _stop_cleans(self, tps: set[TopicPartition]) -> None:
        """Tell the workers cleaning any of ``tps`` to abort (``PauseBook`` waits for it)."""
        with self._lock:
            running = [(s.handle, s.assignment.assignment_id) for s in self._slots
                       if s.assignment is not None and s.assignment.topic_partition in tps]
        for handle, assignment_id in running:
            try:
                handle.call("abort", assignment_id, timeout=self._timeout)
            except ActorUnavailableError:
                pass   # a dead worker stops by itself; the loop collects it
        self.loop.wake()

    def trigger_clean(self, topic: str, partition: int) -> int:
        """Clean the partition as soon as a worker is free, whatever its dirty ratio. Returns its
        count of finished cleans before this one (see ``cleans_completed``)."""
        with self._lock:
            count = self._completed.get(TopicPartition(topic, partition), 0)
        self.request_clean(topic, partition)
        return count

    def request_clean(self, topic: str, partition: int) -> int:
        """``trigger_clean`` returning a ticket: ``clean_request_done`` says when a clean that
        started after this request (and saw every segment rolled before it) has finished. A clean
        already running when the request comes does not count."""
        tp = TopicPartition(topic, partition)
        operator, held = self.pauses(topic, partition)
        if held:
            raise PartitionPausedError(
                f"cleaning of {tp} is paused ({pause_holders(operator, held)}): no clean can "
                "start until it is resumed", topic=topic, partition=partition,
                operator_pauses=operator, pauses=held)
        with self._lock:
            ticket = next(self._tickets)
            self._forced[tp] = (ticket, self._polls)
        self.loop.wake()
        return ticket

    def clean_request_done(self, topic: str, partition: int, ticket: int) -> bool:
        with self._lock:
            return self._requests_done.get(TopicPartition(topic, partition), 0) >= ticket

    def cleans_completed(self, topic: str, partition: int) -> int:
        with self._lock:
            return self._completed.get(TopicPartition(topic, partition), 0)

    def reset_uncleanable(self, topic: str | None = None, partition: int = 0) -> list[str]:
        tp = None if topic is None else TopicPartition(topic, partition)
        return [str(t) for t in self._manager.reset_uncleanable(tp)]

    def explain(self, topic: str, partition: int) -> Explanation:
        tp = TopicPartition(topic, partition)
        with self._lock:
            log_dir = self._dir_of.get(tp)
            logs = dict(self._snapshots)
        if log_dir is None:
            raise UnknownTopicError(f"no compacted partition {tp} is known to the cleaner yet",
                                    topic=topic, partition=partition)
        snapshot = self._nodes[log_dir].call("snapshot", topic, partition, timeout=self._timeout)
        explanation = self._manager.explain(snapshot, logs=logs)
        if explanation.status is CleaningStatus.PAUSED:
            operator, held = self.pauses(topic, partition)
            explanation = replace(explanation, reason=f"cleaning is paused "
                                  f"({pause_holders(operator, held)})")
        return explanation

    def status(self) -> CleanerStatus:
        with self._lock:
            workers = tuple(s.status() for s in self._slots)
            offline = dict(self._offline)
            unreachable = tuple(sorted(self._unreachable))
            compacted = len(self._snapshots)
            completed = sum(self._completed.values())
            failed = self._failed
            recent = tuple(self._recent)
        uncleanable = tuple(
            UncleanableInfo(tp.topic, tp.partition, str(u.log_dir), u.failures, u.error)
            for d in self._nodes for tp, u in self._manager.uncleanable_partitions(d).items())
        return CleanerStatus(
            enabled=self.config.enable_cleaner, manager=self._manager.statistics(),
            workers=workers, uncleanable=uncleanable, offline_dirs=offline,
            unreachable_dirs=unreachable, compacted_partitions=compacted,
            cleans_completed=completed, cleans_failed=failed, recent=recent,
            loop_rounds=self.loop.rounds, loop_failures=self.loop.failures,
            last_loop_failure=self.loop.last_failure)

    @property
    def offline_dirs(self) -> dict[str, str]:
        with self._lock:
            return dict(self._offline)

    # ---- metrics -----------------------------------------------------------------------------
    def _publish_metrics(self, now: int) -> None:
        with self._lock:
            logs = dict(self._snapshots)
            offline = dict(self._offline)
        publish_cleaner_metrics(self._metrics, self._manager, list(self._nodes), logs, offline,
                                now)
