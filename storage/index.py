"""Offset and time indexes of a segment (Kafka's AbstractIndex, OffsetIndex, TimeIndex, LazyIndex).

Offset index: ``storage.offset_index``; time index: ``storage.time_index``; what they share:
``storage.index_file``. This module re-exports their names.

Both are arrays of fixed-width big-endian entries with no header and no checksum; a damaged index
is rebuilt from its segment, never repaired.

Offset index (``.index``), sparse, sorted by offset, positions non-decreasing::

    Entry => RelativeOffset: int32 (offset - base_offset) | Position: int32 (byte position in .log)

    base offset 1000, offset 1005 at position 4096:  00000005 00001000

Time index (``.timeindex``), timestamps strictly increasing, offsets non-decreasing::

    Entry => Timestamp: int64 (ms) | RelativeOffset: int32 (offset - base_offset)

    timestamp 1700000000000 at relative offset 5:   0000018bcfe56800 00000005

The entry count is the file length divided by the entry size. A new writable index is therefore
preallocated to ``floor(max_index_size / entry_size)`` zeroed slots and must be trimmed
(``trim_to_valid_size``, which ``close`` does) before anyone reopens its file; the active segment
grows it back with ``resize(max_index_size)`` after loading. The time index keeps its last slot free
for the entry a segment writes when it becomes inactive
(``maybe_append(..., skip_full_check=True)``).

Both classes are lazy like Kafka's LazyIndex: constructing, renaming or deleting never creates the
file; the first call that needs the entries opens it. A writable index maps its file with ``mmap``
(one file descriptor per open index); a read-only index reads the file into memory and holds no
descriptor. ``release`` gives back the mapping and the descriptor and keeps the entry count, so an
index can be reopened on next use without trimming.
"""

from __future__ import annotations

# one module per format; these names stay importable from here
from storage.index_file import (
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    IndexFullError,
    OffsetPosition,
    ReadOnlyIndexError,
    TimestampOffset,
)
from storage.offset_index import OFFSET_ENTRY, OFFSET_ENTRY_DTYPE, OffsetIndex
from storage.time_index import TIME_ENTRY, TIME_ENTRY_DTYPE, TimeIndex

__all__ = ["DEFAULT_MAX_INDEX_SIZE", "NO_TIMESTAMP", "IndexFullError", "OFFSET_ENTRY",
           "OFFSET_ENTRY_DTYPE", "OffsetIndex", "OffsetPosition", "ReadOnlyIndexError",
           "TIME_ENTRY", "TIME_ENTRY_DTYPE", "TimeIndex", "TimestampOffset"]
