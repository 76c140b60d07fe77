"""The transaction coordinator as a plain class, on real files: a state log and partition logs
(``storage.log.Log``), a fake clock; a "restart" opens the same files in a new coordinator.

Scenarios follow Kafka's TransactionCoordinatorTest / TransactionStateManagerTest (commit, abort,
fencing by epoch, timeout abort, completion of a prepared transaction at load), adapted to the
members of a Strata transaction (one producer id per Spark task attempt)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Sequence

import pytest

from cluster.transactions.coordinator import Marker, TransactionCoordinator
from cluster.transactions.log_store import LogMarkerWriter, LogStateStore
from cluster.transactions.txn_state import (
    DATA_EPOCH,
    ProducerFencedError,
    TransactionConfig,
    TransactionStateError,
    TxnState,
    UnknownTransactionError,
)
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import InvalidConfigError
from storage.log import READ_COMMITTED, Log
from storage.producer_state import InvalidProducerEpochError
from storage.records import Record


class _World:
    """Partition logs and the state log under ``root``; ``coordinator()`` builds a coordinator
    on them as a fresh process would (after ``restart()``, on re-opened files)."""

    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.root = root
        self.clock = clock
        self.logs: dict[tuple[str, int], Log] = {}
        self.state: Log | None = None
        self.sequences: dict[tuple[int, str, int], int] = {}

    def log(self, topic: str, partition: int) -> Log:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = Log.open(self.root / f"{topic}-{partition}", clock=self.clock)
        return self.logs[key]

    def coordinator(self, writer: object | None = None,
                    config: TransactionConfig | None = None) -> TransactionCoordinator:
        if self.state is None:
            self.state = Log.open(self.root / "__strata_transactions-0",
                                  LogConfig(cleanup_policy="compact"), clock=self.clock)
        coordinator = TransactionCoordinator(
            LogStateStore(self.state, self.clock), writer or LogMarkerWriter(self.log),
            config or TransactionConfig(), clock=self.clock)
        coordinator.load()
        return coordinator

    def restart(self) -> None:
        for lg in [*self.logs.values(), *([self.state] if self.state else [])]:
            lg.close()
        self.logs.clear()
        self.state = None

    def append(self, pid: int, topic: str, partition: int, *values: bytes) -> None:
        seq = self.sequences.get((pid, topic, partition), 0)
        self.log(topic, partition).append(
            [Record(key=v, value=v, timestamp=1000) for v in values], producer_id=pid,
            producer_epoch=DATA_EPOCH, base_sequence=seq, is_transactional=True)
        self.sequences[(pid, topic, partition)] = seq + len(values)

    def committed(self, topic: str, partition: int) -> list[bytes]:
        return [r.value for r in self.log(topic, partition).read(isolation=READ_COMMITTED)]

    def stable(self, topic: str, partition: int) -> bool:
        lg = self.log(topic, partition)
        return lg.last_stable_offset == lg.log_end_offset


@pytest.fixture
def world(tmp_path: Path, clock: FakeClock) -> _World:
    return _World(tmp_path, clock)


def test_a_commit_makes_every_member_visible_to_read_committed(world: _World) -> None:
    """Kafka's TransactionCoordinatorTest 'shouldCompleteCommit...' with two members."""
    tc = world.coordinator()
    txn = tc.begin("job-1")
    tc.add_partitions("job-1", txn.epoch, 11, [("t", 0), ("t", 1)])
    tc.add_partitions("job-1", txn.epoch, 12, [("t", 1)])
    world.append(11, "t", 0, b"a")
    world.append(11, "t", 1, b"b")
    world.append(12, "t", 1, b"c")
    assert world.committed("t", 0) == [] and not world.stable("t", 0)
    outcome = tc.end("job-1", txn.epoch, commit=True)
    assert outcome.committed and outcome.committed_producers == (11, 12)
    assert world.committed("t", 0) == [b"a"]
    assert world.committed("t", 1) == [b"b", b"c"]
    assert world.stable("t", 0) and world.stable("t", 1)
    assert tc.describe("job-1").state == TxnState.COMPLETE_COMMIT


def test_a_commit_of_some_members_aborts_the_others_in_one_decision(world: _World) -> None:
    """A failed and a speculative Spark attempt are members left out of the commit."""
    tc = world.coordinator()
    txn = tc.begin("job")
    for pid, value in ((1, b"ok"), (2, b"failed"), (3, b"speculative")):
        tc.add_partitions("job", txn.epoch, pid, [("t", 0)])
        world.append(pid, "t", 0, value)
    outcome = tc.end("job", txn.epoch, commit=True, producer_ids=[1])
    assert outcome.committed_producers == (1,) and outcome.aborted_producers == (2, 3)
    assert world.committed("t", 0) == [b"ok"]
    assert world.stable("t", 0)


