"""LogSegmentTest scenarios, as v2 tests on real files."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.file_records import WRITE_BEHIND_BYTES
from storage.records import Record, build_batch, iter_batches
from storage.segment import HandleCache, LogSegment, RollParams


def make_segment(tmp_path: Path, base: int = 40, clock: FakeClock | None = None,
                 **config: object) -> LogSegment:
    cfg = LogConfig(index_interval_bytes=int(config.pop("index_interval_bytes", 10)),
                    segment_index_bytes=int(config.pop("segment_index_bytes", 10_000)), **config)
    return LogSegment.create(tmp_path, base, cfg, clock=clock or FakeClock())


def append(segment: LogSegment, first_offset: int, *values: str, ts: int | None = None) -> bytes:
    records = [Record(key=v.encode(), value=v.encode(),
                      timestamp=ts if ts is not None else (first_offset + i) * 10)
               for i, v in enumerate(values)]
    data = build_batch(records, base_offset=first_offset)
    last = first_offset + len(values) - 1
    max_ts = max(r.timestamp for r in records)
    segment.append(last, max_ts, last, [data])
    return data


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for b in iter_batches(data) for r in b.records()]


def test_read_on_empty_segment_returns_nothing(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    assert segment.read(40, 300) is None


def test_read_before_first_offset_returns_first_batch(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    append(segment, 50, "hello", "there", "little", "bee")
    result = segment.read(41, 300)
    assert result is not None
    assert offsets_in(result[1]) == [50, 51, 52, 53]


def test_read_after_last_offset_returns_nothing(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    append(segment, 50, "hello", "there")
    assert segment.read(52, 300) is None


def test_read_from_gap_returns_next_batch(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    append(segment, 50, "hello", "there")
    append(segment, 60, "alpha", "beta")
    result = segment.read(55, 200)
    assert result is not None
    assert offsets_in(result[1]) == [60, 61]


def test_read_respects_max_size_but_returns_at_least_one_batch(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    first = append(segment, 50, "hello", "there")
    append(segment, 52, "alpha", "beta")
    result = segment.read(50, 10)
    assert result is not None and result[1] == first
    assert segment.read(50, 10, min_one_message=False) is None


def test_truncate_removes_batches_at_and_after_offset(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    for offset in range(40, 140, 2):
        append(segment, offset, "hello", "there")
    removed = segment.truncate_to(80)
    assert removed > 0
    assert segment.read_next_offset() == 80
    assert segment.read(80, 1000) is None
    result = segment.read(78, 1000)
    assert result is not None and offsets_in(result[1]) == [78, 79]


def test_truncate_full_resets_roll_timer(tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = LogConfig(segment_ms=1000)
    segment = LogSegment.create(tmp_path, 0, cfg, clock=clock)
    append(segment, 0, "hello", ts=clock.milliseconds())
    clock.advance(1500)
    assert segment.should_roll(RollParams(clock.milliseconds() + 1, 1, 10, clock.milliseconds()))
    segment.truncate_to(0)
    assert segment.size == 0
    assert not segment.should_roll(RollParams(clock.milliseconds(), 1, 10, clock.milliseconds()))
    clock.advance(1001)
    append(segment, 0, "hello", ts=clock.milliseconds())
    assert not segment.should_roll(RollParams(clock.milliseconds(), 1, 10, clock.milliseconds()))


def test_truncate_of_empty_segment_does_not_roll(tmp_path: Path) -> None:
    clock = FakeClock()
    segment = LogSegment.create(tmp_path, 0, LogConfig(segment_ms=1000), clock=clock)
    clock.advance(5000)
    segment.truncate_to(0)
    assert not segment.should_roll(RollParams(-1, 0, 10, clock.milliseconds()))


def test_reload_largest_timestamp_after_truncation(tmp_path: Path) -> None:
    segment = make_segment(tmp_path, base=0)
    for i in range(14):
        append(segment, i * 2, "a", "b", ts=i * 100)
    assert segment.time_index.entries > 0
    segment.truncate_to(0)
    assert segment.time_index.entries == 0
    assert segment.max_timestamp_so_far == -1
    append(segment, 0, "a", ts=400)
    assert segment.max_timestamp_so_far == 400


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    for offset in range(40, 50):
        append(segment, offset, str(offset))
    assert segment.find_offset_by_timestamp(420, 40) == (42, 420)
    assert segment.find_offset_by_timestamp(421, 40) == (43, 430)
    assert segment.find_offset_by_timestamp(491, 40) is None
    assert segment.find_offset_by_timestamp(399, 40) == (40, 400)


def test_next_offset_calculation(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    assert segment.read_next_offset() == 40
    append(segment, 50, "hello", "there", "you")
    assert segment.read_next_offset() == 53


def test_change_file_suffixes_does_not_create_lazy_index_files(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    segment.change_file_suffixes("", ".deleted")
    assert segment.log_path.name == "00000000000000000040.log.deleted"
    assert segment.log_path.exists()
    assert not segment.offset_index.path.exists()
    assert not segment.time_index.path.exists()


def test_recovery_fixes_corrupt_offset_index(tmp_path: Path) -> None:
    segment = make_segment(tmp_path, base=0)
    for i in range(100):
        append(segment, i, str(i))
    segment.on_become_inactive()
    index = segment.offset_index.path
    data = bytearray(index.read_bytes())
    data[:16] = os.urandom(16)
    index.write_bytes(bytes(data))
    reopened = LogSegment(tmp_path, 0, segment.config)
    reopened.recover()
    for i in range(100):
        result = reopened.read(i, 1)
        assert result is not None
        assert offsets_in(result[1]) == [i]


def test_recovery_fixes_corrupt_time_index(tmp_path: Path) -> None:
    segment = make_segment(tmp_path, base=0)
    for i in range(100):
        append(segment, i, str(i))
    segment.on_become_inactive()
    segment.time_index.path.write_bytes(os.urandom(120))
    reopened = LogSegment(tmp_path, 0, segment.config)
    reopened.recover()
    for i in range(100):
        assert reopened.find_offset_by_timestamp(i * 10, 0) == (i, i * 10)


def test_recovery_truncates_at_corrupt_batch(tmp_path: Path) -> None:
    segment = make_segment(tmp_path, base=0)
    positions = []
    for i in range(50):
        positions.append(segment.size)
        append(segment, i, str(i))
    segment.on_become_inactive()
    corrupt_at = positions[37] + 30
    with open(segment.log_path, "r+b") as f:
        f.seek(corrupt_at)
        byte = f.read(1)
        f.seek(corrupt_at)
        f.write(bytes([byte[0] ^ 0xFF]))
    reopened = LogSegment(tmp_path, 0, segment.config)
    truncated = reopened.recover()
    assert truncated == segment.size - positions[37]
    assert reopened.read_next_offset() == 37
    assert reopened.size == positions[37]


def test_append_refuses_offset_that_overflows_relative_offsets(tmp_path: Path) -> None:
    from storage.errors import InvalidOffsetError
    segment = make_segment(tmp_path, base=0)
    with pytest.raises(InvalidOffsetError):
        segment.append(2**31, 1, 2**31, [b"x" * 70])
    assert not segment.can_convert_to_relative_offset(2**31)
    assert segment.should_roll(RollParams(1, 2**31, 70, 0))


def test_first_batch_timestamp(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    assert segment.first_batch_timestamp() == -1
    append(segment, 40, "a", "b", ts=1234)
    append(segment, 42, "c", ts=9999)
    assert segment.first_batch_timestamp() == 1234


def test_handle_cache_keeps_descriptors_bounded(tmp_path: Path) -> None:
    cache = HandleCache(capacity=8)
    paths = []
    for i in range(50):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x")
        paths.append(path)
    before = len(os.listdir("/proc/self/fd"))
    for path in paths:
        with cache.borrow(path.name, path) as fd:
            assert os.pread(fd, 1, 0) == b"x"
    assert len(cache) <= 8
    assert len(os.listdir("/proc/self/fd")) <= before + 8
    for path in paths:
        cache.forget(path.name)
    assert len(cache) == 0


def test_handle_cache_never_closes_a_descriptor_a_reader_holds(tmp_path: Path) -> None:
    cache = HandleCache(capacity=8)
    path = tmp_path / "segment"
    path.write_bytes(b"old bytes")
    with cache.borrow("s", path) as fd:
        path.rename(tmp_path / "segment.deleted")
        (tmp_path / "segment.deleted").unlink()
        cache.forget("s")                      # deleted while read: retired, not closed
        with cache.borrow("s", path) as again:  # the same read goes on with the same file
            assert again == fd
        replacement = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR)   # takes a free number
        os.write(replacement, b"NEW")
        assert replacement != fd
        assert os.pread(fd, 9, 0) == b"old bytes"
        os.close(replacement)
    assert len(cache) == 0                     # closed by the last reader out
    with pytest.raises(OSError):
        os.fstat(fd)


def test_handle_cache_refuses_a_file_that_replaced_the_segments_own(tmp_path: Path) -> None:
    cache = HandleCache(capacity=8)
    path = tmp_path / "segment"
    path.write_bytes(b"first")
    inode = path.stat().st_ino
    keep = tmp_path / "keep"
    path.rename(keep)                          # keeps the inode busy, so the new one differs
    path.write_bytes(b"second")
    with pytest.raises(FileNotFoundError):
        with cache.borrow("s", path, inode):
            pass
    assert len(cache) == 0
    with cache.borrow("t", keep, inode) as fd:
        assert os.pread(fd, 5, 0) == b"first"


def test_cleaned_segment_starts_the_disk_writes_of_its_appends_as_they_go(
        tmp_path: Path) -> None:
    """A cleaned segment is written whole, then fsynced once before its swap: its appends start
    writing their whole pages to disk every WRITE_BEHIND_BYTES (sync_file_range), so that fsync
    waits for the tail only. An ordinary segment's appends start nothing (its flush policy is
    the log's), and the cleaned segment's bytes are all still there after its fsync."""
    config = LogConfig(segment_index_bytes=10_000)
    cleaned = LogSegment.create_cleaned(tmp_path, 0, config, clock=FakeClock())
    active = LogSegment.create(tmp_path, 1000, config, clock=FakeClock())
    batch = build_batch([Record(key=b"k", value=b"v" * 100_000, timestamp=0)])
    written = 0
    for i in range(25):
        cleaned.append(i, 0, i, [build_batch([Record(key=b"k", value=b"v" * 100_000,
                                                     timestamp=0)], base_offset=i)])
        active.append(1000 + i, 0, 1000 + i, [batch])
        written += len(batch)
    assert written >= 2 * WRITE_BEHIND_BYTES
    assert cleaned.writeback_started % mmap.PAGESIZE == 0
    assert written - WRITE_BEHIND_BYTES - mmap.PAGESIZE < cleaned.writeback_started <= written
    assert active.writeback_started == 0
    cleaned.flush()
    assert cleaned.size == written and cleaned.log_path.stat().st_size == written
    assert [b.base_offset for b in iter_batches(cleaned.log_path.read_bytes())] == list(range(25))


def test_handle_cache_pread_reads_through_the_cached_descriptor_and_unpins_it(
        tmp_path: Path) -> None:
    """``pread`` is one borrow for one read: the descriptor is opened once and cached, and no
    pin is left behind, so a truncation's forget_when_unpinned does not wait."""
    cache = HandleCache(capacity=8)
    path = tmp_path / "segment"
    path.write_bytes(b"0123456789")
    inode = path.stat().st_ino
    assert cache.pread("s", path, inode, 4, 3) == b"3456"
    with cache.borrow("s", path, inode) as fd:
        assert cache.pread("s", path, inode, 20, 8) == b"89"
        assert os.pread(fd, 2, 0) == b"01"           # the same descriptor, still open
    assert len(cache) == 1
    cache.forget_when_unpinned("s")                  # returns at once: nothing holds it
    assert len(cache) == 0
    with pytest.raises(OSError):
        os.fstat(fd)
