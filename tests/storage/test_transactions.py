"""Transactions (KIP-98) in the producer state and the log: ports of Kafka's
ProducerStateManagerTest transaction cases on real snapshot files, append origins, the last
stable offset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import InvalidRecordError
from storage.log import Log
from storage.producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    CompletedTxn,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    read_snapshot,
)
from storage.records import (
    ControlType,
    Record,
    build_batch,
    build_end_txn_marker,
    set_base_offset,
)
from storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000
PID = 1
EPOCH = 0
EXPIRATION_MS = 24 * 60 * 60 * 1000


# ---- ProducerStateManager level (Kafka's helpers appendClientEntry and appendEndTxnMarker) ------
def append_client(state: ProducerStateManager, pid: int, epoch: int, seq: int, offset: int,
                  is_transactional: bool, timestamp: int = NOW, origin: str = ORIGIN_CLIENT
                  ) -> None:
    info = state.prepare_update(pid, origin)
    info.check_data_batch(epoch, seq, 1, offset)
    info.append_data_batch(epoch, seq, seq, offset, offset, timestamp, is_transactional)
    state.commit(info)
    state.map_end_offset = offset + 1


def append_marker(state: ProducerStateManager, pid: int, epoch: int, control: ControlType,
                  offset: int, coordinator_epoch: int = 0, timestamp: int = NOW
                  ) -> CompletedTxn | None:
    info = state.prepare_update(pid, ORIGIN_COORDINATOR)
    completed = info.append_end_txn_marker(control, coordinator_epoch, epoch, offset, timestamp)
    state.commit(info)
    if completed is not None:
        state.complete_txn(completed)
    state.map_end_offset = offset + 1
    return completed


def reloaded(state: ProducerStateManager, end: int, now: int = NOW) -> ProducerStateManager:
    state.take_snapshot()
    other = ProducerStateManager(state.dir, EXPIRATION_MS)
    other.load_latest_snapshot(end, now)
    return other


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, EXPIRATION_MS)


def test_append_txn_marker_with_no_producer_state(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testAppendTxnMarkerWithNoProducerState."""
    append_marker(state, PID, 2, ControlType.COMMIT, 27)
    entry = state.producers[PID]
    assert (entry.epoch, entry.last_seq) == (2, -1)
    with pytest.raises(InvalidProducerEpochError):
        append_client(state, PID, 0, 0, 28, False)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(state, PID, 2, 17, 28, False)
    append_client(state, PID, 2, 0, 39, False)
    assert (state.producers[PID].epoch, state.producers[PID].last_seq) == (2, 0)


