"""Reading a segment for a clean: chunks of whole batches read through the cleaner's I/O buffer
(grown for a batch larger than it, as Kafka's growBuffersOrFail), each batch's header, and the
per-record arrays of a batch (decompressed within the read path's limits). This module owns the
rule that anything it cannot read is a ``CorruptSegmentError`` naming the file, the position, the
offset and the partition; the clean then stops and the segment is left as it is. "Cannot read"
covers the offsets too, which lie outside a batch's CRC: they are checked as the readers' verified
walk checks them (``storage.segment_read.walk_batches(verify=True)``), so the cleaner never writes
a batch at offsets no reader would accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from cleaner.errors import CorruptSegmentError
from cleaner.kernels import first_misplaced_batch
from cleaner.throttler import Throttler
from storage import compression, kernels
from storage.batch_layout import SIZE_OFFSET
from storage.errors import CorruptRecordError
from storage.files import TopicPartition
from storage.log import Log
from storage.records import (HEADER_SIZE, LOG_OVERHEAD, MAX_DECOMPRESSED_BYTES, BatchHeader,
                             BatchScan, Compression, RecordBatch, max_records_in,
                             parse_control_record, scan_batches)
from storage.segment import LogSegment


INT32_MAX = 2**31 - 1


def following_bases(segments: Sequence[LogSegment]) -> dict[int, int]:
    """Base offset of each segment -> the base offset of the segment after it (the last segment,
    the active one, has none): the bound below which a segment's offsets must end."""
    return {s.base_offset: n.base_offset for s, n in zip(segments, segments[1:])}


