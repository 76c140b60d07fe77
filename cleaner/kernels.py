"""Per-record kernels of the cleaner (numba): walk the records of a v2 batch body and gather the
bytes of the records a clean keeps.

A v2 record is self-contained (its timestamp and offset are deltas from the batch header), so a
filtered batch that keeps its base offset and base timestamp can reuse the kept records' bytes
verbatim; only the header (count, max timestamp, length, CRC) is rewritten.

Record => length: varint | attributes: int8 | timestampDelta: varlong | offsetDelta: varint |
          keyLength: varint | key | valueLength: varint | value | headerCount: varint | headers
"""

from __future__ import annotations

import numba
import numpy as np

WALK_OK = -1


@numba.njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """Zig-zag varint at ``pos``: (value, next position), or (0, -1) when it runs past ``end``."""
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return 0, -1
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


@numba.njit(cache=True, nogil=True)
def walk_records(buf, start, end, count, rec_start, rec_end, ts_delta, offset_delta, key_start,
                 key_len, value_len):
    """Fill the per-record arrays (length ``count``) for the records in ``buf[start:end]``.

    Returns WALK_OK (-1), or the byte position of the first malformed record.
    """
    pos = start
    for i in range(count):
        length, body = _varint(buf, pos, end)
        if body < 0 or length < 0 or body + length > end:
            return pos
        stop = body + length
        rec_start[i] = pos
        rec_end[i] = stop
        p = body + 1   # attributes
        t, p = _varint(buf, p, stop)
        if p < 0:
            return pos
        ts_delta[i] = t
        o, p = _varint(buf, p, stop)
        if p < 0:
            return pos
        offset_delta[i] = o
        klen, p = _varint(buf, p, stop)
        if p < 0 or klen < -1 or p + max(klen, 0) > stop:
            return pos
        key_start[i] = p
        key_len[i] = klen
        p += max(klen, 0)
        vlen, p = _varint(buf, p, stop)
        if p < 0 or vlen < -1 or p + max(vlen, 0) > stop:
            return pos
        value_len[i] = vlen
        pos = stop
    if pos != end:
        return pos
    return WALK_OK


@numba.njit(cache=True, nogil=True)
def gather_records(buf, rec_start, rec_end, keep, out):
    """Copy the kept records' bytes into ``out`` in order; return the number of bytes written."""
    n = 0
    for i in range(keep.shape[0]):
        if keep[i]:
            s = rec_start[i]
            e = rec_end[i]
            out[n:n + e - s] = buf[s:e]
            n += e - s
    return n


def warm_up() -> None:
    """Compile (or load from cache) every kernel once, at process start."""
    body = np.frombuffer(bytes([0x10, 0x00, 0x00, 0x00, 0x02, 0x6B, 0x02, 0x76, 0x00]),
                         dtype=np.uint8)
    arrays = [np.zeros(1, np.int64) for _ in range(7)]
    walk_records(body, 0, body.shape[0], 1, *arrays)
    out = np.zeros(16, np.uint8)
    gather_records(body, arrays[0], arrays[1], np.ones(1, np.bool_), out)
