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

The view of the nodes (snapshots, offline and unreachable directories, the calls the loop makes
to them) is ``cluster.cleaning.coordinator_nodes.NodeViews``; the pauses' bookkeeping (an operator's
against a node's, named reasons, many at once) is
``cluster.cleaning.pauses.PauseBook``; the requested cleans and their tickets
``cluster.cleaning.clean_requests``; the counts and summaries of past cleans
``cluster.cleaning.clean_history``; the gauges ``cluster.cleaning.coordinator_metrics``.

Thread-safe: the loop runs on its own thread; the API methods run on the actor's threads.
``_lock`` guards the slots and tables and is never held across a call to a node or worker.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cleaner.cleanable import LogToClean
from cleaner.config import CleanerConfig
from cleaner.explain import CleaningStatus, Explanation
from cleaner.manager import CleanerManager, CleanerStateError
from cluster.cleaning.clean_history import CleanHistory
from cluster.cleaning.clean_requests import CleanRequests
from cluster.errors import ActorUnavailableError, PartitionPausedError, UnknownTopicError
from cluster.handles import Handle
from cluster.loop import ControlLoop
from cluster.metrics.sink import MetricsSink, NullMetrics
from cluster.metrics.consumer_lag import LagGauges
from cluster.cleaning.coordinator_metrics import publish_cleaner_metrics
from cluster.cleaning.coordinator_nodes import NodeViews
from cluster.cleaning.pauses import PauseBook, pause_holders
from cluster.naming import abs_dir
from cluster.cleaning.slots import CleanerSlot
from cluster.status import CleanerStatus, UncleanableInfo
from cluster.cleaning.clean_assignment import CleanAssignment
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import LogCleaningAbortedError, LogDirOfflineError
from storage.files import TopicPartition

if TYPE_CHECKING:   # annotations only: the coordinator's process loads no numba
    from cleaner.cleaner import CleanResult
    from node.snapshot import LogSnapshot

logger = logging.getLogger(__name__)

BUSY_POLL_S = 0.05


