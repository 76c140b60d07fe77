"""Kafka's ListOffsets for one partition (``Log.fetch_offset_by_timestamp``): ports of
``UnifiedLogTest.testFetchOffsetByTimestampIncludesLeaderEpoch`` / ``...WithMaxTimestamp...``
(KIP-734) and ``PartitionTest.testListOffsetIsolationLevels`` / ``testFetchLatestOffset...``:
earliest, latest, the record with the largest timestamp and offsets by time, and under
``read_committed`` nothing at or past the last stable offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import InvalidOffsetError, StorageError
from storage.log import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED, Log)
from storage.records import ControlType, Record, build_batch

PID, EPOCH = 7, 0


def _open(tmp_path: Path, clock: FakeClock, **config: object) -> Log:
    return Log.open(tmp_path / "t-0", LogConfig(**config), clock=clock)


def test_max_timestamp_finds_the_first_record_with_the_largest_timestamp(
        tmp_path: Path, clock: FakeClock) -> None:
    log = _open(tmp_path, clock, segment_bytes=200, retention_ms=-1)
    for ts in (1000, 5000, 3000):                       # offsets 0, 1, 2 in their own batches
        log.append([Record(b"k", b"v", ts)])
    log.append([Record(b"a", b"v", 4000), Record(b"b", b"v", 5000), Record(b"c", b"v", 5000)])
    assert log.number_of_segments > 1
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (1, 5000)
    log.maybe_increment_log_start_offset(2)
    log.delete_old_segments()
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (4, 5000)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (2, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (6, -1)
    assert log.fetch_offset_by_timestamp(4500) == (4, 5000)
    log.close()


def test_max_timestamp_with_the_log_start_inside_the_batch_holding_it(
        tmp_path: Path, clock: FakeClock) -> None:
    log = _open(tmp_path, clock)
    log.append([Record(b"a", b"v", 1000), Record(b"b", b"v", 5000)])   # offsets 0, 1
    log.append([Record(b"c", b"v", 3000)])
    log.maybe_increment_log_start_offset(1)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (1, 5000)
    log.close()


def test_max_timestamp_of_an_empty_log_is_none(tmp_path: Path, clock: FakeClock) -> None:
    log = _open(tmp_path, clock)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (0, -1)
    log.close()


def test_read_committed_answers_stop_at_the_last_stable_offset(tmp_path: Path,
                                                              clock: FakeClock) -> None:
    log = _open(tmp_path, clock)
    log.append([Record(b"k", b"v", 1000), Record(b"k", b"v", 2000)])       # offsets 0, 1
    log.append_batch(build_batch([Record(b"t", b"v", 9000), Record(b"t", b"v", 3000)],
                                 producer_id=PID, producer_epoch=EPOCH, base_sequence=0,
                                 is_transactional=True))                    # offsets 2, 3: open
    assert log.last_stable_offset == 2
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP, READ_COMMITTED) == (2, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP, READ_UNCOMMITTED) == (4, -1)
    assert log.fetch_offset_by_timestamp(2500, READ_COMMITTED) is None
    assert log.fetch_offset_by_timestamp(2500, READ_UNCOMMITTED) == (2, 9000)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP, READ_COMMITTED) is None
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP, READ_UNCOMMITTED) == (2, 9000)
    assert log.fetch_offset_by_timestamp(1500, READ_COMMITTED) == (1, 2000)
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=PID, producer_epoch=EPOCH)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP, READ_COMMITTED) == (5, -1)
    assert log.fetch_offset_by_timestamp(2500, READ_COMMITTED) == (2, 9000)
    log.close()


def test_bad_list_offset_arguments_are_typed_errors(tmp_path: Path, clock: FakeClock) -> None:
    log = _open(tmp_path, clock)
    with pytest.raises(InvalidOffsetError):
        log.fetch_offset_by_timestamp(-4)
    with pytest.raises(InvalidOffsetError):
        log.fetch_offset_by_timestamp("soon")            # type: ignore[arg-type]
    with pytest.raises(StorageError):
        log.fetch_offset_by_timestamp(0, "serializable")
    log.close()
