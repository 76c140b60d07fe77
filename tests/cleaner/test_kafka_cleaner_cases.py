"""Kafka's LogCleanerTest, ported case by case as v2 batches on real segment files.

Each test names the Kafka test it ports (core/src/test/scala/unit/kafka/log/LogCleanerTest.scala)
and keeps its scenario: the same keys, offsets, segment sizes and assertions. Kafka's helpers map
to ours as follows: ``makeCleaner(capacity)`` is ``make_cleaner`` (a map of ``capacity`` slots at
load factor 0.75), ``FakeOffsetMap`` is ``offset_map_of`` (keys mapped to ``Long.MaxValue`` by a
real ``OffsetMap``), ``appendAsFollower`` (records at offsets a leader chose) is ``follower_log``,
which writes the segment files directly. Transaction cases are ported where transactions live.

Already ported equivalently in tests/cleaner/test_cleaner.py and not repeated here:
testPartialSegmentClean (test_partial_segment_clean, the same keys, offsets and three cleans) and
testCleanSegmentsWithAbort (test_abort_leaves_log_unchanged_and_no_cleaned_files). The
transaction cases (markers, aborted batches, the transaction index) are ported with the
transaction support. testRecoveryAfterCrash is ported in tests/storage/test_loader.py;
testSegmentWithOffsetOverflow is not ported: here the loader splits an overflowed segment before
any clean sees it (tests/storage/test_split.py).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from cleaner.cleanable import LogToClean
from cleaner.cleaner import group_segments_by_size
from cleaner.stats import CleanerStats
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptRecordError
from storage.log import Log
from storage.records import MAGIC_OFFSET, Record, RecordBatch, build_batch
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment
from tests.cleaner.kafka_logs import (
    INT_MAX,
    LARGE_TIMESTAMP,
    LONG_MAX,
    T0,
    TOMBSTONE_RETENTION_MS,
    MakeLog,
    batches,
    follower_log,
    kafka_config,
    key,
    keys_in_log,
    last_offsets_per_batch,
    last_sequences_in_log,
    make_cleaner,
    offsets_in_log,
    record,
)


def first_batch(log: Log) -> RecordBatch:
    segment = log.segments()[0]
    entry = next(iter(segment.batches()))
    return RecordBatch(segment.read_bytes(entry.position, entry.size))


def unkeyed_count(log: Log) -> int:
    return sum(1 for b in batches(log) for r in b.records() if r.key is None and r.value)


def check_segment_order(groups: list[list[LogSegment]]) -> None:
    offsets = [s.base_offset for g in groups for s in g]
    assert offsets == sorted(offsets), "Offsets should be in increasing order."



# ---- segment grouping ----------------------------------------------------------------------------
def test_segment_grouping(make_log: MakeLog) -> None:
    """Kafka's testSegmentGrouping: by log size, by index size, singletons and one group."""
    log = make_log(segment_bytes=300, index_interval_bytes=1)
    while log.number_of_segments < 10:
        log.append_batch(build_batch([Record(b"hello", b"hello", T0)]))
    segments = log.segments()
    end = log.log_end_offset

    groups = group_segments_by_size(segments, INT_MAX, INT_MAX, end)
    assert len(groups) == 1
    assert len(groups[0]) == log.number_of_segments
    check_segment_order(groups)

    groups = group_segments_by_size(segments, 1, INT_MAX, end)
    assert len(groups) == log.number_of_segments
    assert all(len(g) == 1 for g in groups), "All groups should be singletons."
    check_segment_order(groups)
    groups = group_segments_by_size(segments, INT_MAX, 1, end)
    assert len(groups) == log.number_of_segments
    assert all(len(g) == 1 for g in groups), "All groups should be singletons."
    check_segment_order(groups)

    group_size = 3
    log_size = sum(s.size for s in segments[:group_size]) + 1
    groups = group_segments_by_size(segments, log_size, INT_MAX, end)
    check_segment_order(groups)
    assert all(len(g) == group_size for g in groups[:-1]), \
        "All but the last group should be the target size."

    index_size = sum(s.offset_index.size_in_bytes for s in segments[:group_size]) + 1
    groups = group_segments_by_size(segments, INT_MAX, index_size, end)
    check_segment_order(groups)
    assert all(len(g) == group_size for g in groups[:-1]), \
        "All but the last group should be the target size."


