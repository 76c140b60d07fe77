"""The transaction coordinator's Kafka kind (a Kafka client's transactional producer) as a plain
class, on real files and a fake clock. Scenarios of Kafka's TransactionCoordinatorTest (the
InitProducerId, AddPartitionsToTxn and EndTxn cases of a transaction version 1 client) and
TransactionMetadataTest (epoch bumps, exhaustion), on the same state log and partition logs as
the Strata transactions of ``test_transactions``."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cluster.transactions.coordinator import Marker, TransactionCoordinator
from cluster.transactions.txn_kafka import MAX_EPOCH
from cluster.transactions.txn_state import (
    ProducerFencedError,
    TransactionConfig,
    TransactionStateError,
    TxnKind,
    TxnState,
)
from node.kafka.transactions import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
)
from storage.clock import FakeClock
from storage.log import READ_COMMITTED, READ_UNCOMMITTED
from storage.producer_state import InvalidProducerEpochError
from storage.records import Record
from tests.cluster.test_transactions import _World

TID = "orders-producer"


class _KafkaWorld(_World):
    """``_World`` with appends as a Kafka producer makes them: its producer id and epoch."""

    def produce(self, pid: int, epoch: int, topic: str, partition: int, *values: bytes) -> None:
        seq = self.sequences.get((pid, topic, partition), 0)
        self.log(topic, partition).append(
            [Record(key=v, value=v, timestamp=1000) for v in values], producer_id=pid,
            producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        self.sequences[(pid, topic, partition)] = seq + len(values)

    def uncommitted(self, topic: str, partition: int) -> list[bytes]:
        return [r.value for r in self.log(topic, partition).read(isolation=READ_UNCOMMITTED)]


class _FailMarkers:
    """A marker writer that fails while ``failing`` (a node down at the end)."""

    def __init__(self, world: _World) -> None:
        from cluster.transactions.log_store import LogMarkerWriter

        self.inner = LogMarkerWriter(world.log)
        self.failing = False

    def write_markers(self, markers: Sequence[Marker]) -> None:
        if self.failing:
            raise OSError("marker write failed")
        self.inner.write_markers(markers)


@pytest.fixture
def world(tmp_path: Path, clock: FakeClock) -> _KafkaWorld:
    return _KafkaWorld(tmp_path, clock)


def test_init_producer_id_of_a_new_id_gives_epoch_0_and_then_bumps_the_epoch(
        world: _KafkaWorld) -> None:
    """shouldInitPidWithEpochZeroForNewTransactionalId / shouldIncrementEpoch..."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    assert epoch == 0 and pid >= 0
    assert tc.init_producer_id(TID, 60_000) == (pid, 1)
    meta = tc.describe(TID)
    assert meta.kind == TxnKind.KAFKA and meta.producer_id == pid
    assert meta.state == TxnState.EMPTY


def test_init_producer_id_refuses_a_timeout_above_the_maximum(world: _KafkaWorld) -> None:
    """shouldRespondWithInvalidTransactionTimeout..."""
    tc = world.coordinator(config=TransactionConfig(transaction_timeout_ms=10_000,
                                                       transaction_max_timeout_ms=10_000))
    with pytest.raises(InvalidTransactionTimeoutError, match="transaction.max.timeout.ms"):
        tc.init_producer_id(TID, 10_001)
    with pytest.raises(InvalidTransactionTimeoutError):
        tc.init_producer_id(TID, 0)
    assert tc.init_producer_id(TID, 10_000)[1] == 0


def test_a_commit_writes_markers_with_the_producers_own_epoch(world: _KafkaWorld) -> None:
    tc = world.coordinator()
    pid, _ = tc.init_producer_id(TID, 60_000)
    tc.init_producer_id(TID, 60_000)
    epoch = tc.init_producer_id(TID, 60_000)[1]
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0), ("t", 1)])
    world.produce(pid, epoch, "t", 0, b"a")
    world.produce(pid, epoch, "t", 1, b"b")
    assert world.committed("t", 0) == [] and not world.stable("t", 0)
    tc.end_kafka(TID, pid, epoch, commit=True)
    assert world.committed("t", 0) == [b"a"] and world.committed("t", 1) == [b"b"]
    assert world.stable("t", 0) and world.stable("t", 1)
    [state] = [p for p in world.log("t", 0).active_producers() if p.producer_id == pid]
    assert state.epoch == epoch == 2      # the marker kept the producer's epoch
    assert tc.describe(TID).state == TxnState.COMPLETE_COMMIT


def test_an_abort_hides_the_records_from_read_committed_only(world: _KafkaWorld) -> None:
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"x", b"y")
    tc.end_kafka(TID, pid, epoch, commit=False)
    assert world.committed("t", 0) == [] and world.stable("t", 0)
    assert world.uncommitted("t", 0) == [b"x", b"y"]
    assert tc.describe(TID).state == TxnState.COMPLETE_ABORT