def test_control_record_bumps_producer_epoch(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testControlRecordBumpsProducerEpoch."""
    append_client(state, PID, EPOCH, 0, 0, False)
    append_marker(state, PID, 1, ControlType.ABORT, 1)
    entry = state.producers[PID]
    assert (entry.epoch, entry.current_txn_first_offset, entry.last_seq) == (1, -1, -1)
    append_client(state, PID, 1, 0, 2, False)
    assert state.producers[PID].batches[0].first_seq == 0


def test_prepare_update_does_not_mutate(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testPrepareUpdateDoesNotMutate."""
    info = state.prepare_update(PID)
    info.append_data_batch(EPOCH, 0, 5, 15, 20, NOW)
    assert PID not in state.producers
    state.commit(info)
    following = state.prepare_update(PID)
    following.append_data_batch(EPOCH, 6, 10, 26, 30, NOW)
    assert (state.producers[PID].last_seq, state.producers[PID].last_offset) == (5, 20)
    state.commit(following)
    assert (state.producers[PID].last_seq, state.producers[PID].last_offset) == (10, 30)


def test_update_producer_transaction_state(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.updateProducerTransactionState."""
    append_client(state, PID, EPOCH, 0, 9, False)
    info = state.prepare_update(PID)
    info.append_data_batch(EPOCH, 1, 5, 16, 20, NOW, True)
    assert info.entry.current_txn_first_offset == 16 and info.started_transactions == [16]
    info.append_data_batch(EPOCH, 6, 10, 26, 30, NOW, True)
    assert info.entry.current_txn_first_offset == 16 and info.started_transactions == [16]
    completed = info.append_end_txn_marker(ControlType.COMMIT, 15, EPOCH, 40, NOW)
    assert completed == CompletedTxn(PID, 16, 40, False)
    entry = info.entry
    assert (entry.last_seq, entry.last_offset, entry.current_txn_first_offset) == (10, 30, -1)
    assert entry.coordinator_epoch == 15


def test_out_of_sequence_after_control_record_epoch_bump(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testOutOfSequenceAfterControlRecordEpochBump."""
    append_client(state, PID, EPOCH, 0, 0, True)
    append_client(state, PID, EPOCH, 1, 1, True)
    append_marker(state, PID, 1, ControlType.ABORT, 2)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(state, PID, 1, 2, 3, True)
    with pytest.raises(OutOfOrderSequenceError):
        append_client(state, PID, 2, 2, 3, True)
    append_client(state, PID, 1, 0, 3, True)
    assert (state.producers[PID].epoch, state.producers[PID].last_seq) == (1, 0)


def test_non_transactional_append_with_ongoing_transaction(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testNonTransactionalAppendWithOngoingTransaction."""
    append_client(state, PID, EPOCH, 0, 0, True)
    with pytest.raises(InvalidTxnStateError):
        append_client(state, PID, EPOCH, 1, 1, False)


def test_recover_from_snapshot_unfinished_transaction(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testRecoverFromSnapshotUnfinishedTransaction."""
    append_client(state, PID, EPOCH, 0, 0, True)
    append_client(state, PID, EPOCH, 1, 1, True)
    recovered = reloaded(state, 3)
    entry = recovered.producers[PID]
    assert (entry.batches[0].first_offset, entry.batches[0].first_seq, entry.last_offset,
            entry.last_seq, entry.current_txn_first_offset) == (1, 1, 1, 1, 0)
    assert recovered.first_undecided_offset() == 0
    append_client(recovered, PID, EPOCH, 2, 2, True)


def test_recover_from_snapshot_finished_transaction(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testRecoverFromSnapshotFinishedTransaction."""
    append_client(state, PID, EPOCH, 0, 0, True)
    append_client(state, PID, EPOCH, 1, 1, True)
    append_marker(state, PID, EPOCH, ControlType.ABORT, 2)
    recovered = reloaded(state, 3)
    entry = recovered.producers[PID]
    assert (entry.last_offset, entry.last_seq, entry.current_txn_first_offset) == (1, 1, -1)
    assert recovered.first_undecided_offset() is None


def test_recover_from_snapshot_empty_transaction(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testRecoverFromSnapshotEmptyTransaction: a producer known
    only by its marker is kept with the marker's timestamp."""
    append_marker(state, PID, EPOCH, ControlType.ABORT, 0, timestamp=NOW - 5)
    recovered = reloaded(state, 1)
    entry = recovered.producers[PID]
    assert (entry.last_timestamp, entry.current_txn_first_offset, entry.last_offset) \
        == (NOW - 5, -1, -1)


def test_producer_state_after_fencing_abort_marker(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testProducerStateAfterFencingAbortMarker."""
    append_client(state, PID, EPOCH, 0, 0, True)
    append_marker(state, PID, EPOCH + 1, ControlType.ABORT, 1)
    entry = state.producers[PID]
    assert (entry.current_txn_first_offset, entry.last_offset) == (-1, -1)
    state.remove_expired_producers(NOW)
    assert PID in state.producers


def test_first_unstable_offset(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testFirstUnstableOffset (the high watermark is the log end
    here, so the first unstable offset is the first undecided one)."""
    assert state.first_undecided_offset() is None
    append_client(state, PID, 5, 0, 99, True)
    assert state.first_undecided_offset() == 99
    append_client(state, 2, 5, 0, 105, True)
    assert state.first_undecided_offset() == 99
    append_marker(state, PID, 5, ControlType.COMMIT, 109)
    assert state.first_undecided_offset() == 105
    append_marker(state, 2, 5, ControlType.ABORT, 112)
    assert state.first_undecided_offset() is None


def test_producers_with_ongoing_transactions_dont_expire(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testProducersWithOngoingTransactionsDontExpire."""
    append_client(state, PID, 5, 0, 99, True)
    assert state.remove_expired_producers(NOW + EXPIRATION_MS + 1) == 0
    assert PID in state.producers and state.first_undecided_offset() == 99
    assert reloaded(state, 100, now=NOW + EXPIRATION_MS + 1).first_undecided_offset() == 99


def test_sequence_not_validated_for_coordinator_appends(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testSequenceNotValidatedForGroupMetadataTopic."""
    append_client(state, PID, EPOCH, -1, 99, True, origin=ORIGIN_COORDINATOR)
    append_client(state, PID, EPOCH, -1, 100, True, origin=ORIGIN_COORDINATOR)


def test_old_epoch_for_control_record(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testOldEpochForControlRecord."""
    append_client(state, PID, 5, 0, 99, True)
    with pytest.raises(InvalidProducerEpochError):
        append_marker(state, PID, 3, ControlType.COMMIT, 100)


def test_coordinator_fencing(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testCoordinatorFencing."""
    append_client(state, PID, 5, 0, 99, True)
    append_marker(state, PID, 5, ControlType.COMMIT, 100, coordinator_epoch=1)
    assert state.producers[PID].coordinator_epoch == 1
    append_marker(state, PID, 5, ControlType.COMMIT, 101, coordinator_epoch=1)
    append_marker(state, PID, 5, ControlType.COMMIT, 102, coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(state, PID, 5, ControlType.COMMIT, 103, coordinator_epoch=1)


def test_coordinator_fenced_after_reload(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testCoordinatorFencedAfterReload."""
    append_client(state, PID, EPOCH, 0, 99, True)
    append_marker(state, PID, EPOCH, ControlType.COMMIT, 100, coordinator_epoch=1)
    recovered = reloaded(state, 101)
    with pytest.raises(TransactionCoordinatorFencedError):
        append_marker(recovered, PID, EPOCH, ControlType.COMMIT, 101, coordinator_epoch=0)


def test_last_stable_offset_completed_txn(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testLastStableOffsetCompletedTxn."""
    start1, start2, start3 = 992342, 992342 + 25, 992342 + 57
    for pid, start in ((1, start1), (2, start2), (3, start3)):
        append_client(state, pid, EPOCH, 0, start, True)
    last1 = start3 + 15
    txn1 = CompletedTxn(1, start1, last1, False)
    assert state.last_stable_offset_after(txn1) == start2
    state.complete_txn(txn1)
    assert state.first_undecided_offset() == start2
    last3 = last1 + 20
    txn3 = CompletedTxn(3, start3, last3, False)
    assert state.last_stable_offset_after(txn3) == start2
    state.complete_txn(txn3)
    assert state.first_undecided_offset() == start2
    last2 = last3 + 78
    txn2 = CompletedTxn(2, start2, last2, False)
    assert state.last_stable_offset_after(txn2) == last2 + 1
    state.complete_txn(txn2)
    assert state.first_undecided_offset() is None


def test_skip_empty_transactions(state: ProducerStateManager) -> None:
    """Kafka's ProducerStateManagerTest.testSkipEmptyTransactions: one append that completes a
    transaction, holds empty ones, a complete one and an open one."""
    first = state.prepare_update(PID)
    first.append_data_batch(EPOCH, 0, 4, 16, 20, NOW, True)
    assert first.started_transactions == [16]
    state.commit(first)
    assert state.first_undecided_offset() == 16
    second = state.prepare_update(PID)
    done1 = second.append_end_txn_marker(ControlType.COMMIT, 0, EPOCH, 21, NOW)
    assert done1 == CompletedTxn(PID, 16, 21, False)
    assert second.append_end_txn_marker(ControlType.COMMIT, 0, EPOCH, 22, NOW) is None
    assert second.append_end_txn_marker(ControlType.ABORT, 0, EPOCH, 23, NOW) is None
    second.append_data_batch(EPOCH, 5, 8, 24, 27, NOW, True)
    done2 = second.append_end_txn_marker(ControlType.ABORT, 0, EPOCH, 28, NOW)
    assert done2 == CompletedTxn(PID, 24, 28, True)
    assert second.append_end_txn_marker(ControlType.ABORT, 0, EPOCH, 29, NOW) is None
    second.append_data_batch(EPOCH, 9, 10, 30, 31, NOW, True)
    assert second.started_transactions == [24, 30]
    state.commit(second)
    state.complete_txn(done1)
    state.complete_txn(done2)
    assert state.first_undecided_offset() == 30


def test_snapshot_carries_coordinator_epoch_and_open_transaction(
        state: ProducerStateManager) -> None:
    append_client(state, PID, 3, 0, 10, True)
    append_marker(state, 2, 1, ControlType.COMMIT, 11, coordinator_epoch=7)
    path = state.take_snapshot(12)
    entries = {e.producer_id: e for e in read_snapshot(path.read_bytes(), path)}
    assert (entries[PID].current_txn_first_offset, entries[PID].coordinator_epoch) == (10, -1)
    assert (entries[2].current_txn_first_offset, entries[2].coordinator_epoch,
            entries[2].last_offset) == (-1, 7, -1)


# ---- the log: append origins and markers ---------------------------------------------------------
def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = EPOCH, key: bytes = b"k") -> bytes:
    return build_batch([Record(key=key + b"%d" % (seq + i), value=b"v", timestamp=NOW)
                        for i in range(n)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)


def marker(pid: int, control: ControlType, epoch: int = EPOCH, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker(control, producer_id=pid, producer_epoch=epoch,
                                coordinator_epoch=coordinator_epoch, timestamp=NOW)


def open_log(path: Path, **kwargs: object) -> Log:
    kwargs.setdefault("clock", FakeClock(NOW))
    return Log.open(path, LogConfig(segment_bytes=4096), **kwargs)


def test_a_client_may_not_append_a_control_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    with pytest.raises(InvalidRecordError, match="not allowed to write control records"):
        log.append_batch(marker(PID, ControlType.COMMIT))
    with pytest.raises(InvalidRecordError, match="origin"):
        log.append_batch(marker(PID, ControlType.COMMIT), origin="replication")
    assert log.log_end_offset == 2


def test_the_coordinator_appends_markers_that_close_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    assert log.producer_state.ongoing_transactions == {0: PID}
    info = log.append_batch(marker(PID, ControlType.COMMIT), origin=ORIGIN_COORDINATOR)
    assert (info.first_offset, info.last_offset) == (2, 2)
    assert log.producer_state.ongoing_transactions == {}
    assert log.producer_state.producers[PID].current_txn_first_offset == -1


def test_markers_from_a_fenced_producer_or_coordinator_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0, epoch=3))
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=PID, producer_epoch=3,
                              coordinator_epoch=5)
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=2,
                                  coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=3,
                                  coordinator_epoch=4)
    assert log.log_end_offset == 3


def test_a_control_batch_that_is_not_a_marker_is_refused(tmp_path: Path) -> None:
    from storage.records import control_record
    log = open_log(tmp_path / "p-0")
    leader_change = build_batch([control_record(2, 0, NOW)], is_control=True, producer_id=PID,
                                producer_epoch=EPOCH)
    with pytest.raises(InvalidRecordError, match="not a commit or abort marker"):
        log.append_batch(leader_change, origin=ORIGIN_COORDINATOR)
    assert log.log_end_offset == 0


def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    plain = build_batch([Record(key=b"x", value=b"v", timestamp=NOW)], producer_id=PID,
                        producer_epoch=EPOCH, base_sequence=2)
    with pytest.raises(InvalidTxnStateError):
        log.append_batch(plain)
    assert log.log_end_offset == 2


def test_open_transactions_survive_a_clean_close_and_a_kill(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    log.append_batch(txn_batch(2, 0))
    log.roll()
    log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH,
                              coordinator_epoch=4)
    killed = tmp_path / "killed" / "p-0"
    shutil.copytree(log.dir, killed)                 # snapshot at 4 only, marker replayed
    log.flush()
    log.close()
    clean = open_log(tmp_path / "p-0", recovery_point=5, had_clean_shutdown=True)
    replayed = open_log(killed)
    for reopened in (clean, replayed):
        assert reopened.producer_state.ongoing_transactions == {2: 2}
        assert reopened.last_stable_offset == 2
        with pytest.raises(TransactionCoordinatorFencedError):
            reopened.append_end_txn_marker(ControlType.ABORT, producer_id=PID,
                                           producer_epoch=EPOCH, coordinator_epoch=3)


# ---- the last stable offset --------------------------------------------------------------------
def test_last_stable_offset_is_the_first_offset_of_the_earliest_open_transaction(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append([Record(key=b"a", value=b"v", timestamp=NOW)])
    assert log.last_stable_offset == log.log_end_offset == 1
    log.append_batch(txn_batch(PID, 0))              # 1-2
    log.append_batch(txn_batch(2, 0))                # 3-4
    assert log.last_stable_offset == 1
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=2, producer_epoch=EPOCH)   # 5
    assert log.last_stable_offset == 1
    log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH)  # 6
    assert log.last_stable_offset == log.log_end_offset == 7
    log.append_batch(txn_batch(PID, 2))              # 7-8
    assert log.last_stable_offset == 7


def test_last_stable_offset_follows_truncation(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))              # 0-1
    log.roll()
    log.append_batch(txn_batch(2, 0))                # 2-3
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=PID, producer_epoch=EPOCH)  # 4
    log.roll()
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=2, producer_epoch=EPOCH)    # 5
    assert log.last_stable_offset == 6
    log.truncate_to(5)                               # producer 2's marker is gone
    assert log.last_stable_offset == 2
    log.truncate_to(4)                               # and producer 1's
    assert log.last_stable_offset == 0
    assert log.producer_state.ongoing_transactions == {0: PID, 2: 2}
    log.truncate_to(2)
    assert log.last_stable_offset == 0 and log.producer_state.ongoing_transactions == {0: PID}
    log.truncate_to(0)
    assert log.last_stable_offset == log.log_end_offset == 0
    assert log.producer_state.ongoing_transactions == {}


def test_last_stable_offset_after_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    log.truncate_fully_and_start_at(10)
    assert log.last_stable_offset == 10 and log.producer_state.ongoing_transactions == {}


def test_last_stable_offset_is_not_below_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))
    log.append([Record(key=b"a", value=b"v", timestamp=NOW)])
    log.maybe_increment_log_start_offset(2)
    assert log.last_stable_offset == 2