def test_an_abort_hides_every_member(world: _World) -> None:
    tc = world.coordinator()
    txn = tc.begin("job")
    tc.add_partitions("job", txn.epoch, 5, [("t", 0)])
    world.append(5, "t", 0, b"x", b"y")
    outcome = tc.end("job", txn.epoch, commit=False)
    assert not outcome.committed and outcome.aborted_producers == (5,)
    assert world.committed("t", 0) == [] and world.stable("t", 0)


def test_a_member_still_appending_after_the_end_is_fenced_by_the_log(world: _World) -> None:
    """The markers carry a bumped producer epoch: a zombie attempt cannot reopen a transaction
    (the LSO would stay stuck), and cannot register partitions after the end."""
    tc = world.coordinator()
    txn = tc.begin("job")
    tc.add_partitions("job", txn.epoch, 7, [("t", 0)])
    world.append(7, "t", 0, b"early")
    tc.end("job", txn.epoch, commit=False)
    with pytest.raises(InvalidProducerEpochError):
        world.append(7, "t", 0, b"late")
    with pytest.raises(TransactionStateError, match="CompleteAbort"):
        tc.add_partitions("job", txn.epoch, 7, [("t", 1)])
    assert world.stable("t", 0)


def test_a_new_begin_aborts_the_open_transaction_and_fences_its_epoch(world: _World) -> None:
    """Kafka's InitProducerId with an ongoing transaction: aborted, epoch bumped."""
    tc = world.coordinator()
    old = tc.begin("job")
    tc.add_partitions("job", old.epoch, 1, [("t", 0)])
    world.append(1, "t", 0, b"old")
    new = tc.begin("job")
    assert new.epoch > old.epoch
    assert world.stable("t", 0) and world.committed("t", 0) == []
    with pytest.raises(ProducerFencedError, match="fenced"):
        tc.end("job", old.epoch, commit=True)


def test_join_with_the_same_tag_returns_the_open_transaction(world: _World) -> None:
    tc = world.coordinator()
    first = tc.begin("sink", tag="7", join=True)
    tc.add_partitions("sink", first.epoch, 1, [("t", 0)])
    again = tc.begin("sink", tag="7", join=True)
    assert again.epoch == first.epoch
    other = tc.begin("sink", tag="8", join=True)
    assert other.epoch > first.epoch
    with pytest.raises(ProducerFencedError, match="a late task of an earlier micro-batch"):
        tc.begin("sink", tag="7", join=True)


def test_an_expired_transaction_is_aborted_and_its_owner_fenced(world: _World,
                                                               clock: FakeClock) -> None:
    """Kafka's abortTimedOutTransactions: Ongoing past transaction.timeout.ms."""
    tc = world.coordinator(config=TransactionConfig(transaction_timeout_ms=1000))
    txn = tc.begin("job")
    tc.add_partitions("job", txn.epoch, 3, [("t", 0)])
    world.append(3, "t", 0, b"x")
    clock.advance(1000)
    assert tc.abort_expired() == []
    clock.advance(1)
    [outcome] = tc.abort_expired()
    assert not outcome.committed and outcome.epoch == txn.epoch + 1
    assert world.stable("t", 0) and world.committed("t", 0) == []
    with pytest.raises(ProducerFencedError):
        tc.end("job", txn.epoch, commit=True)


def test_a_restart_aborts_what_timed_out_while_no_coordinator_ran(world: _World,
                                                                 clock: FakeClock) -> None:
    """A driver and the coordinator die; the restarted coordinator aborts at load."""
    tc = world.coordinator(config=TransactionConfig(transaction_timeout_ms=500))
    txn = tc.begin("job")
    tc.add_partitions("job", txn.epoch, 4, [("t", 0), ("t", 2)])
    world.append(4, "t", 0, b"x")
    assert not world.stable("t", 0)
    world.restart()
    clock.advance(501)
    tc = world.coordinator(config=TransactionConfig(transaction_timeout_ms=500))
    assert tc.describe("job").state == TxnState.COMPLETE_ABORT
    assert world.stable("t", 0) and world.stable("t", 2)


class _CrashAfter:
    """Writes ``n`` markers, then fails as a killed coordinator would stop."""

    def __init__(self, world: _World, n: int) -> None:
        self.inner = LogMarkerWriter(world.log)
        self.n = n

    def write_markers(self, markers: Sequence[Marker]) -> None:
        self.inner.write_markers(markers[:self.n])
        raise RuntimeError("killed")


