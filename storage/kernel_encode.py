"""The numba kernels that write the record bodies of one v2 batch from columns (``encode_records``,
the builder's loop; ``encode_records_at``, from slices anywhere in their buffers). Compiled as
``storage.kernels`` describes; re-exported there."""

from __future__ import annotations

import numpy as np

from storage import jit
from storage.kernel_primitives import (
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)


# ---- columnar encoding -------------------------------------------------------------------------
@jit.njit(inline="always", cache=True, nogil=True)
def _copy(dst, dst_pos, src, src_pos, n):
    # unsigned indices: numba then skips its negative-index wraparound and vectorises the loop
    # (about 6x faster than slice assignment for 100-byte values)
    for j in range(n):
        dst[np.uint64(dst_pos + j)] = src[np.uint64(src_pos + j)]


@jit.njit(inline="always", cache=True, nogil=True)
def _write_record(out, pos, ts_delta, offset_delta, key_data, key_at, key_len, value_data,
                  value_at, value_len, header_data, header_at, header_len):
    """One v2 record at ``out[pos:]`` (key, value, header block at ``*_at`` of their buffers);
    returns the end position."""
    body = (1 + size_of_varlong(ts_delta) + size_of_varint(offset_delta)
            + size_of_varint(key_len) + max(key_len, 0)
            + size_of_varint(value_len) + max(value_len, 0)
            + (header_len if header_len > 0 else 1))
    pos = write_varint(out, pos, body)
    out[pos] = 0                                   # attributes
    pos = write_varlong(out, pos + 1, ts_delta)
    pos = write_varint(out, pos, offset_delta)
    pos = write_varint(out, pos, key_len)
    if key_len > 0:
        _copy(out, pos, key_data, key_at, key_len)
        pos += key_len
    pos = write_varint(out, pos, value_len)
    if value_len > 0:
        _copy(out, pos, value_data, value_at, value_len)
        pos += value_len
    if header_len > 0:
        _copy(out, pos, header_data, header_at, header_len)
        pos += header_len
    else:
        out[pos] = 0
        pos += 1
    return pos


@jit.njit(cache=True, nogil=True)
def encode_records(out, pos, key_data, key_lens, value_data, value_lens, header_data, header_lens,
                   timestamp_deltas, offset_deltas):
    """Write ``len(key_lens)`` v2 records at ``out[pos:]``; returns the end position.

    Keys (values, header blocks) are concatenated in ``key_data`` (...) in record order;
    ``key_lens[i] == -1`` writes a null key. ``header_lens[i] == 0`` writes headerCount 0; otherwise
    ``header_lens[i]`` bytes of ``header_data`` are copied as they are (an encoded headerCount and
    headers). The caller sizes ``out`` to at least ``pos + MAX_RECORD_OVERHEAD * n`` plus the key,
    value and header bytes.
    """
    key_cursor = 0
    value_cursor = 0
    header_cursor = 0
    for i in range(key_lens.shape[0]):
        key_len = key_lens[i]
        value_len = value_lens[i]
        header_len = header_lens[i]
        pos = _write_record(out, pos, timestamp_deltas[i], offset_deltas[i], key_data,
                            key_cursor, key_len, value_data, value_cursor, value_len,
                            header_data, header_cursor, header_len)
        key_cursor += max(key_len, 0)
        value_cursor += max(value_len, 0)
        header_cursor += max(header_len, 0)
    return pos


@jit.njit(cache=True, nogil=True)
def encode_records_at(out, pos, key_data, key_starts, key_lens, value_data, value_starts,
                      value_lens, header_data, header_starts, header_lens, timestamp_deltas,
                      first_offset_delta):
    """``encode_records`` for records whose keys (values, header blocks) lie anywhere in their
    buffers: record i's key is ``key_data[key_starts[i]:][:key_lens[i]]`` (...); offset deltas
    run from ``first_offset_delta``. A writer encodes the rows of an Arrow batch in place with it,
    without gathering them first."""
    for i in range(key_lens.shape[0]):
        pos = _write_record(out, pos, timestamp_deltas[i], first_offset_delta + i, key_data,
                            key_starts[i], key_lens[i], value_data, value_starts[i],
                            value_lens[i], header_data, header_starts[i], header_lens[i])
    return pos
