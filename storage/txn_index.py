"""Aborted-transaction index: ``<base offset>.txnindex`` beside each segment (Kafka's
TransactionIndex and AbortedTxn), read by ``read_committed`` readers to skip aborted data.

One entry per transaction aborted by a marker in this segment, in the order of the markers; no
header, no padding, all big-endian::

    AbortedTxn => Version: int16 (0)
                  ProducerId: int64
                  FirstOffset: int64        first offset of the transaction (maybe in an earlier
                                            segment)
                  LastOffset: int64         offset of its abort marker; strictly increasing
                  LastStableOffset: int64   the partition's LSO once the transaction was closed
                                            (34 bytes)

The file is created by the first entry (most segments never have one) and is rebuilt from the
``.log`` by recovery (``LogSegment.recover`` with a producer state), like the other indexes. A
trailing piece shorter than an entry (a torn write) is ignored by readers and reported by
``sanity_check``.

Not thread-safe: owned by its segment, whose log serialises writers.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, NamedTuple, Protocol

from storage.durable import fsync_file_if_exists
from storage.errors import CorruptIndexError, InvalidOffsetError

ENTRY = struct.Struct(">hqqqq")   # version, producer id, first, last, last stable offset
ENTRY_SIZE = ENTRY.size           # 34
LAST_OFFSET_POSITION = struct.calcsize(">hqq")   # 18: where LastOffset sits in an entry
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry: the producer, the offsets of the aborted transaction and its marker, and the LSO
    after the abort."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | memoryview, position: int = 0) -> AbortedTxn:
        version, producer_id, first, last, lso = ENTRY.unpack_from(data, position)
        return cls(producer_id, first, last, lso, version)


class TxnIndexSearchResult(NamedTuple):
    """The aborted transactions of one index overlapping a fetch range; ``is_complete``: an entry
    with a last stable offset at or above the range's end was met, so no later segment's index
    can add a transaction to the range (Kafka's TxnIndexSearchResult)."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class _HasTxnIndex(Protocol):
    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult: ...


def collect_aborted_transactions(segments: Iterable[_HasTxnIndex], start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[start_offset, upper_bound_offset)`` from the
    indexes of ``segments`` (the one holding ``start_offset`` first, then the later ones), stopping
    at the first complete search result (Kafka's UnifiedLog.collectAbortedTransactions)."""
    found: list[AbortedTxn] = []
    for segment in segments:
        result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
        found.extend(result.aborted_transactions)
        if result.is_complete:
            break
    return found


class TransactionIndex:
    """The ``.txnindex`` of the segment at ``start_offset``. See the module docstring."""

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.start_offset = start_offset
        self._last_offset: int | None = None   # of the last entry; read from the file when needed
        self._last_known = False

    # ---- reading -----------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.exists()

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def _entries(self, data: bytes) -> list[tuple[int, AbortedTxn]]:
        """(position, entry) of every whole entry; an unknown version is corrupt."""
        out = []
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            txn = AbortedTxn.decode(data, position)
            if txn.version > CURRENT_VERSION:
                raise CorruptIndexError(
                    f"transaction index {self.path}: entry at position {position} has version "
                    f"{txn.version}, the newest known is {CURRENT_VERSION}", path=str(self.path),
                    position=position, version=txn.version)
            out.append((position, txn))
        return out

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._entries(self._read())]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether
        the search is complete (Kafka's collectAbortedTxns)."""
        found = []
        for _, txn in self._entries(self._read()):
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a torn entry, an unknown version, or an entry whose marker
        lies below the segment's base offset."""
        data = self._read()
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(
                f"transaction index {self.path} has size {len(data)}, not a multiple of "
                f"{ENTRY_SIZE}", path=str(self.path), size=len(data))
        for position, txn in self._entries(data):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"transaction index {self.path}: last offset {txn.last_offset} of the aborted "
                    f"transaction at position {position} is below the start offset "
                    f"{self.start_offset}", path=str(self.path), position=position,
                    offset=txn.last_offset)

    # ---- writing -----------------------------------------------------------------------------
    def _load_last_offset(self) -> int | None:
        if not self._last_known:
            entries = self._entries(self._read())
            self._last_offset = entries[-1][1].last_offset if entries else None
            self._last_known = True
        return self._last_offset

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (creating the file); its last offset must be above the previous one's."""
        last = self._load_last_offset()
        if last is not None and txn.last_offset <= last:
            raise InvalidOffsetError(
                f"transaction index {self.path}: last offset {txn.last_offset} of an aborted "
                f"transaction is not above the previous entry's {last}", path=str(self.path),
                offset=txn.last_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size % ENTRY_SIZE:
                os.ftruncate(fd, size - size % ENTRY_SIZE)   # drop a torn entry first
            os.write(fd, txn.encode())
        finally:
            os.close(fd)
        self._last_offset = txn.last_offset

    def flush(self) -> None:
        """fsync the file if it exists."""
        fsync_file_if_exists(self.path)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose marker is at or above ``offset``."""
        for position, txn in self._entries(self._read()):
            if txn.last_offset >= offset:
                os.truncate(self.path, position)
                self._last_known = False
                return

    def reset(self) -> None:
        """Remove every entry (the file stays, empty, if it existed)."""
        if self.path.exists():
            os.truncate(self.path, 0)
        self._last_offset, self._last_known = None, True

    def close(self) -> None:
        """Nothing is held open; kept for symmetry with the other indexes."""

    def delete_if_exists(self) -> bool:
        """Delete the file; returns whether there was one."""
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False
        finally:
            self._last_offset, self._last_known = None, True

    def rename_to(self, path: Path) -> None:
        """Rename the file (if it exists) and use the new name from now on."""
        try:
            if self.path.exists():
                os.replace(self.path, path)
        finally:
            self.path = Path(path)

    def update_parent_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory."""
        self.path = Path(directory) / self.path.name

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path})"
