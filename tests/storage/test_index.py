"""Offset and time index tests: Kafka's OffsetIndexTest and TimeIndexTest on real files, plus the
lazy/release lifecycle and the indexes Kafka itself wrote (fixtures/kafka-real)."""

from __future__ import annotations

import bisect
import json
import os
import pickle
import random
import struct
from pathlib import Path

import pytest

from storage.errors import CorruptIndexError, InvalidOffsetError
from storage.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX, index_file, offset_from_file_name
from storage.files import time_index_file
from storage.index import (
    IndexFullError,
    OffsetIndex,
    OffsetPosition,
    ReadOnlyIndexError,
    TimeIndex,
    TimestampOffset,
)

BASE_OFFSET = 45
MAX_ENTRIES = 30
from tests.conftest import FIXTURES


def new_offset_index(
    directory: Path, base_offset: int = BASE_OFFSET, max_entries: int = MAX_ENTRIES
) -> OffsetIndex:
    return OffsetIndex(index_file(directory, base_offset), base_offset, max_entries * 8)


def new_time_index(
    directory: Path, base_offset: int = BASE_OFFSET, max_entries: int = MAX_ENTRIES
) -> TimeIndex:
    return TimeIndex(time_index_file(directory, base_offset), base_offset, max_entries * 12)


def monotonic_seq(rng: random.Random, base: int, length: int) -> list[int]:
    seq = []
    last = base
    for _ in range(length):
        last += rng.randint(1, 15)
        seq.append(last)
    return seq


def append_time_entries(index: TimeIndex, count: int) -> None:
    for i in range(1, count + 1):
        index.maybe_append(i * 10, i * 10 + BASE_OFFSET)


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- offset index: Kafka's OffsetIndexTest ------------------------------------------------------


