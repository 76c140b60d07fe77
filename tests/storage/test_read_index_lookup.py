"""Where a read starts costs no more index than it needs (issue 16, speed of the Spark read).

A reader that opens a segment read-only (``LogView``, the Spark read) used to read the whole
offset index file for every lookup: the active segment's file is preallocated to
``segment.index.bytes`` (10 MiB by default). A read from the segment's base offset now touches
no index; any other lookup in a large unread index bisects the file in place and gives the
answer reading the whole file would give.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

import storage.index_file as index_file
from storage.config import LogConfig
from storage.files import index_file as index_path
from storage.files import time_index_file as time_index_path
from storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from storage.log import Log
from storage.records import Record
from storage.segment import LogSegment
from storage.view import read_partition_batches

TS = 1_700_000_000_000
BASE = 1000


def _records(start: int, n: int) -> list[Record]:
    return [Record(b"k%d" % i, b"v%06d" % i, TS + i) for i in range(start, start + n)]


class _IndexReads:
    """Counts the offset index file reads: whole-file loads (by file name) and the bytes read
    from ``.index`` files by ``pread`` (the in-place probes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.whole: list[str] = []
        self.probed_bytes = 0
        read_whole, pread = index_file._read_whole, os.pread

        def counting_read_whole(path: Path) -> bytes:
            self.whole.append(Path(path).name)
            return read_whole(path)

        def counting_pread(fd: int, n: int, at: int) -> bytes:
            data = pread(fd, n, at)
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".index"):
                self.probed_bytes += len(data)
            return data

        monkeypatch.setattr(index_file, "_read_whole", counting_read_whole)
        monkeypatch.setattr(index_file.os, "pread", counting_pread)


def _active_log_with_index(directory: Path) -> tuple[LogConfig, int]:
    """A partition whose one (active) segment has a preallocated offset index with entries,
    left as a live owner leaves it (not trimmed)."""
    config = LogConfig(index_interval_bytes=256)
    log = Log.open(directory, config, recovery_point=0, had_clean_shutdown=True)
    for start in range(0, 400, 4):
        log.append(_records(start, 4))
    log.flush()
    end = log.log_end_offset
    assert log.active_segment.offset_index.entries > 10
    assert (directory / "00000000000000000000.index").stat().st_size == \
        config.segment_index_bytes
    return config, end


def test_a_read_from_a_segments_base_offset_reads_no_offset_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_partition_batches`` from offset 0 of a segment whose 10 MiB index is preallocated:
    every record comes back, and the ``.index`` file is neither loaded nor probed."""
    directory = tmp_path / "t-0"
    config, end = _active_log_with_index(directory)
    reads = _IndexReads(monkeypatch)
    batches = list(read_partition_batches(directory, config, 0, end))
    values = [r.value for b in batches for r in b.records()]
    assert values == [b"v%06d" % i for i in range(end)]
    assert not [name for name in reads.whole if name.endswith(".index")]
    segment = LogSegment(directory, 0, config)
    assert segment.walk_start(0) == OffsetPosition(0, 0)
    assert not segment.offset_index.is_open
    assert reads.probed_bytes == 0


def test_a_read_from_inside_a_segment_bisects_its_index_file_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read from an offset inside the active segment finds its start by bisecting the
    preallocated index file (a few hundred bytes read, not 10 MiB) and returns the records."""
    directory = tmp_path / "t-0"
    config, end = _active_log_with_index(directory)
    reads = _IndexReads(monkeypatch)
    batches = list(read_partition_batches(directory, config, 201, end))
    values = [r.value for b in batches for r in b.records() if r.offset >= 201]
    assert values == [b"v%06d" % i for i in range(201, end)]
    assert not [name for name in reads.whole if name.endswith(".index")]
    assert 0 < reads.probed_bytes < 1024
    segment = LogSegment(directory, 0, config)
    whole = LogSegment(directory, 0, config)
    assert whole.offset_index.entries > 0                   # read whole into memory
    assert segment.walk_start(201) == whole.walk_start(201)
    assert not segment.offset_index.is_open


@pytest.mark.parametrize("tail", [b"\x00", b"\xff", b"\x7f"])
def test_a_probed_lookup_answers_as_the_whole_file_does(tmp_path: Path, tail: bytes) -> None:
    """A preallocated index (tail of zeros, or garbage) read by a read-only reader: every lookup
    answered by bisecting the file equals the lookup over the whole file read into memory, and
    after ``_PROBE_LOOKUPS`` lookups the file is read whole."""
    path = index_path(tmp_path, BASE)
    writer = OffsetIndex(path, BASE, 1 << 20)
    rng = random.Random(16)
    offset, position = BASE, 0
    for _ in range(3000):
        offset += rng.randint(1, 20)
        position += rng.randint(1, 4000)
        writer.append(offset, position)
    writer.flush()
    writer.release()                            # as a live owner leaves it: not trimmed
    used = 3000 * 8
    with open(path, "r+b") as f:
        f.seek(used)
        f.write(tail * (os.path.getsize(path) - used))

    whole = OffsetIndex(path, BASE, 1 << 20, writable=False)
    assert whole.entries == (1 << 20) // 8      # the read-only count takes the whole file
    targets = [BASE - 1, BASE, BASE + 1, offset, offset + 1, 2**31 - 2 + BASE] + \
        [rng.randint(BASE, offset + 10) for _ in range(300)]
    for batch in range(0, len(targets), index_file._PROBE_LOOKUPS):
        probed = OffsetIndex(path, BASE, 1 << 20, writable=False)
        for target in targets[batch:batch + index_file._PROBE_LOOKUPS]:
            assert probed.lookup(target) == whole.lookup(target), target
        assert not probed.is_open
    probed = OffsetIndex(path, BASE, 1 << 20, writable=False)
    for target in targets[:index_file._PROBE_LOOKUPS + 1]:
        assert probed.lookup(target) == whole.lookup(target)
    assert probed.is_open


