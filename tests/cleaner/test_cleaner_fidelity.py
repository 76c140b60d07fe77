"""Cleaner bugs a read of Kafka's source found (issue 11), each reproduced on real files: sparse
offsets, empty batches kept for ever, preallocated active segments, a swap after a truncation, and
the timestamp type of a rebuilt batch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.errors import SegmentsChangedError
from storage.log import Log
from storage.records import Record, TimestampType
from storage.scheduler import FakeScheduler
from storage.segment import SegmentIdentity
from storage.view import LogView
from tests.cleaner.kafka_logs import (
    INT_MAX,
    T0,
    MakeLog,
    batches,
    follower_log,
    kafka_config,
    keys_in_log,
    last_offsets_per_batch,
    last_sequences_in_log,
    make_cleaner,
    record,
)


def test_a_follower_log_with_sparse_offsets_is_cleaned_not_stuck(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    # segments at 0, 2^30, 2^31 and 3 * 2^30: each one's offsets fit 2^31 from its own base, but
    # no more than two consecutive ones fit one cleaned segment
    step = 2**30
    layout = [(i * step, [i * step, i * step + 1]) for i in range(4)] + [(4 * step, [4 * step])]
    log = follower_log(tmp_path / "sparse-0", kafka_config(segment_bytes=1 << 20), layout,
                       clock, scheduler, keys=lambda offset: b"%d" % offset)
    before = [(r.offset, r.value) for r in log.read()]
    result = make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    assert result.next_dirty_offset == 4 * step
    assert result.groups == 2
    assert [(r.offset, r.value) for r in log.read()] == before
    assert [s.base_offset for s in log.segments()] == [0, 2 * step, 4 * step]
    for segment in log.segments():
        assert segment.read_next_offset() - 1 - segment.base_offset <= INT_MAX


def test_an_emptied_batch_goes_once_its_producer_writes_again(make_log: MakeLog,
                                                              clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    log.append_batch(record(0, 1, producer_id=1, producer_epoch=0, sequence=0))   # offset 0
    log.append_batch(record(0, 2))                                                # offset 1
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    assert last_offsets_per_batch(log) == [0, 1]       # producer 1's last sequence, kept empty
    log.append_batch(record(1, 3, producer_id=1, producer_epoch=0, sequence=1))   # offset 2
    log.roll()
    for _round in range(3):
        cleaner.clean(log, 0, clock.milliseconds())
        assert last_offsets_per_batch(log) == [1, 2]
        assert last_sequences_in_log(log) == {1: 1}


def test_the_rounds_last_empty_batch_goes_in_a_later_round(make_log: MakeLog,
                                                           clock: FakeClock) -> None:
    log = make_log(delete_retention_ms=0)
    cleaner = make_cleaner(1024, clock)
    log.append_batch(record(0, 0))
    log.append_batch(record(0, None))
    log.roll()
    now = clock.milliseconds()
    cleaner.clean(log, 0, now)
    cleaner.clean(log, 0, now + 1)          # the tombstone's horizon has passed
    assert last_offsets_per_batch(log) == [1]     # empty: the last offset of that round
    log.append_batch(record(1, 1))
    log.append_batch(record(2, 2))
    log.roll()
    cleaner.clean(log, 0, now + 2)
    assert last_offsets_per_batch(log) == [2, 3]
    assert keys_in_log(log) == [1, 2]


def test_a_delete_horizon_rebuild_keeps_log_append_time(make_log: MakeLog,
                                                        clock: FakeClock) -> None:
    log = make_log(message_timestamp_type="LogAppendTime")
    cleaner = make_cleaner(1024, clock)
    appended_at = clock.milliseconds()
    log.append([Record(b"a", b"1", 5), Record(b"b", b"2", 6), Record(b"a", None, 7)])
    clock.advance(1000)
    log.append([Record(b"c", b"3", 8)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    first = next(batches(log))
    assert first.delete_horizon_ms == clock.milliseconds() + log.config.delete_retention_ms
    assert first.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert first.max_timestamp == appended_at
    assert [(r.key, r.timestamp) for r in first.records()] == [(b"b", appended_at),
                                                               (b"a", appended_at)]
    first.ensure_valid()
    assert log.segments()[0].max_timestamp_so_far == appended_at + 1000


def test_a_delete_horizon_rebuild_keeps_create_time_and_record_timestamps(
        make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    log.append([Record(b"a", b"1", 5), Record(b"b", b"2", 9), Record(b"a", None, 7)])
    log.append([Record(b"c", b"3", 8)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    first = next(batches(log))
    assert first.timestamp_type == TimestampType.CREATE_TIME
    assert first.delete_horizon_ms is not None
    assert first.max_timestamp == 9
    assert [(r.key, r.timestamp) for r in first.records()] == [(b"b", 9), (b"a", 7)]


def test_a_view_clean_of_a_preallocated_log_reads_only_written_bytes(
        make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(preallocate=True, segment_bytes=4096)
    for i in range(60):                           # every batch but the last three loses its record
        log.append_batch(record(i % 3, i, producer_id=1, producer_epoch=0, sequence=i))
    log.roll()
    log.append_batch(record(7, 7))                # the active segment: 4096 bytes on disk, mostly 0
    active = log.active_segment
    assert active.log_path.stat().st_size == 4096 > active.size
    view = LogView.open(log.dir, log.config, log.replace_cleaned, clock=clock)
    assert view.active_segment.size == active.size
    result = make_cleaner(1024, clock).clean(view, 0, clock.milliseconds(),
                                             first_uncleanable_offset=active.base_offset)
    view.close()
    assert result.next_dirty_offset == active.base_offset
    assert keys_in_log(log) == [0, 1, 2, 7]
    assert last_offsets_per_batch(log) == [57, 58, 59, 60]


def fixed_size_log(make_log: MakeLog) -> Log:
    """Records of one size (keys k00..k19, values v000..), 10 to a segment, three closed
    segments and an active one."""
    log = make_log(segment_bytes=10 * 80)
    for i in range(30):
        log.append([Record(b"k%02d" % (i % 20), b"v%03d" % i, T0)])
    log.roll()
    assert log.segment_base_offsets() == [0, 10, 20, 30]
    return log


def truncate_and_regrow(log: Log, offset: int) -> list[tuple[int, bytes | None]]:
    """Kafka's follower truncation followed by a refetch from a new leader: the same offsets and
    sizes, other values. Returns (offset, value) of the whole log afterwards."""
    sizes = [s.size for s in log.segments()]
    log.truncate_to(offset)
    for i in range(offset, 30):
        log.append([Record(b"k%02d" % (i % 20), b"w%03d" % i, T0)])
    log.roll()
    assert [s.size for s in log.segments()] == sizes          # base offsets and sizes match
    return [(r.offset, r.value) for r in log.read()]


def test_a_view_clean_is_not_swapped_in_after_a_truncation_regrew_the_segment(
        make_log: MakeLog, clock: FakeClock) -> None:
    log = fixed_size_log(make_log)
    after: list[tuple[int, bytes | None]] = []

    def swap_after_truncation(base: int, old: list[SegmentIdentity]) -> None:
        if not after:
            after.extend(truncate_and_regrow(log, 5))
        log.replace_cleaned(base, old)

    view = LogView.open(log.dir, log.config, swap_after_truncation, clock=clock)
    with pytest.raises(SegmentsChangedError) as caught:
        make_cleaner(1024, clock).clean(view, 0, clock.milliseconds(),
                                        first_uncleanable_offset=30)
    view.close()
    assert caught.value.changed == [0]
    assert [(r.offset, r.value) for r in log.read()] == after
    assert after[5] == (5, b"w005")
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_an_in_process_clean_is_not_swapped_in_after_a_truncation(
        make_log: MakeLog, clock: FakeClock) -> None:
    log = fixed_size_log(make_log)
    after: list[tuple[int, bytes | None]] = []
    swap = log.replace_segments

    def replace_after_truncation(new, old, expected=None):  # type: ignore[no-untyped-def]
        # Kafka's testCleanSegmentsWithConcurrentSegmentDeletion overrides replaceSegments the
        # same way, to act between the clean and its swap
        if not after:
            after.extend(truncate_and_regrow(log, 5))
        swap(new, old, expected)

    log.replace_segments = replace_after_truncation  # type: ignore[method-assign]
    with pytest.raises(SegmentsChangedError):
        make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    assert [(r.offset, r.value) for r in log.read()] == after
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