def test_last_stable_offset_survives_reopen_and_recovery(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append([Record(key=b"a", value=b"v", timestamp=NOW)])
    log.append_batch(txn_batch(PID, 0))              # 1-2, open
    log.roll()
    log.append_batch(txn_batch(2, 0))                # 3-4
    log.append_end_txn_marker(ControlType.ABORT, producer_id=2, producer_epoch=EPOCH)
    killed = tmp_path / "killed" / "p-0"
    shutil.copytree(log.dir, killed)
    log.flush()
    log.close()
    for reopened in (open_log(tmp_path / "p-0", recovery_point=6, had_clean_shutdown=True),
                     open_log(killed)):
        assert reopened.last_stable_offset == 1
        reopened.append_end_txn_marker(ControlType.COMMIT, producer_id=PID, producer_epoch=EPOCH)
        assert reopened.last_stable_offset == reopened.log_end_offset == 7


# ---- the aborted-transaction index of the log ----------------------------------------------------
def aborted(log: Log) -> list[AbortedTxn]:
    """Every entry of every segment's .txnindex (Kafka's LogTestUtils.allAbortedTransactions)."""
    return [txn for segment in log.segments() for txn in segment.txn_index.all_aborted_txns()]


def test_an_abort_marker_writes_an_aborted_txn_entry_to_the_active_segment(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(PID, 0))              # 0-1
    log.append_batch(txn_batch(2, 0))                # 2-3
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=2, producer_epoch=EPOCH)  # 4
    assert not log.active_segment.txn_index.exists()     # created by the first abort only
    log.roll()
    log.append_batch(txn_batch(3, 0))                # 5-6
    log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH)  # 7
    log.append_end_txn_marker(ControlType.ABORT, producer_id=3, producer_epoch=EPOCH)    # 8
    assert log.segments()[0].txn_index.all_aborted_txns() == []
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 7, 5),
                                                               AbortedTxn(3, 5, 8, 9)]
    assert log.active_segment.txn_index.path.name == "00000000000000000005.txnindex"


