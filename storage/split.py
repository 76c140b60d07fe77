"""Splitting a segment whose offsets overflow its base offset (Kafka's splitOverflowedSegment).

An index stores offsets relative to its segment's base offset as int32, so every offset of
``<base>.log`` must lie in ``[base, base + 2**31 - 1]``. Brokers before Kafka 0.11, and their
cleaners, could write segments that break the rule. Such a segment's batches are valid, so recovery
must not truncate them: it splits the segment into consecutive segments, each named by the base
offset of its first batch and holding the batches that fit that base, and swaps them in with the
crash-safe order of a cleaned segment:

1. write every new segment as ``<base>.log.cleaned`` (with its indexes) and fsync it;
2. rename the new segments ``.cleaned`` -> ``.swap``, highest offset first, then fsync the directory;
3. delete the overflowing segment's files;
4. rename the new segments ``.swap`` -> final names, then fsync the directory.

A crash during 1-2 leaves ``.cleaned`` files (and ``.swap`` files at or above the lowest of them),
which the loader's first pass deletes: the original stays and is split again. A crash during 3-4
leaves only ``.swap`` files, which the loader's second and third passes complete.
"""

from __future__ import annotations

import logging

from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.config import LogConfig
from storage.durable import fsync_dir
from storage.records import RecordBatch
from storage.segment import INT32_MAX, LogSegment

log = logging.getLogger(__name__)


def split_overflowed_segment(segment: LogSegment, config: LogConfig, *,
                             clock: Clock = SYSTEM_CLOCK) -> tuple[list[LogSegment], int]:
    """Replace ``segment`` on disk by segments without offset overflow; returns them, read-only
    and in offset order, and the bytes of ``segment`` left out: an incomplete batch at its end and
    every batch from the first one whose offsets do not increase (what recovery truncates)."""
    groups: list[list[tuple[int, int, int, int, int]]] = []   # (position, size, base, last, ts)
    previous_last = segment.base_offset - 1
    for entry in segment.batches():
        data = segment.read_bytes(entry.position, entry.size)
        base = RecordBatch(data).header.base_offset   # a legacy wrapper's is its first inner offset
        if base <= previous_last or entry.last_offset < base:
            break
        if not groups or entry.last_offset - groups[-1][0][2] > INT32_MAX:
            groups.append([])
        groups[-1].append((entry.position, entry.size, base, entry.last_offset,
                           entry.max_timestamp))
        previous_last = entry.last_offset
    directory = segment.dir
    last_modified_ms = segment.last_modified_ms
    kept = sum(size for group in groups for _position, size, _base, _last, _ts in group)
    left_out = segment.size - kept
    created: list[LogSegment] = []
    try:
        for group in groups:
            cleaned = LogSegment.create_cleaned(directory, group[0][2], config, clock=clock)
            created.append(cleaned)
            for position, size, _base, last, timestamp in group:
                cleaned.append(last, timestamp, last, [segment.read_bytes(position, size)], size)
            cleaned.flush()
    except BaseException:
        for cleaned in created:
            cleaned.delete_files()
        raise
    for cleaned in reversed(created):
        cleaned.change_file_suffixes(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    fsync_dir(directory)
    segment.delete_files()
    for new in created:
        new.change_file_suffixes(files.SWAP_SUFFIX, "")
        new.make_read_only()
        new.set_last_modified_ms(last_modified_ms)   # retention by mtime sees the original's age
    fsync_dir(directory)
    log.warning("split %s, whose offsets overflowed its base, into segments %s (%d bytes at its "
                "end left out)", segment.log_path, [s.base_offset for s in created], left_out)
    return created, left_out
