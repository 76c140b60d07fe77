"""Numba kernels of the record format: all of its per-record and per-batch loops.

Every kernel is ``@jit.njit(cache=True, nogil=True)`` (numba's ``njit``, applied at the first
call of any kernel of the process: ``storage.jit``) and works on 1-D ``uint8`` arrays:

* ``scan_batch_headers``  walk the batch headers of a segment (recovery, index rebuild, reads)
* ``walk_records``        locate every field of every record of one v2 batch (decode)
* ``validate_records``    check every record of one v2 batch without materialising it
* ``validate_batch``      check a producer batch, header and records, in one call (append)
* ``encode_records``      write the record bodies of one v2 batch from columns (build)
* ``encode_records_at``   the same from slices anywhere in their buffers (the Spark writer)
* ``read_varint`` / ``read_varlong`` / ``write_varint`` / ``write_varlong``  zig-zag varints

(``encode_records`` and ``encode_records_at`` live in ``storage.kernel_encode``, the primitives in
``storage.kernel_primitives``; this module re-exports both.)

Conventions, so that each kernel compiles once and the on-disk cache is reused:

* input byte buffers are C-contiguous, **read-only** ``uint8`` arrays (``as_input`` makes one from
  any buffer; ``np.frombuffer`` on ``bytes`` is already read-only);
* output arrays are fresh, writable, C-contiguous ``int64``/``uint8`` arrays;
* scalar arguments are Python ``int``/``bool`` (int64/boolean in numba).

Kernels never raise: they return a status code (``OK`` or one of the ``ERR_*`` codes below) and
the position of the problem; ``storage.records`` turns codes into typed errors. Every length read
from the bytes is checked against the end of its enclosing structure before it is used, so a
corrupt length can never make a kernel read out of bounds or loop without progress.

``warm_up()`` loads numba and compiles (or loads from the numba cache) every kernel with the types
above; call it once at process start so that no compile happens on a latency-critical path.
"""

from __future__ import annotations

import numpy as np

from storage import batch_layout as layout
from storage import jit
from storage.batch_layout import (
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_RECORD_OVERHEAD,
)
from storage.kernel_encode import encode_records, encode_records_at
from storage.kernel_primitives import (  # noqa: F401 - re-exported: callers use kernels.<name>
    _u8,
    read_int16,
    read_int32,
    read_int64,
    read_uint32,
    read_varint,
    read_varlong,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)

# ---- byte layout: storage.batch_layout's (the one definition), under the kernels' names -------
V2_HEADER_SIZE = layout.HEADER_SIZE                              # 61
V2_LENGTH_OFFSET = layout.SIZE_OFFSET                            # 8
V2_LEADER_EPOCH_OFFSET = layout.PARTITION_LEADER_EPOCH_OFFSET    # 12
V2_CRC_OFFSET = layout.CRC_OFFSET                                # 17
V2_ATTRIBUTES_OFFSET = layout.ATTRIBUTES_OFFSET                  # 21
V2_LAST_OFFSET_DELTA_OFFSET = layout.LAST_OFFSET_DELTA_OFFSET    # 23
V2_BASE_TIMESTAMP_OFFSET = layout.BASE_TIMESTAMP_OFFSET          # 27
V2_MAX_TIMESTAMP_OFFSET = layout.MAX_TIMESTAMP_OFFSET            # 35
V2_PRODUCER_ID_OFFSET = layout.PRODUCER_ID_OFFSET                # 43
V2_PRODUCER_EPOCH_OFFSET = layout.PRODUCER_EPOCH_OFFSET          # 51
V2_BASE_SEQUENCE_OFFSET = layout.BASE_SEQUENCE_OFFSET            # 53
V2_RECORDS_COUNT_OFFSET = layout.RECORDS_COUNT_OFFSET            # 57
# the smallest possible record: length, attributes, timestampDelta, offsetDelta, key -1, value -1,
# headerCount 0, one byte each
MIN_RECORD_SIZE = 7

