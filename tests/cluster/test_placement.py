"""Where new partitions go (``cluster.placement``): free bytes first, then bytes held, then
partition counts, never an offline directory."""

from __future__ import annotations

import pytest

from cluster.placement import DirRoom, choose, place

GB = 1 << 30


def test_partitions_go_to_the_file_system_with_the_most_free_bytes() -> None:
    rooms = [DirRoom("/a", free_bytes=10 * GB, log_bytes=0, partitions=0),
             DirRoom("/b", free_bytes=50 * GB, log_bytes=9 * GB, partitions=40)]
    assert place(rooms, 3) == ["/b", "/b", "/b"]


def test_directories_sharing_a_file_system_fill_evenly_by_bytes_then_partitions() -> None:
    rooms = [DirRoom("/a", 100 * GB, log_bytes=5 * GB, partitions=1),
             DirRoom("/b", 100 * GB, log_bytes=1 * GB, partitions=9),
             DirRoom("/c", 100 * GB, log_bytes=1 * GB, partitions=3)]
    assert choose(rooms).log_dir == "/c"     # fewest bytes, then fewest partitions
    empty = [DirRoom(d, 100 * GB, 0, 0) for d in ("/b", "/a", "/c")]
    assert place(empty, 6) == ["/a", "/b", "/c", "/a", "/b", "/c"]   # round robin, by name


def test_free_bytes_within_the_tolerance_count_as_equal() -> None:
    rooms = [DirRoom("/a", 1000 * GB, log_bytes=0, partitions=5),
             DirRoom("/b", 995 * GB, log_bytes=0, partitions=0)]
    assert choose(rooms).log_dir == "/b"                     # within 1 %: a tie on free bytes
    assert choose(rooms, tolerance=0.001).log_dir == "/a"    # a strict tolerance: more room wins


def test_offline_directories_are_never_chosen() -> None:
    rooms = [DirRoom("/a", 900 * GB, 0, 0, online=False), DirRoom("/b", 1 * GB, 0, 0)]
    assert place(rooms, 2) == ["/b", "/b"]
    with pytest.raises(ValueError, match="no online log directory"):
        place([DirRoom("/a", GB, 0, 0, online=False)], 1)
    assert place([], 0) == []
