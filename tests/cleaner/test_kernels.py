"""The cleaner's run kernels against the per-batch path they stand in for: the same map, the same
kept bytes, the same counts, and the same points where they hand a batch back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cleaner.batch_filter import ChunkOutput, LastBatches, filter_batch, filter_plain_batches
from cleaner.kernels import DONE, EMPTY, MAP_FULL, PER_BATCH
from cleaner.offset_map import OffsetMap
from cleaner.segment_reader import Records
from cleaner.stats import CleanerStats
from storage.clock import FakeClock
from storage.records import (HEADER_SIZE, BatchHeader, Compression, Record, TimestampType,
                             build_batch, scan_batches)

HASH_KEY = bytes(range(16))
NOW = 1_700_000_000_000


def random_batches(rng: np.random.Generator, count: int, *, tombstones: bool = True,
                   horizon: bool = True) -> tuple[bytes, list[int]]:
    """``count`` plain batches of 1-20 records over 30 keys (some null, some tombstones), some
    under log-append time, some with a delete horizon before or after ``NOW``."""
    out, bases, offset = [], [], 0
    for _ in range(count):
        n = int(rng.integers(1, 21))
        records = []
        for i in range(n):
            k = int(rng.integers(0, 33))
            key = None if k >= 30 else b"key-%d" % k
            value = None if tombstones and rng.random() < 0.15 else b"v" * int(rng.integers(0, 40))
            records.append(Record(key, value, NOW - 10_000 + int(rng.integers(0, 5000)) + i))
        delete_horizon = None
        if horizon and any(r.value is None for r in records):
            delete_horizon = NOW + int(rng.choice([-1000, 0, 1000]))
        append_time = rng.random() < 0.2
        out.append(build_batch(records, base_offset=offset, delete_horizon_ms=delete_horizon,
                               timestamp_type=TimestampType.LOG_APPEND_TIME if append_time
                               else TimestampType.CREATE_TIME,
                               max_timestamp=NOW - 7 if append_time else None))
        bases.append(offset)
        offset += n + int(rng.integers(0, 3))          # gaps, as after earlier cleans
    return b"".join(out), bases


def per_batch_map(data: bytes, start: int, memory: int) -> tuple[OffsetMap, int, bool]:
    """The map built batch by batch as the per-batch path builds it."""
    offset_map = OffsetMap(memory, hash_key=HASH_KEY)
    scan = scan_batches(data)
    consumed_total = 0
    for pos, size in zip(scan.positions.tolist(), scan.sizes.tolist()):
        header = BatchHeader.parse(data, pos)
        records = Records._decode(data, pos, size, header)
        offsets = records.offsets()
        lengths = np.where(offsets >= start, records.key_len, -1)
        consumed = offset_map.put_batch(records.buf, records.key_start, lengths, offsets)
        consumed_total += consumed
        if consumed < records.count:
            return offset_map, consumed_total, True
        if header.last_offset >= start:
            offset_map.update_latest_offset(header.last_offset)
    return offset_map, consumed_total, False


@pytest.mark.parametrize("start", [0, 150])
def test_the_map_kernel_builds_the_map_the_per_batch_path_builds(start: int) -> None:
    data, _bases = random_batches(np.random.default_rng(1), 40)
    expected, consumed, _full = per_batch_map(data, start, 1 << 20)
    scan = scan_batches(data)
    offset_map = OffsetMap(1 << 20, hash_key=HASH_KEY)
    progress = offset_map.put_batches(np.frombuffer(data, np.uint8), scan, 0, len(scan), start)
    assert (progress.next, progress.status, progress.consumed) == (len(scan), DONE, consumed)
    keys = [b"key-%d" % k for k in range(30)] + [b"absent"]
    assert [offset_map.get(k) for k in keys] == [expected.get(k) for k in keys]
    assert (offset_map.size, offset_map.latest_offset, offset_map.null_keys_skipped) == \
        (expected.size, expected.latest_offset, expected.null_keys_skipped)


def test_the_map_kernel_stops_inside_the_batch_where_the_map_fills_up() -> None:
    data, _bases = random_batches(np.random.default_rng(2), 40)
    memory = 24 * 12                                   # 12 slots: 10 keys at load factor 0.9
    expected, consumed, full = per_batch_map(data, 0, memory)
    scan = scan_batches(data)
    offset_map = OffsetMap(memory, hash_key=HASH_KEY)
    progress = offset_map.put_batches(np.frombuffer(data, np.uint8), scan, 0, len(scan), 0)
    assert full and progress.status == MAP_FULL and progress.consumed == consumed
    assert (offset_map.size, offset_map.latest_offset) == (expected.size, expected.latest_offset)
    assert offset_map.size == offset_map.usable_slots


def per_batch_filter(offset_map: OffsetMap, data: bytes, upper_bound: int
                     ) -> tuple[bytes, CleanerStats]:
    stats = CleanerStats(FakeClock())
    scan = scan_batches(data)
    kept = []
    for pos, size in zip(scan.positions.tolist(), scan.sizes.tolist()):
        header = BatchHeader.parse(data, pos)
        records = Records._decode(data, pos, size, header)
        stats.read_messages(header.records_count, size)
        out = filter_batch(offset_map, data, pos, size, header, records, NOW, stats, True,
                           86_400_000, upper_bound, LastBatches(dict))
        if out is not None:
            kept.append(bytes(out[0]))
            stats.recopy_messages(out[1], len(out[0]))
    return b"".join(kept), stats


def test_the_filter_kernel_keeps_the_bytes_filter_batch_keeps() -> None:
    data, _bases = random_batches(np.random.default_rng(3), 60)
    offset_map, _consumed, _full = per_batch_map(data, 0, 1 << 20)
    scan = scan_batches(data)
    upper_bound = int(scan.last_offsets[-1]) + 1
    expected, expected_stats = per_batch_filter(offset_map, data, upper_bound)
    stats = CleanerStats(FakeClock())
    written = ChunkOutput(np.empty(len(data), np.uint8))
    run = filter_plain_batches(offset_map.lookup(), np.frombuffer(data, np.uint8), scan, 0,
                               len(scan), NOW, upper_bound, written, stats)
    assert run.next == len(scan) and run.status in (DONE, EMPTY)
    if run.status == EMPTY:      # the round's last batch kept nothing: the caller's to keep
        assert run.next == len(scan) - 1
    got = b"".join(bytes(p) for p in written.pieces)
    assert got == expected[:len(got)] and got
    assert [int(b) for b in scan_batches(got, check_crc=True).base_offsets] == \
        [int(b) for b in scan_batches(expected, check_crc=True).base_offsets][:len(
            scan_batches(got).base_offsets)]
    assert (stats.messages_read, stats.bytes_read, stats.invalid_messages_read) == \
        (expected_stats.messages_read, expected_stats.bytes_read,
         expected_stats.invalid_messages_read)


def test_the_filter_kernel_refuses_an_output_buffer_too_small_for_the_batches_it_keeps() -> None:
    """The kept bytes are copied unchecked by one memmove each: a buffer too small must raise
    IndexError before anything is written past it."""
    data, _bases = random_batches(np.random.default_rng(3), 4, tombstones=False)
    offset_map, _consumed, _full = per_batch_map(data, 0, 1 << 20)
    scan = scan_batches(data)
    guard = np.full(len(data), 0xAB, np.uint8)
    out = guard[:HEADER_SIZE - 1]      # not even a batch header: the rest must stay untouched
    with pytest.raises(IndexError):
        filter_plain_batches(offset_map.lookup(), np.frombuffer(data, np.uint8), scan, 0,
                             len(scan), NOW, 1 << 40, ChunkOutput(out), CleanerStats(FakeClock()))
    assert (guard[HEADER_SIZE - 1:] == 0xAB).all()


def filter_two(first: bytes, second: bytes) -> tuple[Any, CleanerStats, ChunkOutput]:
    """The filter kernel over two batches, with the map the per-batch path builds of them."""
    data = first + second
    offset_map, _consumed, _full = per_batch_map(data, 0, 1 << 20)
    scan = scan_batches(data)
    stats = CleanerStats(FakeClock())
    written = ChunkOutput(np.empty(len(data), np.uint8))
    run = filter_plain_batches(offset_map.lookup(), np.frombuffer(data, np.uint8), scan, 0, 2,
                               NOW, 100, written, stats)
    return run, stats, written


def test_the_filter_kernel_leaves_a_tombstone_without_a_horizon_to_the_per_batch_path() -> None:
    first = build_batch([Record(b"a", b"1", NOW), Record(b"a", b"2", NOW)], base_offset=0)
    second = build_batch([Record(b"b", None, NOW)], base_offset=2)
    run, stats, written = filter_two(first, second)
    assert (run.next, run.status) == (1, PER_BATCH)
    assert stats.messages_read == 2 and stats.messages_written == 1
    kept = scan_batches(bytes(written.pieces[0]), check_crc=True)
    assert kept.error is None and kept.records_counts.tolist() == [1]


def test_the_filter_kernel_hands_back_a_producer_batch_that_kept_nothing() -> None:
    first = build_batch([Record(b"a", b"1", NOW)], base_offset=0, producer_id=7,
                        producer_epoch=0, base_sequence=0)
    second = build_batch([Record(b"a", b"2", NOW)], base_offset=1)
    run, stats, written = filter_two(first, second)
    assert (run.next, run.status) == (0, EMPTY)
    assert stats.messages_read == 1 and written.pieces == []


def test_the_kernels_stop_at_every_batch_that_is_not_uncompressed_v2_data_outside_a_txn() -> None:
    record = [Record(b"k", b"v", NOW)]
    batches = [build_batch(record), build_batch(record, compression=Compression.GZIP),
               build_batch(record, producer_id=1, producer_epoch=0, base_sequence=0,
                           is_transactional=True), build_batch(record), build_batch(record)]
    data = b"".join(batches)
    scan = scan_batches(data)
    array = np.frombuffer(data, np.uint8)
    offset_map = OffsetMap(1 << 20, hash_key=HASH_KEY)
    stops = []
    for first in range(5):
        progress = offset_map.put_batches(array, scan, first, 5, 0)
        written = ChunkOutput(np.empty(len(data), np.uint8))
        run = filter_plain_batches(offset_map.lookup(), array, scan, first, 5, NOW, 100, written,
                                   CleanerStats(FakeClock()))
        stops.append((progress.next, progress.status, run.next, run.status))
    assert stops == [(1, PER_BATCH, 1, PER_BATCH), (1, PER_BATCH, 1, PER_BATCH),
                     (2, PER_BATCH, 2, PER_BATCH), (5, DONE, 5, DONE), (5, DONE, 5, DONE)]
