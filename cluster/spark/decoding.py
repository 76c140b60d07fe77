"""Stored record batches -> Arrow record batches, the rows of ``spark.read.format("strata")``.

Columns, as Spark's own Kafka source names them::

    topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, key BINARY, value BINARY,
    headers ARRAY<STRUCT<key: STRING, value: BINARY>>

With ``valueFormat=msgpack`` the ``value`` column is replaced by the fields of the value schema,
decoded from each value's msgpack map (a missing field, or a tombstone, gives nulls).

Only the columns asked for are built (``arrow_batches(columns=...)``, the names of the schema the
reader was given): a query with ``.schema("value BINARY")`` gathers no keys and no headers and
hands Spark one column, which is what it costs the JVM that counts (each column is copied into
Spark's rows whether the query uses it or not: the Python data source API has no column pruning).

Uncompressed v2 batches (what the Spark writer sends) are decoded column-wise: one
``walk_records`` kernel call per stored batch locates every field, and keys and values are copied
once, straight from the stored batches into the buffers of the Arrow batch that holds them
(``gather_at``, one call per stored batch and column); nothing per record runs in Python except
headers, when a record has some. An Arrow batch holds about ``rows_per_batch`` rows and about
``bytes_per_batch`` bytes of stored batches at most (a stored batch is never split). Compressed
and legacy batches go through ``RecordBatch.records()``. Every batch's CRC is checked before it
is decoded. Control batches are skipped; a timestamp of -1 (none) reads as null.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import msgpack
import numpy as np
import pyarrow as pa

from cluster.spark import kernels as spark_kernels
from cluster.spark.errors import ValueDecodeError
from storage import kernels
from storage.records import (
    HEADER_SIZE,
    MAGIC,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    Compression,
    RecordBatch,
    decode_headers,
)

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
FIXED_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
READ_DDL = ("topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, key BINARY, "
            "value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
DEFAULT_ROWS_PER_BATCH = 1 << 16
DEFAULT_BYTES_PER_BATCH = 64 << 20     # Arrow offsets are int32, and a batch is held whole

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class _Piece:
    """The wanted records of one stored batch, column-wise (``keys``/``values`` None when not
    asked for)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    keys: pa.Array | None
    values: pa.Array | None
    headers: list[list[Header]] | None     # None: no record of the piece has headers (or not
    #                                        asked for)


@dataclass(frozen=True)
class _Slices:
    """Binary values in place, not copied: ``buf[positions[i]:positions[i] + lengths[i]]``, a
    length of -1 for null."""

    buf: np.ndarray
    positions: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of_array(cls, array: pa.Array) -> _Slices:
        """The values of a ``binary`` array, over its own buffers."""
        _validity, offsets_buf, data = array.buffers()
        offsets = np.frombuffer(offsets_buf, np.int32, len(array) + 1, array.offset * 4)
        lengths = np.diff(offsets).astype(np.int64)
        if array.null_count:
            lengths[array.is_null().to_numpy(zero_copy_only=False)] = -1
        buf = np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
        return cls(buf, offsets[:-1].astype(np.int64), lengths)


