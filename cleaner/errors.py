"""Typed errors of the cleaner (beyond ``storage.errors``, which it also raises)."""

from __future__ import annotations

from storage.errors import CorruptRecordError


class CorruptSegmentError(CorruptRecordError):
    """A batch the cleaner read fails its CRC or its structure (an impossible length, a records
    count its bytes cannot hold, a body that decompresses past ``MAX_DECOMPRESSED_BYTES``).

    The clean of that partition stops before anything is swapped in: the segment keeps its bytes
    and stays detectably corrupt (the cleaner never re-encodes a damaged batch with a fresh CRC),
    and the partition goes through the manager's failure path to uncleanable. Unlike a decoder's
    plain ``CorruptRecordError`` it always names the segment file (``path``), the batch's byte
    position in it (``position``), the offset its header claims (``offset``, -1 when unreadable)
    and the partition (``partition``).
    """