# ---- status codes ------------------------------------------------------------------------------
OK = 0
FULL = 1                     # scan: output table full; call again from the returned position
ERR_BATCH_SIZE = 2           # scan: batchLength < 14 (LegacyRecord.RECORD_OVERHEAD_V0)
ERR_MAGIC = 3                # scan: a complete batch whose magic is not 0, 1 or 2
ERR_V2_SIZE = 4              # scan: a v2 batch smaller than its 61-byte header
ERR_LEGACY_SIZE = 5          # scan: a v1 message smaller than its 22-byte overhead
ERR_RECORD_LENGTH = 10       # record: length varint unreadable, negative or past the batch end
ERR_VARINT = 11              # record: a varint inside the record is longer than 5 (10) bytes
ERR_RECORD_OVERFLOW = 12     # record: a field runs past the record's declared length
ERR_KEY_LENGTH = 13          # record: key length < -1
ERR_VALUE_LENGTH = 14        # record: value length < -1
ERR_HEADER_COUNT = 15        # record: negative header count, or more headers than bytes left
ERR_HEADER_KEY_LENGTH = 16   # record: header key length < 0 (header keys are never null)
ERR_HEADER_VALUE_LENGTH = 17 # record: header value length < -1
ERR_RECORD_SIZE = 18         # record: the fields do not add up to the declared record length
ERR_TRAILING_BYTES = 19      # batch: bytes left after recordsCount records
ERR_OFFSET_DELTA = 20        # validate: offsetDelta of record i is not i
ERR_NULL_KEY = 21            # validate: a record without key while keys are required
# validate_batch: the batch-level checks of a producer batch, in the order LogValidator makes them
ERR_APPEND_SHORT = 22        # fewer bytes than a header up to the magic
ERR_APPEND_LENGTH = 23       # batchLength below 14, or not the bytes given
ERR_APPEND_MAGIC = 24        # magic is not 2 (value: the magic)
ERR_APPEND_HEADER = 25       # smaller than the 61-byte v2 header
ERR_APPEND_TOO_LARGE = 26    # above max.message.bytes
ERR_APPEND_CRC = 27          # stored CRC is not the computed one
ERR_APPEND_CODEC = 28        # compression codec above zstd
ERR_APPEND_CONTROL = 29      # a control batch (clients may not write them)
ERR_APPEND_OFFSET_RANGE = 30 # lastOffsetDelta < 0
ERR_APPEND_COUNT = 31        # recordsCount <= 0
ERR_APPEND_COUNT_RANGE = 32  # recordsCount != lastOffsetDelta + 1
ERR_APPEND_SEQUENCE = 33     # a producer id without a base sequence
ERR_APPEND_COUNT_FIT = 34    # more records than the records' bytes can hold
COMPRESSED = 35              # validate_batch: header valid, records compressed: decompress them


# ---- batch header scan -------------------------------------------------------------------------
# rows of the ``out`` table filled by scan_batch_headers
ROW_POSITION, ROW_SIZE, ROW_BASE_OFFSET, ROW_LAST_OFFSET, ROW_MAX_TIMESTAMP = 0, 1, 2, 3, 4
ROW_MAGIC, ROW_RECORDS_COUNT, ROW_ATTRIBUTES, ROW_CRC, ROW_LEADER_EPOCH = 5, 6, 7, 8, 9
ROW_PRODUCER_ID, ROW_PRODUCER_EPOCH, ROW_BASE_SEQUENCE = 10, 11, 12
SCAN_ROWS = 13


