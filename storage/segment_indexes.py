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
        self._writable = writable
        # made at the first use of either (a closed segment that is never read makes neither,
        # so loading thousands of segments builds no index object)
        self._pair: tuple[OffsetIndex, TimeIndex] | None = None
        self._closed = False   # closed before it was made: made closed (it creates no file)

    def _indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        pair = self._pair
        if pair is None:
            directory, base, suffix = self._dir, self._base_offset, self._suffix
            stem = files.offset_name(base)
            pair = self._pair = (
                OffsetIndex(files.index_file(directory, base, suffix, stem=stem), base,
                            self._index_bytes, writable=self._writable),
                TimeIndex(files.time_index_file(directory, base, suffix, stem=stem), base,
                          self._index_bytes, writable=self._writable))
            if self._closed:
                for index in pair:
                    index.close()
        return pair

    @property
    def offset_index(self) -> OffsetIndex:
        return self._indexes()[0]

    @property
    def time_index(self) -> TimeIndex:
        return self._indexes()[1]

    # ---- lifecycle ---------------------------------------------------------------------------
    def reopen(self, *, writable: bool) -> None:
        """Close both indexes and recreate them lazily, writable or read-only."""
        if self._pair is not None:
            for index in self._pair:
                index.close()
            self._pair = None
        self._writable = writable
        self._closed = False

    def size_for_appends(self) -> None:
        """Grow both indexes to ``segment.index.bytes`` (the active segment's first append)."""
        self.offset_index.resize(self._index_bytes)
        self.time_index.resize(self._index_bytes)

    def trim(self) -> None:
        """Shrink both index files to their entries (at the roll)."""
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def flush(self) -> None:
        """Flush both indexes. An index closed meanwhile by a concurrent roll or close was
        trimmed and written by its closer, so its ``ValueError`` is ignored."""
        for index in self._indexes():
            try:
                index.flush()
            except ValueError:
                pass   # its map was closed by a concurrent roll or close

    def release(self) -> None:
        """Drop the maps of an idle segment's index pair; they reopen on the next lookup."""
        if self._pair is not None:
            for index in self._pair:
                index.release()

    def close(self) -> None:
        """Close the index pair's files and maps."""
        if self._pair is None:
            self._closed = True
            return
        for index in self._pair:
            index.close()

    def rename_suffix(self, suffix: str) -> None:
        """Rename both files to the segment's new temporary ``suffix`` (``""``: none)."""
        offset_index, time_index = self._indexes()
        offset_index.rename_to(files.index_file(self._dir, self._base_offset, suffix))
        time_index.rename_to(files.time_index_file(self._dir, self._base_offset, suffix))
        self._suffix = suffix

    def follow_dir(self, directory: Path) -> None:
        """The files moved with their partition directory to ``directory``: release the maps
        and recreate both indexes there, read-only and lazily."""
        self.release()
        self._dir = directory
        self._pair = None
        self._writable = False
        self._closed = False

    # ---- entries -----------------------------------------------------------------------------
    def append(self, offset: int, position: int, max_timestamp: TimestampOffset) -> None:
        """One sparse entry pair: ``offset`` at file ``position``, and the segment's largest
        timestamp so far with its offset."""
        offset_index, time_index = self._pair or self._indexes()   # (every append's path)
        offset_index.append(offset, position)
        time_index.maybe_append(max_timestamp.timestamp, max_timestamp.offset)

    def append_final_time_entry(self, max_timestamp: TimestampOffset) -> None:
        """The time-index entry for the segment's largest timestamp, even in a full index
        (Kafka's ``onBecomeInactiveSegment`` and ``close``), so a lookup by time finds the
        segment's end."""
        self.time_index.maybe_append(max_timestamp.timestamp, max_timestamp.offset,
                                      skip_full_check=True)

    def is_full(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    def last_indexed_position(self) -> int:
        """The file position of the last offset-index entry (0 without an index file): where a
        walk to the end of the segment may start."""
        index = self.offset_index
        return index.lookup(LAST_OFFSET).position if index.exists() else 0

    def reset(self) -> None:
        """Remove every entry of both (recovery rebuilds them)."""
        self.offset_index.reset()
        self.time_index.reset()

    def truncate_to(self, offset: int) -> None:
        """Remove the entries of offsets >= ``offset``."""
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)

    # ---- checks ------------------------------------------------------------------------------
    def require_offset_index(self) -> None:
        """Kafka's load-time check: the offset index file must exist (``FileNotFoundError``)."""
        if not self.offset_index.exists():
            raise FileNotFoundError(self.offset_index.path)

    def sanity_check(self) -> None:
        """Full sanity check of both indexes (``CorruptIndexError``)."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