def test_truncation_removes_the_aborted_txn_entries_above_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    for pid in (1, 2, 3):
        log.append_batch(txn_batch(pid, 0))          # 0-1, 2-3, 4-5
    for pid in (1, 2, 3):                            # markers at 6, 7, 8
        log.append_end_txn_marker(ControlType.ABORT, producer_id=pid, producer_epoch=EPOCH)
    log.truncate_to(7)
    assert aborted(log) == [AbortedTxn(1, 0, 6, 2)]
    assert log.last_stable_offset == 2
    log.append_end_txn_marker(ControlType.ABORT, producer_id=2, producer_epoch=EPOCH)    # 7
    assert aborted(log) == [AbortedTxn(1, 0, 6, 2), AbortedTxn(2, 2, 7, 4)]


def test_the_txn_index_is_deleted_with_its_segment(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=4096, file_delete_delay_ms=0),
                   clock=FakeClock(NOW))
    log.append_batch(txn_batch(PID, 0))
    log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH)
    index = log.active_segment.txn_index.path
    log.roll()
    log.maybe_increment_log_start_offset(3)
    assert log.delete_old_segments() == 1
    assert not index.exists() and not list(tmp_path.glob("p-0/*.txnindex*"))


def test_the_txn_index_is_swapped_in_and_out_with_its_segment(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=4096, file_delete_delay_ms=0),
                   clock=FakeClock(NOW))
    log.append_batch(txn_batch(PID, 0))              # 0-1
    log.append_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH)  # 2
    log.roll()
    log.append_batch(txn_batch(2, 0))                # 3-4
    log.append_end_txn_marker(ControlType.ABORT, producer_id=2, producer_epoch=EPOCH)    # 5
    log.roll()
    old = log.segments()[:2]
    cleaned = log.create_cleaned_segment(0)
    for segment in old:
        fetch = log.read_raw(segment.base_offset)
        cleaned.append(segment.read_next_offset() - 1, NOW, segment.base_offset, [fetch.data])
        for txn in segment.txn_index.all_aborted_txns():
            cleaned.txn_index.append(txn)
    assert cleaned.txn_index.path.name.endswith(".txnindex.cleaned")
    cleaned.on_become_inactive()
    log.replace_segments([cleaned], old)
    names = sorted(p.name for p in (tmp_path / "p-0").glob("*.txnindex*"))
    assert names == ["00000000000000000000.txnindex"]
    assert aborted(log) == [AbortedTxn(PID, 0, 2, 3), AbortedTxn(2, 3, 5, 6)]


