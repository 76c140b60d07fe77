"""Where new partitions go (``cluster.metadata.placement``): a topic spreads over the directories in
proportion to their room, a nearly full file system takes none, never an offline directory; and
a real cluster on file systems of different sizes places that way."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from cluster.metadata.placement import DirRoom, place

GB = 1 << 30


def test_a_topic_spreads_over_directories_whose_free_bytes_differ_slightly() -> None:
    """The reproduction: one file system with a little more free space took every partition."""
    rooms = [DirRoom("/d1", free_bytes=101 * GB, log_bytes=0, partitions=0, total_bytes=200 * GB),
             DirRoom("/d2", free_bytes=100 * GB, log_bytes=0, partitions=0, total_bytes=200 * GB),
             DirRoom("/d3", free_bytes=100 * GB, log_bytes=0, partitions=0, total_bytes=200 * GB)]
    assert Counter(place(rooms, 6)) == {"/d1": 2, "/d2": 2, "/d3": 2}


def test_directories_get_partitions_in_proportion_to_their_free_bytes() -> None:
    rooms = [DirRoom("/small", free_bytes=10 * GB, log_bytes=0, partitions=0),
             DirRoom("/large", free_bytes=50 * GB, log_bytes=0, partitions=0)]
    chosen = place(rooms, 60)
    assert Counter(chosen) == {"/small": 10, "/large": 50}
    assert "/small" in chosen[:6]          # never all of the first ones while the other has room


def test_equal_directories_take_turns_as_kafka_does() -> None:
    empty = [DirRoom(d, 100 * GB, 0, 0) for d in ("/b", "/a", "/c")]
    assert place(empty, 6) == ["/a", "/b", "/c", "/a", "/b", "/c"]


def test_a_new_topic_lands_on_every_directory_even_when_older_topics_are_uneven() -> None:
    rooms = [DirRoom("/a", 100 * GB, log_bytes=5 * GB, partitions=30),
             DirRoom("/b", 100 * GB, log_bytes=0, partitions=0),
             DirRoom("/c", 100 * GB, log_bytes=0, partitions=0)]
    assert Counter(place(rooms, 3)) == {"/a": 1, "/b": 1, "/c": 1}
    # more partitions of the same topic even out its own spread first, then the totals
    assert place(rooms, 3, topic_partitions={"/a": 1, "/b": 1, "/c": 0}) == ["/c", "/b", "/c"]
    # among ties of the topic's own count, the directory holding fewer partitions goes first
    assert place(rooms, 1) == ["/b"]


def test_directories_sharing_a_file_system_share_its_free_bytes() -> None:
    """Three directories on one 300 GB-free disk and one on another 300 GB-free disk: the lone
    disk takes half of the partitions, not a quarter."""
    rooms = [DirRoom(f"/shared{i}", 300 * GB, 0, 0, file_system="host:1") for i in range(3)]
    rooms.append(DirRoom("/lone", 300 * GB, 0, 0, file_system="host:2"))
    assert Counter(place(rooms, 12))["/lone"] == 6


def test_a_nearly_full_file_system_gets_no_new_partition_while_another_has_room() -> None:
    rooms = [DirRoom("/full", free_bytes=4 * GB, log_bytes=90 * GB, partitions=1,
                     total_bytes=100 * GB),
             DirRoom("/roomy", free_bytes=60 * GB, log_bytes=0, partitions=50,
                     total_bytes=100 * GB)]
    assert place(rooms, 10) == ["/roomy"] * 10
    # when every directory is nearly full, the shares decide among all of them
    both_full = [rooms[0], DirRoom("/also", 2 * GB, 0, 0, total_bytes=100 * GB)]
    assert Counter(place(both_full, 3)) == {"/full": 2, "/also": 1}


def test_offline_directories_are_never_chosen() -> None:
    rooms = [DirRoom("/a", 900 * GB, 0, 0, online=False), DirRoom("/b", 1 * GB, 0, 0)]
    assert place(rooms, 2) == ["/b", "/b"]
    with pytest.raises(ValueError, match="no online log directory"):
        place([DirRoom("/a", GB, 0, 0, online=False)], 1)
    assert place([], 0) == []


def test_a_cluster_on_file_systems_of_different_sizes_spreads_topics_by_room(
        start_cluster: Callable[..., Any], tmpfs: Callable[[str], Path]) -> None:
    mounts = [tmpfs("32m"), tmpfs("64m"), tmpfs("128m")]
    cluster = start_cluster(paths=[m / "logs" for m in mounts])
    cluster.create_topic("six", partitions=7)
    placed = Counter(Path(cluster.partition_dir("six", p)).parent.name for p in range(7))
    assert placed == {"mnt0": 1, "mnt1": 2, "mnt2": 4}
    cluster.create_topic("more", partitions=7)
    placed = Counter(Path(cluster.partition_dir("more", p)).parent.name for p in range(7))
    assert placed == {"mnt0": 1, "mnt1": 2, "mnt2": 4}
