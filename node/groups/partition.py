"""``CoordinatorPartition``: one ``__consumer_offsets`` partition the coordinator holds (Kafka's
``GroupCoordinatorShard`` with its slice of the runtime): its lock, its log, its classic groups
and committed offsets, how an operation's records reach the log before its answers are given,
and how the partition is read back at load.

Every operation runs under ``lock`` and through ``run``: the operation changes the state and
fills ``out``; ``run`` then appends the records as one batch, flushes, runs the callbacks that
waited for them, and only then completes the answers. When the append fails, the partition
unloads itself (its parked answers: NOT_COORDINATOR) and so does every answer of the operation.
"""

from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from kio.schema.errors import ErrorCode

from node.errors import CoordinatorRecordError
from node.groups.config import GroupCoordinatorConfig
from node.groups.membership import ClassicMembership
from node.groups.messages import OffsetCommitResult, PartitionError, TxnOffsetCommit
from node.groups.offset_rules import OffsetRules
from node.groups.offsets import OffsetManager
from node.groups.operation import OperationOutput, not_coordinator
from node.groups.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from node.groups.timer import CoordinatorTimer, Operation
from storage.clock import Clock
from storage.log import Log
from storage.producer_state import ORIGIN_COORDINATOR
from storage.records import ControlType, Record, build_batch, parse_control_record

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CoordinatorPartition:
    """Created loading; ``loaded`` once ``serve`` gave it its log; ``unloaded`` for good (a
    fresh object serves a later load). ``on_failure`` hears of a failed append (after the
    partition unloaded itself), so its owner forgets it. Its state changes under ``lock``."""

    def __init__(self, index: int, config: GroupCoordinatorConfig, clock: Clock,
                 timer: CoordinatorTimer,
                 on_failure: Callable[[CoordinatorPartition], None]) -> None:
        self.index = index
        self.lock = threading.RLock()
        self._loaded = False
        self._unloaded = False
        self._log: Log | None = None
        self._config = config
        self._clock = clock
        self._on_failure = on_failure
        self.out = OperationOutput()
        self.timer = PartitionTimer(self, timer)
        self.membership = ClassicMembership(config, clock, self.timer, self.out)
        self.offsets = OffsetManager(config, clock)
        self.offset_rules = OffsetRules(self.membership, self.offsets, self.out)
        self.next_offset = 0

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def unloaded(self) -> bool:
        return self._unloaded

    def serve(self, log: Log) -> None:
        """The replay is done: append to ``log`` from now on, re-arm the loaded members'
        heartbeats and start the offset-retention timer (the caller holds ``lock``)."""
        self._log = log
        self._loaded = True
        self.run(self._on_loaded)

    def _on_loaded(self) -> None:
        self.membership.on_loaded()
        self._schedule_retention()

    def _schedule_retention(self) -> None:
        def expire() -> None:
            self.offset_rules.expire()
            self._schedule_retention()
        self.timer.schedule(self.retention_key,
                            self._config.offsets_retention_check_interval_ms, expire)

    def abandon(self) -> None:
        """The load failed: the partition serves nothing (the caller holds ``lock``)."""
        self._unloaded = True

    # ---- operations --------------------------------------------------------------------------
    def run(self, operation: Callable[[], T]) -> T:
        """Run ``operation`` (the caller holds ``lock``) and give its outcome effect."""
        try:
            return operation()
        finally:
            self.drain()

    def drain(self) -> bool:
        """Append what the operations left, then answer; False when the append failed."""
        while True:
            records, callbacks, answers = self.out.take()
            if not (records or callbacks or answers):
                return True
            if records:
                try:
                    self._append(records)
                except Exception:  # noqa: BLE001 - any failed write unloads, as Kafka's does
                    logger.exception("__consumer_offsets-%d: appending %d records failed; "
                                     "unloading the partition", self.index, len(records))
                    self._fail(answers)
                    return False
            for callback in callbacks:
                callback()
            for future, answer in answers:
                _give(future, answer)

    def _append(self, records: list[CoordinatorRecord]) -> None:
        """One batch per run of records of the same producer: a transactional offset commit's
        records go in a transactional batch of their producer, appended as the coordinator
        (Kafka's ``CoordinatorPartitionWriter``: the log checks the epoch, not sequences)."""
        if self._log is None:
            raise RuntimeError(f"__consumer_offsets-{self.index} has no log")
        now = self._clock.milliseconds()
        for producer, run in itertools.groupby(records, key=lambda r: r.producer):
            batch = [Record(key=r.key, value=r.value, timestamp=now) for r in run]
            if producer is None:
                self._log.append(batch)
                continue
            producer_id, producer_epoch = producer
            self._log.append_batch(build_batch(
                batch, producer_id=producer_id, producer_epoch=producer_epoch,
                is_transactional=True), origin=ORIGIN_COORDINATOR)
        self._log.flush()

    def commit_transactional(self, request: TxnOffsetCommit) -> OffsetCommitResult:
        """TxnOffsetCommit on this partition (the caller holds ``lock``): a producer epoch older
        than the one the log holds for the producer is INVALID_PRODUCER_EPOCH for every
        partition (the append would be refused: Kafka's log fences it so), checked before the
        offsets are held pending."""
        log = self._log
        entry = None if log is None else log.producer_state.producers.get(request.producer_id)
        if entry is not None and request.producer_epoch < entry.epoch:
            return OffsetCommitResult(tuple(
                PartitionError(o.topic, o.partition, ErrorCode.invalid_producer_epoch)
                for o in request.commit.offsets))
        return self.offset_rules.commit_transactional(request)

    def write_marker(self, log: Log, control_type: ControlType, producer_id: int,
                     producer_epoch: int, coordinator_epoch: int) -> None:
        """Append the transaction coordinator's COMMIT or ABORT marker to ``log`` (this
        partition's) and, once loaded, apply it to the offsets (Kafka's
        ``GroupCoordinator.completeTransaction``: the marker goes through the coordinator so
        the state follows the log's order). The caller holds ``lock``; while the partition
        loads, the load's last read under the lock picks the marker up. Raises what the append
        raises (the marker is then not applied)."""
        log.append_end_txn_marker(control_type, producer_id=producer_id,
                                  producer_epoch=producer_epoch,
                                  coordinator_epoch=coordinator_epoch)
        if self._loaded and not self._unloaded and log is self._log:
            self.offsets.complete_transaction(producer_id, control_type == ControlType.COMMIT)

    def _fail(self, answers: list[tuple[Future[Any], Any]]) -> None:
        self.unload()
        _, _, parked = self.out.take()
        for future, answer in answers + parked:
            _give(future, not_coordinator(answer))
        self._on_failure(self)

    def unload(self) -> None:
        """Drop the state: groups Dead, parked answers NOT_COORDINATOR (left in ``out``),
        timers cancelled (the caller holds ``lock``)."""
        self._unloaded = True
        self._loaded = False
        self.membership.on_unloaded()
        self.timer.cancel(self.retention_key)

    @property
    def retention_key(self) -> str:
        return f"expire-offsets-{self.index}"

    # ---- loading ------------------------------------------------------------------------------
    def replay_log(self, log: Log) -> int:
        """Apply the log's records in order (Kafka's ``CoordinatorLoaderImpl``): tombstones
        delete; a transaction's offset commits stay pending until its marker (COMMIT applies
        them, ABORT drops them). Returns how many records were applied. Called while the
        partition is still loading (its requests are answered COORDINATOR_LOAD_IN_PROGRESS
        meanwhile), without ``lock``; ``next_offset`` is where it ended."""
        return self._replay_from(log, log.log_start_offset)

    def replay_tail(self, log: Log) -> int:
        """Apply what was appended to ``log`` since ``replay_log`` ended (a transaction's
        marker, appended meanwhile by ``write_marker``); the caller holds ``lock``."""
        return self._replay_from(log, max(self.next_offset, log.log_start_offset))

    def _replay_from(self, log: Log, offset: int) -> int:
        end = log.log_end_offset
        applied = 0
        while offset < end:
            fetch = log.read_raw(offset)
            if fetch is None:
                break
            for batch in fetch.batches():
                if batch.next_offset <= offset:
                    continue
                if batch.is_control:
                    for record in batch.records():
                        control_type, _ = parse_control_record(record)
                        if control_type in (ControlType.COMMIT, ControlType.ABORT):
                            self.offsets.replay_end_transaction(
                                batch.producer_id, control_type == ControlType.COMMIT)
                else:
                    producer_id = batch.producer_id if batch.is_transactional else None
                    for record in batch.records():
                        applied += self._replay(record, producer_id)
                offset = batch.next_offset
        self.next_offset = offset
        return applied

    def _replay(self, record: Record, producer_id: int | None) -> int:
        """Apply one record; a record that does not decode raises ``CoordinatorRecordError``
        naming the partition and the offset (Kafka's loader fails the load so too)."""
        try:
            return self._apply(record, producer_id)
        except CoordinatorRecordError as err:
            raise CoordinatorRecordError(
                f"__consumer_offsets-{self.index} offset {record.offset}: {err.message}",
                **err.fields, partition=self.index, offset=record.offset) from err

    def _apply(self, record: Record, producer_id: int | None) -> int:
        if record.key is None:
            logger.warning("__consumer_offsets-%d: record at offset %d has no key; skipped",
                           self.index, record.offset)
            return 0
        key = decode_key(record.key)
        if isinstance(key, GroupMetadataKey):
            value = None if record.value is None else decode_group_metadata_value(record.value)
            self.membership.replay(key.group, value)
            return 1
        if isinstance(key, OffsetCommitKey):
            offset_value = (None if record.value is None
                            else decode_offset_commit_value(record.value))
            if offset_value is not None:
                # Kafka's replay: an offset of a group without metadata makes a standalone group
                self.membership.get_or_create(key.group)
            self.offsets.replay(key, offset_value, producer_id)
            return 1
        logger.info("__consumer_offsets-%d: record type %d at offset %d is not a classic "
                    "group's; skipped", self.index, key.version, record.offset)
        return 0


class PartitionTimer:
    """The coordinator's timer as one partition's operations see it: an operation runs under
    the partition's lock, only while the partition is loaded and its key still holds it, and
    through ``run`` (its records reach the log before its answers are given)."""

    def __init__(self, partition: CoordinatorPartition, timer: CoordinatorTimer) -> None:
        self._partition = partition
        self._timer = timer

    def schedule(self, key: str, delay_ms: int, operation: Operation) -> None:
        partition, timer = self._partition, self._timer

        def timeout() -> None:
            with partition.lock:
                if partition.unloaded or not timer.claim(key, timeout):
                    return
                partition.run(operation)
        timer.schedule(key, delay_ms, timeout)

    def cancel(self, key: str) -> None:
        self._timer.cancel(key)

    def claim(self, key: str, operation: Operation) -> bool:
        return self._timer.claim(key, operation)

    def is_scheduled(self, key: str) -> bool:
        return self._timer.is_scheduled(key)

    def close(self) -> None:
        """The coordinator owns the timer: a partition never stops it."""


def _give(future: Future[Any], answer: Any) -> None:
    if not future.done():
        future.set_result(answer)