def test_segment_grouping_with_sparse_offsets_and_empty_segments(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """Kafka's testSegmentGroupingWithSparseOffsetsAndEmptySegments: three segments each spanning
    2^31 offsets never group; once cleaned empty, the two empty ones group and merge."""
    span = INT_MAX + 1
    layout = [(i * span, [i * span, (i + 1) * span - 1]) for i in range(3)]
    layout.append((3 * span, [3 * span]))          # the 4th, active segment: not cleaned
    log = follower_log(tmp_path / "test-0", kafka_config(), layout, clock, scheduler)
    cleaner = make_cleaner(INT_MAX, clock)
    total_segments = 4
    first_uncleanable = log.log_end_offset - 1
    assert log.number_of_segments == total_segments

    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, first_uncleanable)
    assert len(groups) == total_segments - 1   # non-empty segments 2^31 apart never group
    cleaner.clean(log, 0, clock.milliseconds(), first_uncleanable_offset=first_uncleanable)
    assert log.number_of_segments == total_segments
    assert log.segments()[0].size == 0

    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, first_uncleanable)
    assert len(groups) == 1 + 1                # the two empty segments group together
    cleaner.clean(log, 0, clock.milliseconds(), first_uncleanable_offset=first_uncleanable)
    assert log.number_of_segments == total_segments - 1


def test_segment_grouping_with_sparse_offsets(make_log: MakeLog, tmp_path: Path,
                                              clock: FakeClock, scheduler: FakeScheduler) -> None:
    """Kafka's testSegmentGroupingWithSparseOffsets: a group never spans more than 2^31-1 offsets,
    even when few records remain."""
    config = kafka_config(segment_bytes=400, index_interval_bytes=1)
    hello = build_batch([Record(b"hello", b"hello", T0)])
    probe = make_log(segment_bytes=400, index_interval_bytes=1)
    while probe.number_of_segments == 1:             # fill up the first segment, as Kafka does
        probe.append_batch(hello)
    first_segment = list(range(probe.active_segment.base_offset))
    second_base = probe.active_segment.base_offset
    # the leader's record that rolled, then a follower's record at Int.MaxValue - 1
    log = follower_log(tmp_path / "sparse-0", config,
                       [(0, first_segment), (second_base, [second_base, INT_MAX - 1])],
                       clock, scheduler, keys=lambda _offset: b"hello")
    log.append_batch(hello)
    assert log.log_end_offset == INT_MAX + 1
    assert log.active_segment.read_next_offset() - 1 == INT_MAX   # Kafka reads its index here

    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 1

    log.append_batch(hello)      # the second segment's last offset is now beyond Int.MaxValue
    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 2
    check_segment_order(groups)

    while log.number_of_segments < 4:
        log.append_batch(hello)
    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == log.number_of_segments - 1
    for group in groups:
        assert group[-1].read_next_offset() - 1 - group[0].base_offset <= INT_MAX, \
            "Relative offset greater than Int.MaxValue"
    check_segment_order(groups)