def test_recover_transaction_index(tmp_path: Path) -> None:
    """Kafka's LogSegmentTest.testRecoverTransactionIndex: recovery replays the segment's batches
    through a producer state to rebuild its .txnindex, also when a transaction began in an earlier
    segment."""
    from storage.producer_state import BatchMetadata, ProducerEntry
    from storage.segment import LogSegment
    config = LogConfig()
    segment = LogSegment.create(tmp_path, 100, config)

    def put(data: bytes, base: int) -> None:
        buf = bytearray(data)
        set_base_offset(buf, base)
        last = base + int.from_bytes(buf[23:27], "big")
        segment.append(last, -1, base, [bytes(buf)])
    two = [Record(value=b"a", timestamp=NOW), Record(value=b"b", timestamp=NOW)]
    pid1, pid2 = 5, 10
    put(build_batch(two, producer_id=pid1, producer_epoch=0, base_sequence=100,
                    partition_leader_epoch=15, is_transactional=True), 100)
    put(build_batch(two, producer_id=pid2, producer_epoch=0, base_sequence=100,
                    partition_leader_epoch=15, is_transactional=True), 102)
    put(build_batch(two, partition_leader_epoch=15), 104)
    put(marker(pid2, ControlType.ABORT), 106)
    put(marker(pid1, ControlType.COMMIT), 107)

    state = ProducerStateManager(tmp_path / "state")
    (tmp_path / "state").mkdir()
    segment.recover(config.max_message_bytes)
    segment.rebuild_txn_index(state)
    assert state.map_end_offset == 108
    assert segment.txn_index.all_aborted_txns() == [AbortedTxn(pid2, 102, 106, 100)]

    state = ProducerStateManager(tmp_path / "state")
    entry = ProducerEntry(pid2, 0, current_txn_first_offset=75)
    entry.batches.append(BatchMetadata(6, 10, 5, 10, -1))
    state.load_producer_entry(entry)
    segment.rebuild_txn_index(state)
    assert state.map_end_offset == 108
    assert segment.txn_index.all_aborted_txns() == [AbortedTxn(pid2, 75, 106, 100)]


def write_kafka_txn_log(path: Path, segment_bytes: int = 128 * 5) -> Log:
    """The log of Kafka's LogLoaderTest transaction index recovery cases (segment.bytes 640) and
    UnifiedLogTest.testTransactionIndexUpdated: four transactional producers, plain data between,
    two aborts and two commits."""
    log = Log.open(path, LogConfig(segment_bytes=segment_bytes), clock=FakeClock(NOW))
    sequences = {1: 0, 2: 0, 3: 0, 4: 0}

    def txn(pid: int, n: int) -> None:
        log.append_batch(build_batch([Record(value=b"%d" % i, timestamp=NOW) for i in range(n)],
                                     producer_id=pid, producer_epoch=0,
                                     base_sequence=sequences[pid], is_transactional=True))
        sequences[pid] += n

    def plain(n: int) -> None:
        log.append([Record(value=b"%d" % i, timestamp=NOW) for i in range(n)])

    def end(pid: int, control: ControlType) -> None:
        log.append_end_txn_marker(control, producer_id=pid, producer_epoch=0)

    txn(1, 5); plain(3); txn(2, 2); txn(1, 4); txn(3, 3); plain(2); txn(1, 10)   # noqa: E702
    end(1, ControlType.ABORT)                                                     # 29
    txn(2, 6); txn(4, 3); plain(10); txn(3, 9)                                    # noqa: E702
    end(3, ControlType.COMMIT)                                                    # 58
    txn(4, 8); txn(2, 7)                                                          # noqa: E702
    end(2, ControlType.ABORT)                                                     # 74
    plain(10); txn(4, 4)                                                          # noqa: E702
    end(4, ControlType.COMMIT)                                                    # 89
    assert log.log_end_offset == 90
    return log


