"""Recovery of a segment file (Kafka's ``LogSegment.recover``): which bytes of a ``.log`` are kept.

Owns the checks recovery makes on a file it cannot trust:

- ``checked_batches``: the batches whose structure and checksum are valid (v2: CRC32C from the
  attributes on; a legacy magic 0/1 message: CRC32 from the magic byte on), read in chunks of
  ``RECOVERY_READ_BYTES`` into one reused buffer so memory stays bounded whatever a batch's
  size, with the header of each producer's batch when asked (the producer-state replay that
  rebuilds the ``.txnindex`` then needs no second read of the file);
- ``recovery_scan``: of those, the ones whose offsets fit between their neighbours (offsets lie
  outside the CRC), up to the first that does not (see below);
- ``RecoveryIndexer``: the offset- and time-index entries rebuilt for the batches kept, the
  ``SegmentOffsetOverflowError`` of a batch beyond the segment's 32-bit relative offsets, and the
  producers' batches kept (``producer_batches``), for the replay.

``LogSegment.recover`` truncates the file to what ``scan_file`` keeps;
``LogSegment.plan_recovery`` (the loader's dry run) only reports it (``plan_recovery``). The
loader's swap check reuses ``checked_batches``.

What is kept. Like Kafka, recovery judges a batch by its structure and CRC, never by the topic's
current ``max.message.bytes`` (which may have been lowered after larger batches were written).
Memory stays bounded all the same: a batch larger than ``RECOVERY_CHUNK_BYTES`` is checked piece
by piece. Offsets lie outside the CRC, so a batch is kept only when its offsets fit between its
neighbours: above the batch before it, below the batch after it and below the next segment's
base, when there is one. When a batch and the batch after it disagree, the one out of place is
cut: the later one if the earlier one follows its predecessor exactly, else the earlier one (a
flipped base offset). A batch overflowing the segment's 32-bit relative offsets (an old broker's
segment) raises ``SegmentOffsetOverflowError`` only once its neighbours agree with it, so a
flipped base offset is cut, never taken for an overflow to split. The very last batch of a
segment has no neighbour after it to vouch for its base offset: it is kept when it lies above the
batch before it (and below the next segment's base), whatever the gap, because a gap there is
normal in every log, compacted or not: a truncation inside a batch sets the log end to the target
(Kafka's ``LocalLog.truncateTo``) and the next append starts there, after the cut batch's first
offsets. Unless it overflows the segment's 32-bit relative offsets: an overflowing segment's
batches follow each other, so a last batch that overflows after a gap has a damaged base offset
and is cut. A flipped bit in that batch's base offset that keeps it above the batch before it and
within the segment's relative offsets is not detectable from the segment alone. (Both rules are
for the log's last segment; a closed segment's last batch is vouched for by the next segment's
base offset.)
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

import crc32c
import numpy as np

from storage.errors import SegmentOffsetOverflowError
from storage.index import TimestampOffset
from storage.kernels import LEGACY_CRC_OFFSET, LEGACY_TIMESTAMP_OFFSET
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BatchHeader,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    SIZE_OFFSET,
    INT32_MAX,
    scan_batches,
)

if TYPE_CHECKING:
    from storage.segment_indexes import SegmentIndexes

RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024   # the most recovery reads at once (a large batch's pieces)
# the read buffer of the scan: small enough that the CRC reads it back from the CPU cache (an
# 8 MiB buffer made the scan 20 % slower); a batch larger than it is checked streaming
RECOVERY_READ_BYTES = 2 * 1024 * 1024
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


class RecoveryPlan(NamedTuple):
    """What ``LogSegment.plan_recovery`` found: recovery keeps ``valid_bytes`` of ``file_size``."""

    file_size: int
    valid_bytes: int
    next_offset: int


class CheckedBatch(NamedTuple):
    """A batch that passed its structure and CRC checks: where it is and its offsets, and the
    v2 header of a batch with a producer id when the scan was asked for them (else None)."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int = MAGIC
    producer_header: BatchHeader | None = None