def test_segment_grouping_following_load_of_zero_index(tmp_path: Path, clock: FakeClock,
                                                       scheduler: FakeScheduler) -> None:
    """Kafka's testSegmentGroupingFollowingLoadOfZeroIndex: an empty offset index says nothing of
    a segment's last offset; grouping bounds it by the next base offset instead."""
    config = kafka_config(segment_bytes=400, index_interval_bytes=400)
    half = INT_MAX // 2
    log = follower_log(tmp_path / "zero-0", config, [(0, [0, 1]), (half, [half, INT_MAX + 1])],
                       clock, scheduler, keys=lambda _offset: b"hello")
    assert log.log_end_offset - 1 - log.log_start_offset > INT_MAX, \
        "Actual offset range should be > Int.MaxValue"
    assert log.segments()[-1].offset_index.last_offset - log.log_start_offset <= INT_MAX, \
        "index.lastOffset is reporting the wrong last offset"

    groups = group_segments_by_size(log.segments(), INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 2
    for group in groups:
        assert group[-1].read_next_offset() - 1 - group[0].base_offset <= INT_MAX, \
            "Relative offset greater than Int.MaxValue"
    check_segment_order(groups)


# ---- empty batches and producer state ------------------------------------------------------------
def test_empty_batch_removal_with_sequence_reuse(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testEmptyBatchRemovalWithSequenceReuse, its non-transactional part: a producer that
    restarts its sequence at 0 (a new epoch) keeps its last batch as an empty batch, and that
    empty batch goes once the producer has written a later one. (The commit markers of the
    original are ported with the transaction tests.)"""
    log = make_log(segment_bytes=2048)
    cleaner = make_cleaner(INT_MAX, clock)
    log.append_batch(record(1, 1, producer_id=1, producer_epoch=0, sequence=0))
    log.append_batch(record(2, 2, producer_id=1, producer_epoch=1, sequence=0))
    log.append_batch(record(1, 1))
    log.append_batch(record(2, 1))
    log.roll()

    cleaner.clean(log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [2, 3]
    assert last_offsets_per_batch(log) == [1, 2, 3]    # the producer's last batch, emptied

    log.append_batch(record(3, 3, producer_id=1, producer_epoch=1, sequence=1))
    log.roll()
    cleaner.clean(log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [2, 3, 4]
    assert last_offsets_per_batch(log) == [2, 3, 4]    # the empty batch is gone


def test_clean_segments_retaining_last_empty_batch(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testCleanSegmentsRetainingLastEmptyBatch: when every key is deleted the last batch
    of the round stays, empty, so the last offset survives."""
    log = make_log()
    cleaner = make_cleaner(INT_MAX, clock)
    while log.number_of_segments < 4:
        log.append_batch(record(log.log_end_offset, log.log_end_offset))
    keys_found = keys_in_log(log)
    assert keys_found == list(range(log.log_end_offset))
    for k in keys_found:
        cleaner.offset_map.put(key(k), LONG_MAX)      # pretend all keys are deleted

    segments = log.segments()[:3]
    cleaner.clean_segments(log, segments, 0, CleanerStats(clock), -1,
                           segments[-1].read_next_offset(), {})
    assert log.number_of_segments == 2
    first = log.segments()[0]
    retained = [RecordBatch(first.read_bytes(e.position, e.size)) for e in first.batches()]
    assert len(retained) == 1, "one batch should be retained in the cleaned segment"
    assert retained[0].last_offset == log.segments()[-1].base_offset - 1, \
        "the retained batch should be the last batch"
    assert retained[0].records() == [], "the retained batch should be an empty batch"


def test_deleted_batches_with_no_messages_read(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testDeletedBatchesWithNoMessagesRead, its non-transactional part: with read buffers
    of one batch (max message size 100), chunks whose every batch is dropped move the clean on to
    the next offset instead of growing buffers or stopping."""
    log = make_log(max_message_bytes=100, segment_bytes=1000)
    cleaner = make_cleaner(INT_MAX, clock, max_message_size=100)
    sequence = 0
    for k in (1, 2, 2, 1):
        log.append_batch(record(k, k, producer_id=1, producer_epoch=0, sequence=sequence))
        sequence += 1
    log.roll()

    cleaner.clean(log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 1]
    assert offsets_in_log(log) == [2, 3]
    cleaner.clean(log, 0, LARGE_TIMESTAMP)
    cleaner.clean(log, 0, LARGE_TIMESTAMP + TOMBSTONE_RETENTION_MS + 1)
    assert keys_in_log(log) == [2, 1]
    assert offsets_in_log(log) == [2, 3]


def test_log_cleaner_retains_producer_last_sequence(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testLogCleanerRetainsProducerLastSequence: each active producer's last batch keeps
    its place (empty if need be), so its last sequence survives."""
    log = make_log()
    cleaner = make_cleaner(10, clock)
    log.append_batch(record(0, 0))                                                # offset 0
    log.append_batch(record(0, 1, producer_id=1, producer_epoch=0, sequence=0))   # offset 1
    log.append_batch(record(0, 2, producer_id=2, producer_epoch=0, sequence=0))   # offset 2
    log.append_batch(record(0, 3, producer_id=3, producer_epoch=0, sequence=0))   # offset 3
    log.append_batch(record(1, 1, producer_id=2, producer_epoch=0, sequence=1))   # offset 4
    log.roll()

    cleaner.clean(log, 0, clock.milliseconds())
    assert last_offsets_per_batch(log) == [1, 3, 4]
    assert last_sequences_in_log(log) == {1: 0, 2: 1, 3: 0}
    assert keys_in_log(log) == [0, 1]
    assert offsets_in_log(log) == [3, 4]


# ---- cleaning --------------------------------------------------------------------------------
def test_clean_segments(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testCleanSegments: keys mapped past a group are removed from it, and every byte of
    the group is read."""
    log = make_log(segment_bytes=1024)
    cleaner = make_cleaner(INT_MAX, clock)
    while log.number_of_segments < 4:
        log.append_batch(record(log.log_end_offset, log.log_end_offset))
    assert keys_in_log(log) == list(range(log.log_end_offset))
    keys = [1, 3, 5, 7, 9]
    for k in keys:
        cleaner.offset_map.put(key(k), LONG_MAX)

    segments = log.segments()[:3]
    stats = CleanerStats(clock)
    expected_bytes_read = sum(s.size for s in segments)
    should_remain = [k for k in keys_in_log(log) if k not in keys]
    cleaner.clean_segments(log, segments, 0, stats, -1, segments[-1].read_next_offset(), {})
    assert keys_in_log(log) == should_remain
    assert stats.bytes_read == expected_bytes_read


def test_size_trimmed_for_preallocated_and_compacted_topic(make_log: MakeLog,
                                                           clock: FakeClock) -> None:
    """Kafka's testSizeTrimmedForPreallocatedAndCompactedTopic: a cleaned segment of a
    preallocated log is as long as its batches."""
    original_max_file_size = 1024
    log = make_log(segment_bytes=original_max_file_size, preallocate=True)
    cleaner = make_cleaner(2, clock)
    for k in (0, 1, 0, 1, 0):
        log.append_batch(record(k, k))
    log.roll()
    cleaner.clean(log, 2, clock.milliseconds())
    assert log.segments()[0].log_path.stat().st_size < original_max_file_size, \
        "Cleaned segment file should be trimmed to its real size."


def test_log_cleaner_stats(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testLogCleanerStats: a map of 3 usable slots, first dirty offset 2."""
    log = make_log(segment_bytes=1024)
    cleaner = make_cleaner(4, clock)
    for k in (0, 1, 0, 1, 0):                  # offsets 0..4
        log.append_batch(record(k, k))
    log.roll()
    initial_log_size = log.size_in_bytes

    result = cleaner.clean(log, 2, clock.milliseconds())
    stats = result.stats
    assert result.next_dirty_offset == 5
    assert stats.messages_read == 5
    assert stats.bytes_read == initial_log_size
    assert stats.messages_written == 2
    assert stats.bytes_written == log.size_in_bytes
    assert stats.invalid_messages_read == 0
    assert stats.end_time >= stats.start_time


def test_cleaning_with_deletes(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testCleaningWithDeletes: tombstones of every even key remove those keys."""
    log = make_log(segment_bytes=1024)
    cleaner = make_cleaner(INT_MAX, clock)
    while log.number_of_segments < 2:
        log.append_batch(record(log.log_end_offset, log.log_end_offset))
    leo = log.log_end_offset
    for k in range(0, leo, 2):
        log.append_batch(record(k, None))
    while log.number_of_segments < 4:
        log.append_batch(record(log.log_end_offset, log.log_end_offset))

    cleaner.clean(log, 0, clock.milliseconds())
    keys = set(keys_in_log(log))
    assert not any(k in keys for k in range(0, leo, 2)), \
        "None of the keys we deleted should still exist."


def test_clean_tombstone(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """Kafka's testCleanTombstone: a tombstone whose own timestamp is older than
    delete.retention.ms still survives the cleans that follow its first (KIP-534)."""
    config = LogConfig(file_delete_delay_ms=0)          # Kafka's LogConfig(new Properties())
    log = Log.open(tmp_path / "test-0", config, recovery_point=0, had_clean_shutdown=True,
                   clock=clock, scheduler=scheduler)
    cleaner = make_cleaner(10, clock)
    now = clock.milliseconds()
    log.append_batch(record(0, 0, timestamp=now + config.delete_retention_ms + 10_000))
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    log.append_batch(record(0, None, timestamp=now - config.delete_retention_ms - 10_000))
    log.roll()
    cleaner.clean(log, 1, clock.milliseconds())
    assert first_batch(log).last_offset == 1, "The tombstone should be retained."
    log.append_batch(record(1, 1, timestamp=now))
    log.roll()
    cleaner.clean(log, 2, clock.milliseconds())
    assert first_batch(log).last_offset == 1, "The tombstone should be retained."


def test_cleaning_with_unkeyed_messages(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testCleaningWithUnkeyedMessages: unkeyed records (appended while the topic was not
    compacted) are dropped, their bytes freed, and counted as invalid."""
    log = make_log(segment_bytes=1024, cleanup_policy="delete")
    cleaner = make_cleaner(INT_MAX, clock)
    while log.number_of_segments < 2:
        log.append_batch(record(None, log.log_end_offset))
    num_invalid = unkeyed_count(log)
    size_with_unkeyed = log.size_in_bytes
    while log.number_of_segments < 3:
        log.append_batch(record(log.log_end_offset, log.log_end_offset))
    expected_size_after_cleaning = log.size_in_bytes - size_with_unkeyed

    result = cleaner.clean(log, 0, clock.milliseconds())
    assert unkeyed_count(log) == 0, "Log should only contain keyed messages after cleaning."
    assert log.size_in_bytes == expected_size_after_cleaning, \
        "Log should only contain keyed messages after cleaning."
    assert result.stats.invalid_messages_read == num_invalid


# ---- offset map --------------------------------------------------------------------------------
def test_build_offset_map(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testBuildOffsetMap: three ranges, each mapping exactly its keys."""
    log = make_log()
    cleaner = make_cleaner(1000, clock)
    for i in range(500):
        log.append_batch(record(i, i))
    segments = log.segments()

    def check_range(start: int, end: int) -> None:
        stats = CleanerStats(clock)
        cleaner.build_offset_map(log, start, end, stats)
        m = cleaner.offset_map
        assert m.latest_offset + 1 == end, "Last offset should be the end offset."
        assert m.size == end - start, "Should have the expected number of messages in the map."
        for i in range(start, end):
            assert m.get(key(i)) == i, "Should find all the keys"
        assert m.get(key(start - 1)) == -1, "Should not find a value too small"
        assert m.get(key(end)) == -1, "Should not find a value too large"
        assert stats.map_messages_read == end - start

    check_range(0, segments[1].base_offset)
    check_range(segments[1].base_offset, segments[3].base_offset)
    check_range(segments[3].base_offset, log.log_end_offset)


def test_build_partial_offset_map(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testBuildPartialOffsetMap: a map of 2 usable slots maps offsets 2 and 3 only."""
    log = make_log()
    cleaner = make_cleaner(3, clock)
    for i in range(5):
        log.append_batch(record(i, i))
    log.roll()
    stats = CleanerStats(clock)
    cleaner.build_offset_map(log, 2, INT_MAX, stats)
    m = cleaner.offset_map
    assert m.size == 2
    assert m.get(key(0)) == -1
    assert m.get(key(2)) == 2
    assert m.get(key(3)) == 3
    assert m.get(key(4)) == -1
    assert stats.map_messages_read == 4


def test_cleaning_beyond_missing_offsets(tmp_path: Path, clock: FakeClock,
                                         scheduler: FakeScheduler) -> None:
    """Kafka's testCleaningBeyondMissingOffsets: the next dirty offset passes offset gaps between
    segments, in one segment and in several."""
    config = kafka_config(segment_bytes=1024 * 1024)
    cleaner = make_cleaner(INT_MAX, clock)

    def keys(offset: int) -> bytes:
        return b"1015" if offset in (11, 30) else key(offset)

    log = follower_log(tmp_path / "gap-0", config, [(0, list(range(10))), (11, [11])], clock,
                       scheduler, keys)
    result = cleaner.clean(log, 0, clock.milliseconds())
    assert result.next_dirty_offset == log.active_segment.base_offset == 11, \
        "Cleaning point should pass offset gap"

    log = follower_log(tmp_path / "gap-1", config,
                       [(0, list(range(10))), (15, list(range(15, 25))), (30, [30])], clock,
                       scheduler, keys)
    result = cleaner.clean(log, 0, clock.milliseconds())
    assert result.next_dirty_offset == log.active_segment.base_offset == 30, \
        "Cleaning point should pass offset gap in multiple segments"


# ---- large and corrupt batches -------------------------------------------------------------------
LARGE_MESSAGE_SIZE = 1024 * 1024


def log_with_large_messages(make_log: MakeLog, tmp_path: Path, clock: FakeClock,
                            scheduler: FakeScheduler, max_message_bytes: int) -> Log:
    """Kafka's createLogWithMessagesLargerThanMaxSize (and testLargeMessage's log): 1 MiB records
    in 16 MiB segments until there are two; the log is then reopened with ``max.message.bytes``
    (Kafka's updateConfig)."""
    log = make_log(segment_bytes=LARGE_MESSAGE_SIZE * 16, max_message_bytes=LARGE_MESSAGE_SIZE * 2)
    while log.number_of_segments < 2:
        log.append_batch(record(log.log_end_offset, bytes(LARGE_MESSAGE_SIZE)))
    assert keys_in_log(log) == list(range(log.log_end_offset))
    log.close()
    config = dataclasses.replace(log.config, max_message_bytes=max_message_bytes)
    return Log.open(log.dir, config, recovery_point=log.log_end_offset, had_clean_shutdown=True,
                    clock=clock, scheduler=scheduler)


@pytest.mark.parametrize("max_message_bytes", [LARGE_MESSAGE_SIZE * 2, LARGE_MESSAGE_SIZE // 2],
                         ids=["testLargeMessage", "testMessageLargerThanMaxMessageSize"])
def test_large_message(make_log: MakeLog, tmp_path: Path, clock: FakeClock,
                       scheduler: FakeScheduler, max_message_bytes: int) -> None:
    """Kafka's testLargeMessage and testMessageLargerThanMaxMessageSize: a cleaner whose buffers
    start at 1 KiB cleans 1 MiB batches, also when the topic's max.message.bytes was lowered
    below them."""
    log = log_with_large_messages(make_log, tmp_path, clock, scheduler, max_message_bytes)
    cleaner = make_cleaner(INT_MAX, clock, max_message_size=1024)
    keys = [1, 3, 5, 7, 9]
    for k in keys:
        cleaner.offset_map.put(key(k), LONG_MAX)
    first = log.segments()[0]
    should_remain = [k for k in keys_in_log(log) if k not in keys]
    cleaner.clean_segments(log, [first], 0, CleanerStats(clock), -1, first.read_next_offset(), {})
    assert keys_in_log(log) == should_remain


def test_message_larger_than_max_message_size_with_corrupt_header(
        make_log: MakeLog, tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """Kafka's testMessageLargerThanMaxMessageSizeWithCorruptHeader: a bad magic byte is a
    CorruptRecordError."""
    log = log_with_large_messages(make_log, tmp_path, clock, scheduler, LARGE_MESSAGE_SIZE // 2)
    first = log.segments()[0]
    with open(first.log_path, "r+b") as f:
        f.seek(MAGIC_OFFSET)
        f.write(b"\xff")
    cleaner = make_cleaner(INT_MAX, clock, max_message_size=1024)
    with pytest.raises(CorruptRecordError):
        cleaner.clean_segments(log, [first], 0, CleanerStats(clock), -1,
                               first.read_next_offset(), {})


def test_corrupt_message_size_larger_than_bytes_available(
        make_log: MakeLog, tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """Kafka's testCorruptMessageSizeLargerThanBytesAvailable: a segment file cut to 1 KiB under
    a 1 MiB batch is a CorruptRecordError, never a clean of the bytes that remain."""
    log = log_with_large_messages(make_log, tmp_path, clock, scheduler, LARGE_MESSAGE_SIZE // 2)
    first = log.segments()[0]
    upper_bound = first.read_next_offset()     # Kafka reads it after the cut; it is the same
    os.truncate(first.log_path, 1024)
    cleaner = make_cleaner(INT_MAX, clock, max_message_size=1024)
    with pytest.raises(CorruptRecordError):
        cleaner.clean_segments(log, [first], 0, CleanerStats(clock), -1, upper_bound, {})


def test_cleaning_with_uncleanable_section(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testCleaningWithUncleanableSection: segments from the one holding the first
    uncleanable offset on are not touched."""
    log = make_log(segment_bytes=1024)
    cleaner = make_cleaner(INT_MAX, clock)
    n, cleanable_segments, total_segments = 10, 2, 7
    while log.number_of_segments <= cleanable_segments:
        log.append_batch(record(log.log_end_offset % n, log.log_end_offset))
    first_uncleanable = log.log_end_offset + 1
    while log.number_of_segments < total_segments - 1:
        log.append_batch(record(log.log_end_offset % n, log.log_end_offset))

    def distinct_values_by_segment() -> list[int]:
        found = []
        for segment in log.segments():
            values = set()
            for entry in segment.batches():
                batch = RecordBatch(segment.read_bytes(entry.position, entry.size))
                values.update(r.value for r in batch.records())
            found.append(len(values))
        return found

    before = distinct_values_by_segment()
    assert all(v > n for v in before[:-1]), "each segment must contain duplicates"
    to_clean = LogToClean.of(log, 0, first_uncleanable)    # rounds down to a segment's base
    cleaner.clean(log, 0, clock.milliseconds(),
                  first_uncleanable_offset=to_clean.first_uncleanable_offset)
    after = distinct_values_by_segment()
    assert all(a < b for b, a in list(zip(before, after))[:cleanable_segments]), \
        "The cleanable segments should have fewer number of values after cleaning"
    assert before[cleanable_segments:] == after[cleanable_segments:], \
        "The uncleanable segments should have the same number of values after cleaning"


def test_duplicate_check_after_cleaning(make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's testDuplicateCheckAfterCleaning: after a clean and an unclean reload, a retry of
    each producer's last batch is still recognised as a duplicate at its original offsets."""
    log = make_log(segment_bytes=2048)
    cleaner = make_cleaner(INT_MAX, clock)
    sequences: dict[int, int] = {}

    def append(pid: int, keys: list[int]):  # type: ignore[no-untyped-def]
        """Kafka's appendIdempotentAsLeader: one batch, sequences counted per producer."""
        start = sequences.get(pid, 0)
        sequences[pid] = start + len(keys)
        return log.append_batch(build_batch([Record(key(k), key(k), T0) for k in keys],
                                            producer_id=pid, producer_epoch=0,
                                            base_sequence=start))

    def reload() -> Log:
        log.close()
        return Log.open(log.dir, log.config, recovery_point=0, clock=clock)

    append(1, [1, 2, 3])
    append(2, [3, 1, 4])
    append(3, [1, 4])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    assert last_offsets_per_batch(log) == [2, 5, 7]
    assert last_sequences_in_log(log) == {1: 2, 2: 2, 3: 1}
    assert keys_in_log(log) == [2, 3, 1, 4]
    assert offsets_in_log(log) == [1, 3, 6, 7]

    log = reload()
    sequences.clear()
    info = append(1, [1, 2, 3])
    assert (info.first_offset, info.last_offset) == (0, 2)
    info = append(3, [1, 4])
    assert (info.first_offset, info.last_offset) == (6, 7)
    info = append(2, [3, 1, 4])
    assert (info.first_offset, info.last_offset) == (3, 5)

    append(4, [2])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    assert last_sequences_in_log(log) == {1: 2, 2: 2, 3: 1, 4: 0}
    assert last_offsets_per_batch(log) == [2, 5, 7, 8]
    assert keys_in_log(log) == [3, 1, 4, 2]
    assert offsets_in_log(log) == [3, 6, 7, 8]

    log = reload()
    sequences.clear()
    info = append(1, [1, 2, 3])
    assert (info.first_offset, info.last_offset) == (0, 2)
