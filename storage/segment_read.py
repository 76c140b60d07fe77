"""Reading a segment's batches (Kafka's ``LogSegment.read``, ``translateOffset`` and
``findOffsetByTimestamp``): the verified walk every read uses, the reads by offset and timestamp
built on it, and the producer-header walk of the producer-state replay.

Owns ``BatchEntry`` (where a batch sits, with the header fields readers need) and
``walk_batches`` (``LogSegment.batches``): the file is read in chunks of ``SCAN_CHUNK_BYTES``,
scanned by the kernel (``storage.records.scan_batches``) and, with ``verify``, every batch is
checked (CRC, offsets between its neighbours, a complete end) before it is yielded, so a reader
never positions itself by, nor is served, a damaged batch. ``walk_batch_bytes`` is the same
walk handing out each batch as a ``VerifiedBatch`` over the bytes it checked (bulk reads: one
read and one CRC per batch). ``walk_start``, ``translate_offset``,
``read`` and ``find_offset_by_timestamp`` are the bodies of the ``LogSegment`` methods of those
names, ``written_size`` that of ``size_to_written_batches``. ``producer_batch_headers`` finds the
batches with a producer id for the producer-state replay (``storage.segment_txns``).

Reads only: nothing here writes a file or changes the segment. Each function takes the segment as
a ``SegmentFile``, the few reads it needs of one, so this module knows nothing else of
``LogSegment``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

import crc32c
import numpy as np

from storage.errors import CorruptRecordError
from storage.index import OffsetPosition
from storage.records import (
    INT32_MAX,
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    SIZE_OFFSET,
    BatchHeader,
    BatchScan,
    RecordBatch,
    batch_crc,
    batch_location,
    scan_batches,
)

if TYPE_CHECKING:
    from storage.index import OffsetIndex, TimeIndex

SCAN_CHUNK_BYTES = 256 * 1024
HOP_BATCH_BYTES = 16 * 1024   # producer-state replay reads only the header of a batch this large
REPLAY_CHUNK_BYTES = 1024 * 1024   # and scans smaller ones this many bytes at a time

log = logging.getLogger("storage.segment")   # the segment's logger, as before the split


class SegmentFile(Protocol):
    """What reading a segment's batches needs of it (``LogSegment`` is one): its base offset,
    the size and path of its ``.log``, its index pair, and positional reads."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def log_path(self) -> Path: ...

    @property
    def offset_index(self) -> OffsetIndex: ...

    @property
    def time_index(self) -> TimeIndex: ...

    def read_bytes(self, position: int, size: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """Where one batch sits in a segment file, with the header fields readers need."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int
    records_count: int


class IndexEntryMismatch(Exception):
    """An offset-index entry that does not match the batch at its position (never escapes
    ``walk_batches``, which then walks the segment from its start)."""


def walk_batches(segment: SegmentFile, start_position: int = 0, end_position: int | None = None,
                 chunk_bytes: int = SCAN_CHUNK_BYTES, *, verify: bool = False,
                 next_base_offset: int | None = None, target_offset: int | None = None,
                 torn_tail_ok: bool = False,
                 index_entry_offset: int | None = None) -> Iterator[BatchEntry]:
    """``LogSegment.batches``: walk the batch headers of ``segment`` from ``start_position``;
    stops at the first incomplete batch.

    Raises CorruptRecordError (with file and position) for an impossible batch size.

    With ``verify`` (every read path) each batch is checked before it is yielded, so that a
    reader never positions itself by, nor is served, a damaged batch:

    - its CRC: one crc32c call per batch over a view of the chunk already read;
    - its offsets, which lie outside the CRC: the base offset must lie above the previous
      batch's last offset (the segment's base offset - 1 for the first), the last offset must
      lie below the next batch's base offset, below ``next_base_offset`` (the next segment's
      base offset or, for the active segment, the log end offset) and within the segment's
      32-bit relative offsets. A batch is therefore yielded only once the batch after it (or
      the end of the walk) has been read;
    - the end: every byte up to ``end_position`` (default: the segment's size) must belong
      to a complete batch, unless ``torn_tail_ok`` (a file another process is appending to).

    A failure raises ``CorruptRecordError`` naming the file, the batch's position and its base
    offset, after every batch before it was yielded. One exception: a batch that fails its CRC
    is skipped when ``target_offset`` is given and the next batch, intact, starts at or below
    it: the damaged batch then provably holds no offset the caller wants (its own header cannot
    be trusted to say so), and reads from offsets after a damaged batch keep working.

    ``index_entry_offset`` is the offset of the offset-index entry ``start_position`` came
    from: the first batch there must end at or below it (an entry is the last offset of the
    append that starts at its position). If it does not, the entry is wrong, and the walk
    starts over from the segment's first byte rather than skip what lies before.
    """
    end = segment.size if end_position is None else min(end_position, segment.size)
    chunks = _chunks(segment, start_position, end, chunk_bytes,
                     torn_tail_ok=torn_tail_ok or not verify)
    if not verify:
        for position, scan, _view in chunks:
            for pos, size, base, last, max_ts, magic, n in zip(
                    scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                    scan.last_offsets.tolist(), scan.max_timestamps.tolist(),
                    scan.magics.tolist(), scan.records_counts.tolist()):
                yield BatchEntry(position + pos, size, base, last, max_ts, magic, n)
        return
    for entry, _data in _verified_walk(segment, start_position, end, chunk_bytes, chunks,
                                       next_base_offset=next_base_offset,
                                       target_offset=target_offset, torn_tail_ok=torn_tail_ok,
                                       index_entry_offset=index_entry_offset):
        yield entry


def walk_batch_bytes(segment: SegmentFile, start_position: int = 0,
                     end_position: int | None = None, chunk_bytes: int = SCAN_CHUNK_BYTES, *,
                     next_base_offset: int | None = None, target_offset: int | None = None,
                     torn_tail_ok: bool = False, index_entry_offset: int | None = None
                     ) -> Iterator[tuple[BatchEntry, VerifiedBatch]]:
    """``walk_batches(verify=True)`` that also hands out each batch's bytes, as a
    ``VerifiedBatch`` over the chunk the walk read and checked (no second read of the file, no
    second CRC). Same arguments, checks and ``CorruptRecordError`` as ``walk_batches``; the
    batch's ``position`` is its position in the file. For bulk reads (the Spark read)."""
    end = segment.size if end_position is None else min(end_position, segment.size)
    chunks = _chunks(segment, start_position, end, chunk_bytes, torn_tail_ok=torn_tail_ok)
    path = segment.log_path
    for entry, data in _verified_walk(segment, start_position, end, chunk_bytes, chunks,
                                      next_base_offset=next_base_offset,
                                      target_offset=target_offset, torn_tail_ok=torn_tail_ok,
                                      index_entry_offset=index_entry_offset):
        yield entry, VerifiedBatch(data, entry.position, path)


class VerifiedBatch(RecordBatch):
    """A ``RecordBatch`` over bytes whose CRC (and offsets) the verified walk checked: made only
    by ``walk_batch_bytes``, over the very bytes it checked (an immutable ``bytes`` chunk), so
    ``ensure_valid`` has nothing left to check and returns at once."""

    __slots__ = ()

    def ensure_valid(self) -> None:
        """Nothing to do: ``walk_batch_bytes`` checked this batch's CRC before making it."""


def _verified_walk(segment: SegmentFile, start_position: int, end: int, chunk_bytes: int,
                   chunks: Iterator[tuple[int, BatchScan, memoryview]], *,
                   next_base_offset: int | None, target_offset: int | None,
                   torn_tail_ok: bool, index_entry_offset: int | None
                   ) -> Iterator[tuple[BatchEntry, memoryview]]:
    """The verified walk of ``walk_batches`` over ``chunks``: each batch with a view of its
    bytes, restarted from the segment's first byte on an ``IndexEntryMismatch``."""
    upper = segment.base_offset + INT32_MAX
    if next_base_offset is not None:
        upper = min(upper, next_base_offset - 1)
    first_last = index_entry_offset if start_position > 0 else None
    try:
        yield from _verified(segment, chunks, upper, target_offset, first_last)
    except IndexEntryMismatch as mismatch:
        log.warning("%s: %s; reading from the start of the segment instead",
                    segment.offset_index.path, mismatch)
        chunks = _chunks(segment, 0, end, chunk_bytes, torn_tail_ok=torn_tail_ok)
        yield from _verified(segment, chunks, upper, target_offset, None)


def walk_start(segment: SegmentFile, offset: int) -> OffsetPosition:
    """Where a verified walk for ``offset`` starts: the offset-index entry *before* the one at
    or below ``offset`` (``(base offset, 0)`` when there is none). Starting one entry early
    costs about ``index.interval.bytes`` of walk, and gives the first batch a reader may want
    a predecessor to check its base offset against. A read from the segment's base offset (or
    below) starts at its first byte without touching the index, which could say nothing else."""
    if offset <= segment.base_offset:
        return OffsetPosition(segment.base_offset, 0)
    entry = segment.offset_index.lookup(offset)
    if entry.position == 0:
        return entry
    return segment.offset_index.lookup(entry.offset - 1)

def written_size(segment: SegmentFile, last_indexed_position: int) -> int:
    """The end of the last whole batch (``LogSegment.size_to_written_batches``): the batch
    headers are walked from ``last_indexed_position`` (that of the last offset index entry) up
    to the segment's size; the first bytes that are no batch (the zeroed tail of a preallocated
    file) end the walk."""
    end = start = min(last_indexed_position, segment.size)
    try:
        for entry in walk_batches(segment, start):
            end = entry.position + entry.size
    except CorruptRecordError:
        pass                    # the zeroed tail of the preallocated file
    return end


def translate_offset(segment: SegmentFile, offset: int, start_position: int = 0, *,
                     next_base_offset: int | None = None) -> BatchEntry | None:
    """The first batch whose last offset is >= ``offset`` (the batch holding it, or the next
    batch after a gap), searching from the index entry at or below it. Every batch walked is
    verified (``batches(verify=True)``)."""
    entry = walk_start(segment, offset)
    for batch in walk_batches(segment, max(entry.position, start_position), verify=True,
                              next_base_offset=next_base_offset, target_offset=offset,
                              index_entry_offset=entry.offset
                              if entry.position >= start_position else None):
        if batch.last_offset >= offset:
            return batch
    return None

def read(segment: SegmentFile, start_offset: int, max_size: int, max_position: int | None = None,
         min_one_message: bool = True, *,
         next_base_offset: int | None = None) -> tuple[int, bytes] | None:
    """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes (at least
    one batch if ``min_one_message``). Returns (file position, bytes) or None past the end.

    Every batch returned, and every batch walked to find the first, passed
    ``batches(verify=True)``: its CRC and its offsets (below ``next_base_offset`` when given:
    the next segment's base offset, or the log end offset for the active segment). A damaged
    batch ends the bytes returned before it; ``CorruptRecordError`` is raised when it would be
    the first batch returned."""
    limit = segment.size if max_position is None else max_position
    entry = walk_start(segment, start_offset)
    first: BatchEntry | None = None
    end = budget = 0
    walk = walk_batches(segment, entry.position, limit, verify=True,
                        next_base_offset=next_base_offset, target_offset=start_offset,
                        index_entry_offset=entry.offset)
    try:
        for batch in walk:
            if first is None:
                if batch.last_offset < start_offset:
                    continue
                first = batch
                budget = max(max_size, first.size) if min_one_message else max_size
                end = first.position
            if batch.position + batch.size - first.position > budget:
                break
            end = batch.position + batch.size
    except CorruptRecordError:
        if first is None or end == first.position:
            raise
    finally:
        walk.close()
    if first is None or end == first.position:
        return None
    return first.position, segment.read_bytes(first.position, end - first.position)

def find_offset_by_timestamp(segment: SegmentFile, timestamp: int, start_offset: int
                             ) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= ``timestamp`` at or after
    ``start_offset``, or None."""
    ts_entry = segment.time_index.lookup(timestamp)
    index_entry = walk_start(segment, max(ts_entry.offset, start_offset))
    for entry in walk_batches(segment, index_entry.position, verify=True,
                              target_offset=start_offset, index_entry_offset=index_entry.offset):
        if entry.max_timestamp < timestamp or entry.last_offset < start_offset:
            continue
        batch = RecordBatch(segment.read_bytes(entry.position, entry.size), entry.position,
                            segment.log_path)
        for record in batch.records():
            if record.timestamp >= timestamp and record.offset >= start_offset:
                return record.offset, record.timestamp
    return None


def _chunks(segment: SegmentFile, start: int, end: int, chunk_bytes: int, *,
            torn_tail_ok: bool) -> Iterator[tuple[int, BatchScan, memoryview]]:
    """``(file position, scan, bytes)`` of each chunk of complete batches in ``[start, end)``;
    a chunk's problem is raised after the chunk, so its good batches come first."""
    position = start
    while position + HEADER_SIZE_UP_TO_MAGIC <= end:
        wanted = min(chunk_bytes, end - position)
        data = segment.read_bytes(position, wanted)
        scan = scan_batches(data)
        if len(scan.positions) == 0:
            if scan.problem is not None:
                raise _corrupt_at(segment.log_path, position + max(scan.error_position, 0),
                                  scan.problem)
            if len(data) < wanted:
                break    # the file ends before the segment's size: reported below
            batch_size = int.from_bytes(data[SIZE_OFFSET:LOG_OVERHEAD], "big",
                                        signed=True) + LOG_OVERHEAD
            if batch_size <= len(data) or position + batch_size > end:
                break    # incomplete batch at the end of the file
            chunk_bytes = batch_size
            continue
        yield position, scan, memoryview(data)
        if scan.problem is not None:
            raise _corrupt_at(segment.log_path, position + scan.error_position, scan.problem)
        position += scan.valid_bytes
    if position < end and not torn_tail_ok:
        raise _corrupt_at(segment.log_path, position,
                          f"the {end - position} bytes from here to position "
                          f"{end} are not a complete batch")


def _verified(segment: SegmentFile, chunks: Iterator[tuple[int, BatchScan, memoryview]],
              upper: int, target_offset: int | None,
              first_last: int | None) -> Iterator[tuple[BatchEntry, memoryview]]:
    """The checks of ``batches(verify=True)`` over the chunks of ``_chunks``, each batch with a
    view of its bytes in its chunk; raises
    ``IndexEntryMismatch``, before yielding anything, when the first batch is not a batch,
    fails its CRC or ends above ``first_last`` (the walk then starts again from the
    segment's first byte, where a damaged index cannot mislead it)."""
    previous_last = segment.base_offset - 1
    held: tuple[BatchEntry, memoryview] | None = None   # yielded once the batch after it fits
    damaged: CorruptRecordError | None = None    # a CRC failure that may yet be skipped
    while True:
        try:
            position, scan, view = next(chunks)
        except StopIteration:
            break
        except CorruptRecordError as err:
            if first_last is not None and held is None and damaged is None:
                raise IndexEntryMismatch(f"no batch at position {err.position}, where the "
                                          f"index entry for offset {first_last} points")
            if held is not None:
                yield held                  # intact: the damage lies after it
            raise damaged or err
        for pos, size, base, last, max_ts, magic, n, stored in zip(
                scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                scan.last_offsets.tolist(), scan.max_timestamps.tolist(), scan.magics.tolist(),
                scan.records_counts.tolist(), scan.crcs.tolist()):
            entry = BatchEntry(position + pos, size, base, last, max_ts, magic, n)
            computed = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) if magic == MAGIC \
                else batch_crc(view, pos, size, magic)
            if computed != stored:
                if first_last is not None and held is None and damaged is None:
                    raise IndexEntryMismatch(
                        f"the batch at position {entry.position}, where the index entry for "
                        f"offset {first_last} points, fails its CRC")
                if held is not None:
                    yield held              # intact: the damage lies in the batch after it
                    held = None
                error = _crc_mismatch(segment.log_path, entry, stored, computed)
                if damaged is not None or target_offset is None:
                    raise damaged or error
                damaged = error
                continue
            if first_last is not None:
                if last > first_last and held is None and damaged is None:
                    raise IndexEntryMismatch(f"the index entry for offset {first_last} at "
                                              f"position {entry.position} points at a batch "
                                              f"ending at offset {last}")
                first_last = None
            if base <= previous_last or last < base or last > upper:
                raise damaged or _offsets_out_of_place(segment.log_path, entry, previous_last,
                                                       upper)
            if damaged is not None:
                if target_offset is None or base > target_offset:
                    raise damaged
                damaged = None
            if held is not None:
                yield held
            held, previous_last = (entry, view[pos:pos + size]), last
    if held is not None:
        yield held
    if damaged is not None:
        raise damaged