KAFKA_ABORTED = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]


def test_full_transaction_index_recovery(tmp_path: Path) -> None:
    """Kafka's LogLoaderTest.testFullTransactionIndexRecovery."""
    log = write_kafka_txn_log(tmp_path / "p-0")
    assert aborted(log) == KAFKA_ABORTED and log.number_of_segments > 3
    for segment in log.segments():
        segment.offset_index.delete_if_exists()
        segment.txn_index.delete_if_exists()
    log.close()
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024 * 5), clock=FakeClock(NOW))
    assert aborted(reloaded) == KAFKA_ABORTED


@pytest.mark.parametrize("without_snapshots", [False, True])
def test_recover_only_last_segment(tmp_path: Path, without_snapshots: bool) -> None:
    """Kafka's LogLoaderTest.testRecoverOnlyLastSegment and testRecoverLastSegmentWithNoSnapshots
    (the producer state is then rebuilt from the start of the log)."""
    log = write_kafka_txn_log(tmp_path / "p-0")
    last = log.segments()[-1]
    recovery_point = last.base_offset
    log.close()
    if without_snapshots:
        for snapshot in (tmp_path / "p-0").glob("*.snapshot"):
            snapshot.unlink()
    last.offset_index.delete_if_exists()
    last.txn_index.delete_if_exists()
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024 * 5),
                        recovery_point=recovery_point, clock=FakeClock(NOW))
    assert aborted(reloaded) == KAFKA_ABORTED


@pytest.mark.parametrize("without_snapshots", [False, True])
def test_recovery_rebuilds_an_entry_whose_transaction_began_segments_earlier(
        tmp_path: Path, without_snapshots: bool) -> None:
    """As testRecoverOnlyLastSegment, from the segment holding producer 2's abort marker (its
    transaction began at offset 8, two segments earlier): the producer state at that segment's
    base comes from its snapshot, or without snapshots from a replay of the log before it."""
    log = write_kafka_txn_log(tmp_path / "p-0")
    holder = next(s for s in log.segments() if s.txn_index.all_aborted_txns()
                  == [KAFKA_ABORTED[1]])
    assert holder.base_offset > 8
    log.close()
    if without_snapshots:
        for snapshot in (tmp_path / "p-0").glob("*.snapshot"):
            snapshot.unlink()
    holder.txn_index.delete_if_exists()
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024 * 5),
                        recovery_point=holder.base_offset, clock=FakeClock(NOW))
    assert aborted(reloaded) == KAFKA_ABORTED
    assert reloaded.last_stable_offset == reloaded.log_end_offset == 90


def test_a_torn_txn_index_is_rebuilt_at_load_after_a_clean_shutdown(tmp_path: Path) -> None:
    log = write_kafka_txn_log(tmp_path / "p-0")
    holder = next(s for s in log.segments() if s.txn_index.all_aborted_txns())
    log.flush()
    log.close()
    with open(holder.txn_index.path, "ab") as f:
        f.write(b"\x00" * 7)
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024 * 5), recovery_point=90,
                        had_clean_shutdown=True, clock=FakeClock(NOW))
    assert aborted(reloaded) == KAFKA_ABORTED
    assert holder.txn_index.path.stat().st_size == 34


# ---- read_committed ------------------------------------------------------------------------------
# offsets of the Kafka txn log by who wrote them: aborted (producers 1 and 2), markers, the rest
KAFKA_ABORTED_OFFSETS = [*range(0, 5), *range(8, 14), *range(19, 29), *range(30, 36),
                         *range(67, 74)]
KAFKA_MARKERS = [29, 58, 74, 89]


def test_transaction_index_updated(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testTransactionIndexUpdated (one 5 MiB segment)."""
    log = write_kafka_txn_log(tmp_path / "p-0", segment_bytes=5 * 1024 * 1024)
    assert log.number_of_segments == 1
    assert aborted(log) == KAFKA_ABORTED
    assert log.last_stable_offset == 90


@pytest.mark.parametrize("segment_bytes", [128 * 5, 5 * 1024 * 1024])
def test_read_committed_skips_aborted_transactions_and_markers(tmp_path: Path,
                                                               segment_bytes: int) -> None:
    log = write_kafka_txn_log(tmp_path / "p-0", segment_bytes=segment_bytes)
    committed = [r.offset for r in log.read(0, isolation="read_committed")]
    assert committed == [o for o in range(90)
                         if o not in KAFKA_ABORTED_OFFSETS and o not in KAFKA_MARKERS]
    uncommitted = [r.offset for r in log.read(0)]
    assert uncommitted == [o for o in range(90) if o not in KAFKA_MARKERS]
    for start in (5, 20, 31, 60, 74, 75):           # a fetch from the middle sees the same
        assert [r.offset for r in log.read(start, isolation="read_committed")] \
            == [o for o in committed if o >= start]
    assert [r.offset for r in log.read(0, fetch_bytes=1, isolation="read_committed")] \
        == committed


def test_fetch_up_to_last_stable_offset(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testFetchUpToLastStableOffset: read_committed fetches below the LSO
    return data, fetches at or above it none, before and after a commit."""
    log = open_log(tmp_path / "p-0")
    seq = {1: 0, 2: 0}

    def txn(pid: int, n: int) -> None:
        log.append_batch(txn_batch(pid, seq[pid], n))
        seq[pid] += n

    txn(1, 5)
    log.append([Record(value=b"%d" % i, timestamp=NOW) for i in range(3)])
    txn(2, 2)
    txn(1, 4)
    log.append([Record(value=b"%d" % i, timestamp=NOW) for i in range(2)])
    txn(1, 10)

    def assert_lso_bounded_fetches() -> None:
        for offset in range(log.log_start_offset, log.last_stable_offset):
            assert list(log.read(offset, isolation="read_committed"))
        for offset in range(log.last_stable_offset, log.log_end_offset + 1):
            assert not list(log.read(offset, isolation="read_committed"))

    assert log.last_stable_offset == 0
    assert_lso_bounded_fetches()
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=1, producer_epoch=EPOCH)
    assert log.last_stable_offset == 8
    assert_lso_bounded_fetches()
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=2, producer_epoch=EPOCH)
    assert log.last_stable_offset == log.log_end_offset == 28
    assert [r.offset for r in log.read(0, isolation="read_committed")] \
        == [o for o in range(28) if o not in (26, 27)]


