"""Partition layouts that a real Kafka broker leaves on disk, built here with Kafka's rules where
no licensed fixture has them; ``python -m tests.storage.kafka_layouts DIR`` writes them.

``cleaned_overlap``: a ``__consumer_offsets`` partition after Kafka's cleaner grouped segments
``[0, 63)`` and ``[63, 474)`` into one cleaned segment at base 0 (Kafka's ``groupSegmentsBySize``
puts consecutive segments in one group; the cleaned segment takes the first one's base offset and
keeps the latest record of each key at its original offset: 153, 369, 408 and 473), while segment
63, which the swap replaced, is still on disk under its own name (the broker stopped before its
``.deleted`` rename). Segment 474 is the active one. Kafka loads the partition as it is
(``LogSegment.recover`` checks each batch's CRC and that its offsets fit the segment's 32-bit
relative range, never the next segment's base) and a fetch takes the floor segment of its offset,
so a reader from 0 gets 153, 369, 408, 473, then 474 onwards.

Records are Kafka's offset commits: key ``OffsetCommitKey`` v1 (group, topic, partition), value
``OffsetCommitValue`` v3 (offset, leader epoch, metadata, commit timestamp), one record a batch,
as the group coordinator appends them.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from storage import files
from storage.index import OffsetIndex, TimeIndex
from storage.records import Record, build_batch

CLEANED_OVERLAP_PARTITION = "__consumer_offsets-0"
CLEANED_OVERLAP_KEPT = (153, 369, 408, 473)    # the cleaned segment's batches
CLEANED_OVERLAP_ACTIVE = range(474, 490)       # the active segment's offsets
BASE_TIME_MS = 1_700_000_000_000


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return struct.pack(f">hh{len(g)}sh{len(t)}si", 1, len(g), g, len(t), t, partition)


def offset_commit_value(offset: int, timestamp: int) -> bytes:
    return struct.pack(">hqihq", 3, offset, -1, 0, timestamp)


def _key_at(offset: int) -> bytes:
    """The key of the commit at ``offset``: four partitions of one group take turns, and each
    one's last commit below 474 is at one of ``CLEANED_OVERLAP_KEPT``."""
    for partition, last in enumerate(CLEANED_OVERLAP_KEPT):
        if offset == last:
            return offset_commit_key("billing", "payments", partition)
    if offset in CLEANED_OVERLAP_ACTIVE:
        return offset_commit_key("billing", "payments", offset % 4)
    # every other offset below 474 commits a partition whose kept offset lies above it
    candidates = [p for p, last in enumerate(CLEANED_OVERLAP_KEPT) if last > offset]
    return offset_commit_key("billing", "payments", candidates[offset % len(candidates)])


def _commit(offset: int) -> bytes:
    timestamp = BASE_TIME_MS + offset * 1000
    return build_batch([Record(key=_key_at(offset), value=offset_commit_value(offset, timestamp),
                               timestamp=timestamp)], base_offset=offset,
                       partition_leader_epoch=0)


def _write_segment(directory: Path, base: int, offsets: list[int]) -> None:
    """A closed segment as Kafka leaves it: the ``.log``, an offset index trimmed to its entries
    (none below ``index.interval.bytes`` of 4096) and a time index holding the final entry."""
    data = b"".join(_commit(o) for o in offsets)
    files.log_file(directory, base).write_bytes(data)
    index = OffsetIndex(files.index_file(directory, base), base, 10 * 1024 * 1024)
    index.trim_to_valid_size()
    index.close()
    times = TimeIndex(files.time_index_file(directory, base), base, 10 * 1024 * 1024)
    if offsets:
        last = offsets[-1]
        times.maybe_append(BASE_TIME_MS + last * 1000, last, skip_full_check=True)
    times.close()


def write_cleaned_overlap(parent: Path) -> Path:
    """Write the ``cleaned_overlap`` partition under ``parent``; returns its directory."""
    directory = parent / CLEANED_OVERLAP_PARTITION
    directory.mkdir(parents=True)
    _write_segment(directory, 0, list(CLEANED_OVERLAP_KEPT))
    _write_segment(directory, 63, list(range(63, 474)))
    _write_segment(directory, 474, list(CLEANED_OVERLAP_ACTIVE))
    (directory / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    return directory


if __name__ == "__main__":
    write_cleaned_overlap(Path(sys.argv[1]))