def _corrupt_at(path: Path, position: int, problem: str, **fields: object) -> CorruptRecordError:
    return CorruptRecordError(f"{batch_location(path, position)}: {problem}",
                              path=str(path), position=position, **fields)


def _crc_mismatch(path: Path, entry: BatchEntry, stored: int, computed: int) -> CorruptRecordError:
    return _corrupt_at(
        path, entry.position, f"CRC mismatch for the batch at offsets {entry.base_offset}.."
                              f"{entry.last_offset} (stored crc {stored:#010x}, computed crc "
                              f"{computed:#010x})", base_offset=entry.base_offset,
        offset=entry.last_offset, stored_crc=stored, computed_crc=computed)


def _offsets_out_of_place(path: Path, entry: BatchEntry, previous_last: int,
                          upper: int) -> CorruptRecordError:
    base, last = entry.base_offset, entry.last_offset
    if base <= previous_last:
        why = f"its base offset is not above {previous_last}, where the batches before it end"
    elif last < base:
        why = "its last offset is below its base offset"
    else:
        why = f"its last offset is beyond {upper}, the last offset this segment may hold"
    return _corrupt_at(path, entry.position, f"the batch at offsets {base}..{last} is out of "
                                             f"place: {why}", base_offset=base, offset=last)


def producer_batch_headers(segment: SegmentFile, start_position: int
                           ) -> Iterator[tuple[int, int, BatchHeader]]:
    """(position, size, header) of every v2 batch with a producer id from ``start_position``
    on. Small batches are scanned a chunk at a time and only those with a producer parsed, so
    plain batches cost no Python; a large batch is hopped over after reading its header, so
    its bytes are not read again. Stops at an incomplete batch; raises CorruptRecordError
    (file, position) at an impossible one."""
    position, end = start_position, segment.size
    while position + HEADER_SIZE <= end:
        head = segment.read_bytes(position, HEADER_SIZE)
        size = int.from_bytes(head[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
        if size >= HOP_BATCH_BYTES:
            if position + size > end:
                return   # incomplete batch at the end of the file
            if head[MAGIC_OFFSET] >= 2:
                header = BatchHeader.parse(head)
                if header.producer_id >= 0:
                    yield position, size, header
            position += size
            continue
        data = segment.read_bytes(position, min(REPLAY_CHUNK_BYTES, end - position))
        scan = scan_batches(data)
        for i in np.flatnonzero((scan.magics >= 2) & (scan.producer_ids >= 0)).tolist():
            at = int(scan.positions[i])
            yield position + at, int(scan.sizes[i]), BatchHeader.parse(data, at)
        position += scan.valid_bytes
        if scan.error is not None:
            raise CorruptRecordError(
                f"{segment.log_path}: {scan.error} at position {position}",
                path=str(segment.log_path), position=position)
        if len(scan.positions) == 0:
            return   # incomplete batch at the end of the file