def test_two_transactions_in_a_row_keep_the_producer_id_and_epoch(world: _KafkaWorld) -> None:
    """A Kafka producer begins its next transaction with AddPartitionsToTxn after a Complete
    one (CompleteCommit -> Ongoing), without a new InitProducerId."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    for value, commit in ((b"one", True), (b"two", False), (b"three", True)):
        tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
        world.produce(pid, epoch, "t", 0, value)
        tc.end_kafka(TID, pid, epoch, commit=commit)
    assert world.committed("t", 0) == [b"one", b"three"]
    meta = tc.describe(TID)
    assert (meta.producer_id, meta.epoch) == (pid, epoch)


def test_init_producer_id_of_an_ongoing_transaction_aborts_it_and_fences_the_producer(
        world: _KafkaWorld) -> None:
    """shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState: the
    transaction is aborted with the epoch bumped, CONCURRENT_TRANSACTIONS is answered, and the
    retry bumps the epoch once more."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"zombie")
    with pytest.raises(ConcurrentTransactionsError):
        tc.init_producer_id(TID, 60_000)
    assert world.stable("t", 0) and world.committed("t", 0) == []
    assert tc.describe(TID).state == TxnState.COMPLETE_ABORT
    assert tc.init_producer_id(TID, 60_000) == (pid, epoch + 2)
    with pytest.raises(InvalidProducerEpochError):
        world.produce(pid, epoch, "t", 0, b"late")
    with pytest.raises(ProducerFencedError):
        tc.end_kafka(TID, pid, epoch, commit=True)
    with pytest.raises(ProducerFencedError):
        tc.add_kafka_partitions(TID, pid, epoch, [("t", 1)])


