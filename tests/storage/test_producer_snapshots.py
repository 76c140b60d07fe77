"""Producer snapshots are a cache of what the log's batches say: a snapshot with a valid CRC that
does not match the log (stale, forged, naming batches or transactions the log does not hold) is
not trusted, and a log whose snapshots are all missing rebuilds its producer state from its
batches, even after a clean shutdown. Every forged file here is written with the snapshot
module's own encoder, so its CRC is valid."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import (
    CACHED_BATCHES,
    ORIGIN_COORDINATOR,
    BatchMetadata,
    ProducerEntry,
    encode_snapshot,
    read_snapshot,
)
from storage.records import ControlType, Record, build_batch, build_end_txn_marker

NOW = 1_700_000_000_000
EPOCH = 0


def batch(pid: int, seq: int, n: int = 3, *, transactional: bool = False) -> bytes:
    return build_batch([Record(key=b"k%d" % (seq + i), value=b"v", timestamp=NOW)
                        for i in range(n)], producer_id=pid, producer_epoch=EPOCH,
                       base_sequence=seq, is_transactional=transactional)


def plain(n: int = 1) -> bytes:
    return build_batch([Record(key=b"p", value=b"v", timestamp=NOW) for _ in range(n)])


def open_log(path: Path, **kwargs: object) -> Log:
    kwargs.setdefault("clock", FakeClock(NOW))
    return Log.open(path, LogConfig(segment_bytes=4096), **kwargs)


def reopen_clean(log: Log) -> Log:
    return open_log(log.dir, recovery_point=log.log_end_offset, had_clean_shutdown=True)


def entry(pid: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
          txn_first_offset: int = -1) -> ProducerEntry:
    batches: deque[BatchMetadata] = deque(maxlen=CACHED_BATCHES)
    if last_offset >= 0:
        batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, NOW))
    return ProducerEntry(pid, EPOCH, batches, current_txn_first_offset=txn_first_offset,
                         last_timestamp=NOW)


def forge_snapshot(directory: Path, at: int, entries: list[ProducerEntry]) -> None:
    path = files.snapshot_file(directory, at)
    path.write_bytes(encode_snapshot(entries))
    assert len(read_snapshot(path.read_bytes(), path)) == len(entries)   # a valid file


def two_producers(path: Path) -> Log:
    """Producer 7 at offsets 0-2 (sequences 0-2), producer 8 at 3-5 (sequences 0-2), closed
    cleanly: the snapshot at 6 is the log's own."""
    log = open_log(path)
    log.append_batch(batch(7, 0))
    log.append_batch(batch(8, 0))
    log.close()
    return log


# each forged entry names a batch the log does not hold at that offset
FORGED_BATCHES = {
    "an unknown producer at another producer's offsets": entry(9, 0, 2, 3, 5),
    "a producer's next sequences at another producer's offsets": entry(7, 3, 5, 3, 5),
    "a batch past the log end": entry(7, 3, 5, 40, 42),
    "a batch past the snapshot's own offset": entry(7, 3, 5, 6, 8),
    "a sequence the batch at that offset does not carry": entry(8, 3, 5, 3, 5),
}


@pytest.mark.parametrize("forged", FORGED_BATCHES.values(), ids=FORGED_BATCHES.keys())
def test_a_snapshot_naming_a_batch_the_log_does_not_hold_is_not_trusted(
        tmp_path: Path, forged: ProducerEntry) -> None:
    log = two_producers(tmp_path / "p-0")
    truthful = [entry(7, 0, 2, 0, 2), entry(8, 0, 2, 3, 5)]
    forge_snapshot(log.dir, 6, [e for e in truthful if e.producer_id != forged.producer_id]
                   + [forged])
    reopened = reopen_clean(log)
    new = reopened.append_batch(batch(forged.producer_id, forged.batches[-1].first_seq))
    assert not new.duplicate and (new.first_offset, new.last_offset) == (6, 8)
    assert reopened.log_end_offset == 9
    assert [r.offset for r in reopened.read(6)] == [6, 7, 8]
    for pid, first in ((7, 0), (8, 3)):       # the true state came back from the batches
        retry = reopened.append_batch(batch(pid, 0))
        assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first, first + 2)


