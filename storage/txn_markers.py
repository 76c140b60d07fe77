"""The commit and abort markers of a segment, and whether its ``.txnindex`` matches them.

A segment's ``.txnindex`` holds one entry per transaction aborted by a marker in the segment
(``storage.txn_index``). The file has no checksum (as in Kafka) and is created by the first entry,
so a deleted or emptied file looks like a segment without aborts, and an entry naming a commit
marker hides a committed transaction from ``read_committed`` readers. ``txn_index_mismatch``
compares the entries with the markers found in the segment's batches:

- every entry's ``LastOffset`` is an abort marker of its producer;
- every abort marker that closed an open transaction has an entry. A transaction may begin
  segments earlier, so whether the producer had one open at the marker is read from the segment
  (a transactional batch of it before the marker, or its previous marker with none between) and,
  before its first batch there, from the producer snapshot at the segment's base offset
  (``open_transactions_in_snapshot``; without a readable one, an abort is taken to close a
  transaction). An abort that closed none (a transaction that wrote nothing to the partition,
  Kafka's empty transactions) has no entry.

The loader (``storage.load_checks.txn_index_problem``), ``strata recover --dry-run`` and
``strata dump-log --verify`` share these rules; the first reads the markers of a ``LogSegment``
(``txn_markers_of``), the tools those of the bytes they hold (``txn_markers_in``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, NamedTuple

import numpy as np

from storage.errors import CorruptRecordError
from storage.producer_state import read_snapshot
from storage.records import (
    BatchHeader,
    ControlType,
    RecordBatch,
    byte_view,
    parse_control_record,
    scan_batches,
)
from storage.txn_index import ENTRY_SIZE, AbortedTxn

class TxnMarker(NamedTuple):
    """A commit or abort marker at ``offset``; ``needs_entry``: an abort that, as far as its
    segment shows, closed an open transaction (so the ``.txnindex`` must name it)."""

    offset: int
    producer_id: int
    aborted: bool
    needs_entry: bool


def open_transactions_in_snapshot(path: Path) -> set[int] | None:
    """The producers with an open transaction in the producer snapshot ``path``, None when there
    is no readable snapshot there."""
    try:
        entries = read_snapshot(path.read_bytes(), path)
    except (CorruptRecordError, OSError):
        return None
    return {e.producer_id for e in entries if e.current_txn_first_offset >= 0}


def markers_of_headers(headers: Iterable[tuple[int, int, BatchHeader]],
                       read: Callable[[int, int], bytes | memoryview],
                       open_at_start: set[int] | None = None) -> list[TxnMarker]:
    """The markers among the producer batches ``headers`` ((position, size, header), in file
    order); ``read(position, size)`` gives a control batch's bytes; ``open_at_start``: the
    producers with a transaction open at the segment's base offset (None: unknown). A control
    batch that is no commit or abort marker, or whose record does not decode, is none (the CRC
    checks of readers and recovery judge it)."""
    open_txn: dict[int, bool] = {}       # producer -> has an open transaction
    markers = []
    for position, size, header in headers:
        pid = header.producer_id
        if pid < 0:
            continue
        if not header.is_control:
            if header.is_transactional:
                open_txn[pid] = True
            continue
        try:
            records = RecordBatch(bytes(read(position, size))).records() \
                if header.records_count > 0 else []
            marker = parse_control_record(records[0]) if records else None
        except CorruptRecordError:
            marker = None
        if marker is None or marker[0] not in (ControlType.ABORT, ControlType.COMMIT):
            continue
        aborted = marker[0] == ControlType.ABORT
        was_open = open_txn.get(pid, open_at_start is None or pid in open_at_start)
        markers.append(TxnMarker(header.base_offset, pid, aborted, aborted and was_open))
        open_txn[pid] = False
    return markers


def txn_markers_in(data: bytes | memoryview,
                   open_at_start: set[int] | None = None) -> list[TxnMarker]:
    """The markers of a segment's bytes, up to its first incomplete or impossible batch
    (``open_at_start`` as for ``markers_of_headers``)."""
    view = byte_view(data)
    scan = scan_batches(view)
    rows = np.flatnonzero((scan.magics >= 2) & (scan.producer_ids >= 0)).tolist()

    def headers() -> Iterable[tuple[int, int, BatchHeader]]:
        for i in rows:
            at = int(scan.positions[i])
            yield at, int(scan.sizes[i]), BatchHeader.parse(view, at)

    return markers_of_headers(headers(), lambda at, size: view[at:at + size], open_at_start)


def txn_index_mismatch(markers: list[TxnMarker], entries: list[AbortedTxn],
                       markers_end: int | None = None) -> str | None:
    """Why ``entries`` (a segment's ``.txnindex``) do not match the segment's ``markers``, or
    None (the rules are in the module docstring). ``markers_end``: the markers were found only
    below this offset (a damaged batch stopped the walk); entries at or past it are not
    judged."""
    by_offset = {m.offset: m for m in markers}
    for txn in entries:
        if markers_end is not None and txn.last_offset >= markers_end:
            continue
        marker = by_offset.get(txn.last_offset)
        if marker is None or marker.producer_id != txn.producer_id:
            return (f"entry {tuple(txn)[:4]}: no marker of producer {txn.producer_id} at its last "
                    f"offset {txn.last_offset}")
        if not marker.aborted:
            return (f"entry {tuple(txn)[:4]}: the marker of producer {txn.producer_id} at offset "
                    f"{txn.last_offset} is a commit, which hides a committed transaction")
    named = {(txn.last_offset, txn.producer_id) for txn in entries}
    for marker in markers:
        if marker.needs_entry and (marker.offset, marker.producer_id) not in named:
            return (f"the abort marker of producer {marker.producer_id} at offset "
                    f"{marker.offset} has no entry in the .txnindex (read_committed would serve "
                    f"the aborted records)")
    return None


def txn_index_mismatch_in(segment_data: bytes | memoryview,
                          index_data: bytes | memoryview | None,
                          open_at_start: set[int] | None = None) -> str | None:
    """``txn_index_mismatch`` of a segment's bytes and its ``.txnindex`` bytes (None: no file),
    ``open_at_start`` as for ``markers_of_headers``; a trailing piece shorter than an entry is
    left to the index's own checks, and markers are looked for up to the segment's first
    incomplete or impossible batch."""
    entries = []
    if index_data is not None:
        whole = len(index_data) - len(index_data) % ENTRY_SIZE
        entries = [AbortedTxn.decode(index_data, at) for at in range(0, whole, ENTRY_SIZE)]
    view = byte_view(segment_data)
    scan = scan_batches(view)
    markers_end = None
    if scan.error is not None and len(scan.last_offsets):
        markers_end = int(scan.last_offsets[-1]) + 1
    return txn_index_mismatch(txn_markers_in(view, open_at_start), entries, markers_end)