def test_init_producer_id_with_another_producer_id_or_an_old_epoch_is_fenced(
        world: _KafkaWorld) -> None:
    """A v3+ client names the producer id and epoch it has (isValidProducerId)."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.init_producer_id(TID, 60_000)
    with pytest.raises(ProducerFencedError, match="not its producer"):
        tc.init_producer_id(TID, 60_000, pid + 1, 1)
    with pytest.raises(ProducerFencedError, match="epoch 0 is fenced"):
        tc.init_producer_id(TID, 60_000, pid, epoch)
    assert tc.init_producer_id(TID, 60_000, pid, 1) == (pid, 2)


def test_an_exhausted_epoch_gives_a_new_producer_id(world: _KafkaWorld) -> None:
    """TransactionMetadataTest: the epoch before Short.MAX_VALUE rotates the producer id."""
    tc = world.coordinator()
    pid, _ = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, 0, [("t", 0)])
    tc.end_kafka(TID, pid, 0, commit=True)
    # bring the id to the last epoch by its own records, as a long-lived id would be
    from dataclasses import replace
    meta = replace(tc.describe(TID), epoch=MAX_EPOCH - 1)
    world.state.append([Record(key=meta.key(), value=meta.value(), timestamp=1)])
    world.restart()
    tc = world.coordinator()
    new_pid, epoch = tc.init_producer_id(TID, 60_000)
    assert new_pid != pid and epoch == 0


def test_add_partitions_without_the_ids_producer_is_invalid_producer_id_mapping(
        world: _KafkaWorld) -> None:
    """shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent
    / ...WhenPidDoesntMatch; shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent.
    """
    tc = world.coordinator()
    with pytest.raises(InvalidProducerIdMappingError, match="InitProducerId first"):
        tc.add_kafka_partitions(TID, 1, 0, [("t", 0)])
    pid, epoch = tc.init_producer_id(TID, 60_000)
    with pytest.raises(InvalidProducerIdMappingError):
        tc.add_kafka_partitions(TID, pid + 1, epoch, [("t", 0)])
    with pytest.raises(ProducerFencedError):
        tc.add_kafka_partitions(TID, pid, epoch + 1, [("t", 0)])
    assert tc.describe(TID).state == TxnState.EMPTY


def test_calls_while_the_markers_are_not_written_are_concurrent_transactions(
        world: _KafkaWorld) -> None:
    """shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIsPrepareCommit, and
    InitProducerId and EndTxn in PrepareCommit; the next tick completes it."""
    writer = _FailMarkers(world)
    tc = world.coordinator(writer=writer)
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"a")
    writer.failing = True
    with pytest.raises(OSError):
        tc.end_kafka(TID, pid, epoch, commit=True)
    assert tc.describe(TID).state == TxnState.PREPARE_COMMIT
    with pytest.raises(ConcurrentTransactionsError):
        tc.add_kafka_partitions(TID, pid, epoch, [("t", 1)])
    with pytest.raises(ConcurrentTransactionsError):
        tc.init_producer_id(TID, 60_000)
    with pytest.raises(ConcurrentTransactionsError):
        tc.end_kafka(TID, pid, epoch, commit=True)
    with pytest.raises(TransactionStateError):
        tc.end_kafka(TID, pid, epoch, commit=False)
    writer.failing = False
    tc.tick()
    assert tc.describe(TID).state == TxnState.COMPLETE_COMMIT
    assert world.committed("t", 0) == [b"a"]


def test_end_txn_retries_and_refusals_follow_the_state(world: _KafkaWorld) -> None:
    """EndTxn of an Empty transaction and of one ended the other way is INVALID_TXN_STATE; a
    retry of the same end answers NONE and writes nothing more."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    with pytest.raises(TransactionStateError, match="Empty"):
        tc.end_kafka(TID, pid, epoch, commit=True)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"a")
    tc.end_kafka(TID, pid, epoch, commit=True)
    end = world.log("t", 0).log_end_offset
    tc.end_kafka(TID, pid, epoch, commit=True)
    assert world.log("t", 0).log_end_offset == end
    with pytest.raises(TransactionStateError, match="CompleteCommit"):
        tc.end_kafka(TID, pid, epoch, commit=False)
    with pytest.raises(InvalidProducerIdMappingError):
        tc.end_kafka("never-initialized", pid, epoch, commit=True)


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch(world: _KafkaWorld,
                                                                clock: FakeClock) -> None:
    """shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch: the zombie's commit is fenced,
    and so are its appends."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 1000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"slow")
    clock.advance(1000)
    assert tc.tick() == []
    clock.advance(1)
    [outcome] = tc.tick()
    assert not outcome.committed and outcome.epoch == epoch + 1
    assert world.stable("t", 0) and world.committed("t", 0) == []
    with pytest.raises(ProducerFencedError):
        tc.end_kafka(TID, pid, epoch, commit=True)
    with pytest.raises(InvalidProducerEpochError):
        world.produce(pid, epoch, "t", 0, b"zombie")
    assert tc.init_producer_id(TID, 1000) == (pid, epoch + 2)


def test_a_restart_keeps_the_kafka_kind_and_completes_a_decided_commit(
        world: _KafkaWorld) -> None:
    writer = _FailMarkers(world)
    tc = world.coordinator(writer=writer)
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    world.produce(pid, epoch, "t", 0, b"a")
    writer.failing = True
    with pytest.raises(OSError):
        tc.end_kafka(TID, pid, epoch, commit=True)
    world.restart()
    tc = world.coordinator()
    meta = tc.describe(TID)
    assert meta.kind == TxnKind.KAFKA and meta.state == TxnState.COMPLETE_COMMIT
    assert world.committed("t", 0) == [b"a"]
    assert tc.init_producer_id(TID, 60_000) == (pid, epoch + 1)


def test_verify_names_only_the_partitions_of_the_open_transaction(world: _KafkaWorld) -> None:
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    assert not tc.verify_kafka(TID, pid, epoch, "t", 0)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    assert tc.verify_kafka(TID, pid, epoch, "t", 0)
    assert not tc.verify_kafka(TID, pid, epoch, "t", 1)
    assert not tc.verify_kafka(TID, pid, epoch + 1, "t", 0)
    assert not tc.verify_kafka("other", pid, epoch, "t", 0)
    tc.end_kafka(TID, pid, epoch, commit=True)
    assert not tc.verify_kafka(TID, pid, epoch, "t", 0)


def test_a_transactional_id_serves_one_kind_only(world: _KafkaWorld) -> None:
    tc = world.coordinator()
    tc.init_producer_id(TID, 60_000)
    with pytest.raises(TransactionStateError, match="Kafka producer"):
        tc.begin(TID)
    txn = tc.begin("spark-job")
    with pytest.raises(TransactionStateError, match="Strata transaction"):
        tc.init_producer_id("spark-job", 60_000)
    with pytest.raises(TransactionStateError, match="Strata transaction"):
        tc.add_kafka_partitions("spark-job", 1, txn.epoch, [("t", 0)])


def test_kafka_transaction_errors_survive_pickling() -> None:
    for err in (ConcurrentTransactionsError("retry", transactional_id="a"),
                InvalidProducerIdMappingError("no", producer_id=3),
                InvalidTransactionTimeoutError("too long", timeout_ms=5)):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)


def test_adding_partitions_already_in_the_transaction_writes_nothing(
        world: _KafkaWorld) -> None:
    """shouldReplyWithOkOnAddPartitionsWhenAllPartitionsAlreadyIncluded: no state record."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0), ("t", 1)])
    assert world.state is not None
    written = world.state.log_end_offset
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 1)])
    assert world.state.log_end_offset == written
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 2)])
    assert world.state.log_end_offset == written + 1
    assert tc.describe(TID).members == {pid: frozenset({("t", 0), ("t", 1), ("t", 2)})}