@jit.njit(cache=True, nogil=True)
def scan_batch_headers(buf, start, end, out):
    """Walk the batches of ``buf[start:end]`` as Kafka's ``FileLogInputStream`` does.

    ``out`` is an int64 table of ``SCAN_ROWS`` rows; column ``k`` receives the header fields of the
    k-th complete batch (``ROW_*``). Returns ``(count, next_position, status)``:

    * ``OK``: stopped because at most 17 bytes remain or the next batch is incomplete;
    * ``FULL``: ``out`` is full, call again from ``next_position``;
    * ``ERR_BATCH_SIZE``: batchLength < 14 at ``next_position`` (Kafka raises here);
    * ``ERR_MAGIC`` / ``ERR_V2_SIZE`` / ``ERR_LEGACY_SIZE``: a complete batch that cannot be one.

    Legacy (magic 0/1) entries report their offset field as both base and last offset, their
    timestamp (v1) or -1 (v0) as max timestamp, 1 record when uncompressed and -1 (unknown without
    decompressing) for a compressed wrapper, and -1 for the producer fields and leader epoch.
    """
    pos = start
    n = 0
    capacity = out.shape[1]
    while True:
        if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
            return n, pos, OK
        if n == capacity:
            return n, pos, FULL
        length = read_int32(buf, pos + V2_LENGTH_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            return n, pos, ERR_BATCH_SIZE
        size = length + LOG_OVERHEAD
        if size > end - pos:
            return n, pos, OK
        magic = _u8(buf, pos + MAGIC_OFFSET)
        if magic == 2:
            if size < V2_HEADER_SIZE:
                return n, pos, ERR_V2_SIZE
            base = read_int64(buf, pos)
            out[ROW_BASE_OFFSET, n] = base
            out[ROW_LAST_OFFSET, n] = base + read_int32(buf, pos + V2_LAST_OFFSET_DELTA_OFFSET)
            out[ROW_MAX_TIMESTAMP, n] = read_int64(buf, pos + V2_MAX_TIMESTAMP_OFFSET)
            out[ROW_RECORDS_COUNT, n] = read_int32(buf, pos + V2_RECORDS_COUNT_OFFSET)
            out[ROW_ATTRIBUTES, n] = read_int16(buf, pos + V2_ATTRIBUTES_OFFSET)
            out[ROW_CRC, n] = read_uint32(buf, pos + V2_CRC_OFFSET)
            out[ROW_LEADER_EPOCH, n] = read_int32(buf, pos + V2_LEADER_EPOCH_OFFSET)
            out[ROW_PRODUCER_ID, n] = read_int64(buf, pos + V2_PRODUCER_ID_OFFSET)
            out[ROW_PRODUCER_EPOCH, n] = read_int16(buf, pos + V2_PRODUCER_EPOCH_OFFSET)
            out[ROW_BASE_SEQUENCE, n] = read_int32(buf, pos + V2_BASE_SEQUENCE_OFFSET)
        elif magic == 0 or magic == 1:
            if magic == 1 and length < LEGACY_RECORD_OVERHEAD_V1:
                return n, pos, ERR_LEGACY_SIZE
            offset = read_int64(buf, pos)
            attributes = _u8(buf, pos + LEGACY_ATTRIBUTES_OFFSET)
            out[ROW_BASE_OFFSET, n] = offset
            out[ROW_LAST_OFFSET, n] = offset
            if magic == 1:
                out[ROW_MAX_TIMESTAMP, n] = read_int64(buf, pos + LEGACY_TIMESTAMP_OFFSET)
            else:
                out[ROW_MAX_TIMESTAMP, n] = -1
            out[ROW_RECORDS_COUNT, n] = 1 if (attributes & 0x07) == 0 else -1
            out[ROW_ATTRIBUTES, n] = attributes
            out[ROW_CRC, n] = read_uint32(buf, pos + LEGACY_CRC_OFFSET)
            out[ROW_LEADER_EPOCH, n] = -1
            out[ROW_PRODUCER_ID, n] = -1
            out[ROW_PRODUCER_EPOCH, n] = -1
            out[ROW_BASE_SEQUENCE, n] = -1
        else:
            return n, pos, ERR_MAGIC
        out[ROW_POSITION, n] = pos
        out[ROW_SIZE, n] = size
        out[ROW_MAGIC, n] = magic
        n += 1
        pos += size


# ---- the records of one batch ------------------------------------------------------------------
# rows of the ``out`` table filled by walk_records
REC_OFFSET_DELTA, REC_TIMESTAMP_DELTA, REC_KEY_POS, REC_KEY_LEN, REC_VALUE_POS = 0, 1, 2, 3, 4
REC_VALUE_LEN, REC_HEADERS_POS, REC_HEADER_COUNT, REC_START, REC_END = 5, 6, 7, 8, 9
RECORD_ROWS = 10


@jit.njit(inline="always", cache=True, nogil=True)
def _read_bytes_field(buf, pos, stop, err_length):
    """A nullable byte field (key, value, header value) at ``pos`` inside a record ending at
    ``stop``: ``(status, length, data_pos, next_pos)``; a length below -1 is ``err_length``."""
    length, p = read_varint(buf, pos, stop)
    if p < 0:
        return ERR_VARINT, length, p, p
    if length < -1:
        return err_length, length, p, p
    if length > 0:
        if length > stop - p:
            return ERR_RECORD_OVERFLOW, length, p, p
        return OK, length, p, p + length
    return OK, length, p, p


@jit.njit(cache=True, nogil=True)
def _walk(buf, start, end, count, out, validate, require_keys):
    """The one record parser: walk the ``count`` records that must fill ``buf[start:end]``.

    Fills column i of ``out`` with record i's ``REC_*`` fields when ``out`` has columns; with
    ``validate`` also checks ``offsetDelta == i`` and (``require_keys``) a key on every record, and
    tracks the first maximum timestamp delta. One fused loop with the varint readers inlined: a
    per-record helper returning its fields as a tuple costs twice the time.

    Returns ``(status, index, error_pos, error_value, max_timestamp_delta,
    offset_delta_of_max_timestamp, has_null_key)`` as ``validate_records`` documents.
    """
    fill = out.shape[1] > 0
    pos = np.int64(start)
    max_delta = np.int64(-(2 ** 63))
    offset_of_max = np.int64(-1)
    has_null_key = False
    z = np.int64(0)
    for i in range(count):
        length, body = read_varint(buf, pos, end)
        if body < 0 or length < 0 or length > end - body:
            return ERR_RECORD_LENGTH, i, pos, z, max_delta, offset_of_max, has_null_key
        stop = body + length
        p = body + 1                               # attributes: unused by Kafka, not checked
        if p > stop:
            return ERR_RECORD_OVERFLOW, i, pos, z, max_delta, offset_of_max, has_null_key
        ts_delta, p = read_varlong(buf, p, stop)
        if p < 0:
            return ERR_VARINT, i, pos, z, max_delta, offset_of_max, has_null_key
        offset_delta, p = read_varint(buf, p, stop)
        if p < 0:
            return ERR_VARINT, i, pos, z, max_delta, offset_of_max, has_null_key
        status, key_len, key_pos, p = _read_bytes_field(buf, p, stop, ERR_KEY_LENGTH)
        if status != OK:
            return status, i, pos, z, max_delta, offset_of_max, has_null_key
        status, value_len, value_pos, p = _read_bytes_field(buf, p, stop, ERR_VALUE_LENGTH)
        if status != OK:
            return status, i, pos, z, max_delta, offset_of_max, has_null_key
        header_count, p = read_varint(buf, p, stop)
        if p < 0:
            return ERR_VARINT, i, pos, z, max_delta, offset_of_max, has_null_key
        if header_count < 0 or header_count > stop - p:
            return ERR_HEADER_COUNT, i, pos, z, max_delta, offset_of_max, has_null_key
        headers_pos = p
        for _ in range(header_count):
            hk_len, p = read_varint(buf, p, stop)
            if p < 0:
                return ERR_VARINT, i, pos, z, max_delta, offset_of_max, has_null_key
            if hk_len < 0:
                return ERR_HEADER_KEY_LENGTH, i, pos, z, max_delta, offset_of_max, has_null_key
            if hk_len > stop - p:
                return ERR_RECORD_OVERFLOW, i, pos, z, max_delta, offset_of_max, has_null_key
            p += hk_len
            status, _len, _at, p = _read_bytes_field(buf, p, stop, ERR_HEADER_VALUE_LENGTH)
            if status != OK:
                return status, i, pos, z, max_delta, offset_of_max, has_null_key
        if p != stop:
            return ERR_RECORD_SIZE, i, pos, z, max_delta, offset_of_max, has_null_key
        if validate:
            if offset_delta != i:
                return (ERR_OFFSET_DELTA, i, pos, offset_delta, max_delta, offset_of_max,
                        has_null_key)
            if key_len < 0:
                has_null_key = True
                if require_keys:
                    return (ERR_NULL_KEY, i, pos, offset_delta, max_delta, offset_of_max,
                            has_null_key)
            if ts_delta > max_delta:
                max_delta = ts_delta
                offset_of_max = offset_delta
        if fill:
            out[REC_OFFSET_DELTA, i] = offset_delta
            out[REC_TIMESTAMP_DELTA, i] = ts_delta
            out[REC_KEY_POS, i] = key_pos
            out[REC_KEY_LEN, i] = key_len
            out[REC_VALUE_POS, i] = value_pos
            out[REC_VALUE_LEN, i] = value_len
            out[REC_HEADERS_POS, i] = headers_pos
            out[REC_HEADER_COUNT, i] = header_count
            out[REC_START, i] = pos
            out[REC_END, i] = stop
        pos = stop
    if pos != end:
        return ERR_TRAILING_BYTES, count, pos, z, max_delta, offset_of_max, has_null_key
    return OK, count, pos, z, max_delta, offset_of_max, has_null_key


@jit.njit(cache=True, nogil=True)
def walk_records(buf, start, end, out):
    """Locate every field of the ``out.shape[1]`` records that must fill ``buf[start:end]``
    exactly (the records section of one v2 batch, decompressed).

    Column ``i`` of the int64 table ``out`` receives record i's ``REC_*`` fields (positions are
    indices into ``buf``; a length of -1 is null). Returns ``(count_read, status, error_pos)``;
    ``ERR_TRAILING_BYTES`` when bytes remain after the last record, a record ``ERR_*`` code (with
    the record's position) otherwise.
    """
    status, index, where, _value, _max, _at, _null = _walk(buf, start, end, out.shape[1], out,
                                                           False, False)
    return index, status, where


@jit.njit(cache=True, nogil=True)
def validate_records(buf, start, end, count, require_keys):
    """Check the ``count`` records that must fill ``buf[start:end]`` exactly, as Kafka's
    ``LogValidator`` does for a producer batch: structure, ``offsetDelta == i``, and a key on every
    record when ``require_keys``. Nothing is materialised.

    Returns ``(status, index, error_pos, error_value, max_timestamp_delta,
    offset_delta_of_max_timestamp, has_null_key)``: on error ``index`` is the record's index,
    ``error_pos`` its position and ``error_value`` its offset delta (for ``ERR_OFFSET_DELTA`` and
    ``ERR_NULL_KEY``). The max timestamp delta is the first maximum (Kafka compares with ``>``).
    """
    return _walk(buf, start, end, count, np.empty((RECORD_ROWS, 0), dtype=np.int64), True,
                 require_keys)


@jit.njit(cache=True, nogil=True)
def validate_batch(buf, computed_crc, max_message_bytes, require_keys, from_client=True):
    """Check one producer-encoded v2 batch that fills ``buf`` exactly: its header in the order of
    Kafka's ``LogValidator`` (sizes, magic, ``max.message.bytes``, the CRC against
    ``computed_crc``, codec, control flag, offset range against the count, producer sequence), then
    every record as ``validate_records`` does. One call per append, so that the header checks
    cost no Python.

    ``from_client=False`` (the transaction coordinator's appends) skips the two client-only checks,
    as Kafka's LogValidator does for a non-client origin: the control flag and a producer id without
    a sequence (a marker has none).

    Returns ``validate_records``' tuple; the ``ERR_APPEND_*`` codes for a refused header (the
    caller reads the header again for its message), or ``COMPRESSED`` when the header is valid and
    the records must be decompressed and checked with ``validate_records``.
    """
    z = np.int64(0)
    no_max = np.int64(-(2 ** 63))
    no_offset = np.int64(-1)
    size = buf.shape[0]
    if size < HEADER_SIZE_UP_TO_MAGIC:
        return ERR_APPEND_SHORT, z, z, z, no_max, no_offset, False
    length = read_int32(buf, V2_LENGTH_OFFSET)
    if length < LEGACY_RECORD_OVERHEAD_V0 or length + LOG_OVERHEAD != size:
        return ERR_APPEND_LENGTH, z, V2_LENGTH_OFFSET, length, no_max, no_offset, False
    magic = _u8(buf, MAGIC_OFFSET)
    if magic != 2:
        return ERR_APPEND_MAGIC, z, MAGIC_OFFSET, magic, no_max, no_offset, False
    if size < V2_HEADER_SIZE:
        return ERR_APPEND_HEADER, z, z, z, no_max, no_offset, False
    if size > max_message_bytes:
        return ERR_APPEND_TOO_LARGE, z, z, z, no_max, no_offset, False
    if read_uint32(buf, V2_CRC_OFFSET) != computed_crc:
        return ERR_APPEND_CRC, z, V2_CRC_OFFSET, z, no_max, no_offset, False
    attributes = read_int16(buf, V2_ATTRIBUTES_OFFSET)
    codec = attributes & 0x07
    if codec > 4:
        return ERR_APPEND_CODEC, z, V2_ATTRIBUTES_OFFSET, codec, no_max, no_offset, False
    if attributes & 0x20 and from_client:
        return ERR_APPEND_CONTROL, z, V2_ATTRIBUTES_OFFSET, z, no_max, no_offset, False
    last_offset_delta = read_int32(buf, V2_LAST_OFFSET_DELTA_OFFSET)
    count = read_int32(buf, V2_RECORDS_COUNT_OFFSET)
    if last_offset_delta < 0:
        return ERR_APPEND_OFFSET_RANGE, z, z, z, no_max, no_offset, False
    if count <= 0:
        return ERR_APPEND_COUNT, z, z, z, no_max, no_offset, False
    if count != last_offset_delta + 1:
        return ERR_APPEND_COUNT_RANGE, z, z, z, no_max, no_offset, False
    if (from_client and read_int64(buf, V2_PRODUCER_ID_OFFSET) >= 0
            and read_int32(buf, V2_BASE_SEQUENCE_OFFSET) < 0):
        return ERR_APPEND_SEQUENCE, z, z, z, no_max, no_offset, False
    if codec != 0:
        return COMPRESSED, z, z, z, no_max, no_offset, False
    if count > (size - V2_HEADER_SIZE) // MIN_RECORD_SIZE:
        return ERR_APPEND_COUNT_FIT, z, z, z, no_max, no_offset, False
    return _walk(buf, V2_HEADER_SIZE, size, count, np.empty((RECORD_ROWS, 0), dtype=np.int64),
                 True, require_keys)


# ---- helpers for callers -----------------------------------------------------------------------
_UINT8 = np.dtype(np.uint8)   # a dtype object, positional: half the cost of ``dtype=np.uint8``


def as_input(buf: object) -> np.ndarray:
    """A read-only 1-D ``uint8`` view of any buffer (bytes, bytearray, memoryview, mmap, ndarray),
    without copying; the one array type every kernel is compiled for."""
    if type(buf) is bytes or (type(buf) is memoryview and buf.readonly and buf.format == "B"
                              and buf.ndim == 1 and buf.c_contiguous):
        return np.frombuffer(buf, _UINT8)     # already read-only: the append fast path
    if isinstance(buf, np.ndarray):
        arr = np.asarray(buf)
        if arr.dtype != np.uint8 or arr.ndim != 1 or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        arr = arr.view()
    else:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)  # type: ignore[arg-type]
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        arr = np.frombuffer(view, dtype=np.uint8)
    if arr.flags.writeable:
        arr.flags.writeable = False
    return arr


