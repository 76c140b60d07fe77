"""CleanerStats: Kafka's fields, its stats log line character for character, snapshots."""

from __future__ import annotations

import dataclasses
import pickle

from cleaner.stats import CleanerStats, CleanerStatsSnapshot, PreCleanStats
from storage.clock import FakeClock

MB = 1024 * 1024


def finished_stats(clock: FakeClock) -> CleanerStats:
    stats = CleanerStats(clock)
    stats.index_messages_read(1_000_000)
    stats.index_bytes_read(50 * MB)
    clock.advance(1500)
    stats.index_done()
    stats.read_messages(1_234_567, 2_500 * MB)
    stats.recopy_messages(234_567, 1_000 * MB)
    stats.invalid_message()
    stats.invalid_message()
    stats.buffer_utilization = 0.4567
    clock.advance(2500)
    stats.all_done()
    return stats


def test_accumulates_kafkas_fields(clock: FakeClock) -> None:
    stats = finished_stats(clock)
    assert stats.messages_read == 1_234_567
    assert stats.bytes_read == 2_500 * MB
    assert stats.messages_written == 234_567
    assert stats.bytes_written == 1_000 * MB
    assert stats.map_messages_read == 1_000_000
    assert stats.map_bytes_read == 50 * MB
    assert stats.invalid_messages_read == 2
    assert stats.elapsed_secs == 4.0
    assert stats.elapsed_index_secs == 1.5


def test_log_line_is_kafkas_format(clock: FakeClock) -> None:
    line = finished_stats(clock).log_line(0, "topic-0", 100, 2000)
    assert line == (
        "\n\tLog cleaner thread 0 cleaned log topic-0 (dirty section = [100, 2000])\n"
        "\t2,500.0 MB of log processed in 4.0 seconds (625.0 MB/sec).\n"
        "\tIndexed 50.0 MB in 1.5 seconds (33.3 Mb/sec, 37.5% of total time)\n"
        "\tBuffer utilization: 45.7%\n"
        "\tCleaned 2,500.0 MB in 2.5 seconds (1,000.0 Mb/sec, 62.5% of total time)\n"
        "\tStart size: 2,500.0 MB (1,234,567 messages)\n"
        "\tEnd size: 1,000.0 MB (234,567 messages)\n"
        "\t60.0% size reduction (81.0% fewer messages)\n")


def test_zero_duration_prints_javas_infinity_and_nan(clock: FakeClock) -> None:
    stats = CleanerStats(clock)
    stats.index_done()
    stats.all_done()
    line = stats.log_line(1, "t-1", 0, 0)
    assert "\t0.0 MB of log processed in 0.0 seconds (NaN MB/sec).\n" in line
    assert "\tStart size: 0.0 MB (0 messages)\n" in line
    assert "\tNaN% size reduction (NaN% fewer messages)\n" in line
    stats.read_messages(1, MB)
    assert "(Infinity MB/sec)" in stats.log_line(1, "t-1", 0, 1)


def test_rounding_is_half_up_on_the_decimal_value(clock: FakeClock) -> None:
    stats = CleanerStats(clock)
    stats.buffer_utilization = 0.0015  # Java prints 0.2%, Python's "%.1f" would print 0.1%
    assert "\tBuffer utilization: 0.2%\n" in stats.log_line(0, "x", 0, 0)


def test_invalid_messages_warning_only_when_some(clock: FakeClock) -> None:
    assert CleanerStats(clock).invalid_messages_warning() is None
    assert finished_stats(clock).invalid_messages_warning() == (
        "\tFound 2 invalid messages during compaction.")


def test_snapshot_is_frozen_plain_values_that_pickle(clock: FakeClock) -> None:
    stats = finished_stats(clock)
    snapshot = stats.snapshot()
    assert isinstance(snapshot, CleanerStatsSnapshot)
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot
    row = dataclasses.asdict(snapshot)
    assert row["bytes_read"] == 2_500 * MB and row["buffer_utilization"] == 0.4567
    assert snapshot.elapsed_secs == 4.0
    stats.read_messages(1, 1)
    assert snapshot.messages_read == 1_234_567


def test_pre_clean_line_only_when_partitions_are_delayed() -> None:
    assert PreCleanStats(3, 0, 0).log_line() is None
    assert PreCleanStats(3, 2, 5000).log_line() == (
        "\tCleanable partitions: 3, Delayed partitions: 2, max delay: 5000")