def test_a_commit_of_an_aborted_transaction_is_invalid_txn_state(world: _KafkaWorld) -> None:
    """shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort,
    and the next transaction starts empty of the aborted one's partitions."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 0)])
    tc.end_kafka(TID, pid, epoch, commit=False)
    tc.end_kafka(TID, pid, epoch, commit=False)
    with pytest.raises(TransactionStateError, match="CompleteAbort"):
        tc.end_kafka(TID, pid, epoch, commit=True)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 1)])
    assert tc.describe(TID).members == {pid: frozenset({("t", 1)})}


class _CoordinatorActor:
    """The coordinator actor's transaction methods the brokers call (``CoordinatorService``'s,
    over a real coordinator)."""

    def __init__(self, tc: TransactionCoordinator) -> None:
        self.tc = tc

    def kafka_txn_coordinator_dir(self, transactional_id: str) -> str:
        return f"/dirs/{self.tc.partition_of(transactional_id) % 2}"

    def kafka_init_producer_id(self, tid: str, timeout_ms: int, pid: int,
                               epoch: int) -> tuple[int, int]:
        return self.tc.init_producer_id(tid, timeout_ms, pid, epoch)

    def describe_transaction(self, transactional_id: str) -> Any:
        return self.tc.describe(transactional_id)

    def list_transactions(self) -> Any:
        return self.tc.transactions()


def test_the_brokers_door_forwards_to_the_coordinator_and_reports_its_state(
        world: _KafkaWorld) -> None:
    from cluster.handles import LocalHandle
    from cluster.kafka.txns import ClusterTransactions
    from node.kafka.transactions import CoordinatorNotAvailableError

    tc = world.coordinator()
    handle = LocalHandle(_CoordinatorActor(tc), "coordinator")
    door = ClusterTransactions(handle, {"/dirs/0": 10, "/dirs/1": 11}.get)
    assert door.coordinator(TID) == 10 + tc.partition_of(TID) % 2
    pid, epoch = door.init_producer_id(TID, 60_000, -1, -1)
    tc.add_kafka_partitions(TID, pid, epoch, [("t", 1), ("t", 0)])
    tc.begin("spark-job")
    [kafka, unknown] = door.describe([TID, "nobody"])
    assert unknown is None
    assert kafka is not None
    assert (kafka.state, kafka.producer_id, kafka.producer_epoch) == ("Ongoing", pid, epoch)
    assert kafka.partitions == (("t", 0), ("t", 1))
    assert [(t.transactional_id, t.state) for t in door.list_transactions()] == [
        (TID, "Ongoing"), ("spark-job", "Empty")]
    handle.dead = True
    with pytest.raises(CoordinatorNotAvailableError, match="not available"):
        door.init_producer_id(TID, 60_000, pid, epoch)
    stranger = ClusterTransactions(LocalHandle(_CoordinatorActor(tc), "c"), {}.get)
    with pytest.raises(CoordinatorNotAvailableError, match="no broker's"):
        stranger.coordinator(TID)


def test_a_retried_init_producer_id_gets_the_same_epoch_unless_fenced_since(
        world: _KafkaWorld) -> None:
    """TransactionMetadataTest's epoch bump with an expected epoch: a retry naming the epoch
    before its own bump (the answer was lost) gets the current epoch again, not a second bump;
    after another producer's InitProducerId, or a fencing, it is PRODUCER_FENCED."""
    tc = world.coordinator()
    pid, epoch = tc.init_producer_id(TID, 60_000)
    assert tc.init_producer_id(TID, 60_000, pid, epoch) == (pid, epoch + 1)
    assert tc.init_producer_id(TID, 60_000, pid, epoch) == (pid, epoch + 1)
    assert tc.describe(TID).epoch == epoch + 1
    assert tc.init_producer_id(TID, 60_000) == (pid, epoch + 2)     # another producer
    with pytest.raises(ProducerFencedError):
        tc.init_producer_id(TID, 60_000, pid, epoch)
    # the producer of epoch + 2 bumps itself, then another InitProducerId fences its transaction
    assert tc.init_producer_id(TID, 60_000, pid, epoch + 2) == (pid, epoch + 3)
    tc.add_kafka_partitions(TID, pid, epoch + 3, [("t", 0)])
    with pytest.raises(ConcurrentTransactionsError):
        tc.init_producer_id(TID, 60_000)
    with pytest.raises(ProducerFencedError):
        tc.init_producer_id(TID, 60_000, pid, epoch + 2)
    world.restart()
    tc = world.coordinator()
    assert tc.describe(TID).last_epoch == -1