def test_lookup_matches_sorted_map_floor_for_random_offsets(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    assert index.lookup(92) == OffsetPosition(BASE_OFFSET, 0)
    rng = random.Random(1234)
    offsets = monotonic_seq(rng, BASE_OFFSET + 1, index.max_entries)
    positions = monotonic_seq(rng, 0, index.max_entries)
    reference = dict(zip(offsets, positions))
    for offset, position in reference.items():
        index.append(offset, position)

    for offset, position in reference.items():
        assert index.lookup(offset) == OffsetPosition(offset, position)
    keys = sorted(reference)
    for target in range(BASE_OFFSET - 5, keys[-1] + 20):
        slot = bisect.bisect_right(keys, target) - 1
        floor = OffsetPosition(keys[slot], reference[keys[slot]]) if slot >= 0 else None
        assert index.lookup(target) == (floor or OffsetPosition(BASE_OFFSET, 0))


def test_lookup_extreme_cases_on_empty_and_full_index(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0)
    assert index.lookup(BASE_OFFSET - 100) == OffsetPosition(BASE_OFFSET, 0)
    last = OffsetPosition(BASE_OFFSET + index.max_entries, index.max_entries - 1)
    assert index.lookup(BASE_OFFSET + index.max_entries) == last
    assert index.lookup(BASE_OFFSET + 2**40) == last


def test_entry_returns_the_nth_entry(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i, i)
    assert [index.entry(i) for i in range(index.max_entries)] == [
        OffsetPosition(BASE_OFFSET + i, i) for i in range(index.max_entries)
    ]


def test_entry_beyond_the_entries_raises_index_error(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    with pytest.raises(IndexError):
        index.entry(0)
    index.append(BASE_OFFSET, 0)
    with pytest.raises(IndexError):
        index.entry(1)


def test_append_to_full_index_raises_index_full_error(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    for i in range(index.max_entries):
        assert not index.is_full()
        index.append(BASE_OFFSET + i + 1, i)
    assert index.is_full()
    with pytest.raises(IndexFullError) as raised:
        index.append(BASE_OFFSET + index.max_entries + 1, 1)
    assert raised.value.path == index.path
    assert index.entries == MAX_ENTRIES


@pytest.mark.parametrize("offset", [50, 51])
def test_append_offset_not_above_last_raises_invalid_offset_error(
    tmp_path: Path, offset: int
) -> None:
    index = new_offset_index(tmp_path)
    index.append(51, 0)
    with pytest.raises(InvalidOffsetError) as raised:
        index.append(offset, 1)
    assert raised.value.last_offset == 51
    assert index.entries == 1


@pytest.mark.parametrize("offset", [BASE_OFFSET - 1, BASE_OFFSET + 2**31])
def test_append_offset_outside_int32_relative_range_raises_invalid_offset_error(
    tmp_path: Path, offset: int
) -> None:
    index = new_offset_index(tmp_path)
    with pytest.raises(InvalidOffsetError):
        index.append(offset, 0)
    assert index.entries == 0
    index.append(BASE_OFFSET + 2**31 - 1, 0)
    assert index.last_offset == BASE_OFFSET + 2**31 - 1


def test_fetch_upper_bound_offset_returns_first_entry_at_or_past_the_fetch_end(
    tmp_path: Path,
) -> None:
    index = new_offset_index(tmp_path)
    first = OffsetPosition(BASE_OFFSET, 0)
    second = OffsetPosition(BASE_OFFSET + 1, 10)
    third = OffsetPosition(BASE_OFFSET + 2, 23)
    fourth = OffsetPosition(BASE_OFFSET + 3, 37)
    assert index.fetch_upper_bound_offset(first.position, 5) is None
    for entry in (first, second, third, fourth):
        index.append(entry.offset, entry.position)

    table = [
        (first, 5, second),
        (first, 10, second),
        (first, 23, third),
        (first, 22, third),
        (second, 24, fourth),
        (fourth, 1, None),
        (first, 200, None),
        (second, 200, None),
    ]
    for fetch, size, expected in table:
        assert index.fetch_upper_bound_offset(fetch.position, size) == expected, (fetch, size)


def test_reopening_a_closed_index_gives_the_same_entries(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    first, second = OffsetPosition(51, 0), OffsetPosition(52, 1)
    index.append(first.offset, first.position)
    index.append(second.offset, second.position)
    index.close()
    assert not index.is_open
    assert index.path.stat().st_size == 2 * 8

    reopened = OffsetIndex(index.path, BASE_OFFSET, writable=False)
    assert reopened.lookup(first.offset) == first
    assert reopened.lookup(second.offset) == second
    assert reopened.last_offset == second.offset
    assert reopened.entries == 2
    with pytest.raises(ReadOnlyIndexError):
        reopened.append(53, 2)
    assert index.entries == 2  # the closed index reopens lazily too


def test_truncate_to_removes_entries_at_or_above_the_offset(tmp_path: Path) -> None:
    index = OffsetIndex(index_file(tmp_path, 0), 0, 10 * 8)
    index.reset()
    for i in range(1, 10):
        index.append(i, i)

    index.truncate_to(12)
    assert index.lookup(10) == OffsetPosition(9, 9), "truncating past the end changes nothing"
    assert index.last_offset == 9

    index.append(10, 10)
    index.truncate_to(10)
    assert index.lookup(10) == OffsetPosition(9, 9), "the entry for exactly 10 is removed"
    assert index.last_offset == 9
    index.append(10, 10)

    index.truncate_to(9)
    assert index.lookup(10) == OffsetPosition(8, 8)
    assert index.last_offset == 8
    index.append(9, 9)

    index.truncate_to(5)
    assert index.lookup(10) == OffsetPosition(4, 4)
    assert index.last_offset == 4
    index.append(5, 5)
    assert index.entries == 5

    index.reset()
    assert index.entries == 0
    assert index.last_offset == 0
    index.append(0, 0)


def test_truncate_to_between_sparse_entries_keeps_the_lower_entry(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    for offset in (50, 60, 70):
        index.append(offset, offset * 10)
    index.truncate_to(65)
    assert [index.entry(n).offset for n in range(index.entries)] == [50, 60]
    index.truncate_to(BASE_OFFSET - 10)
    assert index.entries == 0
    assert index.lookup(70) == OffsetPosition(BASE_OFFSET, 0)


def test_sanity_check_rejects_length_not_a_multiple_of_the_entry_size(tmp_path: Path) -> None:
    path = index_file(tmp_path, BASE_OFFSET)
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")
    for writable in (True, False):
        with pytest.raises(CorruptIndexError) as raised:
            OffsetIndex(path, BASE_OFFSET, writable=writable).sanity_check()
        assert raised.value.path == path
        assert str(path) in str(raised.value)
        assert pickle.loads(pickle.dumps(raised.value)).length == 11


def test_sanity_check_rejects_last_offset_below_the_base_offset(tmp_path: Path) -> None:
    path = index_file(tmp_path, BASE_OFFSET)
    path.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", -1, 10))
    index = OffsetIndex(path, BASE_OFFSET, writable=False)
    assert index.last_offset == BASE_OFFSET - 1
    with pytest.raises(CorruptIndexError) as raised:
        index.sanity_check()
    assert raised.value.last_offset == BASE_OFFSET - 1
    assert str(path) in str(raised.value)


def test_sanity_check_accepts_last_offset_equal_to_the_base_offset(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path, base_offset=20, max_entries=10)
    index.append(20, 0)
    index.sanity_check()
    index.close()
    OffsetIndex(index.path, 20, writable=False).sanity_check()


def test_on_disk_layout_is_big_endian_relative_offset_then_position(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path, base_offset=1000)
    index.append(1005, 4096)
    index.close()
    assert index.path.read_bytes() == bytes.fromhex("00000005 00001000")


# -- lifecycle: lazy files, preallocation, trim, resize, release --------------------------------


def test_lazy_index_is_constructed_renamed_and_deleted_without_creating_a_file(
    tmp_path: Path,
) -> None:
    offsets = new_offset_index(tmp_path)
    times = new_time_index(tmp_path)
    for index in (offsets, times):
        assert not index.exists()
        target = index.path.with_name(index.path.name + ".deleted")
        index.rename_to(target)
        assert index.path == target
        assert not index.is_open
        assert not index.delete_if_exists()
        index.close()
        index.release()
    assert list(tmp_path.iterdir()) == []


def test_read_only_index_of_a_missing_file_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    index = OffsetIndex(index_file(tmp_path, BASE_OFFSET), BASE_OFFSET, writable=False)
    assert index.entries == 0
    assert index.lookup(100) == OffsetPosition(BASE_OFFSET, 0)
    index.sanity_check()
    assert list(tmp_path.iterdir()) == []


def test_rename_moves_an_open_index_which_keeps_working(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    index.append(50, 0)
    old = index.path
    index.rename_to(old.with_name(old.name + ".swap"))
    assert not old.exists() and index.exists()
    index.append(51, 10)
    index.close()
    assert OffsetIndex(index.path, BASE_OFFSET, writable=False).entries == 2


def test_rename_after_the_directory_moved_only_updates_the_path(tmp_path: Path) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    index = new_offset_index(directory)
    index.append(50, 0)
    index.close()
    moved = tmp_path / "topic-0.deleted"
    directory.rename(moved)
    index.rename_to(moved / index.path.name)
    assert index.entries == 1


def test_delete_if_exists_removes_the_file(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    index.append(50, 0)
    assert index.delete_if_exists()
    assert not index.exists()
    assert not index.is_open
    assert not index.delete_if_exists()


def test_new_index_is_preallocated_trimmed_on_close_and_resized_back(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    index.append(50, 0)
    index.append(51, 8)
    assert index.path.stat().st_size == MAX_ENTRIES * 8
    assert index.size_in_bytes == 16

    index.close()
    assert index.path.stat().st_size == 16
    assert index.is_full(), "a reopened trimmed index has no free slot until resized"
    assert index.resize(MAX_ENTRIES * 8)
    assert not index.resize(MAX_ENTRIES * 8 + 7), "rounded down to the same size"
    assert (index.entries, index.max_entries) == (2, MAX_ENTRIES)
    assert index.path.stat().st_size == MAX_ENTRIES * 8
    index.append(52, 16)
    assert index.lookup(100) == OffsetPosition(52, 16)


def test_preallocation_rounds_max_index_size_down_to_whole_entries(tmp_path: Path) -> None:
    offsets = OffsetIndex(index_file(tmp_path, 0), 0, 100)
    times = TimeIndex(time_index_file(tmp_path, 0), 0, 100)
    assert offsets.max_entries == 12 and offsets.path.stat().st_size == 96
    assert times.max_entries == 8 and times.path.stat().st_size == 96


def test_max_index_size_below_one_entry_raises_without_creating_a_file(tmp_path: Path) -> None:
    index = OffsetIndex(index_file(tmp_path, 0), 0, 7)
    with pytest.raises(ValueError):
        index.append(0, 0)
    assert not index.exists()


def test_resize_cannot_drop_entries(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    for offset in (50, 51, 52):
        index.append(offset, 0)
    with pytest.raises(ValueError):
        index.resize(16)
    index.trim_to_valid_size()
    assert index.max_entries == 3 and index.is_full()


def test_reset_removes_every_entry_and_preallocates_again(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    index.append(50, 0)
    index.trim_to_valid_size()
    index.reset()
    assert index.entries == 0
    assert index.max_entries == MAX_ENTRIES
    assert index.path.stat().st_size == MAX_ENTRIES * 8


def test_release_keeps_the_entries_of_a_preallocated_index(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    for offset in (50, 51, 52):
        index.append(offset, offset)
    index.flush()
    index.release()
    assert not index.is_open
    assert index.path.stat().st_size == MAX_ENTRIES * 8, "release does not trim"
    assert index.entries == 3
    index.append(53, 53)
    assert index.lookup(60) == OffsetPosition(53, 53)


def test_closing_a_released_index_whose_file_was_removed_creates_nothing(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path)
    index.append(50, 0)
    index.release()
    index.path.unlink()
    index.close()
    assert not index.exists()
    assert index.entries == 0, "used again, it starts a new empty file"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc/self/fd")
def test_release_frees_the_file_descriptor_of_every_index(tmp_path: Path) -> None:
    count = 2000
    indexes = [new_offset_index(tmp_path, base_offset=n * 100, max_entries=4) for n in range(count)]
    baseline = open_fd_count()
    for index in indexes:
        index.append(index.base_offset + 1, 0)
    assert open_fd_count() >= baseline + count  # a mapping keeps a descriptor
    for index in indexes:
        index.release()
    assert open_fd_count() == baseline
    assert all(index.lookup(index.base_offset + 5).position == 0 for index in indexes[:10])
    for index in indexes:
        index.close()
    assert open_fd_count() == baseline

    read_only = [OffsetIndex(index.path, index.base_offset, writable=False) for index in indexes]
    assert sum(index.entries for index in read_only) == count
    assert open_fd_count() == baseline, "a read-only index holds no descriptor"


def test_read_only_index_refuses_changes(tmp_path: Path) -> None:
    writer = new_offset_index(tmp_path)
    writer.append(50, 0)
    writer.close()
    index = OffsetIndex(writer.path, BASE_OFFSET, writable=False)
    with pytest.raises(ReadOnlyIndexError):
        index.truncate_to(0)
    with pytest.raises(ReadOnlyIndexError):
        index.resize(MAX_ENTRIES * 8)
    with pytest.raises(ReadOnlyIndexError):
        index.reset()
    assert not index.resize(8), "resizing to the current size is not a change"
    index.close()
    assert writer.path.stat().st_size == 8


def test_index_errors_survive_pickling_with_their_fields(tmp_path: Path) -> None:
    index = new_offset_index(tmp_path, max_entries=1)
    index.append(50, 0)
    with pytest.raises(IndexFullError) as raised:
        index.append(51, 0)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is IndexFullError
    assert (copy.path, copy.entries, str(copy)) == (index.path, 1, str(raised.value))


# -- time index: Kafka's TimeIndexTest -----------------------------------------------------------


def test_time_lookup_finds_largest_timestamp_at_or_below_the_target(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    assert index.lookup(100) == TimestampOffset(-1, BASE_OFFSET)
    append_time_entries(index, MAX_ENTRIES - 1)
    assert index.lookup(9) == TimestampOffset(-1, BASE_OFFSET)
    assert index.lookup(25) == TimestampOffset(20, 65)
    assert index.lookup(30) == TimestampOffset(30, 75)
    assert index.lookup(2**62) == TimestampOffset(290, 335)


def test_time_entry_returns_the_nth_entry(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    with pytest.raises(IndexError):
        index.entry(0)
    append_time_entries(index, MAX_ENTRIES - 1)
    assert [index.entry(n) for n in range(4)] == [
        TimestampOffset(10, 55),
        TimestampOffset(20, 65),
        TimestampOffset(30, 75),
        TimestampOffset(40, 85),
    ]


def test_time_truncate_to_removes_entries_at_or_above_the_offset(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    append_time_entries(index, MAX_ENTRIES - 1)
    index.truncate_to(70)
    assert index.last_entry() == TimestampOffset(20, 65)
    index.truncate_to(65)
    assert index.last_entry() == TimestampOffset(10, 55)
    index.reset()
    assert index.entries == 0

    append_time_entries(index, MAX_ENTRIES - 1)
    index.truncate_to(10 + BASE_OFFSET)
    assert index.entries == 0
    assert index.last_entry() == TimestampOffset(-1, BASE_OFFSET)


def test_time_index_is_full_one_slot_early_unless_the_full_check_is_skipped(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    assert not index.is_full()
    append_time_entries(index, MAX_ENTRIES - 1)
    assert index.is_full()
    with pytest.raises(IndexFullError):
        index.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(10000, (MAX_ENTRIES - 2) * 10, skip_full_check=True)
    index.maybe_append(10000, 1000, skip_full_check=True)
    assert index.entries == MAX_ENTRIES
    with pytest.raises(IndexFullError):
        index.maybe_append(20000, 2000, skip_full_check=True)


def test_maybe_append_ignores_a_timestamp_not_above_the_last(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    index.maybe_append(-1, BASE_OFFSET)
    assert index.entries == 0, "NO_TIMESTAMP is never indexed"
    index.maybe_append(100, 50)
    index.maybe_append(100, 51)
    index.maybe_append(99, 52)
    assert index.entries == 1
    assert index.last_entry() == TimestampOffset(100, 50)
    index.maybe_append(101, 50)
    assert index.last_entry() == TimestampOffset(101, 50), "an equal offset is allowed"


def test_time_last_entry_is_base_offset_without_timestamp_when_empty(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    assert index.last_entry() == TimestampOffset(-1, BASE_OFFSET)
    index.maybe_append(1, 1 + BASE_OFFSET)
    assert index.last_entry() == TimestampOffset(1, BASE_OFFSET + 1)


def test_time_resize_reports_whether_the_size_changed(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    assert not index.resize(MAX_ENTRIES * 12)
    assert index.resize(MAX_ENTRIES // 2 * 12)
    assert index.resize(MAX_ENTRIES * 2 * 12)
    assert index.max_entries == MAX_ENTRIES * 2


def test_time_index_reopens_with_the_same_entries_after_close(tmp_path: Path) -> None:
    index = new_time_index(tmp_path)
    append_time_entries(index, 5)
    index.close()
    reopened = TimeIndex(index.path, BASE_OFFSET, writable=False)
    reopened.sanity_check()
    assert [reopened.entry(n) for n in range(reopened.entries)] == [
        TimestampOffset(i * 10, BASE_OFFSET + i * 10) for i in range(1, 6)
    ]


def test_time_on_disk_layout_is_big_endian_timestamp_then_relative_offset(tmp_path: Path) -> None:
    index = new_time_index(tmp_path, base_offset=1000)
    index.maybe_append(1700000000000, 1005)
    index.close()
    assert index.path.read_bytes() == bytes.fromhex("0000018bcfe56800 00000005")


@pytest.mark.parametrize(
    ("entries", "field"),
    [
        ([(10, 1), (5, 2)], "last_timestamp"),
        ([(10, 0), (20, -1)], "last_offset"),
    ],
)
def test_time_sanity_check_rejects_a_corrupt_last_entry(
    tmp_path: Path, entries: list[tuple[int, int]], field: str
) -> None:
    path = time_index_file(tmp_path, BASE_OFFSET)
    path.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries))
    with pytest.raises(CorruptIndexError) as raised:
        TimeIndex(path, BASE_OFFSET, writable=False).sanity_check()
    assert field in raised.value.fields
    assert raised.value.path == path


def test_time_sanity_check_rejects_length_not_a_multiple_of_the_entry_size(tmp_path: Path) -> None:
    path = time_index_file(tmp_path, BASE_OFFSET)
    path.write_bytes(struct.pack(">qi", 10, 1) * 2 + b"\x00" * 5)
    with pytest.raises(CorruptIndexError) as raised:
        TimeIndex(path, BASE_OFFSET).sanity_check()
    assert raised.value.length == 29


# -- indexes written by Kafka ------------------------------------------------------------------


def kafka_index_files() -> list[object]:
    """One pytest param per index file in the fixtures: (path, its EXPECTED.json record)."""
    if not (FIXTURES / "EXPECTED.json").exists():
        return []
    expected = json.loads((FIXTURES / "EXPECTED.json").read_text())
    found: list[object] = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            source, *rest = path.relative_to(FIXTURES).parts
            record = expected[source]["/".join(rest)]
            found.append(pytest.param(path, record, id=str(path.relative_to(FIXTURES))))
    return found


@pytest.mark.parametrize(("path", "expected"), kafka_index_files())
def test_index_written_by_kafka_passes_sanity_check(
    path: Path, expected: dict[str, object]
) -> None:
    base_offset = offset_from_file_name(path.name)
    cls = TimeIndex if path.name.endswith(TIME_INDEX_SUFFIX) else OffsetIndex
    index = cls(path, base_offset, writable=False)
    index.sanity_check()
    parsed = expected.get("parsed")
    size = index.entry_size
    entries = parsed["entries"] if isinstance(parsed, dict) else int(str(expected["bytes"])) // size
    assert index.entries == entries
    if isinstance(index, TimeIndex) and isinstance(parsed, dict) and parsed["entries"]:
        (timestamp, relative), = parsed["last"]  # type: ignore[misc]
        assert index.last_entry() == TimestampOffset(timestamp, base_offset + relative)
    index.release()


def test_an_append_backs_the_pages_ahead_with_written_zeros(tmp_path: Path) -> None:
    # a write through the map into a hole would be SIGBUS on a full disk; the index writes zeros
    # ahead with pwrite (ENOSPC surfaces there), in 64 KiB steps, and entries beyond stay zero
    index = OffsetIndex(index_file(tmp_path, 0), 0, 1024 * 1024)
    index.append(5, 100)
    allocated = os.stat(index.path).st_blocks * 512
    assert 64 * 1024 <= allocated < 1024 * 1024
    data = index.path.read_bytes()
    assert data[:8] == struct.pack(">ii", 5, 100) and data[8:64 * 1024] == bytes(64 * 1024 - 8)
    index.close()


def test_time_index_skips_a_timestamp_not_above_the_last_even_when_full(tmp_path: Path) -> None:
    times = new_time_index(tmp_path, max_entries=3)
    times.maybe_append(10, BASE_OFFSET + 1)
    times.maybe_append(20, BASE_OFFSET + 2, skip_full_check=True)
    times.maybe_append(30, BASE_OFFSET + 3, skip_full_check=True)   # the reserved last slot
    times.maybe_append(30, BASE_OFFSET + 4, skip_full_check=True)   # not above: nothing to add
    assert times.entries == 3
    with pytest.raises(IndexFullError):
        times.maybe_append(40, BASE_OFFSET + 5, skip_full_check=True)
    with pytest.raises(InvalidOffsetError):
        times.maybe_append(50, BASE_OFFSET + 2, skip_full_check=True)