def read_chunks(log: Log, segment: LogSegment, position: int, *, buffer_size: int,
                max_message_size: int, check_done: Callable[[TopicPartition], None],
                throttler: Throttler, check_crc: bool = True,
                following: Mapping[int, int] | None = None
                ) -> Iterator[tuple[int, bytes, BatchScan]]:
    """Read ``segment`` from ``position`` in I/O-buffer-sized chunks of whole batches, growing
    the buffer for a batch larger than it (up to max.message.bytes, then to the batch).

    With ``check_crc`` (every pass that uses records) each chunk's batches are verified before
    the chunk is yielded, as the readers' verified walk verifies them: the CRC, and the offsets
    outside it (each base offset above the last offset of the batch before it, the segment's
    base offset - 1 for the first one read; each last offset at or above its base offset, below
    the next segment's base offset ``following[segment.base_offset]`` when known, and within
    the segment's 32-bit relative offsets). A batch that fails a check, or an impossible batch,
    raises ``CorruptSegmentError``."""
    max_size = max(log.config.max_message_bytes, max_message_size)
    end = segment.size
    previous_last = segment.base_offset - 1
    upper = segment.base_offset + INT32_MAX
    if following is not None and segment.base_offset in following:
        upper = min(upper, following[segment.base_offset] - 1)
    while position < end:
        check_done(log.topic_partition)
        wanted = min(buffer_size, end - position)
        chunk = segment.read_bytes(position, wanted)
        if len(chunk) < wanted:
            raise corrupt(log, segment, position, claimed_offset(chunk, 0),
                          f"the file ends at byte {position + len(chunk)}, before the "
                          f"segment's {end} bytes")
        throttler.maybe_throttle(len(chunk))
        scan = scan_batches(chunk, check_crc=check_crc)
        if scan.error is not None and len(scan.positions) == 0:
            bad = max(scan.error_position, 0)
            raise corrupt(log, segment, position + bad, claimed_offset(chunk, bad),
                          scan.error.replace(f"at position {scan.error_position}",
                                             "").strip())
        if len(scan.positions) == 0:
            if len(chunk) < LOG_OVERHEAD:
                return
            batch_size = int.from_bytes(chunk[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
            if position + batch_size > end:
                raise corrupt(log, segment, position, claimed_offset(chunk, 0),
                              f"the batch claims {batch_size} bytes but only "
                              f"{end - position} remain in the segment")
            if buffer_size >= batch_size:      # cannot happen after a full read
                raise corrupt(log, segment, position, claimed_offset(chunk, 0),
                              f"a batch of {batch_size} bytes is not whole in "
                              f"{len(chunk)} bytes read")
            # Kafka's growBuffersOrFail: double up to max.message.bytes, then fit the batch
            buffer_size = min(buffer_size * 2, max_size) if buffer_size < max_size else batch_size
            continue
        if check_crc:
            previous_last = check_offsets(log, segment, position, scan, previous_last, upper)
        yield position, chunk, scan
        position += scan.valid_bytes


@dataclass(slots=True)
class Records:
    """The per-record arrays of one batch (decompressed when needed)."""

    buf: np.ndarray
    count: int
    base_offset: int
    rec_start: np.ndarray
    rec_end: np.ndarray
    ts_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_len: np.ndarray

    def offsets(self) -> np.ndarray:
        return self.base_offset + self.offset_delta

    @classmethod
    def read(cls, chunk: bytes, pos: int, size: int, header: BatchHeader, log: Log,
             segment: LogSegment, file_position: int) -> Records:
        """Decode the batch at ``chunk[pos:pos + size]`` (at ``file_position`` of ``segment``)
        within the read path's limits: at most ``MAX_DECOMPRESSED_BYTES`` decompressed, a records
        count no larger than its bytes can hold. Any failure is a ``CorruptSegmentError``."""
        try:
            return cls._decode(chunk, pos, size, header)
        except CorruptRecordError as err:
            raise corrupt(log, segment, file_position, header.base_offset, err.message) from err

    @classmethod
    def _decode(cls, chunk: bytes, pos: int, size: int, header: BatchHeader) -> Records:
        if header.magic < 2:
            return cls._legacy(chunk[pos:pos + size])
        count = header.records_count
        if header.compression == Compression.NONE:
            buf = np.frombuffer(chunk, dtype=np.uint8)
            start, end = pos + HEADER_SIZE, pos + size
        else:
            body = compression.decompress(Compression(header.compression),
                                          chunk[pos + HEADER_SIZE:pos + size],
                                          max_size=MAX_DECOMPRESSED_BYTES)
            buf = np.frombuffer(body, dtype=np.uint8)
            start, end = 0, len(body)
        if not 0 <= count <= max_records_in(end - start):
            raise CorruptRecordError(f"records count {count} cannot fit in the batch's "
                                     f"{end - start} bytes of records")
        table = np.empty((kernels.RECORD_ROWS, count), dtype=np.int64)
        read, status, where = kernels.walk_records(buf, start, end, table)
        if status != kernels.OK:
            raise CorruptRecordError(
                f"malformed record {read} at byte {where - start} of the records")
        return cls(buf, count, header.base_offset, table[kernels.REC_START],
                   table[kernels.REC_END], table[kernels.REC_TIMESTAMP_DELTA],
                   table[kernels.REC_OFFSET_DELTA], table[kernels.REC_KEY_POS],
                   table[kernels.REC_KEY_LEN], table[kernels.REC_VALUE_LEN])

    @classmethod
    def _legacy(cls, raw: bytes) -> Records:
        """Legacy (magic 0/1) entries: decode through the reader into contiguous key arrays."""
        records = RecordBatch(raw).records()
        keys = [r.key or b"" for r in records]
        buf = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8)
        lengths = np.array([len(r.key) if r.key is not None else -1 for r in records], np.int64)
        starts = np.concatenate([[0], np.cumsum([len(k) for k in keys])[:-1]]).astype(np.int64) \
            if records else np.zeros(0, np.int64)
        offsets = np.array([r.offset for r in records], dtype=np.int64)
        base = int(offsets[0]) if records else 0
        values = np.array([len(r.value) if r.value is not None else -1 for r in records], np.int64)
        zeros = np.zeros(len(records), dtype=np.int64)
        return cls(buf, len(records), base, zeros, zeros, zeros, offsets - base, starts, lengths,
                   values)


def control_type(chunk: bytes, pos: int, size: int, header: BatchHeader) -> int | None:
    """The type of a control batch's first record (``ControlType.ABORT``/``COMMIT`` or another
    int), or None for an empty control batch."""
    if header.records_count <= 0:
        return None
    records = RecordBatch(chunk[pos:pos + size]).records()
    return parse_control_record(records[0])[0] if records else None


def claimed_offset(chunk: bytes, pos: int) -> int:
    """The base offset a (possibly damaged) batch header at ``chunk[pos:]`` claims, or -1."""
    return int.from_bytes(chunk[pos:pos + 8], "big", signed=True) if len(chunk) >= pos + 8 else -1


def check_offsets(log: Log, segment: LogSegment, position: int, scan: BatchScan,
                  previous_last: int, upper: int) -> int:
    """Check the offsets of the batches of ``scan`` (a chunk read at ``position`` of
    ``segment``) in order, the first against ``previous_last``; returns the last offset of the
    chunk's last batch. A batch out of place is a ``CorruptSegmentError`` at its position (a
    flipped base offset shows either in its own batch or, when it moved the batch's offsets
    up, in the batch after it, which the message then names with the batch before it)."""
    bases, lasts = scan.base_offsets, scan.last_offsets
    if len(bases) == 0:
        return previous_last
    i = int(first_misplaced_batch(bases, lasts, previous_last, upper))
    if i < 0:
        return int(lasts[-1])
    before = previous_last if i == 0 else int(lasts[i - 1])
    base, last, at = int(bases[i]), int(lasts[i]), position + int(scan.positions[i])
    if base <= before:
        where = (f"the batch before it, at position {position + int(scan.positions[i - 1])}, "
                 f"ends" if i > 0 else "the batches before it end")
        why = f"its base offset is not above {before}, where {where}"
    elif last < base:
        why = "its last offset is below its base offset"
    else:
        why = f"its last offset is beyond {upper}, the last offset this segment may hold"
    raise corrupt(log, segment, at, base,
                  f"the batch at offsets {base}..{last} is out of place: {why} (offsets lie "
                  f"outside the CRC, so a damaged offset passes it)")


def corrupt(log: Log, segment: LogSegment, position: int, offset: int,
            problem: str) -> CorruptSegmentError:
    return CorruptSegmentError(
        f"{segment.log_path}: corrupt batch at position {position} (offset {offset}) of "
        f"partition {log.name}: {problem}; the clean stops and the segment is left as it is",
        path=str(segment.log_path), position=position, offset=offset, partition=log.name)


def batch_header(chunk: bytes, pos: int, size: int, magic: int, log: Log, segment: LogSegment,
                 file_position: int) -> BatchHeader:
    """The batch's header; a legacy entry's is read through its (bounded) wrapper, and a wrapper
    that cannot be read is a ``CorruptSegmentError``."""
    if magic >= 2:
        return BatchHeader.parse(chunk, pos)
    try:
        return RecordBatch(chunk[pos:pos + size], file_position, segment.log_path).header
    except CorruptRecordError as err:
        raise corrupt(log, segment, file_position, claimed_offset(chunk, pos),
                      err.message) from err


__all__ = ["Records", "batch_header", "check_offsets", "claimed_offset", "control_type",
           "corrupt", "following_bases", "read_chunks"]