def warm_up() -> None:
    """Compile, or load from the numba cache, every kernel with the argument types callers use."""
    jit.load()
    n = 2
    zeros = np.zeros(n, dtype=np.int64)
    key_lens = np.array([1, -1], dtype=np.int64)
    value_lens = np.array([1, 1], dtype=np.int64)
    data = as_input(b"kv")
    out = np.zeros(V2_HEADER_SIZE + MAX_RECORD_OVERHEAD * n + 8, dtype=np.uint8)
    end = encode_records(out, V2_HEADER_SIZE, data, key_lens, data, value_lens, data, zeros,
                         zeros, np.arange(n, dtype=np.int64))
    encode_records_at(np.zeros_like(out), V2_HEADER_SIZE, data, zeros, key_lens, data, zeros,
                      value_lens, data, zeros, zeros, zeros, 0)
    records = as_input(out[:end].tobytes())
    walk_records(records, V2_HEADER_SIZE, end, np.empty((RECORD_ROWS, n), dtype=np.int64))
    validate_records(records, V2_HEADER_SIZE, end, n, True)
    validate_batch(records, 0, 1 << 20, True, True)   # every argument given, as appends do
    scan_batch_headers(records, 0, end, np.empty((SCAN_ROWS, 1), dtype=np.int64))
    read_varint(records, 0, end)
    read_varlong(records, 0, end)