def test_a_snapshot_that_matches_the_log_is_used(tmp_path: Path) -> None:
    """The check refuses only what the log contradicts: the log's own snapshot, rewritten as it
    was, still answers a retry with the original offsets."""
    log = two_producers(tmp_path / "p-0")
    forge_snapshot(log.dir, 6, [entry(7, 0, 2, 0, 2), entry(8, 0, 2, 3, 5)])
    reopened = reopen_clean(log)
    assert reopened.producer_state.map_end_offset == 6
    retry = reopened.append_batch(batch(8, 0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (3, 5)


FORGED_TRANSACTIONS = {
    "a producer with no batch in the log": entry(9, -1, -1, -1, -1, txn_first_offset=1),
    "another producer's batch": entry(9, -1, -1, -1, -1, txn_first_offset=3),
    "a plain batch of the producer": entry(7, 0, 2, 0, 2, txn_first_offset=0),
    "an offset past the log end": entry(9, -1, -1, -1, -1, txn_first_offset=30),
}


@pytest.mark.parametrize("forged", FORGED_TRANSACTIONS.values(), ids=FORGED_TRANSACTIONS.keys())
def test_a_snapshot_naming_an_open_transaction_the_log_does_not_hold_pins_nothing(
        tmp_path: Path, forged: ProducerEntry) -> None:
    log = two_producers(tmp_path / "p-0")
    truthful = [entry(7, 0, 2, 0, 2), entry(8, 0, 2, 3, 5)]
    forge_snapshot(log.dir, 6, [e for e in truthful if e.producer_id != forged.producer_id]
                   + [forged])
    reopened = reopen_clean(log)
    assert reopened.producer_state.ongoing_transactions == {}
    assert reopened.last_stable_offset == reopened.log_end_offset == 6
    assert [r.offset for r in reopened.read(0, isolation="read_committed")] == list(range(6))


def test_a_snapshot_naming_a_transaction_the_log_holds_keeps_it_open(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(plain())                                 # 0
    log.append_batch(batch(7, 0, 2, transactional=True))      # 1-2, open
    log.close()
    forge_snapshot(log.dir, 3, [entry(7, 0, 1, 1, 2, txn_first_offset=1)])
    reopened = reopen_clean(log)
    assert reopened.producer_state.ongoing_transactions == {1: 7}
    assert reopened.last_stable_offset == 1


def test_an_open_transaction_survives_the_loss_of_every_snapshot_after_a_clean_shutdown(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(plain())                                 # 0
    log.append_batch(batch(7, 0, 2, transactional=True))      # 1-2
    log.roll()                                                # a snapshot at 3 as well
    log.append_batch(plain())                                 # 3
    log.close()
    snapshots = list(log.dir.glob("*.snapshot"))
    assert snapshots
    for path in snapshots:
        path.unlink()
    reopened = reopen_clean(log)
    assert reopened.producer_state.ongoing_transactions == {1: 7}
    assert reopened.last_stable_offset == 1
    assert [r.offset for r in reopened.read(0, isolation="read_committed")] == [0]
    reopened.append_batch(build_end_txn_marker(ControlType.ABORT, producer_id=7,
                                               producer_epoch=EPOCH, coordinator_epoch=0,
                                               timestamp=NOW),
                          origin=ORIGIN_COORDINATOR)          # 4
    assert reopened.last_stable_offset == reopened.log_end_offset == 5
    assert [r.offset for r in reopened.read(0, isolation="read_committed")] == [0, 3]
    assert [r.offset for r in reopened.read(0)] == [0, 1, 2, 3]
    again = reopen_clean(reopened)
    assert [r.offset for r in again.read(0, isolation="read_committed")] == [0, 3]


def test_a_producer_survives_the_loss_of_every_snapshot_after_a_clean_shutdown(
        tmp_path: Path) -> None:
    log = two_producers(tmp_path / "p-0")
    for path in log.dir.glob("*.snapshot"):
        path.unlink()
    reopened = reopen_clean(log)
    retry = reopened.append_batch(batch(7, 0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    assert reopened.log_end_offset == 6
