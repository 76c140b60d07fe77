"""A segment's index pair, the offset index and the time index (the two lazy indexes of Kafka's
``LogSegment``), over their lifecycle: created lazily (no file is opened until a lookup or append
needs it), reopened writable for the active segment and read-only once it rolls, grown to
``segment.index.bytes`` at the first append and trimmed to their entries at the roll, given the
final time-index entry when the segment stops taking appends, flushed, checked, cut, renamed,
released while idle and closed. Each file's format is its own module (``storage.offset_index``,
``storage.time_index``).
"""

from __future__ import annotations

from pathlib import Path

from storage import files
from storage.index import OffsetIndex, TimeIndex, TimestampOffset

LAST_OFFSET = 2**63 - 1


class SegmentIndexes:
    """The offset and time index of the segment at ``base_offset`` in ``directory`` (with the
    segment's temporary ``suffix``, if any), each ``index_bytes`` long at most. Owned by its
    ``LogSegment``: not thread-safe for writers; lookups may run beside them."""

    def __init__(self, directory: Path, base_offset: int, suffix: str, index_bytes: int, *,
                 writable: bool) -> None:
        self._dir = directory
        self._base_offset = base_offset
        self._suffix = suffix
        self._index_bytes = index_bytes
        self._offset_index, self._time_index = self._open(writable)

    def _open(self, writable: bool) -> tuple[OffsetIndex, TimeIndex]:
        directory, base, suffix = self._dir, self._base_offset, self._suffix
        return (OffsetIndex(files.index_file(directory, base, suffix), base, self._index_bytes,
                            writable=writable),
                TimeIndex(files.time_index_file(directory, base, suffix), base,
                          self._index_bytes, writable=writable))

    @property
    def offset_index(self) -> OffsetIndex:
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        return self._time_index

    # ---- lifecycle ---------------------------------------------------------------------------
    def reopen(self, *, writable: bool) -> None:
        """Close both indexes and recreate them lazily, writable or read-only."""
        self._offset_index.close()
        self._time_index.close()
        self._offset_index, self._time_index = self._open(writable)

    def size_for_appends(self) -> None:
        """Grow both indexes to ``segment.index.bytes`` (the active segment's first append)."""
        self._offset_index.resize(self._index_bytes)
        self._time_index.resize(self._index_bytes)

    def trim(self) -> None:
        """Shrink both index files to their entries (at the roll)."""
        self._offset_index.trim_to_valid_size()
        self._time_index.trim_to_valid_size()

    def flush(self) -> None:
        """Flush both indexes. An index closed meanwhile by a concurrent roll or close was
        trimmed and written by its closer, so its ``ValueError`` is ignored."""
        for index in (self._offset_index, self._time_index):
            try:
                index.flush()
            except ValueError:
                pass   # its map was closed by a concurrent roll or close

    def release(self) -> None:
        """Drop the maps of an idle segment's index pair; they reopen on the next lookup."""
        self._offset_index.release()
        self._time_index.release()

    def close(self) -> None:
        """Close the index pair's files and maps."""
        self._offset_index.close()
        self._time_index.close()

    def rename_suffix(self, suffix: str) -> None:
        """Rename both files to the segment's new temporary ``suffix`` (``""``: none)."""
        self._offset_index.rename_to(files.index_file(self._dir, self._base_offset, suffix))
        self._time_index.rename_to(files.time_index_file(self._dir, self._base_offset, suffix))
        self._suffix = suffix

    def follow_dir(self, directory: Path) -> None:
        """The files moved with their partition directory to ``directory``: release the maps
        and recreate both indexes there, read-only and lazily."""
        self.release()
        self._dir = directory
        self._offset_index, self._time_index = self._open(writable=False)

    # ---- entries -----------------------------------------------------------------------------
    def append(self, offset: int, position: int, max_timestamp: TimestampOffset) -> None:
        """One sparse entry pair: ``offset`` at file ``position``, and the segment's largest
        timestamp so far with its offset."""
        self._offset_index.append(offset, position)
        self._time_index.maybe_append(max_timestamp.timestamp, max_timestamp.offset)

    def append_final_time_entry(self, max_timestamp: TimestampOffset) -> None:
        """The time-index entry for the segment's largest timestamp, even in a full index
        (Kafka's ``onBecomeInactiveSegment`` and ``close``), so a lookup by time finds the
        segment's end."""
        self._time_index.maybe_append(max_timestamp.timestamp, max_timestamp.offset,
                                      skip_full_check=True)

    def is_full(self) -> bool:
        return self._offset_index.is_full() or self._time_index.is_full()

    def last_indexed_position(self) -> int:
        """The file position of the last offset-index entry (0 without an index file): where a
        walk to the end of the segment may start."""
        index = self._offset_index
        return index.lookup(LAST_OFFSET).position if index.exists() else 0

    def reset(self) -> None:
        """Remove every entry of both (recovery rebuilds them)."""
        self._offset_index.reset()
        self._time_index.reset()

    def truncate_to(self, offset: int) -> None:
        """Remove the entries of offsets >= ``offset``."""
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)

    # ---- checks ------------------------------------------------------------------------------
    def require_offset_index(self) -> None:
        """Kafka's load-time check: the offset index file must exist (``FileNotFoundError``)."""
        if not self._offset_index.exists():
            raise FileNotFoundError(self._offset_index.path)

    def sanity_check(self) -> None:
        """Full sanity check of both indexes (``CorruptIndexError``)."""
        self._offset_index.sanity_check()
        self._time_index.sanity_check()