@dataclass(frozen=True)
class _Located:
    """The wanted records of one stored batch with their keys and values located in it, not yet
    copied (``keys``/``values`` None when not asked for)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    keys: _Slices | None
    values: _Slices | None
    headers: list[list[Header]] | None
    stored_bytes: int


@dataclass(frozen=True)
class Wanted:
    """Which record fields a read builds: keys, values and headers cost a copy (or Python, for
    headers) per record; offsets and timestamps are always there (offsets bound the read)."""

    keys: bool = True
    values: bool = True
    headers: bool = True


ALL_FIELDS = Wanted()


def decode_batch(batch: RecordBatch, start: int, end: int,
                 wanted: Wanted = ALL_FIELDS) -> _Piece | None:
    """The records of ``batch`` with offsets in ``[start, end)``; None when there are none.
    ``wanted`` says which of keys, values and headers to build (the others are None).
    Checks as ``_locate``."""
    found = _locate(batch, start, end, wanted)
    if found is None:
        return None
    return _Piece(found.offsets, found.timestamps,
                  None if found.keys is None else _binary([found.keys]),
                  None if found.values is None else _binary([found.values]), found.headers)


def _locate(batch: RecordBatch, start: int, end: int, wanted: Wanted) -> _Located | None:
    """The records of ``batch`` with offsets in ``[start, end)``, keys and values located in
    the batch's buffer (which must not change while the result is used); None when there are
    none.

    The batch's CRC is checked first, before any header field is trusted: a damaged batch raises
    ``CorruptRecordError`` (naming its file and position), never altered rows. A batch of the
    Spark read (``read_partition_batches``) is a ``VerifiedBatch``, checked by the walk that read
    it, and is not checked again."""
    batch.ensure_valid()
    if batch.is_control or batch.records_count == 0 or batch.last_offset < start:
        return None
    header = batch.header
    if batch.magic != MAGIC or header.attributes & 0x07 != Compression.NONE:
        return _located_records(batch, start, end)
    count = header.records_count
    buf = kernels.as_input(batch.buffer)
    fields = np.empty((kernels.RECORD_ROWS, count), dtype=np.int64)
    _read, status, _where = kernels.walk_records(buf, HEADER_SIZE, len(buf), fields)
    if status != kernels.OK:
        return _located_records(batch, start, end)      # raises the typed CorruptRecordError
    offsets = header.base_offset + fields[kernels.REC_OFFSET_DELTA]
    if header.attributes & TIMESTAMP_TYPE_MASK:
        timestamps = np.full(count, header.max_timestamp, dtype=np.int64)
    else:
        timestamps = header.base_timestamp + fields[kernels.REC_TIMESTAMP_DELTA]
    if offsets[0] < start or offsets[-1] >= end:
        inside = (offsets >= start) & (offsets < end)
        fields = fields[:, inside]
        offsets, timestamps = offsets[inside], timestamps[inside]
        if not len(offsets):
            return None
    keys = _Slices(buf, fields[kernels.REC_KEY_POS], fields[kernels.REC_KEY_LEN]) \
        if wanted.keys else None
    values = _Slices(buf, fields[kernels.REC_VALUE_POS], fields[kernels.REC_VALUE_LEN]) \
        if wanted.values else None
    counts = fields[kernels.REC_HEADER_COUNT]
    headers = None
    if wanted.headers and counts.any():
        data = bytes(batch.buffer)
        headers = [_decode_headers(data, int(p), int(c)) if c else []
                   for p, c in zip(fields[kernels.REC_HEADERS_POS], counts)]
    return _Located(offsets, timestamps, keys, values, headers, len(buf))


def _located_records(batch: RecordBatch, start: int, end: int) -> _Located | None:
    piece = _decode_records(batch, start, end)
    if piece is None:
        return None
    return _Located(piece.offsets, piece.timestamps, _Slices.of_array(piece.keys),
                    _Slices.of_array(piece.values), piece.headers, batch.size)


def _decode_records(batch: RecordBatch, start: int, end: int) -> _Piece | None:
    records = [r for r in batch.records(check_crc=False) if start <= r.offset < end]  # checked
    if not records:
        return None
    headers = [list(r.headers) for r in records]
    return _Piece(np.fromiter((r.offset for r in records), np.int64, len(records)),
                  np.fromiter((r.timestamp for r in records), np.int64, len(records)),
                  pa.array([r.key for r in records], pa.binary()),
                  pa.array([r.value for r in records], pa.binary()),
                  headers if any(headers) else None)


def _binary(parts: Sequence[_Slices]) -> pa.Array:
    """One ``binary`` column of the values of ``parts``, in order: each byte copied once."""
    lengths = parts[0].lengths if len(parts) == 1 else np.concatenate([p.lengths for p in parts])
    out = np.empty(int(lengths[lengths > 0].sum()), dtype=np.uint8)
    offsets = np.empty(len(lengths) + 1, dtype=np.int32)
    row = cursor = 0
    for p in parts:
        cursor = spark_kernels.gather_at(p.buf, p.positions, p.lengths, out, offsets, row, cursor)
        row += len(p.lengths)
    offsets[row] = cursor
    nulls = lengths < 0
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(out)],
                                 null_count=null_count)


def _decode_headers(data: bytes, pos: int, count: int) -> list[Header]:
    return list(decode_headers(data, pos, count, errors="replace"))


# ---- values as msgpack maps ----------------------------------------------------------------------
class MsgpackValues:
    """Decodes binary values holding msgpack maps into one Arrow column per field."""

    def __init__(self, fields: list[tuple[str, pa.DataType]]) -> None:
        self.fields = fields

    def columns(self, values: pa.Array, topic: str, partition: int,
                offsets: np.ndarray) -> list[pa.Array]:
        rows = []
        for i, raw in enumerate(values.to_pylist()):
            if raw is None:
                rows.append(None)
                continue
            try:
                row = msgpack.unpackb(raw, timestamp=3)
            except (ValueError, msgpack.exceptions.UnpackException) as err:
                raise ValueDecodeError(
                    f"the value of {topic}-{partition} at offset {int(offsets[i])} is not "
                    f"msgpack: {err}", topic=topic, partition=partition,
                    offset=int(offsets[i])) from None
            if not isinstance(row, dict):
                raise ValueDecodeError(
                    f"the value of {topic}-{partition} at offset {int(offsets[i])} is a msgpack "
                    f"{type(row).__name__}, not a map", topic=topic, partition=partition,
                    offset=int(offsets[i]))
            rows.append(row)
        out = []
        for name, kind in self.fields:
            column = [None if r is None else r.get(name) for r in rows]
            try:
                out.append(pa.array(column, kind))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as err:
                raise ValueDecodeError(
                    f"field {name!r} of the msgpack values of {topic}-{partition} does not fit "
                    f"{kind}: {err}", topic=topic, partition=partition, field=name) from None
        return out


# ---- assembling Arrow batches ----------------------------------------------------------------------
def arrow_batches(batches: Iterable[RecordBatch], topic: str, partition: int, start: int,
                  end: int, *, values: MsgpackValues | None = None,
                  rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
                  columns: Sequence[str] | None = None,
                  bytes_per_batch: int = DEFAULT_BYTES_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of about ``rows_per_batch`` rows, cut sooner when the stored batches
    they hold reach ``bytes_per_batch`` bytes (one stored batch is never split), with ``columns``
    in that order (default: every column, ``FIXED_COLUMNS`` or, with ``values``, the msgpack
    fields in place of ``value``). Only what the columns need is decoded; keys and values are
    copied from the stored batches' buffers, which must not change meanwhile (storage reads
    hand out immutable bytes), straight into the Arrow batch's."""
    if columns is None:
        columns = [c for c in FIXED_COLUMNS if c != "value" or values is None]
        if values is not None:
            at = columns.index("headers")
            columns[at:at] = [name for name, _ in values.fields]
    columns = list(columns)
    unpacked = values is not None and any(c not in FIXED_COLUMNS for c in columns)
    wanted = Wanted(keys="key" in columns, values="value" in columns or unpacked,
                    headers="headers" in columns)
    pending: list[_Located] = []
    rows = stored = 0
    for batch in batches:
        piece = _locate(batch, start, end, wanted)
        if piece is None:
            continue
        pending.append(piece)
        rows += len(piece.offsets)
        stored += piece.stored_bytes
        if rows >= rows_per_batch or stored >= bytes_per_batch:
            yield _assemble(pending, topic, partition, values, columns)
            pending, rows, stored = [], 0, 0
    if pending:
        yield _assemble(pending, topic, partition, values, columns)


