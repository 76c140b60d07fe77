"""Load-time checks of a segment's index files against its ``.log`` (loader pass 4).

The offset and time indexes are hints and carry no checksum, nor does the ``.txnindex`` (as in
Kafka). Before a segment that recovery will not re-validate is trusted, ``quick_index_check``
checks the sizes of its index files, ``check_indexes_against_log`` their entries against the
``.log`` (``storage.index_checks``; the loader runs it on the active segment at open, and a closed
segment runs it at the first use of its indexes: ``LogSegment.check_indexes_at_first_use``), and
``txn_index_problem`` its aborted-transaction entries against the batches they name and the
segment's markers. A failed check makes the loader rebuild the index from the ``.log``; nothing
here writes a file.

Finding the markers reads a segment's producer batches, so it is done only in a log that may
hold transactions (``log_may_hold_transactions``, from the directory listing and the newest
producer snapshot): a log that never saw one costs no read of its segments. What this trusts: a
log whose transactional producers are all forgotten (``producer.id.expiration.ms``) and whose
``.txnindex`` files are all gone looks like a log that never saw a transaction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from storage import files
from storage import txn_index
from storage.errors import CorruptIndexError, CorruptRecordError
from storage.index_checks import check_index_files
from storage.producer_state import read_snapshot
from storage.records import HEADER_SIZE, MAGIC, BatchHeader
from storage.segment import LogSegment
from storage.segment_read import producer_batch_headers
from storage.txn_markers import (
    TxnMarker,
    markers_of_headers,
    open_transactions_in_snapshot,
    txn_index_mismatch,
)


def quick_index_check(directory: Path, stem: str, names: set[str],
                      suffixes: tuple[str, ...] | None = None) -> None:
    """Cheap structural check from the sizes of the index files of segment ``stem`` (among
    ``names``, the listing of ``directory``), or of those with ``suffixes``; full checks happen
    in recovery. ``CorruptIndexError`` for a size that is not a whole number of entries."""
    folder = str(directory)
    for suffix, width in ((files.INDEX_SUFFIX, 8), (files.TIME_INDEX_SUFFIX, 12),
                          (files.TXN_INDEX_SUFFIX, txn_index.ENTRY_SIZE)):
        if suffixes is not None and suffix not in suffixes:
            continue
        name = f"{stem}{suffix}"
        if name not in names:
            continue
        path = os.path.join(folder, name)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue
        if size % width:
            raise CorruptIndexError(
                f"index file {path} has size {size}, not a multiple of {width}", path=path)


def log_may_hold_transactions(directory: Path, names: set[str]) -> bool:
    """Whether the log in ``directory`` (``names``: its listing) may hold transaction markers:
    it has a ``.txnindex``, or its newest producer snapshot names a producer with a marker or
    an open transaction, or it has segments and no readable snapshot to tell."""
    if any(name.endswith(files.TXN_INDEX_SUFFIX) for name in names):
        return True
    snapshots = sorted(n for n in names
                       if n.endswith(files.SNAPSHOT_SUFFIX) and files.is_segment_file(n))
    if not snapshots:
        return any(name.endswith(files.LOG_SUFFIX) for name in names)
    path = directory / snapshots[-1]
    try:
        entries = read_snapshot(path.read_bytes(), path)
    except (CorruptRecordError, OSError):
        return True
    return any(e.coordinator_epoch >= 0 or e.current_txn_first_offset >= 0 for e in entries)


def txn_markers_of(segment: LogSegment) -> tuple[list[TxnMarker], int | None]:
    """The commit and abort markers of ``segment`` (its producer batches are walked), and None,
    or the offset below which they were found when a damaged batch stopped the walk (readers
    and recovery report that batch; the markers before it are still known)."""
    stopped: list[int] = []

    def headers() -> Iterator[tuple[int, int, BatchHeader]]:
        walked_to = segment.base_offset
        try:
            for position, size, header in producer_batch_headers(segment, 0):
                walked_to = header.last_offset + 1
                yield position, size, header
        except CorruptRecordError:
            stopped.append(walked_to)

    open_at_start = open_transactions_in_snapshot(
        files.snapshot_file(segment.log_path.parent, segment.base_offset))
    markers = markers_of_headers(headers(), segment.read_bytes, open_at_start)
    return markers, stopped[0] if stopped else None


def txn_index_problem(segment: LogSegment, before: list[LogSegment],
                      compacted: bool) -> str | None:
    """Why ``segment``'s ``.txnindex`` cannot be trusted, or None. The file has no checksum (as in
    Kafka), and a flipped producer id or offset in it would make ``read_committed`` serve an
    aborted transaction's records, so each entry is checked against the log: its marker (the
    batch at ``last_offset``) is an abort marker of its producer, and the batch at its
    ``first_offset`` (in this segment or one ``before`` it) is a transactional batch of the same
    producer (on a ``compacted`` log that batch may be gone: the cleaner removes aborted batches),
    and its last stable offset is not past the marker; and every abort marker of the segment
    that closed a transaction has its entry (``storage.txn_markers``: a deleted or emptied file
    has none). Walks the segment's producer batches: call it only for a log that
    ``log_may_hold_transactions``."""
    try:
        aborted = segment.txn_index.all_aborted_txns()
    except CorruptIndexError as err:
        return str(err)
    markers, markers_end = txn_markers_of(segment)
    mismatch = txn_index_mismatch(markers, aborted, markers_end)
    if mismatch is not None:
        return mismatch
    for txn in aborted:
        if not 0 <= txn.first_offset <= txn.last_offset or txn.last_offset < segment.base_offset:
            return f"entry {txn} does not fit the segment"
        if not 0 <= txn.last_stable_offset <= txn.last_offset + 1:
            # the stable offset after an abort is never past the marker; a larger one would end
            # the search for aborted transactions early (Kafka's collectAbortedTxns)
            return f"entry {txn}: its last stable offset is past its marker"
        marker = _header_at(segment, txn.last_offset)
        if marker is None or marker.base_offset != txn.last_offset or not marker.is_control \
                or marker.producer_id != txn.producer_id:
            return f"entry {txn}: no abort marker of producer {txn.producer_id} at its last offset"
        holder = segment
        if txn.first_offset < segment.base_offset:
            holder = next((s for s in reversed(before) if s.base_offset <= txn.first_offset), None)
        first = _header_at(holder, txn.first_offset) if holder is not None else None
        if first is not None and first.base_offset == txn.first_offset:
            if not first.is_transactional or first.producer_id != txn.producer_id:
                return (f"entry {txn}: the batch at its first offset is not a transactional "
                        f"batch of producer {txn.producer_id}")
        elif not compacted:
            return f"entry {txn}: no batch starts at its first offset"
    return None


def _header_at(segment: LogSegment, offset: int) -> BatchHeader | None:
    """The v2 header of the batch holding ``offset`` (or the next one), None if none or legacy."""
    entry = segment.translate_offset(offset)
    if entry is None or entry.magic != MAGIC:
        return None
    return BatchHeader.parse(segment.read_bytes(entry.position, HEADER_SIZE))


def check_indexes_against_log(segment: LogSegment, end_offset: int | None) -> None:
    """Decide on open whether ``segment``'s indexes can be trusted (``index_checks``:
    ``CorruptIndexError`` on any doubt, and the loader rebuilds them from the ``.log``).
    ``end_offset`` is the next segment's base offset, None for the last (active) segment."""
    check_index_files(segment.log_path, segment.size, segment.base_offset,
                      segment.offset_index, segment.time_index, end_offset)
