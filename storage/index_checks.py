"""The check of a segment's offset and time index against its ``.log``: whether the entries of
the two hint files can be trusted (they carry no checksum, as in Kafka).

``check_index_files`` is the check; ``CorruptIndexError`` on any doubt, and the caller rebuilds
the indexes from the ``.log``. Nothing here writes a file. Two callers: the loader (pass 4) for
the active segment, whose tail it must scan at open, and ``LogSegment`` for a closed segment, at
the first use of its indexes (as Kafka's ``LazyIndex`` loads an index when first used), so a
clean open reads no index of the closed segments.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, TimeIndex
from storage.kernels import LEGACY_TIMESTAMP_OFFSET
from storage.records import (
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_RECORD_OVERHEAD_V0,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    SIZE_OFFSET,
)
from storage.segment_recovery import checked_batches

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def check_index_files(log_path: Path, size: int, base_offset: int, offsets: OffsetIndex,
                      times: TimeIndex, end_offset: int | None, *, release: bool = True) -> None:
    """Whether the ``offsets`` and ``times`` indexes of the segment at ``base_offset`` (its
    ``.log`` at ``log_path`` holds ``size`` bytes of batches) can be trusted; ``CorruptIndexError``
    on any doubt. ``end_offset`` is the next segment's base offset, None for the last (active)
    segment.

    Every entry of both indexes is checked (``check_entries``: monotonic, inside the file). The
    last offset-index entry (or position 0) must point at a batch boundary consistent with it,
    and the largest timestamp there must not exceed the time index's last entry (a time index
    zeroed by a lost write reads as timestamp 0 and would make retention delete the segment).
    Cheap for a closed segment: one batch header is read. The active segment's tail, from its
    last index entry to the end of the file, is scanned batch by batch with CRCs: garbage after a
    clean shutdown (a stale marker, a torn write) is found here and truncated by the rebuild.
    With ``release`` both indexes are released afterwards (a load does not keep thousands of
    them read); a segment checking them at their first use keeps them for that use."""
    try:
        bound = 2**63 if end_offset is None else end_offset
        offsets.check_entries(size, bound)
        times.check_entries(bound)
        entry = offsets.last_entry_or_none()
        last_time = times.last_entry()
        position = entry.position if entry is not None else 0
        if size == 0:
            if entry is not None or times.entries:
                raise CorruptIndexError(f"indexes of the empty segment {log_path} have "
                                        f"entries", path=str(log_path))
            return
        if end_offset is None:
            first, next_offset, max_ts = _scan_tail(log_path, position)
        else:
            first, max_ts = _batch_header(log_path, size, offsets.path, position)
            next_offset = end_offset
        # the batch an entry points at starts at or below the entry's offset (an entry names the
        # last offset of the append starting there); without an entry it is the first batch,
        # which compaction may have moved above the segment's base offset
        high = next_offset - 1 if entry is None else min(entry.offset, next_offset - 1)
        if not base_offset <= first <= high:
            raise CorruptIndexError(
                f"{offsets.path}: the batch at position {position} of {log_path} starts "
                f"at offset {first}, inconsistent with the index entry "
                f"{entry.offset if entry is not None else '(none)'} -> {position}",
                path=str(offsets.path), position=position, offset=first)
        if last_time.offset >= next_offset or max_ts > last_time.timestamp:
            raise CorruptIndexError(
                f"{times.path}: its last entry {last_time.timestamp} -> {last_time.offset} "
                f"disagrees with {log_path} (a batch at position {position} or later has "
                f"timestamp {max_ts}; the segment ends before offset {next_offset})",
                path=str(times.path), timestamp=last_time.timestamp, offset=last_time.offset)
    finally:
        if release:
            offsets.release()
            times.release()


def _batch_header(log_path: Path, size: int, index_path: Path,
                  position: int) -> tuple[int, int]:
    """(first offset field, max timestamp) of the batch at ``position`` of a closed segment's
    ``.log`` of ``size`` bytes, or ``CorruptIndexError`` (naming the offset index at
    ``index_path``) when no plausible batch starts there. Only its header is read."""
    fd = os.open(log_path, os.O_RDONLY)   # not the handle cache: read once
    try:
        header = os.pread(fd, min(HEADER_SIZE, size - position), position)
    finally:
        os.close(fd)
    scan = None
    if len(header) >= HEADER_SIZE_UP_TO_MAGIC:
        length = _INT32.unpack_from(header, SIZE_OFFSET)[0]
        magic = header[MAGIC_OFFSET]
        if (length >= LEGACY_RECORD_OVERHEAD_V0 and position + LOG_OVERHEAD + length <= size
                and magic in (0, 1, MAGIC) and (magic != MAGIC or len(header) == HEADER_SIZE)):
            first = _INT64.unpack_from(header, 0)[0]
            if magic == MAGIC:
                scan = first, _INT64.unpack_from(header, MAX_TIMESTAMP_OFFSET)[0]
            elif magic == 1 and len(header) >= LEGACY_TIMESTAMP_OFFSET + 8:
                scan = first, _INT64.unpack_from(header, LEGACY_TIMESTAMP_OFFSET)[0]
            else:
                scan = first, -1
    if scan is None:
        raise CorruptIndexError(
            f"{index_path}: position {position} of {log_path} is not the start of a batch",
            path=str(index_path), position=position)
    return scan


def _scan_tail(log_path: Path, position: int) -> tuple[int, int, int]:
    """(first offset, next offset, max timestamp) of the batches from ``position`` to the end of
    the active segment's ``.log``, each checked with its CRC; ``CorruptIndexError`` when they do
    not reach the end of the file exactly with increasing offsets."""
    fd = os.open(log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        first, previous_last, max_ts, end = None, None, -1, position
        for batch in checked_batches(fd, position, size):
            if previous_last is not None and batch.base_offset <= previous_last \
                    or batch.last_offset < batch.base_offset:
                break
            if first is None:
                first = batch.base_offset
            previous_last, end = batch.last_offset, batch.position + batch.size
            max_ts = max(max_ts, batch.max_timestamp)
    finally:
        os.close(fd)
    if first is None or previous_last is None or end != size:
        raise CorruptIndexError(
            f"{log_path}: no valid batch at position {end} of {size} bytes after the "
            f"last index entry (a torn or garbage tail)", path=str(log_path), position=end)
    return first, previous_last + 1, max_ts