def _assemble(pieces: list[_Located], topic: str, partition: int,
              values: MsgpackValues | None, columns: list[str]) -> pa.RecordBatch:
    offsets = pieces[0].offsets if len(pieces) == 1 else np.concatenate(
        [p.offsets for p in pieces])
    n = len(offsets)
    built: dict[str, pa.Array] = {}
    gathered: list[pa.Array] = []            # the values, gathered once for value and msgpack

    def raw_values() -> pa.Array:
        if not gathered:
            gathered.append(_binary([p.values for p in pieces]))
        return gathered[0]

    for name in columns:
        if name == "topic":
            built[name] = pa.repeat(pa.scalar(topic, pa.string()), n)
        elif name == "partition":
            built[name] = pa.array(np.full(n, partition, dtype=np.int32))
        elif name == "offset":
            built[name] = pa.array(offsets)
        elif name == "timestamp":
            built[name] = _timestamps(np.concatenate([p.timestamps for p in pieces]))
        elif name == "key":
            built[name] = _binary([p.keys for p in pieces])
        elif name == "value":
            built[name] = raw_values()
        elif name == "headers":
            built[name] = _headers(pieces, n)
    if values is not None and any(name not in built for name in columns):
        unpacked = values.columns(raw_values(), topic, partition, offsets)
        built.update((name, column) for (name, _), column in zip(values.fields, unpacked))
    return pa.RecordBatch.from_arrays([built[name] for name in columns], names=columns)


def _timestamps(timestamps: np.ndarray) -> pa.Array:
    nulls = timestamps == NO_TIMESTAMP
    ts = pa.array(timestamps * 1000, pa.int64(), mask=nulls if nulls.any() else None)
    return ts.cast(TIMESTAMP_TYPE)


def _headers(pieces: list[_Located], n: int) -> pa.Array:
    if all(p.headers is None for p in pieces):
        empty = pa.array([], HEADERS_TYPE.value_type)
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), empty,
                                        type=HEADERS_TYPE)
    rows: list[list[dict[str, object]]] = []
    for p in pieces:
        if p.headers is None:
            rows.extend([] for _ in range(len(p.offsets)))
        else:
            rows.extend([{"key": k, "value": v} for k, v in h] for h in p.headers)
    return pa.array(rows, HEADERS_TYPE)
