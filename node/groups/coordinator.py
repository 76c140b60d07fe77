"""``GroupCoordinator``: the group coordinator of one log directory (Kafka's
``GroupCoordinatorService`` over its runtime): routes each request to the ``__consumer_offsets``
partition of its group, runs it there under that partition's lock, and answers through a
``concurrent.futures.Future``.

A future completes with the message's result; a Kafka-level error is an error code in the
result, never an exception. A result whose operation wrote records completes only after they
are appended to the partition's log and flushed. A group whose partition is not held here is
answered NOT_COORDINATOR; one whose partition is loading, COORDINATOR_LOAD_IN_PROGRESS (a
Heartbeat then NONE, as Kafka answers it blindly). A failed write answers NOT_COORDINATOR and
unloads the partition.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from kio.schema.errors import ErrorCode

from node.groups.config import GroupCoordinatorConfig
from node.groups.group_views import describe_group, list_groups
from node.groups.messages import (
    GroupDeletion,
    GroupDescription,
    GroupListing,
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    OffsetCommit,
    OffsetCommitResult,
    OffsetDelete,
    OffsetDeleteResult,
    OffsetFetch,
    OffsetFetchResult,
    PartitionError,
    SyncGroup,
    SyncGroupResult,
    TxnOffsetCommit,
)
from node.groups.partition import CoordinatorPartition
from node.groups.placement import partition_for
from node.groups.timer import CoordinatorTimer, ThreadTimer
from storage.clock import SYSTEM_CLOCK, Clock
from storage.log import Log
from storage.records import ControlType

logger = logging.getLogger(__name__)

T = TypeVar("T")
LOAD = ErrorCode.coordinator_load_in_progress
NOT_HERE = ErrorCode.not_coordinator


class GroupCoordinator:
    """The classic groups and committed offsets of the ``__consumer_offsets`` partitions this
    directory has loaded. Thread-safe: one lock per partition; ``load`` blocks its caller (a
    worker thread) while the partition is read back."""

    def __init__(self, config: GroupCoordinatorConfig, clock: Clock = SYSTEM_CLOCK,
                 timer: CoordinatorTimer | None = None) -> None:
        self.config = config
        self._clock = clock
        self._timer: CoordinatorTimer = timer if timer is not None else ThreadTimer(clock)
        self._lock = threading.Lock()
        self._partitions: dict[int, CoordinatorPartition] = {}
        self._closed = False

    def partition_for(self, group_id: str) -> int:
        """``abs(java String.hashCode) % offsets.topic.num.partitions``."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    # ---- partitions --------------------------------------------------------------------------
    def load(self, partition: int, log: Log) -> None:
        """Read the partition back (blocking), then serve its groups: heartbeats re-armed, the
        offset-retention timer started, new records appended to ``log``. A partition already
        loaded is unloaded first. A record that cannot be decoded fails the load
        (``CoordinatorRecordError``) and leaves the partition unloaded."""
        state = CoordinatorPartition(partition, self.config, self._clock, self._timer,
                                     self._forget)
        with self._lock:
            if self._closed:
                raise RuntimeError("the group coordinator is closed")
            previous = self._partitions.get(partition)
            self._partitions[partition] = state
        if previous is not None:
            self._unload_state(previous)
        try:
            applied = state.replay_log(log)
        except BaseException:
            self._abandon(state)
            raise
        with state.lock:
            # what was appended meanwhile (a transaction's marker: write_marker appends it
            # under this lock without applying it while the partition loads)
            try:
                applied += state.replay_tail(log)
            except BaseException:
                self._abandon(state)
                raise
            if state.unloaded:
                return
            state.serve(log)
        logger.info("__consumer_offsets-%d loaded: %d records, %d groups", partition, applied,
                    len(state.membership.groups))

    def _abandon(self, state: CoordinatorPartition) -> None:
        with self._lock:
            if self._partitions.get(state.index) is state:
                del self._partitions[state.index]
        with state.lock:
            state.abandon()

    def write_marker(self, partition: int, log: Log, control_type: ControlType,
                     producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Append the transaction coordinator's COMMIT or ABORT marker to ``log``, partition
        ``partition`` of ``__consumer_offsets``, and apply it to the producer's pending offset
        commits there (Kafka's ``GroupCoordinator.completeTransaction``/``onTransactionCompleted``)
        under the partition's lock, so it takes its place among the coordinator's own appends
        in log order. A partition not held here gets the marker alone (its load replays it).
        Raises what the append raises."""
        with self._lock:
            state = self._partitions.get(partition)
        if state is None:
            log.append_end_txn_marker(control_type, producer_id=producer_id,
                                      producer_epoch=producer_epoch,
                                      coordinator_epoch=coordinator_epoch)
            return
        with state.lock:
            state.write_marker(log, control_type, producer_id, producer_epoch,
                               coordinator_epoch)

    def unload(self, partition: int) -> None:
        """The partition left this directory: its groups are dropped, their parked JoinGroup
        and SyncGroup answers NOT_COORDINATOR, their timers cancelled."""
        with self._lock:
            state = self._partitions.pop(partition, None)
        if state is not None:
            self._unload_state(state)

    def _unload_state(self, state: CoordinatorPartition) -> None:
        with state.lock:
            if state.unloaded:
                return
            state.run(state.unload)

    def _forget(self, state: CoordinatorPartition) -> None:
        with self._lock:
            if self._partitions.get(state.index) is state:
                del self._partitions[state.index]

    def is_loaded(self, partition: int) -> bool:
        with self._lock:
            state = self._partitions.get(partition)
        return state is not None and state.loaded

    def close(self) -> None:
        """Unload every partition and stop the timer."""
        with self._lock:
            self._closed = True
            states = list(self._partitions.values())
            self._partitions.clear()
        for state in states:
            self._unload_state(state)
        self._timer.close()

    # ---- running an operation ----------------------------------------------------------------
    def _submit(self, group_id: str, operation: Callable[[CoordinatorPartition], T],
                error: Callable[[ErrorCode], T]) -> Future[T]:
        """Run ``operation`` on the group's partition and complete the future with what it
        returns (after its records are durable); ``error(code)`` when the partition is not
        here or still loading."""
        def run(state: CoordinatorPartition, future: Future[T]) -> None:
            result = state.run(lambda: operation(state))
            # run() appended and flushed the operation's records before returning
            future.set_result(error(NOT_HERE) if state.unloaded else result)

        return self._on_partition(group_id, run, error)

    def _park(self, group_id: str, operation: Callable[[CoordinatorPartition, Future[T]], None],
              error: Callable[[ErrorCode], T]) -> Future[T]:
        """Like ``_submit`` for an operation that completes the future itself, maybe much
        later (a parked JoinGroup or SyncGroup)."""
        return self._on_partition(
            group_id, lambda state, future: state.run(lambda: operation(state, future)), error)

    def _on_partition(self, group_id: str,
                      body: Callable[[CoordinatorPartition, Future[T]], None],
                      error: Callable[[ErrorCode], T]) -> Future[T]:
        """A new future, completed with ``error(code)`` when the group's partition is not here
        or still loading, else handed to ``body`` under the partition's lock; an exception of
        ``body`` fails the future unless ``body`` completed it."""
        future: Future[T] = Future()
        with self._lock:
            state = self._partitions.get(self.partition_for(group_id))
        if state is None:
            future.set_result(error(NOT_HERE))
            return future
        with state.lock:
            if state.unloaded:
                future.set_result(error(NOT_HERE))
            elif not state.loaded:
                future.set_result(error(LOAD))
            else:
                try:
                    body(state, future)
                except BaseException as err:
                    logger.exception("group coordinator operation on %s failed", group_id)
                    if not future.done():
                        future.set_exception(err)
        return future

    # ---- membership --------------------------------------------------------------------------
    def join_group(self, request: JoinGroup) -> Future[JoinGroupResult]:
        """JoinGroup: may complete much later (when the rebalance's join phase ends)."""
        if not request.group_id:
            return _done(JoinGroupResult(ErrorCode.invalid_group_id, member_id=request.member_id))
        return self._park(request.group_id,
                          lambda state, future: state.membership.join(request, future),
                          lambda code: JoinGroupResult(code, member_id=request.member_id))

    def sync_group(self, request: SyncGroup) -> Future[SyncGroupResult]:
        """SyncGroup: a follower's waits until the leader's assignment is durable."""
        if not request.group_id:
            return _done(SyncGroupResult(ErrorCode.invalid_group_id))
        return self._park(request.group_id,
                          lambda state, future: state.membership.sync(request, future),
                          SyncGroupResult)

    def heartbeat(self, request: Heartbeat) -> Future[ErrorCode]:
        if not request.group_id:
            return _done(ErrorCode.invalid_group_id)
        return self._submit(request.group_id,
                            lambda state: state.membership.heartbeat(request),
                            lambda code: ErrorCode.none if code is LOAD else code)

    def leave_group(self, request: LeaveGroup) -> Future[LeaveGroupResult]:
        if not request.group_id:
            return _done(LeaveGroupResult(ErrorCode.invalid_group_id))
        return self._submit(request.group_id,
                            lambda state: state.membership.leave(request),
                            LeaveGroupResult)

    # ---- offsets -----------------------------------------------------------------------------
    def commit_offsets(self, request: OffsetCommit) -> Future[OffsetCommitResult]:
        def error(code: ErrorCode) -> OffsetCommitResult:
            return OffsetCommitResult(tuple(PartitionError(o.topic, o.partition, code)
                                            for o in request.offsets))
        return self._submit(request.group_id,
                            lambda state: state.offset_rules.commit(request), error)

    def commit_transactional_offsets(self, request: TxnOffsetCommit
                                     ) -> Future[OffsetCommitResult]:
        """TxnOffsetCommit (Kafka's ``commitTransactionalOffsets``): an empty group id is
        INVALID_GROUP_ID; the offsets are answered once their transactional batch is durable
        and stay pending until the transaction's marker (``write_marker``)."""
        commit = request.commit

        def error(code: ErrorCode) -> OffsetCommitResult:
            return OffsetCommitResult(tuple(PartitionError(o.topic, o.partition, code)
                                            for o in commit.offsets))
        if not commit.group_id:
            return _done(error(ErrorCode.invalid_group_id))
        return self._submit(commit.group_id,
                            lambda state: state.commit_transactional(request), error)

    def fetch_offsets(self, request: OffsetFetch) -> Future[OffsetFetchResult]:
        return self._submit(request.group_id,
                            lambda state: state.offset_rules.fetch(request),
                            lambda code: OffsetFetchResult(request.group_id, code))

    def delete_offsets(self, request: OffsetDelete) -> Future[OffsetDeleteResult]:
        if not request.group_id:
            return _done(OffsetDeleteResult(ErrorCode.invalid_group_id))
        return self._submit(request.group_id,
                            lambda state: state.offset_rules.delete(request),
                            OffsetDeleteResult)

    # ---- admin -------------------------------------------------------------------------------
    def list_groups(self, states: frozenset[str] | None = None) -> Future[list[GroupListing]]:
        """Every group of every loaded partition (a loading one contributes none)."""
        with self._lock:
            held = list(self._partitions.values())
        listings: list[GroupListing] = []
        for state in held:
            with state.lock:
                if state.loaded:
                    listings.extend(list_groups(state.membership.groups, states))
        return _done(listings)

    def describe_groups(self, group_ids: Sequence[str]) -> Future[list[GroupDescription]]:
        """DescribeGroups: each group as its partition sees it (an unknown one as Dead)."""
        described = [
            self._submit(group_id,
                         lambda state, g=group_id: describe_group(state.membership.groups, g),
                         lambda code, g=group_id: GroupDescription(g, code))
            for group_id in group_ids]
        return _done([f.result() for f in described])

    def delete_groups(self, group_ids: Sequence[str]) -> Future[list[GroupDeletion]]:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP; unknown: GROUP_ID_NOT_FOUND); a
        deleted group's offsets and record get tombstones."""
        deleted = [self._submit(group_id,
                                lambda state, g=group_id: state.offset_rules.delete_group(g),
                                lambda code, g=group_id: GroupDeletion(g, code))
                   for group_id in group_ids]
        return _gather(deleted)


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


def _gather(futures: list[Future[T]]) -> Future[list[T]]:
    """One future of every result, in order, once all are done."""
    combined: Future[list[T]] = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0] != 0:
                return
        try:
            combined.set_result([f.result() for f in futures])
        except BaseException as err:  # noqa: BLE001 - handed to the waiter
            combined.set_exception(err)
    if not futures:
        combined.set_result([])
    for future in futures:
        future.add_done_callback(one_done)
    return combined