def test_a_restart_completes_a_commit_decided_before_the_crash(world: _World) -> None:
    """Kafka's TransactionStateManager loading a PrepareCommit: the markers are sent again."""
    tc = world.coordinator(writer=_CrashAfter(world, 1))
    txn = tc.begin("job")
    tc.add_partitions("job", txn.epoch, 9, [("t", 0), ("t", 1)])
    world.append(9, "t", 0, b"a")
    world.append(9, "t", 1, b"b")
    with pytest.raises(RuntimeError):
        tc.end("job", txn.epoch, commit=True)
    assert world.committed("t", 0) == [b"a"] and not world.stable("t", 1)
    first_epoch = tc.coordinator_epoch
    world.restart()
    tc = world.coordinator()
    assert tc.coordinator_epoch == first_epoch + 1
    assert tc.describe("job").state == TxnState.COMPLETE_COMMIT
    assert world.committed("t", 0) == [b"a"] and world.committed("t", 1) == [b"b"]
    assert world.stable("t", 0) and world.stable("t", 1)
    assert tc.end("job", txn.epoch, commit=True).committed    # a retried commit: same outcome


def test_a_replayed_sink_batch_adds_nothing(world: _World) -> None:
    """The micro-batch id committed is part of the decision, and survives a restart."""
    tc = world.coordinator()
    txn = tc.begin("sink", tag="3", join=True)
    tc.add_partitions("sink", txn.epoch, 1, [("t", 0)])
    world.append(1, "t", 0, b"batch3")
    assert not tc.end("sink", txn.epoch, commit=True, sink_batch=3).replayed_batch
    world.restart()
    tc = world.coordinator()
    assert tc.describe("sink").sink_batch == 3
    replay = tc.begin("sink", tag="3", join=True)
    tc.add_partitions("sink", replay.epoch, 2, [("t", 0)])
    world.append(2, "t", 0, b"batch3-again")
    outcome = tc.end("sink", replay.epoch, commit=True, sink_batch=3)
    assert outcome.replayed_batch and not outcome.committed
    assert world.committed("t", 0) == [b"batch3"] and world.stable("t", 0)


def test_an_ended_id_is_forgotten_after_the_expiration_but_a_sinks_is_kept(
        world: _World, clock: FakeClock) -> None:
    """Kafka's transactional.id.expiration.ms, through a restart (a tombstone in the log)."""
    config = TransactionConfig(transactional_id_expiration_ms=1000)
    tc = world.coordinator(config=config)
    job = tc.begin("job")
    tc.end("job", job.epoch, commit=True)                 # an Empty transaction ends too
    sink = tc.begin("sink", tag="0", join=True)
    tc.end("sink", sink.epoch, commit=True, sink_batch=0)
    clock.advance(1000)
    tc.tick()
    assert [t.transactional_id for t in tc.transactions()] == ["job", "sink"]
    clock.advance(1)
    tc.tick()
    assert [t.transactional_id for t in tc.transactions()] == ["sink"]
    world.restart()
    tc = world.coordinator(config=config)
    assert [t.transactional_id for t in tc.transactions()] == ["sink"]
    with pytest.raises(UnknownTransactionError):
        tc.describe("job")


def test_ending_an_aborted_transaction_with_commit_is_refused(world: _World) -> None:
    tc = world.coordinator()
    txn = tc.begin("job")
    tc.end("job", txn.epoch, commit=False)
    with pytest.raises(TransactionStateError, match="already ended with CompleteAbort"):
        tc.end("job", txn.epoch, commit=True)
    assert not tc.end("job", txn.epoch, commit=False).committed     # a retried abort


def test_unknown_ids_and_bad_timeouts_are_refused(world: _World) -> None:
    tc = world.coordinator(config=TransactionConfig(transaction_timeout_ms=1000,
                                                      transaction_max_timeout_ms=10_000))
    with pytest.raises(UnknownTransactionError, match="nosuch"):
        tc.add_partitions("nosuch", 0, 1, [("t", 0)])
    with pytest.raises(InvalidConfigError, match="transaction.max.timeout.ms=10000"):
        tc.begin("job", timeout_ms=10_001)


def test_transaction_config_reads_kafka_keys() -> None:
    config = TransactionConfig.from_properties({"transaction.timeout.ms": "1500"})
    assert config.transaction_timeout_ms == 1500
    with pytest.raises(InvalidConfigError, match="transaction.timeout.ms"):
        TransactionConfig.from_properties({"transaction.timeout.ms": "0"})
    with pytest.raises(InvalidConfigError, match="above transaction.max.timeout.ms"):
        TransactionConfig.from_properties({"transaction.timeout.ms": "1000000"})


def test_transaction_errors_survive_pickling() -> None:
    err = ProducerFencedError("fenced", transactional_id="j", epoch=1, current_epoch=2)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ProducerFencedError and back.current_epoch == 2 and str(back) == "fenced"