def test_last_stable_offset_with_mixed_producer_data(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testLastStableOffsetWithMixedProducerData."""
    log = open_log(tmp_path / "p-0")
    first = log.append_batch(txn_batch(137, 0, 3, epoch=5))
    assert log.last_stable_offset == first.first_offset
    log.append([Record(value=v, timestamp=NOW) for v in (b"g", b"h", b"i")])
    second = log.append_batch(txn_batch(983, 0, 3, epoch=5))
    assert log.last_stable_offset == first.first_offset
    log.append_end_txn_marker(ControlType.ABORT, producer_id=137, producer_epoch=5)
    assert log.last_stable_offset == second.first_offset
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=983, producer_epoch=5)
    assert log.last_stable_offset == log.log_end_offset
    assert [r.offset for r in log.read(isolation="read_committed")] == [3, 4, 5, 6, 7, 8]


def test_aborted_transaction_spanning_multiple_segments(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testAbortedTransactionSpanningMultipleSegments."""
    records = txn_batch(137, 0, 3, epoch=5)
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=len(records)), clock=FakeClock(NOW))
    first = log.append_batch(records)
    assert log.last_stable_offset == first.first_offset
    log.append_batch(txn_batch(137, 3, 3, epoch=5))
    assert log.last_stable_offset == first.first_offset
    assert log.active_segment.base_offset == 3
    log.append_end_txn_marker(ControlType.ABORT, producer_id=137, producer_epoch=5)
    assert log.last_stable_offset == log.log_end_offset
    found = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in found] == [(137, 0)]
    assert list(log.read(0, isolation="read_committed")) == []
    assert len(list(log.read(0))) == 6


def test_read_refuses_an_unknown_isolation(tmp_path: Path) -> None:
    from storage.errors import StorageError
    log = open_log(tmp_path / "p-0")
    with pytest.raises(StorageError, match="isolation 'serializable'"):
        list(log.read(0, isolation="serializable"))


def test_read_committed_is_right_after_reopen_and_index_recovery(tmp_path: Path) -> None:
    log = write_kafka_txn_log(tmp_path / "p-0")
    expected = [r.offset for r in log.read(0, isolation="read_committed")]
    for segment in log.segments():
        segment.offset_index.delete_if_exists()
        segment.txn_index.delete_if_exists()
    log.close()
    reopened = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=128 * 5), clock=FakeClock(NOW))
    assert [r.offset for r in reopened.read(0, isolation="read_committed")] == expected


# ---- more UnifiedLogTest transactional cases -------------------------------------------------------
def three_plain_then_open_txn(path: Path) -> Log:
    log = Log.open(path, LogConfig(segment_bytes=1024 * 1024), clock=FakeClock(NOW))
    log.append([Record(value=b"%d" % i, timestamp=NOW) for i in range(3)])
    log.append_batch(build_batch([Record(value=b"3", timestamp=NOW),
                                  Record(value=b"4", timestamp=NOW)], producer_id=17,
                                 producer_epoch=10, base_sequence=0, is_transactional=True))
    assert log.last_stable_offset == 3
    log.flush()
    log.close()
    reopened = Log.open(path, LogConfig(segment_bytes=1024 * 1024), recovery_point=5,
                        had_clean_shutdown=True, clock=FakeClock(NOW))
    assert reopened.producer_state.first_undecided_offset() == 3
    return reopened


@pytest.mark.parametrize("fully", [False, True])
def test_truncate_below_first_unstable_offset(tmp_path: Path, fully: bool) -> None:
    """Kafka's UnifiedLogTest.testTruncateBelowFirstUnstableOffset and
    testTruncateFullyAndStartBelowFirstUnstableOffset."""
    log = three_plain_then_open_txn(tmp_path / "p-0")
    if fully:
        log.truncate_fully_and_start_at(0)
    else:
        log.truncate_to(0)
    assert log.producer_state.first_undecided_offset() is None
    assert log.producer_state.producers == {}
    assert log.last_stable_offset == log.log_end_offset == 0


