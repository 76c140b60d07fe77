"""UnifiedLogTest scenarios (append, roll, read, retention, truncation, compacted-topic rules) on
real files, with a fake clock and scheduler."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Callable

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from storage.log import Log
from storage.records import Record, build_batch
from storage.scheduler import FakeScheduler
from tests.storage.helpers import batch_of, offsets, rec, values

MakeLog = Callable[..., Log]


@pytest.fixture
def make_log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> MakeLog:
    def make(name: str = "t-0", **config: object) -> Log:
        return Log.open(tmp_path / name, LogConfig(**config), recovery_point=0,
                        had_clean_shutdown=True, clock=clock, scheduler=scheduler)
    return make


def test_append_assigns_offsets_and_reads_back(make_log: MakeLog) -> None:
    log = make_log()
    info = log.append([Record(key=b"k", value=b"v", timestamp=1700000000000, headers=[("h", b"x")])])
    assert (info.first_offset, info.last_offset) == (0, 0)
    info = log.append([rec(1), rec(2), rec(3)])
    assert (info.first_offset, info.last_offset) == (1, 3)
    records = list(log.read(0))
    assert offsets(records) == [0, 1, 2, 3]
    assert records[0].key == b"k" and records[0].value == b"v"
    assert records[0].headers == (("h", b"x"),)
    assert records[0].timestamp == 1700000000000
    assert log.log_end_offset == 4


def test_append_batch_stamps_offsets_without_reencoding(make_log: MakeLog) -> None:
    log = make_log()
    log.append([rec(0)])
    data = batch_of(1, 2, 3, base_offset=0)
    info = log.append_batch(data)
    assert (info.first_offset, info.last_offset, info.records_count) == (1, 3, 3)
    fetch = log.read_raw(1)
    assert fetch is not None
    assert fetch.data[8:] == data[8:]
    assert int.from_bytes(fetch.data[:8], "big") == 1


def test_append_batch_rejects_corrupt_crc(make_log: MakeLog) -> None:
    log = make_log()
    data = bytearray(batch_of(1, 2))
    data[-1] ^= 0x55
    with pytest.raises(CorruptRecordError) as err:
        log.append_batch(bytes(data))
    assert pickle.loads(pickle.dumps(err.value)).message == err.value.message
    assert log.log_end_offset == 0


def test_append_batch_rejects_truncated_batch(make_log: MakeLog) -> None:
    log = make_log()
    with pytest.raises(CorruptRecordError):
        log.append_batch(batch_of(1, 2)[:-5])


def test_compacted_topic_rejects_record_without_key(make_log: MakeLog) -> None:
    log = make_log(cleanup_policy="compact")
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key"):
        log.append([rec(1), rec(2, key=False)])
    assert log.log_end_offset == 0
    log.append([rec(1)])
    assert log.log_end_offset == 1


def test_batch_over_max_message_bytes_is_refused(make_log: MakeLog) -> None:
    log = make_log(max_message_bytes=200)
    with pytest.raises(RecordTooLargeError):
        log.append([Record(key=b"k", value=b"x" * 500, timestamp=1)])
    assert log.log_end_offset == 0


def test_batch_over_segment_bytes_is_refused(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=300)
    with pytest.raises(RecordTooLargeError):
        log.append([Record(key=b"k", value=b"x" * 500, timestamp=1)])


def test_size_based_roll(make_log: MakeLog) -> None:
    size = len(batch_of(1))
    log = make_log(segment_bytes=10 * (size - 1))
    for i in range(11):
        log.append([rec(i)])
    assert log.number_of_segments == 2
    assert offsets(log.read(0)) == list(range(11))


def test_time_based_roll_during_append(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(segment_ms=3_600_000)
    log.append([rec(0, ts=clock.milliseconds())])
    assert log.number_of_segments == 1
    for i in range(1, 5):
        clock.advance(3_600_001)
        log.append([rec(i, ts=clock.milliseconds())])
        assert log.number_of_segments == i + 1
    clock.advance(10)
    log.append([rec(9, ts=clock.milliseconds())])
    assert log.number_of_segments == 5


def test_time_based_roll_uses_record_timestamps_not_wall_clock(make_log: MakeLog,
                                                                clock: FakeClock) -> None:
    log = make_log(segment_ms=1000)
    log.append([rec(0, ts=5000)])
    clock.advance(100_000)
    log.append([rec(1, ts=5500)])
    assert log.number_of_segments == 1
    log.append([rec(2, ts=6001)])
    assert log.number_of_segments == 2


def test_time_based_roll_jitter(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(segment_ms=3_600_000, segment_jitter_ms=3_600_000 - 1)
    log.active_segment.rolling_jitter_ms = 1_800_000
    log.append([rec(0, ts=clock.milliseconds())])
    clock.advance(3_600_000 - 1_800_000 + 1)
    log.append([rec(1, ts=clock.milliseconds())])
    assert log.number_of_segments == 2


def test_roll_when_offset_index_is_full(make_log: MakeLog) -> None:
    log = make_log(segment_index_bytes=8 * 4, index_interval_bytes=1)
    for i in range(20):
        log.append([rec(i)])
    assert log.number_of_segments > 1
    assert offsets(log.read(0)) == list(range(20))
    for segment in log.segments()[:-1]:
        assert segment.offset_index.entries <= 4


def test_read_from_inside_a_batch_returns_records_from_that_offset(make_log: MakeLog) -> None:
    log = make_log()
    log.append([rec(i) for i in range(10)])
    assert offsets(log.read(4)) == list(range(4, 10))
    assert values(log.read(4, max_offset=6)) == [4, 5]


def test_read_out_of_range(make_log: MakeLog) -> None:
    log = make_log()
    log.append([rec(0)])
    assert list(log.read(1)) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read_raw(2)


def test_offset_for_timestamp(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=400)
    for i in range(30):
        log.append([rec(i, ts=1000 + i * 10)])
    assert log.number_of_segments > 2
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1155) == (16, 1160)
    assert log.offset_for_timestamp(5000) is None


def test_truncate_to(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=500)
    for i in range(40):
        log.append([rec(i)])
    segments = log.number_of_segments
    assert segments > 3
    assert log.truncate_to(25)
    assert log.log_end_offset == 25
    assert offsets(log.read(0)) == list(range(25))
    assert log.number_of_segments < segments
    log.append([rec(99)])
    assert offsets(log.read(24)) == [24, 25]
    assert not log.truncate_to(100)


def test_truncate_below_first_segment_starts_log_over(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=500)
    for i in range(40):
        log.append([rec(i)])
    log.maybe_increment_log_start_offset(30)
    log.delete_old_segments()
    assert log.segment_base_offsets()[0] > 10
    log.truncate_to(10)
    assert log.log_end_offset == 10
    assert log.log_start_offset == 10
    assert log.number_of_segments == 1


def test_index_resized_at_truncation(make_log: MakeLog) -> None:
    log = make_log(index_interval_bytes=1, segment_index_bytes=8 * 100)
    for i in range(10):
        log.append([rec(i)])
    active = log.active_segment
    assert active.offset_index.entries == 9
    log.truncate_to(0)
    assert log.active_segment.offset_index.max_entries == 100


def test_retention_by_size_keeps_two_segments(make_log: MakeLog, scheduler: FakeScheduler) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, retention_bytes=size * 5 * 2 - 1)
    for i in range(15):
        log.append([rec(i)])
    assert log.number_of_segments == 3
    assert log.delete_old_segments() == 1
    assert log.number_of_segments == 2
    assert log.log_start_offset == 5


def test_retention_by_time_keeps_one_segment(make_log: MakeLog, clock: FakeClock) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, retention_ms=10_000)
    for i in range(15):
        log.append([rec(i, ts=clock.milliseconds() - 20_000)])
    assert log.number_of_segments == 3
    assert log.delete_old_segments() == 3
    assert log.number_of_segments == 1
    assert log.log_start_offset == 15
    assert log.log_end_offset == 15


def test_retention_skips_compacted_topic(make_log: MakeLog, clock: FakeClock) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, retention_ms=10_000, cleanup_policy="compact")
    for i in range(15):
        log.append([rec(i, ts=clock.milliseconds() - 20_000)])
    assert log.delete_old_segments() == 0
    assert log.number_of_segments == 3


def test_retention_applies_to_compact_and_delete(make_log: MakeLog, clock: FakeClock) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, retention_ms=10_000, cleanup_policy="compact,delete")
    for i in range(15):
        log.append([rec(i, ts=clock.milliseconds() - 20_000)])
    log.delete_old_segments()
    assert log.number_of_segments == 1


def test_retention_by_log_start_offset(make_log: MakeLog) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5)
    for i in range(15):
        log.append([rec(i)])
    log.maybe_increment_log_start_offset(7)
    assert log.delete_old_segments() == 1
    assert log.segment_base_offsets() == [5, 10]
    assert log.log_start_offset == 7
    assert offsets(log.read()) == list(range(7, 15))


def test_deleted_segments_are_renamed_then_removed_after_delay(
        make_log: MakeLog, clock: FakeClock, scheduler: FakeScheduler) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, retention_ms=10_000, file_delete_delay_ms=60_000)
    for i in range(10):
        log.append([rec(i, ts=clock.milliseconds() - 20_000)])
    scheduler.tick()
    log.delete_old_segments()
    names = os.listdir(log.dir)
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    clock.advance(59_999)
    scheduler.tick()
    assert "00000000000000000000.log.deleted" in os.listdir(log.dir)
    clock.advance(2)
    scheduler.tick()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]


def test_flush_moves_recovery_point(make_log: MakeLog) -> None:
    log = make_log()
    for i in range(5):
        log.append([rec(i)])
    assert log.recovery_point == 0
    assert log.unflushed_messages == 5
    log.flush()
    assert log.recovery_point == 5
    assert log.unflushed_messages == 0


def test_flush_messages_triggers_flush(make_log: MakeLog) -> None:
    log = make_log(flush_messages=3)
    log.append([rec(0)])
    log.append([rec(1)])
    assert log.recovery_point == 0
    log.append([rec(2)])
    assert log.recovery_point == 3


def test_roll_schedules_flush_of_old_segment(make_log: MakeLog, scheduler: FakeScheduler) -> None:
    log = make_log()
    log.append([rec(0)])
    log.roll()
    assert log.recovery_point == 0
    scheduler.tick()
    assert log.recovery_point == 1


def test_log_append_time_overrides_timestamps(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append([rec(0, ts=5)])
    assert info.log_append_time == clock.milliseconds()
    fetch = log.read_raw(0)
    assert fetch is not None
    batch = next(fetch.batches())
    batch.ensure_valid()
    assert batch.max_timestamp == clock.milliseconds()


def test_many_closed_segments_stay_under_open_file_limit(make_log: MakeLog) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size)
    for i in range(1500):
        log.append([rec(i)])
    assert log.number_of_segments == 1500
    before = len(os.listdir("/proc/self/fd"))
    assert offsets(log.read(0)) == list(range(1500))
    after = len(os.listdir("/proc/self/fd"))
    assert after - before < 300


def test_replace_segments_swaps_cleaned_segment_in(make_log: MakeLog) -> None:
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5, file_delete_delay_ms=0)
    for i in range(15):
        log.append([rec(i)])
    old = log.segments()[:2]
    cleaned = log.create_cleaned_segment(0)
    kept = [r for r in log.read(0, max_offset=10) if r.offset % 2 == 0]
    for r in kept:
        data = build_batch([r], base_offset=r.offset)
        cleaned.append(r.offset, r.timestamp, r.offset, [data])
    cleaned.on_become_inactive()
    cleaned.flush()
    log.replace_segments([cleaned], old)
    assert log.segment_base_offsets() == [0, 10]
    assert offsets(log.read(0)) == [0, 2, 4, 6, 8, 10, 11, 12, 13, 14]
    names = os.listdir(log.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert "00000000000000000000.log" in names
    assert "00000000000000000005.log" not in names


def test_a_multi_batch_append_larger_than_segment_bytes_is_refused(tmp_path: Path) -> None:
    """Kafka's UnifiedLog.append refuses a record set larger than a segment, even when each of
    its batches fits (found by the model-based test): it would fill a segment past its size."""
    from storage.errors import RecordTooLargeError
    from storage.records import build_batch

    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1024))
    batch = build_batch([Record(key=b"a", value=b"x" * 400, timestamp=1)])
    log.append_batch(batch)
    with pytest.raises(RecordTooLargeError, match="larger than segment.bytes=1024"):
        log.append_batch(batch + batch + batch)
    assert log.log_end_offset == 1
    log.close()


def test_truncate_inside_a_batch_ends_the_log_at_the_target(make_log: MakeLog) -> None:
    """Kafka's LocalLog.truncateTo: the batch holding the target goes whole, and the log end is
    the target all the same, so the next append takes the target offset."""
    log = make_log()
    log.append([rec(i) for i in range(5)])
    log.append([rec(i) for i in range(5, 10)])
    assert log.truncate_to(7)
    assert log.log_end_offset == 7
    assert offsets(log.read(0)) == [0, 1, 2, 3, 4]
    assert log.append([rec(70)]).first_offset == 7
    assert offsets(log.read(0)) == [0, 1, 2, 3, 4, 7]


def test_an_append_after_delete_records_and_a_truncation_inside_a_batch_is_readable(
        make_log: MakeLog) -> None:
    log = make_log()
    log.append([rec(i) for i in range(10)])
    log.maybe_increment_log_start_offset(5)
    assert log.truncate_to(7)
    assert (log.log_start_offset, log.log_end_offset) == (5, 7)
    info = log.append([rec(70)])
    assert info.first_offset == 7 >= log.log_start_offset
    assert [(r.offset, int(r.value)) for r in log.read()] == [(7, 70)]


def _batches_of(data: bytes) -> list:
    from storage.records import iter_batches
    return list(iter_batches(data))


def _with_producer_max_timestamp(batch: bytes, max_timestamp: int) -> bytes:
    """The batch as a producer that got its max timestamp wrong sends it (CRC valid)."""
    import crc32c
    buf = bytearray(batch)
    buf[35:43] = max_timestamp.to_bytes(8, "big", signed=True)
    buf[17:21] = crc32c.crc32c(bytes(buf[21:])).to_bytes(4, "big")
    return bytes(buf)


def test_a_batch_max_timestamp_is_taken_from_its_records(tmp_path: Path, clock: FakeClock,
                                                         scheduler: FakeScheduler) -> None:
    """Kafka's LogValidator re-stamps a CreateTime batch's max timestamp from its records:
    a producer's 0 must neither hide the batch from offsets-by-time nor, once an unclean restart
    rebuilt the time index from the stored batches, let retention delete it at once."""
    now = clock.milliseconds()
    config = LogConfig(retention_ms=7 * 24 * 3600 * 1000, segment_bytes=250)
    log = Log.open(tmp_path / "t-0", config, clock=clock, scheduler=scheduler)
    for i in range(6):
        log.append_batch(_with_producer_max_timestamp(
            build_batch([Record(b"k%d" % i, b"v" * 50, now - 1000 + i)]), 0))
    assert log.number_of_segments > 2
    assert log.offset_for_timestamp(now - 998) == (2, now - 998)
    stored = [b for segment in log.segments() for b in segment.read(0, 1 << 20, None)[1:]
              for b in _batches_of(b)]
    assert [b.header.max_timestamp for b in stored] == [now - 1000 + i for i in range(6)]
    log.close()
    reopened = Log.open(tmp_path / "t-0", config, clock=clock, scheduler=scheduler)  # unclean
    assert reopened.delete_old_segments() == 0
    assert offsets(reopened.read(0)) == list(range(6))
    assert reopened.offset_for_timestamp(now - 998) == (2, now - 998)
    reopened.close()


def test_on_offsets_changed_is_called_after_each_append_but_not_for_a_duplicate(
        make_log: MakeLog) -> None:
    log = make_log()
    seen: list[int] = []
    log.on_offsets_changed = lambda changed: seen.append(changed.log_end_offset)
    data = build_batch([rec(1), rec(2)], producer_id=3, producer_epoch=0, base_sequence=0)
    log.append_batch(data)
    log.append([rec(3)])
    assert log.append_batch(data).duplicate
    assert seen == [2, 3]


def test_raising_the_log_start_offset_raises_the_recovery_point_below_it(
        make_log: MakeLog) -> None:
    """Kafka's ``UnifiedLog.updateLogStartOffset``: nothing below the log start is recovered, so
    the recovery point never stays below it (DeleteRecords and retention alike)."""
    size = len(batch_of(0))
    log = make_log(segment_bytes=size * 5)
    for i in range(15):
        log.append([rec(i)])
    assert log.recovery_point < 7
    log.maybe_increment_log_start_offset(7)
    assert log.recovery_point == 7
    log.flush()
    assert log.recovery_point == 15
    log.maybe_increment_log_start_offset(12)
    assert log.recovery_point == 15      # never lowered
    log.append([rec(15)])
    log.delete_old_segments()
    assert log.segment_base_offsets()[0] == 10 and log.recovery_point == 15


def test_a_log_opened_with_a_recovery_point_below_its_log_start_starts_recovery_there(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """A recovery point checkpoint older than the log start checkpoint (delete-records after the
    last flush): the opened log's recovery point is the log start, as in Kafka's ``UnifiedLog``
    construction, so a later power loss is never taken to cost the segment holding the log start
    and the producer state only its snapshot keeps."""
    config = LogConfig(segment_bytes=len(batch_of(0)) * 5)
    log = Log.open(tmp_path / "t-0", config, clock=clock, scheduler=scheduler)
    for i in range(15):
        log.append([rec(i)])
    log.maybe_increment_log_start_offset(12)
    log.close()
    reopened = Log.open(tmp_path / "t-0", config, clock=clock, scheduler=scheduler,
                        recovery_point=3, log_start_offset=12)
    assert (reopened.log_start_offset, reopened.recovery_point) == (12, 12)
    assert offsets(reopened.read()) == list(range(12, 15))