class Coordinator:
    def __init__(self, nodes: Mapping[str, Handle], workers: Sequence[Handle],
                 config: CleanerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 metrics: MetricsSink | None = None,
                 retention_check_interval_ms: int = 300_000, metrics_interval_ms: int = 5_000,
                 call_timeout_s: float = 60.0) -> None:
        self.config = config or CleanerConfig()
        self._views = NodeViews(
            nodes, call_timeout_s, on_offline=lambda d: self._manager.handle_log_dir_failure(d),
            on_online=lambda d: self._manager.add_log_dir(d))
        self._clock = clock
        self._metrics = metrics or NullMetrics()
        self._lag = LagGauges(self._metrics)
        self._timeout = call_timeout_s
        self._retention_interval_ms = retention_check_interval_ms
        self._metrics_interval_ms = metrics_interval_ms
        self._manager = CleanerManager(
            [Path(d) for d in self._views.nodes], self.config, clock=clock,
            on_dir_failure=lambda d, e: self._views.mark_offline(str(d), str(e)),
            checkpoint_file=lambda d: self._views.checkpoint(str(d)))
        self._lock = threading.Lock()
        self._slots = [CleanerSlot(i, h) for i, h in enumerate(workers)]
        self._pauses = PauseBook(self._manager, self._stop_cleans, call_timeout_s)
        self._workers_reset = False
        self._requests = CleanRequests()
        self._history = CleanHistory()
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
        self._views.poll()
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
        requested = self._requests.waiting()
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
        self._views.start_up()

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
        with self._lock:
            ticket = slot.ticket
        self._history.cleaned(a, slot.index, result, now)
        if ticket:
            self._requests.done(tp, ticket)
        with self._lock:
            slot.free()

    def _clean_failed(self, slot: CleanerSlot, a: CleanAssignment, err: BaseException,
                      now: int) -> None:
        tp = a.topic_partition
        text = f"{type(err).__name__}: {err}"
        if isinstance(err, LogCleaningAbortedError):
            outcome = "aborted"
        elif isinstance(err, LogDirOfflineError):
            outcome = "offline"
            self._views.mark_offline(a.log_dir, str(err))
        else:
            outcome = "cleaner died" if isinstance(err, ActorUnavailableError) else "failed"
            logger.warning("cleaning %s by cleaner %d failed: %s", tp, slot.index, text)
            self._views.remove_cleaned(a.log_dir, tp)
            self._manager.record_cleaning_failure(tp, a.log_dir, err, now)
        try:
            self._manager.done_cleaning(tp, a.log_dir, a.first_dirty_offset)
        except CleanerStateError:
            logger.warning("cleaning state of %s was reset meanwhile", tp, exc_info=True)
        polls = self._views.polls
        with self._lock:
            ticket = slot.ticket
        self._history.ended(a, slot.index, outcome, text, now)
        if outcome == "aborted" and ticket:     # asked for: clean once unpaused
            self._requests.again(tp, ticket, polls)
        with self._lock:
            if isinstance(err, ActorUnavailableError):
                slot.lost()
            else:
                slot.free()

    def _recover_workers(self) -> None:
        with self._lock:
            for slot in self._slots:
                slot.poll_recovery()

    def _assign(self, now: int) -> int:
        started = 0
        for slot in self._slots:
            if not slot.idle:
                continue
            logs = self._views.logs_for(slot.handle.host)
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

    def _grab_forced(self, logs: Mapping[TopicPartition, LogSnapshot],
                     now: int) -> tuple[LogToClean | None, int]:
        """A requested partition and the ticket it serves, chosen whatever its dirty ratio (a
        copy of its snapshot with ``min.cleanable.dirty.ratio`` 0 goes through the manager's
        selection, so every state rule still applies). Only a snapshot polled after the request
        is used, so a segment rolled just before the request is cleaned too. A request for a
        partition with nothing to clean, or no longer compacted or present, is done at once."""
        polls = self._views.polls
        known = set(self._views.snapshots())
        for tp, ticket in self._requests.due(polls):
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
                self._requests.started(tp, ticket)
                return chosen, ticket
            logger.info("clean of %s requested but nothing below its active segment is dirty", tp)
            self._request_done(tp, ticket)
        return None, 0

    def _request_done(self, tp: TopicPartition, ticket: int) -> None:
        self._requests.done(tp, ticket)

    def _retention(self, now: int) -> None:
        chosen = self._manager.deletable_logs(self._views.snapshots(), now)
        by_dir: dict[str, list[TopicPartition]] = {}
        for lg in chosen:
            by_dir.setdefault(abs_dir(lg.dir.parent), []).append(lg.topic_partition)
        try:
            self._views.delete_old_segments(by_dir)
        finally:
            self._manager.done_deleting([lg.topic_partition for lg in chosen])

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
        count = self._history.completed(TopicPartition(topic, partition))
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
        ticket = self._requests.add(tp, self._views.polls)
        self.loop.wake()
        return ticket

    def clean_request_done(self, topic: str, partition: int, ticket: int) -> bool:
        return self._requests.is_done(TopicPartition(topic, partition), ticket)

    def cleans_completed(self, topic: str, partition: int) -> int:
        return self._history.completed(TopicPartition(topic, partition))

    def reset_uncleanable(self, topic: str | None = None, partition: int = 0) -> list[str]:
        tp = None if topic is None else TopicPartition(topic, partition)
        return [str(t) for t in self._manager.reset_uncleanable(tp)]

    def explain(self, topic: str, partition: int) -> Explanation:
        tp = TopicPartition(topic, partition)
        logs = self._views.snapshots()
        snapshot = self._views.snapshot(tp)
        if snapshot is None:
            raise UnknownTopicError(f"no compacted partition {tp} is known to the cleaner yet",
                                    topic=topic, partition=partition)
        explanation = self._manager.explain(snapshot, logs=logs)
        if explanation.status is CleaningStatus.PAUSED:
            operator, held = self.pauses(topic, partition)
            explanation = replace(explanation, reason=f"cleaning is paused "
                                  f"({pause_holders(operator, held)})")
        return explanation

    def status(self) -> CleanerStatus:
        with self._lock:
            workers = tuple(s.status() for s in self._slots)
        offline = self._views.offline()
        unreachable = self._views.unreachable()
        compacted = len(self._views.snapshots())
        completed, failed, recent = self._history.totals()
        uncleanable = tuple(
            UncleanableInfo(tp.topic, tp.partition, str(u.log_dir), u.failures, u.error)
            for d in self._views.nodes for tp, u in self._manager.uncleanable_partitions(d).items())
        return CleanerStatus(
            enabled=self.config.enable_cleaner, manager=self._manager.statistics(),
            workers=workers, uncleanable=uncleanable, offline_dirs=offline,
            unreachable_dirs=unreachable, compacted_partitions=compacted,
            cleans_completed=completed, cleans_failed=failed, recent=recent,
            loop_rounds=self.loop.rounds, loop_failures=self.loop.failures,
            last_loop_failure=self.loop.last_failure)

    @property
    def offline_dirs(self) -> dict[str, str]:
        return self._views.offline()

    # ---- metrics -----------------------------------------------------------------------------
    def _publish_metrics(self, now: int) -> None:
        publish_cleaner_metrics(self._metrics, self._manager, list(self._views.nodes),
                                self._views.snapshots(), self._views.offline(), now)
        self._lag.publish(self._views.consumer_lags())