def test_truncate_fully_and_start(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testTruncateFullyAndStart (our truncate_fully_and_start_at puts the
    log start at the new offset)."""
    log = three_plain_then_open_txn(tmp_path / "p-0")
    log.truncate_fully_and_start_at(2)
    assert log.producer_state.first_undecided_offset() is None
    assert log.producer_state.producers == {}
    assert (log.log_start_offset, log.log_end_offset, log.last_stable_offset) == (2, 2, 2)


def test_rebuild_transactional_state(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testRebuildTransactionalState: an aborted transaction stays closed
    after an unclean reopen."""
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=5 * 1024 * 1024),
                   clock=FakeClock(NOW))
    log.append_batch(txn_batch(137, 0, 3, epoch=5))
    log.append_end_txn_marker(ControlType.ABORT, producer_id=137, producer_epoch=5)
    assert log.last_stable_offset == log.log_end_offset
    log.close()
    reopened = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=5 * 1024 * 1024),
                        clock=FakeClock(NOW))
    assert reopened.producer_state.first_undecided_offset() is None
    assert reopened.last_stable_offset == reopened.log_end_offset == 4


def test_zombie_coordinator_fenced_empty_transaction(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testZombieCoordinatorFencedEmptyTransaction: markers of empty
    transactions still raise the coordinator epoch (the first transaction is written through the
    coordinator here: this log has no follower path)."""
    log = open_log(tmp_path / "p-0")
    log.append_batch(txn_batch(1, 0, 10))
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=1, producer_epoch=0)
    for _ in range(2):
        log.append_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=0,
                                  coordinator_epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=0,
                                  coordinator_epoch=1)


def test_end_txn_with_fenced_producer_epoch(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testEndTxnWithFencedProducerEpoch."""
    log = open_log(tmp_path / "p-0")
    log.append_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=5,
                              coordinator_epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=4,
                                  coordinator_epoch=1)


@pytest.mark.parametrize("delete_segment", [False, True])
def test_last_stable_offset_does_not_exceed_log_start_offset(tmp_path: Path,
                                                             delete_segment: bool) -> None:
    """Kafka's UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment and
    ...AfterSegmentDeletion."""
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=5 * 1024 * 1024,
                                               file_delete_delay_ms=0), clock=FakeClock(NOW))
    log.append_batch(txn_batch(1, 0, 5))
    log.append([Record(value=b"%d" % i, timestamp=NOW) for i in range(3)])
    assert log.log_end_offset == 8
    log.roll()
    assert log.number_of_segments == 2
    log.append_batch(txn_batch(1, 5, 5))
    assert log.last_stable_offset == 0
    if delete_segment:
        log.maybe_increment_log_start_offset(8)
        assert log.delete_old_segments() == 1 and log.number_of_segments == 1
        assert log.last_stable_offset == 8
    else:
        log.maybe_increment_log_start_offset(5)
        assert log.last_stable_offset == 5


def test_a_damaged_segment_below_the_recovery_point_does_not_stop_a_txn_index_rebuild(
        tmp_path: Path) -> None:
    log = write_kafka_txn_log(tmp_path / "p-0")
    first, holder = log.segments()[0], log.segments()[2]
    assert holder.txn_index.all_aborted_txns() == [KAFKA_ABORTED[1]]
    log.flush()
    log.close()                                      # a snapshot at the log end, 90
    for segment in log.segments()[1:]:               # replayed from the start instead
        files.snapshot_file(tmp_path / "p-0", segment.base_offset).unlink()
    holder.offset_index.delete_if_exists()           # forces a rebuild of segment 2
    holder.txn_index.delete_if_exists()
    with open(first.log_path, "r+b") as f:           # a negative batch length in segment 0
        f.seek(first.translate_offset(5).position + 8)
        f.write((-5).to_bytes(4, "big", signed=True))
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=128 * 5), recovery_point=90,
                        had_clean_shutdown=True, clock=FakeClock(NOW))
    assert reloaded.log_end_offset == 90
    assert reloaded.segments()[2].txn_index.exists()  # rebuilt, without what segment 0 began


def test_txn_index_recovery_reads_large_and_small_batches_alike(tmp_path: Path) -> None:
    """The recovery replay reads only the header of a batch of 16 KiB or more and scans smaller
    ones by chunks: both kinds of producer batches, between plain ones, rebuild the same index."""
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=8 * 1024 * 1024),
                   clock=FakeClock(NOW))
    big = [Record(key=b"k%d" % i, value=b"x" * 200, timestamp=NOW) for i in range(200)]
    log.append(big)                                                   # plain, large
    log.append_batch(build_batch(big, producer_id=1, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))              # 200-399, large
    for i in range(50):
        log.append([Record(key=b"p", value=b"%d" % i, timestamp=NOW)])   # 400-449, small
    log.append_batch(txn_batch(2, 0, 3))                              # 450-452, small
    log.append(big)                                                   # 453-652
    log.append_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=0)   # 653
    log.append_batch(txn_batch(2, 3, 3))                              # 654-656
    log.append_end_txn_marker(ControlType.ABORT, producer_id=2, producer_epoch=0)   # 657
    expected = [AbortedTxn(1, 200, 653, 450), AbortedTxn(2, 450, 657, 658)]
    assert aborted(log) == expected
    committed = [r.offset for r in log.read(0, isolation="read_committed")]
    log.active_segment.txn_index.delete_if_exists()
    log.close()
    reopened = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=8 * 1024 * 1024),
                        clock=FakeClock(NOW))
    assert aborted(reopened) == expected
    assert [r.offset for r in reopened.read(0, isolation="read_committed")] == committed
    assert committed == [*range(0, 200), *range(400, 450), *range(453, 653)]
