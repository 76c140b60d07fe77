"""A segment's index pair, the offset index and the time index (the two lazy indexes of Kafka's
``LogSegment``), over their lifecycle: created lazily (no file is opened until a lookup or append
needs it), reopened writable for the active segment and read-only once it rolls, grown to
``segment.index.bytes`` at the first append and trimmed to their entries at the roll, given the
final time-index entry when the segment stops taking appends, flushed, checked, released while
idle and closed. The ``.txnindex`` joins them where its lifecycle is the same (flush, checks).

The segment keeps the index objects as ``offset_index``, ``time_index`` and ``txn_index`` (its
appends and reads use them directly); these functions are the bodies of its index-lifecycle
methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage import files
from storage.index import OffsetIndex, TimeIndex

if TYPE_CHECKING:
    from storage.segment import LogSegment

LAST_OFFSET = 2**63 - 1


def open_indexes(segment: LogSegment, writable: bool) -> None:
    """(Re)create the lazy index objects for the segment's current directory and suffix."""
    size = segment.config.segment_index_bytes
    directory, base, suffix = segment.dir, segment.base_offset, segment.suffix
    segment.offset_index = OffsetIndex(files.index_file(directory, base, suffix), base, size,
                                       writable=writable)
    segment.time_index = TimeIndex(files.time_index_file(directory, base, suffix), base, size,
                                   writable=writable)


def reopen_indexes(segment: LogSegment, writable: bool) -> None:
    """Close both indexes and recreate them lazily, writable or read-only."""
    segment.offset_index.close()
    segment.time_index.close()
    open_indexes(segment, writable)


def size_for_appends(segment: LogSegment) -> None:
    """Grow both indexes to ``segment.index.bytes`` (the active segment's first append)."""
    segment.offset_index.resize(segment.config.segment_index_bytes)
    segment.time_index.resize(segment.config.segment_index_bytes)


def last_indexed_position(segment: LogSegment) -> int:
    """The file position of the last offset-index entry (0 without an index file): where a walk
    to the end of the segment may start."""
    index = segment.offset_index
    return index.lookup(LAST_OFFSET).position if index.exists() else 0


def append_final_time_entry(segment: LogSegment) -> None:
    """The time-index entry for the segment's largest timestamp, even in a full index (Kafka's
    ``onBecomeInactiveSegment`` and ``close``), so a lookup by time finds the segment's end."""
    max_ts = segment._max_ts()
    segment.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)


def trim_indexes(segment: LogSegment) -> None:
    """Shrink both index files to their entries (at the roll)."""
    segment.offset_index.trim_to_valid_size()
    segment.time_index.trim_to_valid_size()


def flush_indexes(segment: LogSegment) -> None:
    """Flush the three indexes. An index closed meanwhile by a concurrent roll or close was
    trimmed and written by its closer, so its ``ValueError`` is ignored."""
    for index in (segment.offset_index, segment.time_index):
        try:
            index.flush()
        except ValueError:
            pass   # its map was closed by a concurrent roll or close
    segment.txn_index.flush()


def require_offset_index(segment: LogSegment) -> None:
    """Kafka's load-time check: the offset index file must exist (``FileNotFoundError``)."""
    if not segment.offset_index.exists():
        raise FileNotFoundError(segment.offset_index.path)


def check_indexes(segment: LogSegment) -> None:
    """Full sanity check of the offset, time and transaction indexes (``CorruptIndexError``)."""
    segment.offset_index.sanity_check()
    segment.time_index.sanity_check()
    segment.txn_index.sanity_check()


def release_indexes(segment: LogSegment) -> None:
    """Drop the maps of an idle segment's index pair; they reopen on the next lookup."""
    segment.offset_index.release()
    segment.time_index.release()


def close_indexes(segment: LogSegment) -> None:
    """Close the index pair's files and maps."""
    segment.offset_index.close()
    segment.time_index.close()