# ---- the zeroed tail of a live owner's preallocated index ---------------------------------------
# A read-only reader counts every slot of the file as an entry (the owner's count lives in its
# memory). Lookups bisected into the zeroed tail and answered with the segment's start, so every
# read from inside an active segment walked it from its first byte. Each lookup below is checked
# against a plain list of the entries written.

def _preallocated(path: Path, index: OffsetIndex | TimeIndex, entries: list[tuple[int, int]],
                  append: str) -> None:
    for entry in entries:
        getattr(index, append)(*entry)
    index.flush()
    index.release()                              # as a live owner leaves it: not trimmed
    assert os.path.getsize(path) == (1 << 20) // index.entry_size * index.entry_size


def test_read_only_offset_lookups_ignore_the_zeroed_tail_of_a_live_index(tmp_path: Path) -> None:
    path = index_path(tmp_path, BASE)
    rng = random.Random(7)
    entries, offset, position = [], BASE, 0
    for _ in range(3000):
        offset += rng.randint(1, 20)
        position += rng.randint(1, 4000)
        entries.append((offset, position))
    _preallocated(path, OffsetIndex(path, BASE, 1 << 20), entries, "append")

    def oracle(target: int) -> OffsetPosition:
        found = [e for e in entries if e[0] <= target]
        return OffsetPosition(*found[-1]) if found else OffsetPosition(BASE, 0)

    def upper_oracle(position: int, size: int) -> OffsetPosition | None:
        found = [e for e in entries if e[1] >= position + size]
        return OffsetPosition(*found[0]) if found else None

    targets = [BASE - 1, BASE, entries[0][0], offset, offset + 1, 2**31 - 2 + BASE] + \
        [rng.randint(BASE, offset + 10) for _ in range(200)]
    whole = OffsetIndex(path, BASE, 1 << 20, writable=False)
    for target in targets:
        assert whole.lookup(target) == oracle(target), target
    for batch in range(0, len(targets), index_file._PROBE_LOOKUPS):     # bisected in the file
        probed = OffsetIndex(path, BASE, 1 << 20, writable=False)
        for target in targets[batch:batch + index_file._PROBE_LOOKUPS]:
            assert probed.lookup(target) == oracle(target), target
    for _ in range(100):
        at, size = rng.randint(0, position + 10), rng.randint(1, 5000)
        assert whole.fetch_upper_bound_offset(at, size) == upper_oracle(at, size), (at, size)


def test_read_only_time_lookups_ignore_the_zeroed_tail_of_a_live_index(tmp_path: Path) -> None:
    path = time_index_path(tmp_path, BASE)
    rng = random.Random(8)
    entries, timestamp, offset = [], TS, BASE
    for _ in range(2000):
        timestamp += rng.randint(1, 50)
        offset += rng.randint(1, 20)
        entries.append((timestamp, offset))
    _preallocated(path, TimeIndex(path, BASE, 1 << 20), entries, "maybe_append")
    index = TimeIndex(path, BASE, 1 << 20, writable=False)
    for target in [TS - 1, TS, timestamp, timestamp + 1] + \
            [rng.randint(TS, timestamp + 10) for _ in range(200)]:
        found = [e for e in entries if e[0] <= target]
        expected = TimestampOffset(*found[-1]) if found else TimestampOffset(-1, BASE)
        assert index.lookup(target) == expected, target


def test_a_read_from_inside_the_active_segment_starts_where_the_owners_index_says(
        tmp_path: Path) -> None:
    """The reproduction: a reader's ``walk_start`` inside a live log's active segment was
    ``(base, 0)``, a walk of the whole segment; it is now the entry the owner's own index gives."""
    directory = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=4096)
    log = Log.open(directory, config, recovery_point=0, had_clean_shutdown=True)
    for start in range(0, 20_000, 100):
        log.append([Record(b"k%d" % i, b"x" * 200, TS + i) for i in range(start, start + 100)])
    owner = log.active_segment
    for target in (0, 150, 9_999, 19_950, 19_999):
        assert LogSegment(directory, 0, config).walk_start(target) == owner.walk_start(target)
    assert LogSegment(directory, 0, config).walk_start(19_950).position > 0
    assert LogSegment(directory, 0, config).offset_index.entries == \
        config.segment_index_bytes // 8          # the file's count itself is unchanged
    log.close()
