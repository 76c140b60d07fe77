"""The segments of one log by base offset (Kafka's ``LogSegments``).

Owns the ordered map base offset -> ``LogSegment`` (the last one is the active segment) and the
short list of closed segments whose indexes are loaded, so that a log of many segments keeps only
the ``INDEXED_SEGMENTS_KEPT`` most recently read ones mapped.

Not thread-safe: the owning ``LocalLog`` calls it under its lock.
"""

from __future__ import annotations

import bisect
from typing import Iterable

from storage.segment import LogSegment

INDEXED_SEGMENTS_KEPT = 16


class LogSegments:
    """Segments in offset order. Never empty once the log is loaded (the loader creates a
    segment in an empty directory)."""

    def __init__(self, segments: Iterable[LogSegment]) -> None:
        self._by_base: dict[int, LogSegment] = {s.base_offset: s for s in segments}
        self._bases: list[int] = sorted(self._by_base)
        self._indexed: list[int] = []   # closed segments whose indexes are loaded, oldest first
        self._removals = 0

    @property
    def removals(self) -> int:
        """How many segments left the map so far (retention, truncation, swaps): a reader that
        took segments without the owner's lock compares it before and after."""
        return self._removals

    def __len__(self) -> int:
        return len(self._bases)

    def __contains__(self, base: int) -> bool:
        return base in self._by_base

    def get(self, base: int) -> LogSegment | None:
        return self._by_base.get(base)

    def bases(self) -> list[int]:
        """The base offsets in order (a copy)."""
        return list(self._bases)

    def all(self) -> list[LogSegment]:
        """The segments in offset order (a new list)."""
        return [self._by_base[b] for b in self._bases]

    @property
    def active(self) -> LogSegment:
        return self._by_base[self._bases[-1]]

    @property
    def first_base(self) -> int:
        return self._bases[0]

    def in_range(self, from_offset: int, to_offset: int,
                 limit: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments(from,
        to)): the one holding ``from_offset`` and every later one below ``to_offset``; only the
        first ``limit`` of them when given (O(log segments + limit))."""
        i = max(bisect.bisect_right(self._bases, from_offset) - 1, 0)
        j = bisect.bisect_left(self._bases, to_offset)
        if limit is not None:
            j = min(j, i + limit)
        return [self._by_base[b] for b in self._bases[i:j]]

    def above(self, offset: int) -> list[LogSegment]:
        """The segments whose base offset is above ``offset``."""
        return [self._by_base[b] for b in self._bases if b > offset]

    def add(self, segment: LogSegment) -> None:
        """Add ``segment``, replacing one at the same base offset."""
        base = segment.base_offset
        replaced = self._by_base.get(base)
        if replaced is None:
            bisect.insort(self._bases, base)
        elif replaced is not segment:
            self._removals += 1
        self._by_base[base] = segment

    def remove(self, base: int) -> None:
        """Forget the segment at ``base`` (its files are the caller's)."""
        if self._by_base.pop(base, None) is not None:
            self._removals += 1
        i = bisect.bisect_left(self._bases, base)
        if i < len(self._bases) and self._bases[i] == base:
            del self._bases[i]
        if base in self._indexed:
            self._indexed.remove(base)

    def note_indexed(self, segment: LogSegment) -> None:
        """``segment``'s indexes were just used: keep those of at most ``INDEXED_SEGMENTS_KEPT``
        closed segments loaded, releasing the least recently used."""
        base = segment.base_offset
        if base == self._bases[-1]:
            return
        if base in self._indexed:
            self._indexed.remove(base)
        self._indexed.append(base)
        while len(self._indexed) > INDEXED_SEGMENTS_KEPT:
            old = self._by_base.get(self._indexed.pop(0))
            if old is not None and old.base_offset != self._bases[-1]:
                old.release()

    def release_idle(self) -> None:
        """Drop descriptors and index maps of every closed segment."""
        for base in self._bases[:-1]:
            self._by_base[base].release()
        self._indexed.clear()
