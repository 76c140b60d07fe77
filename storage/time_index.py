"""Time index (``.timeindex``, Kafka's TimeIndex), timestamps strictly increasing, offsets
non-decreasing::

    Entry => Timestamp: int64 (ms) | RelativeOffset: int32 (offset - base_offset)

    timestamp 1700000000000 at relative offset 5:   0000018bcfe56800 00000005

The index keeps its last slot free for the entry a segment writes when it becomes inactive
(``maybe_append(..., skip_full_check=True)``). The shared file handling is
``storage.index_file._Index``.
"""

from __future__ import annotations

import struct

import numpy as np

from storage.errors import CorruptIndexError, InvalidOffsetError
from storage.index_file import (
    IndexFullError,
    NO_TIMESTAMP,
    TimestampOffset,
    _Index,
    _INT32,
    _INT32_MAX,
    _INT64,
)


TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative_offset
TIME_ENTRY_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
assert TIME_ENTRY_DTYPE.itemsize == TIME_ENTRY.size


_TIME_RELATIVE_OFFSET_AT = struct.calcsize(">q")
_TIME_ENTRY_SIZE = TIME_ENTRY.size


class TimeIndex(_Index):
    """Timestamp -> first offset at or after it, one entry per new maximum timestamp.

    Timestamps strictly increase and offsets never decrease from entry to entry. The last slot is
    reserved (``is_full`` is one early) for the entry a segment adds when it becomes inactive.
    Not thread-safe; owned by one segment.
    """

    ENTRY = TIME_ENTRY
    _TABLE_DTYPE = np.dtype([("key", ">i8"), ("value", ">i4")])
    _KEY = _INT64
    _KEY_AT = 0
    _VALUE = _INT32
    _VALUE_AT = _TIME_RELATIVE_OFFSET_AT
    _RELATIVE_OFFSET_AT = _TIME_RELATIVE_OFFSET_AT

    def is_full(self) -> bool:
        self._data()
        return self._entries >= self._max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        self._check_entry(n)
        timestamp, relative = TIME_ENTRY.unpack_from(self._data(), n * TIME_ENTRY.size)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return self.entry(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add ``timestamp -> offset`` if ``timestamp`` is above the last entry's, else do nothing.

        Raises ``IndexFullError`` when full (the reserved slot counts as free with
        ``skip_full_check``) and ``InvalidOffsetError`` when ``offset`` is below the last offset.
        Like ``OffsetIndex.append``: one combined guard, the precise error only when it fails."""
        buf = self._buf if self._buf is not None else self._data()
        n = self._entries
        relative = offset - self._base_offset
        if n:
            last_timestamp, last_relative = TIME_ENTRY.unpack_from(buf, (n - 1) * _TIME_ENTRY_SIZE)
        else:
            last_timestamp, last_relative = NO_TIMESTAMP, 0
        if (not self._writable or (not skip_full_check and n >= self._max_entries - 1)
                or (n and relative < last_relative)):
            self._refuse_append(timestamp, offset, skip_full_check)
        if timestamp <= last_timestamp:
            return
        if n >= self._max_entries or not 0 <= relative <= _INT32_MAX:
            self._refuse_append(timestamp, offset, True)
        end = (n + 1) * _TIME_ENTRY_SIZE
        if end > self._backed:
            self._ensure_backed(end)
        TIME_ENTRY.pack_into(buf, n * _TIME_ENTRY_SIZE, timestamp, relative)
        self._entries = n + 1

    def _refuse_append(self, timestamp: int, offset: int, skip_full_check: bool) -> None:
        self._check_writable("append to")
        if not skip_full_check and self.is_full():
            raise IndexFullError(
                f"attempt to append to a full time index {self._path} (size = {self._entries})",
                path=self._path,
                entries=self._entries,
            )
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                f"the last offset appended ({last.offset}) to {self._path}",
                path=self._path,
                offset=offset,
                last_offset=last.offset,
            )
        self._check_slot_free()
        self._relative(offset)
        raise AssertionError(f"append of {timestamp} -> {offset} to {self._path} refused")

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp ``<= target_timestamp``, else
        ``(-1, base_offset)``."""
        slot = self._lookup_slot(target_timestamp)
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self._base_offset)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` naming the file when the last timestamp is below the first,
        the last offset is below the base offset, or the length is not whole entries."""
        self._data()
        if self._entries:
            first, last = self.entry(0), self.last_entry()
            if last.timestamp < first.timestamp:
                raise CorruptIndexError(
                    f"time index file {self._path} is corrupt: last timestamp {last.timestamp} is "
                    f"below the first timestamp {first.timestamp}",
                    path=self._path,
                    last_timestamp=last.timestamp,
                    first_timestamp=first.timestamp,
                )
            self._check_last_offset(last.offset)
        self._check_length()

    def check_entries(self, end_offset: int) -> None:
        """Full check on open against the segment (offsets below ``end_offset``): timestamps
        strictly increase (an index zeroed by a lost write fails here), relative offsets never
        decrease and are not negative, the last offset is below ``end_offset``.
        ``CorruptIndexError`` naming the file and the first bad entry."""
        self._check_length()
        if not self.entries:
            return
        timestamps, relative = self._columns()
        if relative[0] < 0:
            raise self._corrupt(0, f"has a negative relative offset {int(relative[0])}")
        slot = self._first_bad(timestamps, strictly=True)
        if slot is not None:
            raise self._corrupt(slot, f"has timestamp {int(timestamps[slot])}, not above the "
                                      f"previous entry's {int(timestamps[slot - 1])}")
        slot = self._first_bad(relative, strictly=False)
        if slot is not None:
            raise self._corrupt(slot, f"has relative offset {int(relative[slot])}, below the "
                                      f"previous entry's {int(relative[slot - 1])}")
        last_offset = self._base_offset + int(relative[-1])
        if last_offset >= end_offset:
            raise self._corrupt(len(relative) - 1, f"has offset {last_offset}, not below the "
                                                   f"segment's end offset {end_offset}")
