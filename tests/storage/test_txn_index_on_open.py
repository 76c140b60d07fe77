"""A ``.txnindex`` is checked against its segment's markers when a log opens after a clean
shutdown: emptied, deleted, or naming a commit marker, it is rebuilt from the log, so a
``read_committed`` reader never gets aborted records and never loses committed ones. A log that
never saw a transaction reads no batch for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record
from storage.txn_index import AbortedTxn
from tests.storage.test_transactions import (
    KAFKA_ABORTED,
    KAFKA_ABORTED_OFFSETS,
    KAFKA_MARKERS,
    NOW,
    aborted,
    write_kafka_txn_log,
)

COMMITTED = [o for o in range(90) if o not in KAFKA_ABORTED_OFFSETS and o not in KAFKA_MARKERS]


def closed_kafka_txn_log(path: Path) -> Log:
    log = write_kafka_txn_log(path)
    log.flush()
    log.close()
    return log


def reopen_clean(path: Path) -> Log:
    return Log.open(path, LogConfig(segment_bytes=128 * 5), recovery_point=90,
                    had_clean_shutdown=True, clock=FakeClock(NOW))


def committed_offsets(log: Log) -> list[int]:
    return [r.offset for r in log.read(0, isolation="read_committed")]


def holders(log: Log) -> list[Path]:
    return [s.txn_index.path for s in log.segments() if s.txn_index.all_aborted_txns()]


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_lost_txn_index_is_rebuilt_at_load_after_a_clean_shutdown(tmp_path: Path,
                                                                     how: str) -> None:
    log = closed_kafka_txn_log(tmp_path / "p-0")
    lost = holders(log)
    assert len(lost) == 2
    for path in lost:
        if how == "deleted":
            path.unlink()
        else:
            path.write_bytes(b"")
    reloaded = reopen_clean(tmp_path / "p-0")
    assert aborted(reloaded) == KAFKA_ABORTED
    assert committed_offsets(reloaded) == COMMITTED
    assert all(path.stat().st_size == 34 for path in lost)


def test_one_lost_txn_index_among_others_is_rebuilt(tmp_path: Path) -> None:
    log = closed_kafka_txn_log(tmp_path / "p-0")
    holders(log)[-1].unlink()
    reloaded = reopen_clean(tmp_path / "p-0")
    assert aborted(reloaded) == KAFKA_ABORTED
    assert committed_offsets(reloaded) == COMMITTED


def test_a_txn_index_entry_naming_a_commit_marker_is_rebuilt(tmp_path: Path) -> None:
    """An entry for producer 3's committed transaction (offsets 14-16 and 49-57, committed at 58)
    would hide it from read_committed readers."""
    log = closed_kafka_txn_log(tmp_path / "p-0")
    segment = next(s for s in log.segments() if s.base_offset <= 58 < s.read_next_offset())
    forged = AbortedTxn(3, 14, 58, 59)
    with open(segment.txn_index.path, "ab") as f:
        f.write(forged.encode())
    reloaded = reopen_clean(tmp_path / "p-0")
    assert forged not in aborted(reloaded)
    assert aborted(reloaded) == KAFKA_ABORTED
    assert committed_offsets(reloaded) == COMMITTED


def test_a_log_without_transactions_reads_no_batch_for_its_txn_indexes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check costs a clean open of a log that never saw a transaction no read of its
    segments: the loader learns it from the directory listing and the newest snapshot."""
    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024), clock=FakeClock(NOW))
    for i in range(200):
        log.append([Record(b"k%d" % i, b"v", NOW)])
    assert log.number_of_segments > 5
    log.close()
    from storage import load_checks
    scanned: list[object] = []
    real = load_checks.txn_markers_of
    monkeypatch.setattr(load_checks, "txn_markers_of",
                        lambda segment: scanned.append(segment) or real(segment))
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1024),
                        recovery_point=log.log_end_offset, had_clean_shutdown=True,
                        clock=FakeClock(NOW))
    assert reloaded.log_end_offset == 200 and scanned == []


def test_an_empty_transaction_aborted_in_a_later_segment_needs_no_entry(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An abort marker of a producer with no open transaction (a transaction that wrote nothing
    to this partition: Kafka's testSkipEmptyTransactions) has no ``.txnindex`` entry, and the
    snapshot at its segment's base says the producer had none open: the index is trusted, not
    rebuilt at every open."""
    from storage.producer_state import ORIGIN_COORDINATOR
    from storage.records import ControlType, build_end_txn_marker

    log = closed_kafka_txn_log(tmp_path / "p-0")
    log = reopen_clean(tmp_path / "p-0")
    log.roll()
    for pid in (4, 9):                    # 4 committed at 89; 9 never wrote here
        log.append_batch(build_end_txn_marker(ControlType.ABORT, producer_id=pid,
                                              producer_epoch=0, coordinator_epoch=0,
                                              timestamp=NOW), origin=ORIGIN_COORDINATOR)
    end = log.log_end_offset
    log.close()
    caplog.set_level("WARNING", logger="storage.loader")
    reloaded = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=128 * 5), recovery_point=end,
                        had_clean_shutdown=True, clock=FakeClock(NOW))
    assert "rebuilding it from the log" not in caplog.text
    assert aborted(reloaded) == KAFKA_ABORTED
    assert committed_offsets(reloaded) == COMMITTED
