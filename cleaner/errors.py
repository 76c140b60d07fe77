"""Typed errors of the cleaner (beyond ``storage.errors``, which it also raises)."""

from __future__ import annotations

from storage.errors import CorruptRecordError, StorageError


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


class CleanerIOError(StorageError):
    """A clean failed on an I/O error (``OSError``: a full disk, a lost permission, a read
    error), raised instead of the raw ``OSError``, which is its ``__cause__``.

    Before it is raised the clean has removed its ``.cleaned`` files and closed every descriptor
    and map it opened for them: the partition's segments are exactly as they were and nothing
    is swapped in. Unlike ``CorruptSegmentError`` the stored bytes are not in doubt, so the
    partition takes the manager's failure path (retried after the backoff, uncleanable after
    ``uncleanable_retries`` failures in a row). Kafka's CleanerThread takes the whole log
    directory offline on an ``IOException``; here the cleaner does not own the directory (a
    worker runs in a process of its own), and leaves that judgement to the owner, whose own
    next write meets a fault of the disk. Names the file (``path``, the partition directory when
    the failing call named none), the partition (``partition``) and the ``errno``.
    """