def checked_batches(fd: int, start: int, end: int, *,
                    producer_headers: bool = False) -> Iterator[CheckedBatch]:
    """The batches of file ``fd`` from ``start`` whose structure and CRC are valid, in order;
    stops at the first incomplete or invalid one (the caller compares the last position reached
    with ``end`` to know whether anything was left). Offsets are not checked here. With
    ``producer_headers`` each v2 batch with a producer id carries its parsed header (the others
    cost no Python beyond their ``CheckedBatch``).

    Memory is bounded by ``RECOVERY_CHUNK_BYTES``: batches are scanned in chunks of
    ``RECOVERY_READ_BYTES``, read into one buffer reused for every chunk (a fresh buffer per
    chunk costs a page fault per page, as much as the read itself), and a batch larger than a
    chunk (v2, or a legacy magic 0/1 message) is checked streaming (its header, then its
    checksum chained over pieces of at most ``RECOVERY_CHUNK_BYTES`` read with ``os.pread``),
    never read whole when larger. Nothing yielded refers to the buffer."""
    position = start
    buffer = memoryview(bytearray(max(0, min(RECOVERY_READ_BYTES, end - start))))
    while position + HEADER_SIZE_UP_TO_MAGIC <= end:
        data = buffer[:os.preadv(fd, [buffer[:min(RECOVERY_READ_BYTES, end - position)]],
                                 position)]
        scan = scan_batches(data, check_crc=True)
        if len(scan.positions):
            headers: list[BatchHeader | None] = [None] * len(scan.positions)
            if producer_headers:
                for i in np.flatnonzero((scan.magics >= MAGIC)
                                        & (scan.producer_ids >= 0)).tolist():
                    headers[i] = BatchHeader.parse(data, int(scan.positions[i]))
            for pos, size, base, last, max_ts, magic, header in zip(
                    scan.positions.tolist(), scan.sizes.tolist(), scan.base_offsets.tolist(),
                    scan.last_offsets.tolist(), scan.max_timestamps.tolist(),
                    scan.magics.tolist(), headers):
                yield CheckedBatch(position + pos, size, base, last, max_ts, magic, header)
            position += scan.valid_bytes
            if scan.error is not None:
                return
            continue
        if scan.error is not None or len(data) < LOG_OVERHEAD:
            return
        batch_size = int.from_bytes(data[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) \
            + LOG_OVERHEAD
        if batch_size <= len(data) or position + batch_size > end:
            return   # incomplete at the end of the file
        batch = _check_large_batch(fd, position, batch_size)
        if batch is None:
            return
        yield batch if producer_headers else batch._replace(producer_header=None)
        position += batch_size


def _check_large_batch(fd: int, position: int, size: int) -> CheckedBatch | None:
    """Check the batch of ``size`` bytes at ``position`` (larger than a recovery chunk) without
    holding it in memory: its header's structure, then its checksum streamed over
    ``RECOVERY_CHUNK_BYTES`` pieces (v2: CRC32C from the attributes to the end; a legacy magic 0/1
    message: CRC32 from the magic byte to the end). None when it is not a valid batch. A v2
    batch with a producer id carries its header."""
    header = os.pread(fd, HEADER_SIZE, position)
    magic = header[MAGIC_OFFSET] if len(header) > MAGIC_OFFSET else -1
    if magic == MAGIC and len(header) == HEADER_SIZE:
        fields = BATCH_HEADER.unpack(header)
        (base, _length, _epoch, _magic, crc, _attributes, last_delta, _base_ts, max_ts, pid,
         _pepoch, _seq, _count) = fields
        if _streamed_checksum(fd, position + ATTRIBUTES_OFFSET, position + size,
                              crc32c.crc32c) != crc:
            return None
        return CheckedBatch(position, size, base, base + last_delta, max_ts, MAGIC,
                            BatchHeader(*fields) if pid >= 0 else None)
    if magic in (0, 1) and len(header) >= LEGACY_TIMESTAMP_OFFSET + 8:
        offset = _INT64.unpack_from(header, 0)[0]
        crc = _UINT32.unpack_from(header, LEGACY_CRC_OFFSET)[0]
        max_ts = _INT64.unpack_from(header, LEGACY_TIMESTAMP_OFFSET)[0] if magic == 1 else -1
        if _streamed_checksum(fd, position + MAGIC_OFFSET, position + size, zlib.crc32) != crc:
            return None
        return CheckedBatch(position, size, offset, offset, max_ts, magic)
    return None


def _streamed_checksum(fd: int, start: int, stop: int,
                       update: Callable[..., int]) -> int | None:
    """``update`` (crc32c.crc32c or zlib.crc32) chained over ``[start, stop)`` of ``fd``, read
    in ``RECOVERY_CHUNK_BYTES`` pieces; None when the file ends early."""
    value = 0
    while start < stop:
        piece = os.pread(fd, min(RECOVERY_CHUNK_BYTES, stop - start), start)
        if not piece:
            return None
        value = update(piece, value)
        start += len(piece)
    return value


def recovery_scan(fd: int, file_size: int, base_offset: int, next_base_offset: int | None,
                  accept: Callable[[CheckedBatch, int], None], *,
                  producer_headers: bool = False) -> tuple[int, int]:
    """The batches ``LogSegment.recover`` keeps of the segment at ``base_offset`` open as ``fd``
    (see the module docstring), each passed to ``accept(batch, position)`` (with its producer
    header when ``producer_headers``: ``checked_batches``); returns (bytes kept, last offset kept
    or base - 1)."""
    valid = 0
    prev_last = base_offset - 1
    held: CheckedBatch | None = None     # accepted once the batch after it agrees
    for batch in checked_batches(fd, 0, file_size, producer_headers=producer_headers):
        if held is not None:
            if batch.base_offset > held.last_offset:
                accept(held, valid)
            elif held.base_offset == prev_last + 1:
                # the next batch's offsets are out of place, not the held one's (which
                # follows its predecessor exactly): keep the held batch, cut here
                accept(held, valid)
                valid += held.size
                prev_last = held.last_offset
                held = None
                break
            else:
                held = None              # out of place itself (a flipped base offset)
                break
            valid += held.size
            prev_last = held.last_offset
        if batch.base_offset <= prev_last or batch.last_offset < batch.base_offset or (
                next_base_offset is not None and batch.last_offset >= next_base_offset):
            held = None
            break
        held = batch
    if held is not None and next_base_offset is None and held.base_offset != prev_last + 1 \
            and held.last_offset - base_offset > INT32_MAX:
        # the log's last batch, after a gap, beyond the segment's relative offsets, with no
        # later segment to vouch for it: a gap is normal (a truncation inside a batch), an
        # overflow is normal (an old broker's segment), but at the end of a log an overflowing
        # segment's batches follow each other (only a cleaned one has gaps, and a later
        # segment always follows it): this base offset is damaged
        held = None
    if held is not None:                 # the last batch: nothing after it to disagree
        accept(held, valid)
        valid += held.size
        prev_last = held.last_offset
    return valid, prev_last


def check_relative_offset(log_path: Path, base_offset: int, batch: CheckedBatch,
                          position: int) -> None:
    """``SegmentOffsetOverflowError`` when ``batch`` (at ``position`` of ``log_path``) ends beyond
    the offsets the segment at ``base_offset`` can index relative to its base."""
    if not 0 <= batch.last_offset - base_offset <= INT32_MAX:
        raise SegmentOffsetOverflowError(
            f"{log_path}: the batch at position {position} ends at offset "
            f"{batch.last_offset}, beyond the segment's base {base_offset} + 2^31 - 1",
            path=str(log_path), position=position, offset=batch.last_offset)


class RecoveryIndexer:
    """The ``accept`` of ``recovery_scan`` for a real recovery: checks each kept batch's relative
    offset and adds an offset- and time-index entry every ``index_interval_bytes`` to the
    segment's (reset) ``indexes``. Afterwards ``max_timestamp`` / ``offset_of_max_timestamp`` are
    the largest timestamp kept and its offset, ``last_index_position`` the position of the last
    entry, and ``producer_batches`` the (position, size, header) of every kept batch that
    carried its producer header (a scan with ``producer_headers``), in order."""

    def __init__(self, indexes: SegmentIndexes, log_path: Path, base_offset: int,
                 index_interval_bytes: int) -> None:
        self._indexes = indexes
        self._log_path = log_path
        self._base_offset = base_offset
        self._index_interval_bytes = index_interval_bytes
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.last_index_position = 0
        self.producer_batches: list[tuple[int, int, BatchHeader]] = []

    def __call__(self, batch: CheckedBatch, position: int) -> None:
        """Index one batch that recovery keeps, at ``position`` (the bytes kept before it)."""
        check_relative_offset(self._log_path, self._base_offset, batch, position)
        if batch.producer_header is not None:
            self.producer_batches.append((position, batch.size, batch.producer_header))
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset
        if position - self.last_index_position > self._index_interval_bytes:
            self._indexes.append(batch.last_offset, position,
                                 TimestampOffset(self.max_timestamp,
                                                 self.offset_of_max_timestamp))
            self.last_index_position = position


def scan_file(log_path: Path, base_offset: int, next_base_offset: int | None,
              accept: Callable[[CheckedBatch, int], None], *,
              producer_headers: bool = False) -> RecoveryPlan:
    """Scan the ``.log`` at ``log_path`` of the segment at ``base_offset`` (``recovery_scan``,
    each kept batch passed to ``accept``, with its producer header when ``producer_headers``),
    writing nothing: what recovery keeps of it."""
    fd = os.open(log_path, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        valid, prev_last = recovery_scan(fd, file_size, base_offset, next_base_offset, accept,
                                         producer_headers=producer_headers)
    finally:
        os.close(fd)
    return RecoveryPlan(file_size, valid, prev_last + 1)


def plan_recovery(log_path: Path, base_offset: int,
                  next_base_offset: int | None) -> RecoveryPlan:
    """``LogSegment.plan_recovery``: what recovery would keep, nothing written."""
    return scan_file(log_path, base_offset, next_base_offset,
                     lambda batch, position: check_relative_offset(log_path, base_offset,
                                                                   batch, position))
