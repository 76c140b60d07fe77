"""Offset index (``.index``, Kafka's OffsetIndex), sparse, sorted by offset, positions
non-decreasing::

    Entry => RelativeOffset: int32 (offset - base_offset) | Position: int32 (byte position in .log)

    base offset 1000, offset 1005 at position 4096:  00000005 00001000

The shared file handling is ``storage.index_file._Index``.
"""

from __future__ import annotations

import bisect
import struct

import numpy as np

from storage.errors import InvalidOffsetError
from storage.index_file import OffsetPosition, _Index, _INT32, _INT32_MAX


OFFSET_ENTRY = struct.Struct(">ii")  # relative_offset, position


# the same layout as a numpy record, for reading a whole file at once (``strata dump-log``)
OFFSET_ENTRY_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
assert OFFSET_ENTRY_DTYPE.itemsize == OFFSET_ENTRY.size


_POSITION_AT = struct.calcsize(">i")
_OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size


class OffsetIndex(_Index):
    """Offset -> byte position in the segment's ``.log``, one entry per ``index.interval.bytes``.

    Offsets strictly increase from entry to entry. Not thread-safe; owned by one segment.
    """

    ENTRY = OFFSET_ENTRY
    _TABLE_DTYPE = np.dtype([("key", ">i4"), ("value", ">i4")])
    _KEY = _INT32
    _KEY_AT = 0
    _VALUE = _INT32
    _VALUE_AT = _POSITION_AT
    _RELATIVE_OFFSET_AT = 0

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when the index is empty."""
        return self.entry(self._entries - 1).offset if self.entries else self._base_offset

    def entry(self, n: int) -> OffsetPosition:
        self._check_entry(n)
        relative, position = OFFSET_ENTRY.unpack_from(self._data(), n * OFFSET_ENTRY.size)
        return OffsetPosition(self._base_offset + relative, position)

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``. Raises ``IndexFullError`` when full, ``InvalidOffsetError``
        when ``offset`` is not above the last offset or does not fit in an int32 relative offset.

        Called on every append of the active segment: one combined guard, and the precise error
        from ``_refuse_append`` only when it fails."""
        buf = self._buf if self._buf is not None else self._data()
        n = self._entries
        relative = offset - self._base_offset
        if (not self._writable or n >= self._max_entries
                or not 0 <= relative <= _INT32_MAX or not 0 <= position <= _INT32_MAX
                or (n and relative <= _INT32.unpack_from(buf, (n - 1) * _OFFSET_ENTRY_SIZE)[0])):
            self._refuse_append(offset, position)
        end = (n + 1) * _OFFSET_ENTRY_SIZE
        if end > self._backed:
            self._ensure_backed(end)
        OFFSET_ENTRY.pack_into(buf, n * _OFFSET_ENTRY_SIZE, relative, position)
        self._entries = n + 1

    def _refuse_append(self, offset: int, position: int) -> None:
        self._check_writable("append to")
        self._check_slot_free()
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"attempt to append an offset {offset} to position {self._entries} no larger than "
                f"the last offset appended ({self.last_offset}) to {self._path}",
                path=self._path,
                offset=offset,
                last_offset=self.last_offset,
            )
        if not 0 <= position <= _INT32_MAX:
            raise ValueError(f"position {position} does not fit in an int32 ({self._path})")
        self._relative(offset)
        raise AssertionError(f"append of {offset} -> {position} to {self._path} refused")

    def last_entry_or_none(self) -> OffsetPosition | None:
        """The last entry, or None when the index is empty."""
        return self.entry(self._entries - 1) if self.entries else None

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset ``<= target_offset``, else ``(base_offset, 0)``.
        A large read-only index not yet read is searched in its file (``_probe``)."""
        probed = self._probe(target_offset - self._base_offset)
        if probed is not None:
            slot, fields = probed
            if fields is None:
                return OffsetPosition(self._base_offset, 0)
            relative, position = fields
            return OffsetPosition(self._base_offset + relative, position)
        slot = self._lookup_slot(target_offset - self._base_offset)
        return self.entry(slot) if slot >= 0 else OffsetPosition(self._base_offset, 0)

    def fetch_upper_bound_offset(
        self, fetch_position: int, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry whose position is ``>= fetch_position + fetch_size``, else None."""
        values = self._values()
        searched = self._searched(self._keys(), values)
        slot = bisect.bisect_left(values, fetch_position + fetch_size, 0, searched)
        return self.entry(slot) if slot < searched else None

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` naming the file when its length is not whole entries or the
        last offset is below the base offset."""
        self._data()
        self._check_last_offset(self.last_offset)
        self._check_length()

    def check_entries(self, log_size: int, end_offset: int) -> None:
        """Full check on open against the segment (``log_size`` bytes of ``.log``, offsets below
        ``end_offset``): offsets and positions strictly increase, the first relative offset and
        position are not negative, the last position is inside the ``.log`` and the last offset
        below ``end_offset``. ``CorruptIndexError`` naming the file and the first bad entry."""
        self._check_length()
        if not self.entries:
            return
        relative, positions = self._columns()
        if relative[0] < 0 or positions[0] < 0:
            raise self._corrupt(0, f"has relative offset {relative[0]} and position "
                                   f"{positions[0]}; neither may be negative")
        for column, name in ((relative, "offset"), (positions, "position")):
            slot = self._first_bad(column, strictly=True)
            if slot is not None:
                raise self._corrupt(slot, f"has {name} {int(column[slot])}, not above the "
                                          f"previous entry's {int(column[slot - 1])}")
        last = len(relative) - 1
        if positions[last] >= log_size:
            raise self._corrupt(last, f"has position {int(positions[last])}, beyond the "
                                      f"{log_size} bytes of the segment")
        if self._base_offset + int(relative[last]) >= end_offset:
            raise self._corrupt(last, f"has offset {self._base_offset + int(relative[last])}, "
                                      f"not below the segment's end offset {end_offset}")
