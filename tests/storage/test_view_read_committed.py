"""``read_partition_batches(isolation="read_committed")``: a reader of segment files in another
process (a Spark task) sees what ``Log.read(isolation="read_committed")`` sees: no batch of an
aborted transaction, no abort marker, nothing of a transaction still open when it reads up to the
last stable offset; read_uncommitted sees everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.producer_state import ORIGIN_COORDINATOR
from storage.records import ControlType, Record, build_batch, build_end_txn_marker
from storage.view import AbortedRanges, read_partition_batches
from storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)


class Producers:
    """Transactional producers writing straight into a log, with the coordinator's markers."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def send(self, producer: int, values: list[bytes], key: bytes | None = None) -> None:
        seq = self.sequences.get(producer, 0)
        self.log.append_batch(build_batch(
            [Record(key=key, value=v, timestamp=NOW) for v in values], producer_id=producer,
            producer_epoch=0, base_sequence=seq, is_transactional=True))
        self.sequences[producer] = seq + len(values)

    def end(self, producer: int, commit: bool) -> None:
        self.log.append_batch(build_end_txn_marker(
            ControlType.COMMIT if commit else ControlType.ABORT, producer_id=producer,
            producer_epoch=0, coordinator_epoch=0, timestamp=NOW), origin=ORIGIN_COORDINATOR)


def plain(log: Log, values: list[bytes]) -> None:
    log.append([Record(value=v, timestamp=NOW) for v in values])


def file_values(log: Log, end: int, isolation: str, start: int = 0) -> list[bytes]:
    out = []
    for batch in read_partition_batches(log.dir, log.config, start, end, isolation=isolation):
        if batch.is_control:
            continue
        out.extend(r.value for r in batch.records() if start <= r.offset < end)
    return out


def log_values(log: Log, isolation: str, start: int = 0) -> list[bytes]:
    return [r.value for r in log.read(start, isolation=isolation)]


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log.open(tmp_path / "t-0", CONFIG)
    yield opened
    opened.close()


def interleaved(log: Log) -> Producers:
    """Producer 1 aborts, producer 2 commits, plain records between, across several segments;
    then producer 1 commits a second transaction and producer 3 leaves one open."""
    p = Producers(log)
    plain(log, [b"plain-0"])
    p.send(1, [b"abort-1a", b"abort-1b"])
    p.send(2, [b"commit-2a"])
    plain(log, [b"plain-1"])
    for i in range(12):                       # rolls segments while both are open
        p.send(1 + i % 2, [b"%s-%d" % (b"abort-1" if i % 2 == 0 else b"commit-2", i)] * 3)
    p.end(1, commit=False)
    plain(log, [b"plain-2"])
    p.send(1, [b"commit-1"])
    p.end(2, commit=True)
    p.end(1, commit=True)
    plain(log, [b"plain-3"])
    p.send(3, [b"open-3"])
    plain(log, [b"plain-after-open"])
    return p


def test_read_committed_file_reads_skip_aborted_data_and_stop_at_the_last_stable_offset(
        log: Log) -> None:
    interleaved(log)
    assert log.number_of_segments >= 3
    lso = log.last_stable_offset
    assert lso < log.log_end_offset
    committed = file_values(log, lso, "read_committed")
    assert committed == log_values(log, "read_committed")
    assert not any(v.startswith(b"abort") or v.startswith(b"open") for v in committed)
    assert committed.count(b"commit-1") == 1 and b"plain-3" in committed
    assert b"plain-after-open" not in committed           # above the last stable offset
    everything = file_values(log, log.log_end_offset, "read_uncommitted")
    assert everything == log_values(log, "read_uncommitted")
    assert any(v.startswith(b"abort") for v in everything)


def test_read_committed_from_inside_an_aborted_transaction_still_skips_it(log: Log) -> None:
    """A range that starts after the aborted transaction's first offset (a later Spark
    micro-batch) still finds it in the ``.txnindex`` of the segment holding the marker."""
    interleaved(log)
    lso = log.last_stable_offset
    for start in range(0, lso):
        assert file_values(log, lso, "read_committed", start) == \
            log_values(log, "read_committed", start), start


def test_the_committed_view_is_the_same_after_the_open_transaction_aborts(log: Log) -> None:
    p = interleaved(log)
    before = file_values(log, log.last_stable_offset, "read_committed")
    p.end(3, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    after = file_values(log, log.log_end_offset, "read_committed")
    assert after[:len(before)] == before
    assert after[len(before):] == [b"plain-after-open"]


def test_an_aborted_range_skips_nothing_of_a_later_transaction_when_its_marker_is_gone() -> None:
    """The cleaner removes an abort marker once its transaction's data is gone; a reader whose
    aborted-transaction list came from before that clean must not skip the producer's later
    committed batches for want of the marker (Kafka's consumer would)."""
    ranges = AbortedRanges([AbortedTxn(producer_id=7, first_offset=10, last_offset=20,
                                       last_stable_offset=21)])
    later = build_batch([Record(value=b"x", timestamp=NOW)], base_offset=30, producer_id=7,
                        producer_epoch=0, base_sequence=5, is_transactional=True)
    inside = build_batch([Record(value=b"x", timestamp=NOW)], base_offset=15, producer_id=7,
                         producer_epoch=0, base_sequence=2, is_transactional=True)
    other = build_batch([Record(value=b"x", timestamp=NOW)], base_offset=15, producer_id=8,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    from storage.records import RecordBatch

    assert not ranges.skips(RecordBatch(later))
    assert ranges.skips(RecordBatch(inside))
    assert not ranges.skips(RecordBatch(other))


def test_an_unknown_isolation_is_refused_naming_it(log: Log) -> None:
    plain(log, [b"a"])
    with pytest.raises(StorageError, match="read_committee"):
        list(read_partition_batches(log.dir, log.config, 0, 1, isolation="read_committee"))
