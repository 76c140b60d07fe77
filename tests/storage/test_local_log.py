"""``LocalLog`` on its own, on real files: the scenarios of Kafka's ``LocalLogTest`` (append,
read, roll, flush, truncation, segment deletion, directory rename and delete, close), with
batches stamped as the partition log above it stamps them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError, StorageError
from storage.local_log import LocalLog
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment
from tests.storage.helpers import batch_of, values

T0 = 1_700_000_000_000


def open_local_log(directory: Path, clock: FakeClock, scheduler: FakeScheduler,
                   config: LogConfig | None = None) -> LocalLog:
    """A log of one empty active segment at offset 0 (Kafka's createLocalLogWithActiveSegment)."""
    config = config or LogConfig()
    directory.mkdir(parents=True)
    segment = LogSegment.create(directory, 0, config, clock=clock)
    return LocalLog(directory, config, [segment], log_end_offset=0, recovery_point=0,
                    lock=threading.RLock(), clock=clock, scheduler=scheduler)


def append(log: LocalLog, *ids: int, at: int) -> None:
    """Records ``ids`` as one batch at offset ``at`` (Kafka's appendRecords)."""
    data = batch_of(*ids, ts=T0, base_offset=at)
    log.append(at + len(ids) - 1, T0, at, [data], len(data), len(ids))


def read_values(log: LocalLog, start_offset: int = 0) -> list[int]:
    fetch = log.read(start_offset, 1024 * 1024, True, log_start_offset=lambda: 0)
    if fetch is None:
        return []
    return values(r for batch in fetch.batches() for r in batch.records())


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> Iterator[LocalLog]:
    opened = open_local_log(tmp_path / "test_topic-1", clock, scheduler)
    yield opened
    opened.close()


def test_append_moves_the_log_end_and_reads_back_what_was_written(log: LocalLog) -> None:
    assert read_values(log) == []
    append(log, 1, 2, at=0)
    assert log.log_end_offset == 2
    assert log.recovery_point == 0
    assert log.unflushed_messages == 2
    assert read_values(log) == [1, 2]


def test_flush_moves_the_recovery_point_and_the_flush_time(log: LocalLog,
                                                          clock: FakeClock) -> None:
    assert log.recovery_point == 0 and log.last_flush_ms == clock.milliseconds()
    append(log, 1, at=0)
    clock.advance(1)
    new_segment = log.roll()
    log.flush(new_segment.base_offset)
    assert log.recovery_point == 1
    assert log.last_flush_ms == clock.milliseconds()
    assert log.unflushed_messages == 0


def test_a_roll_starts_a_segment_at_the_log_end_and_keeps_an_empty_active_one(
        log: LocalLog) -> None:
    first = log.roll()
    assert (first.base_offset, log.number_of_segments, log.log_end_offset) == (0, 1, 0)
    append(log, 1, at=0)
    assert (log.roll().base_offset, log.number_of_segments, log.log_end_offset) == (1, 2, 1)
    append(log, 2, at=1)
    assert (log.roll().base_offset, log.number_of_segments, log.log_end_offset) == (2, 3, 2)
    assert read_values(log) == [1]          # one segment a read
    assert read_values(log, 1) == [2]


def test_truncate_to_removes_later_segments_and_cuts_the_one_holding_the_target(
        log: LocalLog) -> None:
    for offset in range(12):
        append(log, offset, at=offset)
        if offset % 3 == 2:
            log.roll()
    assert (log.number_of_segments, log.log_end_offset) == (5, 12)
    log.truncate_to(7)
    assert log.segment_base_offsets() == [0, 3, 6]
    assert (log.recovery_point, log.log_end_offset) == (0, 7)
    assert read_values(log, 6) == [6]
    append(log, 7, at=7)                    # the active segment takes appends again
    assert log.log_end_offset == 8
    assert read_values(log, 6) == [6, 7]


def test_truncate_fully_and_start_at_leaves_one_empty_segment_there(log: LocalLog) -> None:
    for offset in range(8):
        append(log, offset, at=offset)
        if offset % 2:
            log.roll()
    for offset in range(8, 13):
        append(log, offset, at=offset)
    assert log.number_of_segments == 5
    old = log.segments()
    log.truncate_fully_and_start_at(10)
    assert log.segment_base_offsets() == [10]
    assert (log.log_end_offset, log.recovery_point, log.unflushed_messages) == (10, 10, 0)
    assert read_values(log, 10) == []
    assert not any(s.log_path.exists() for s in old)


@pytest.mark.parametrize("delay_ms", [0, 60_000])
def test_removed_segments_are_renamed_deleted_then_removed_after_the_delay(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler, delay_ms: int) -> None:
    log = open_local_log(tmp_path / "test_topic-1", clock, scheduler,
                         LogConfig(file_delete_delay_ms=delay_ms))
    for offset in range(9):
        append(log, offset, at=offset)
        log.roll()
    assert log.number_of_segments == 10
    doomed = log.segments()
    log.remove_and_delete_segments(doomed)
    assert log.number_of_segments == 0
    if delay_ms:
        assert all(s.log_path.name.endswith(".deleted") and s.log_path.exists()
                   for s in doomed)
        clock.advance(delay_ms + 1)
        scheduler.tick()
    assert not any(s.log_path.exists() for s in doomed)
    assert sorted(p.name for p in log.dir.iterdir()) == []


def test_rename_dir_moves_every_segment_and_closes_the_log(log: LocalLog, tmp_path: Path) -> None:
    append(log, 1, at=0)
    log.roll()
    old_dir = log.dir
    log.rename_dir("test_topic-2")
    assert not old_dir.exists() and log.dir == tmp_path / "test_topic-2"
    assert [s.log_path.parent for s in log.segments()] == [log.dir, log.dir]
    assert log.number_of_segments == 2 and log.is_closed
    with pytest.raises(StorageError):
        log.roll()


def test_delete_removes_the_directory(log: LocalLog) -> None:
    append(log, 1, at=0)
    log.roll()
    log.delete()
    assert not log.dir.exists() and log.is_closed


def test_close_twice_is_harmless_and_a_closed_log_takes_no_roll(log: LocalLog) -> None:
    append(log, 1, 2, at=0)
    log.close()
    log.close()
    assert log.is_closed
    with pytest.raises(StorageError):
        log.roll()


def test_update_config_is_the_config_from_then_on(log: LocalLog) -> None:
    new = LogConfig(segment_bytes=log.config.segment_bytes + 1)
    log.update_config(new)
    assert log.config == new
    assert log.active_segment.config.segment_bytes == new.segment_bytes


def test_a_read_outside_the_log_is_out_of_range(log: LocalLog) -> None:
    for offset in range(5):
        append(log, offset, at=offset)
        if offset % 2:
            log.roll()
    assert log.number_of_segments == 3
    assert read_values(log, 3) == [3]
    assert log.read(5, 1024, True, log_start_offset=lambda: 0) is None   # the log end
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1024, True, log_start_offset=lambda: 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1024, True, log_start_offset=lambda: 2)
