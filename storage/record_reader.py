"""Reading record batches (Kafka's DefaultRecordBatch and MemoryRecords, read side): one batch
(``RecordBatch``: header, checks, records), a buffer of batches (``iter_batches``) and the
vectorised header scan (``scan_batches``). Per-record work is in ``storage.kernels``."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import crc32c
import numpy as np

from storage import compression as compressors
from storage import kernels, legacy
from storage.errors import CorruptRecordError
from storage.kernel_twins import kernel_for
# the header layout and its offsets: storage.batch_layout (one definition)
from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    SIZE_OFFSET,
)
from storage.record_format import (
    BatchHeader,
    Compression,
    LEGACY_RECORD_OVERHEAD_V0,
    MAGIC,
    MAX_DECOMPRESSED_BYTES,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
    _compression,
    _INT32,
    _MIN_BATCH_SIZE,
    _SCAN_CHUNK,
    batch_location,
    byte_view,
    decode_varint,
)


# ---- reading one batch -------------------------------------------------------------------------
class RecordBatch:
    """One batch over a slice of a buffer, not copied.

    For magic 0/1 (legacy, read-only) the same interface with a synthesized header: its
    ``base_offset`` and ``records_count`` decompress a wrapper (as Kafka's legacy batches do), while
    ``last_offset``, ``max_timestamp``, ``compression`` and ``size`` read the entry alone.
    May be shared between threads: its only mutable state is that lazily computed legacy header.
    """

    __slots__ = ("_buffer", "_position", "_path", "_header", "_message")

    def __init__(self, buffer: memoryview | bytes, position: int = -1,
                 path: Path | None = None) -> None:
        view = byte_view(buffer)
        self._position = position
        self._path = path
        self._message: legacy.LegacyMessage | None = None
        self._header: BatchHeader | None = None
        if len(view) < HEADER_SIZE_UP_TO_MAGIC:
            raise self._corrupt(f"only {len(view)} bytes, fewer than {HEADER_SIZE_UP_TO_MAGIC}")
        (length,) = _INT32.unpack_from(view, SIZE_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise self._corrupt(f"batch length {length} is below the minimum "
                                f"{LEGACY_RECORD_OVERHEAD_V0}")
        size = length + LOG_OVERHEAD
        if size > len(view):
            raise self._corrupt(f"batch of {size} bytes is truncated to {len(view)}")
        self._buffer = view[:size]
        magic = view[MAGIC_OFFSET]
        if magic == MAGIC:
            if size < HEADER_SIZE:
                raise self._corrupt(f"v2 batch of {size} bytes is smaller than its "
                                    f"{HEADER_SIZE}-byte header")
            self._header = BatchHeader(*BATCH_HEADER.unpack_from(view, 0))
        elif magic in (0, 1):
            self._message = legacy.read_message(self._buffer, 0, path=path,
                                                base_position=max(position, 0))
        else:
            raise self._corrupt(f"unknown magic {magic}")

    def _corrupt(self, problem: str, **fields: object) -> CorruptRecordError:
        return CorruptRecordError(f"{batch_location(self._path, self._position)}: {problem}",
                                  path=self._path, position=self._position, **fields)

    # -- header fields --
    @property
    def header(self) -> BatchHeader:
        if self._header is None:
            self._header = self._legacy_header()
        return self._header

    def _legacy_header(self) -> BatchHeader:
        message = self._message
        assert message is not None
        return BatchHeader.of_legacy(message, path=self._path, position=self._position)

    @property
    def magic(self) -> int:
        return self._buffer[MAGIC_OFFSET]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        if self._message is not None:
            return self._message.offset
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size(self) -> int:
        return len(self._buffer)

    @property
    def max_timestamp(self) -> int:
        if self._message is not None:
            return self._message.timestamp
        return self.header.max_timestamp

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def compression(self) -> Compression:
        if self._message is not None:
            return _compression(self._message.codec, self._message.offset)
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        if self._message is not None:
            return TimestampType(self._message.timestamp_type)
        return self.header.timestamp_type

    @property
    def is_control(self) -> bool:
        return self._message is None and self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self._message is None and self.header.is_transactional

    @property
    def producer_id(self) -> int:
        return NO_PRODUCER_ID if self._message is not None else self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH if self._message is not None else self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return NO_SEQUENCE if self._message is not None else self.header.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        if self._message is not None:
            return NO_PARTITION_LEADER_EPOCH
        return self.header.partition_leader_epoch

    @property
    def delete_horizon_ms(self) -> int | None:
        return None if self._message is not None else self.header.delete_horizon_ms

    @property
    def position(self) -> int:
        return self._position

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def buffer(self) -> memoryview:
        return self._buffer

    # -- checks --
    def stored_crc(self) -> int:
        return self._message.crc if self._message is not None else self.header.crc

    def compute_crc(self) -> int:
        """CRC32C of attributes..end for v2; zlib CRC32 of magic..end for magic 0/1."""
        if self._message is not None:
            return zlib.crc32(self._buffer[MAGIC_OFFSET:])
        return crc32c.crc32c(self._buffer[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.stored_crc()

    def ensure_valid(self) -> None:
        """Raise ``CorruptRecordError`` on a CRC mismatch. Its fields: ``path``, ``position`` (of
        the batch in its file), ``base_offset`` and ``offset`` (the batch's last offset) as the
        header claims them, ``stored_crc`` and ``computed_crc``. One CRC call over a view, no
        copy."""
        stored, computed = self.stored_crc(), self.compute_crc()
        if stored != computed:
            base = self._header.base_offset if self._header is not None else self.last_offset
            raise self._corrupt(
                f"CRC mismatch for the batch at offsets {base}..{self.last_offset} (stored crc "
                f"{stored:#010x}, computed crc {computed:#010x})", base_offset=base,
                offset=self.last_offset, stored_crc=stored, computed_crc=computed)

    # -- records --
    def records(self, *, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
                check_crc: bool = True) -> list[Record]:
        """Every record, decompressed, with absolute offsets, effective timestamps (the batch's
        maxTimestamp under LogAppendTime) and decoded headers. Control records come back raw.

        The batch's CRC is checked first (``ensure_valid``), as Kafka's consumers do with
        ``check.crcs=true``: a damaged batch raises ``CorruptRecordError``, never altered records.
        ``check_crc=False`` is for tools that report damage themselves (``dump-log``)."""
        if check_crc:
            self.ensure_valid()
        if self._message is not None:
            return [Record(key, value, timestamp, (), offset) for offset, timestamp, key, value
                    in legacy.decode(self._message, max_decompressed_bytes=max_decompressed_bytes,
                                     path=self._path, position=self._position)]
        header = self.header
        data = self._records_section(header, max_decompressed_bytes)
        count = header.records_count
        if count == 0 and not data:
            return []
        fields = self._walk(data, count)
        return _materialize(data, fields, header)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def check_records(self, *, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> None:
        """Decode the records as ``records`` does (decompressing, walking every record's fields)
        without building them: raises the ``CorruptRecordError`` a reader would meet. About 40
        times faster than ``records`` for a check that keeps nothing."""
        if self._message is not None:
            self.records(max_decompressed_bytes=max_decompressed_bytes)
            return
        header = self.header
        data = self._records_section(header, max_decompressed_bytes)
        if header.records_count or data:
            self._walk(data, header.records_count)

    def _records_section(self, header: BatchHeader, max_decompressed_bytes: int) -> bytes:
        count = header.records_count
        if count < 0:
            raise self._corrupt(f"negative records count {count}", base_offset=header.base_offset)
        body = self._buffer[HEADER_SIZE:]
        codec = _compression(header.attributes, header.base_offset)
        if codec == Compression.NONE or (count == 0 and not body):
            return bytes(body)
        try:
            return compressors.decompress(codec, body, max_size=max_decompressed_bytes)
        except CorruptRecordError as err:
            raise self._corrupt(f"base offset {header.base_offset}: {err.message}",
                                base_offset=header.base_offset) from err

    def _walk(self, data: bytes, count: int) -> np.ndarray:
        if count > max_records_in(len(data)):
            raise self._corrupt(f"records count {count} cannot fit in {len(data)} bytes",
                                base_offset=self.header.base_offset)
        fields = np.empty((kernels.RECORD_ROWS, count), dtype=np.int64)
        walk = kernel_for(kernels.walk_records, len(data))
        read, status, where = walk(kernels.as_input(data), 0, len(data), fields)
        if status != kernels.OK:
            raise self._corrupt(
                f"base offset {self.header.base_offset}, record {read} at byte {where} of the "
                f"records: {RECORD_ERRORS[status]}", base_offset=self.header.base_offset,
                record_index=read)
        return fields

    def __repr__(self) -> str:
        return (f"RecordBatch(magic={self.magic}, last_offset={self.last_offset}, "
                f"size={self.size}, position={self._position})")


def max_records_in(size: int) -> int:
    """The most v2 records ``size`` bytes of records can hold (each takes at least
    ``kernels.MIN_RECORD_SIZE`` bytes): every reader checks a batch's records count against it
    before allocating per-record tables, so a forged count cannot claim memory."""
    return max(size, 0) // kernels.MIN_RECORD_SIZE


RECORD_ERRORS = {
    kernels.ERR_RECORD_LENGTH: "record length is unreadable, negative or past the end",
    kernels.ERR_VARINT: "a varint is longer than allowed",
    kernels.ERR_RECORD_OVERFLOW: "a field runs past the record's length",
    kernels.ERR_KEY_LENGTH: "key length is below -1",
    kernels.ERR_VALUE_LENGTH: "value length is below -1",
    kernels.ERR_HEADER_COUNT: "header count is negative or larger than the bytes left",
    kernels.ERR_HEADER_KEY_LENGTH: "header key length is negative",
    kernels.ERR_HEADER_VALUE_LENGTH: "header value length is below -1",
    kernels.ERR_RECORD_SIZE: "record fields do not add up to the record length",
    kernels.ERR_TRAILING_BYTES: "bytes remain after the declared number of records",
}


def _materialize(data: bytes, fields: np.ndarray, header: BatchHeader) -> list[Record]:
    (offset_deltas, ts_deltas, key_pos, key_len, value_pos, value_len, headers_pos,
     header_count) = fields[:kernels.REC_START].tolist()
    base_offset = header.base_offset
    if header.attributes & TIMESTAMP_TYPE_MASK:
        timestamps = [header.max_timestamp] * len(offset_deltas)
    else:
        base_timestamp = header.base_timestamp
        timestamps = [base_timestamp + d for d in ts_deltas]
    return [
        Record(None if kl < 0 else data[kp:kp + kl], None if vl < 0 else data[vp:vp + vl], ts,
               decode_headers(data, hp, hc) if hc else (), base_offset + od)
        for od, ts, kp, kl, vp, vl, hp, hc in zip(offset_deltas, timestamps, key_pos, key_len,
                                                  value_pos, value_len, headers_pos, header_count)
    ]


def decode_headers(data: bytes, pos: int, count: int, errors: str = "surrogateescape"
                   ) -> tuple[tuple[str, bytes | None], ...]:
    """``count`` record headers at ``pos``, already bounds-checked by the kernel. Keys decode with
    ``surrogateescape`` by default so that any bytes round-trip through a rebuild unchanged
    (``errors="replace"`` for display and Arrow columns)."""
    headers = []
    for _ in range(count):
        key_len, pos = decode_varint(data, pos)
        key = data[pos:pos + key_len].decode("utf-8", errors)
        pos += key_len
        value_len, pos = decode_varint(data, pos)
        if value_len < 0:
            headers.append((key, None))
        else:
            headers.append((key, data[pos:pos + value_len]))
            pos += value_len
    return tuple(headers)


# ---- walking a buffer of batches ---------------------------------------------------------------
def iter_batches(buf: bytes | memoryview, start: int = 0, *, path: Path | None = None,
                 base_position: int = 0) -> Iterator[RecordBatch]:
    """The batches of ``buf[start:]`` by Kafka's ``FileLogInputStream`` rules: stop, without error,
    when at most 17 bytes remain or the next batch is incomplete; raise ``CorruptRecordError``
    (naming ``path`` and ``base_position + pos``) when a batchLength is below 14, or a complete
    batch is not a batch (unknown magic, v2 smaller than its header)."""
    view = byte_view(buf)
    end = len(view)
    pos = start
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        (length,) = _INT32.unpack_from(view, pos + SIZE_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            where = base_position + pos
            raise CorruptRecordError(
                f"{batch_location(path, where)}: batch length {length} is below the minimum "
                f"{LEGACY_RECORD_OVERHEAD_V0}", path=path, position=where)
        size = length + LOG_OVERHEAD
        if size > end - pos:
            return
        yield RecordBatch(view[pos:pos + size], base_position + pos, path)
        pos += size


@dataclass(frozen=True, eq=False)
class BatchScan:
    """Header fields of every complete batch found by ``scan_batches``, one array element per batch.

    ``positions`` and ``error_position`` are indices into the scanned buffer; ``valid_bytes`` counts
    from ``start`` to the end of the last complete batch. ``error`` says why the scan stopped before
    the data ran out (an impossible batch, or a CRC mismatch with ``check_crc``), else ``None``.
    Legacy entries report their offset field as base and last offset and -1 records for a
    compressed wrapper. ``crcs``, ``partition_leader_epochs`` and the producer fields are extras.
    """

    positions: np.ndarray
    sizes: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    magics: np.ndarray
    records_counts: np.ndarray
    attributes: np.ndarray
    valid_bytes: int
    error: str | None
    error_position: int
    crcs: np.ndarray
    partition_leader_epochs: np.ndarray
    producer_ids: np.ndarray
    producer_epochs: np.ndarray
    base_sequences: np.ndarray
    problem: str | None = None      # ``error`` without its position, for callers that add their own

    def __len__(self) -> int:
        return len(self.positions)


_SCAN_MESSAGES = {
    kernels.ERR_BATCH_SIZE: "batch length below the minimum record overhead of 14",
    kernels.ERR_MAGIC: "unknown magic byte",
    kernels.ERR_V2_SIZE: "v2 batch smaller than its 61-byte header",
    kernels.ERR_LEGACY_SIZE: "magic 1 message smaller than its 22-byte overhead",
}


_SCAN_DTYPES = (
    (kernels.ROW_POSITION, np.int64), (kernels.ROW_SIZE, np.int64),
    (kernels.ROW_BASE_OFFSET, np.int64), (kernels.ROW_LAST_OFFSET, np.int64),
    (kernels.ROW_MAX_TIMESTAMP, np.int64), (kernels.ROW_MAGIC, np.int8),
    (kernels.ROW_RECORDS_COUNT, np.int32), (kernels.ROW_ATTRIBUTES, np.int16),
    (kernels.ROW_CRC, np.uint32), (kernels.ROW_LEADER_EPOCH, np.int32),
    (kernels.ROW_PRODUCER_ID, np.int64), (kernels.ROW_PRODUCER_EPOCH, np.int16),
    (kernels.ROW_BASE_SEQUENCE, np.int32),
)


def scan_batches(buf: np.ndarray | bytes | memoryview, start: int = 0, end: int | None = None, *,
                 check_crc: bool = False) -> BatchScan:
    """Walk the batch headers of ``buf[start:end]`` in a numba kernel (recovery, index rebuild,
    segment reads). Stops at the first incomplete batch (no error) or impossible batch (``error``
    set, never raised); with ``check_crc`` also at the first batch whose CRC does not match."""
    data = kernels.as_input(buf)
    end = len(data) if end is None else end
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"scan range [{start}, {end}) is outside the buffer of {len(data)} bytes")
    capacity = max(1, min((end - start) // _MIN_BATCH_SIZE + 1, _SCAN_CHUNK))
    tables = []
    pos = start
    scan = kernel_for(kernels.scan_batch_headers, end - start)
    while True:
        table = np.empty((kernels.SCAN_ROWS, capacity), dtype=np.int64)
        count, pos, status = scan(data, pos, end, table)
        tables.append(table[:, :count])
        if status != kernels.FULL:
            break
    table = tables[0] if len(tables) == 1 else np.concatenate(tables, axis=1)
    problem = None if status == kernels.OK else _SCAN_MESSAGES[status]
    error_position = -1 if status == kernels.OK else pos
    if check_crc and table.shape[1]:
        bad = _first_bad_crc(data, table)
        if bad is not None:
            index, stored, computed = bad
            error_position = int(table[kernels.ROW_POSITION, index])
            problem = (f"CRC mismatch for the batch at base offset "
                       f"{int(table[kernels.ROW_BASE_OFFSET, index])} (stored crc {stored:#010x}, "
                       f"computed crc {computed:#010x})")
            table = table[:, :index]
    error = None if problem is None else f"{problem} at position {error_position}"
    # int64 row views of the kernel's table: no copy per column (this runs once per read chunk)
    columns = [table[row] for row, _dtype in _SCAN_DTYPES]
    count = table.shape[1]
    valid_bytes = 0 if count == 0 else int(table[kernels.ROW_POSITION, count - 1]
                                           + table[kernels.ROW_SIZE, count - 1]) - start
    (positions, sizes, base_offsets, last_offsets, max_timestamps, magics, records_counts,
     attributes, crcs, leader_epochs, producer_ids, producer_epochs, base_sequences) = columns
    return BatchScan(positions, sizes, base_offsets, last_offsets, max_timestamps, magics,
                     records_counts, attributes, valid_bytes, error, error_position, crcs,
                     leader_epochs, producer_ids, producer_epochs, base_sequences, problem)


def _first_bad_crc(data: np.ndarray, table: np.ndarray) -> tuple[int, int, int] | None:
    view = memoryview(data)
    rows = zip(table[kernels.ROW_POSITION].tolist(), table[kernels.ROW_SIZE].tolist(),
               table[kernels.ROW_MAGIC].tolist(), table[kernels.ROW_CRC].tolist())
    for index, (pos, size, magic, stored) in enumerate(rows):
        computed = batch_crc(view, pos, size, magic)
        if computed != stored:
            return index, stored, computed
    return None


def batch_crc(view: memoryview, position: int, size: int, magic: int) -> int:
    """The CRC the batch of ``size`` bytes at ``position`` of ``view`` should store: CRC32C of
    attributes..end for v2, zlib CRC32 of magic..end for magic 0/1. One call over a view, no
    copy."""
    if magic == MAGIC:
        return crc32c.crc32c(view[position + ATTRIBUTES_OFFSET:position + size])
    return zlib.crc32(view[position + MAGIC_OFFSET:position + size])
