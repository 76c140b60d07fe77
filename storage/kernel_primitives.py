"""Numba primitives of the record format: big-endian integer readers and Kafka's zig-zag varints
(read, size, write). Compiled as ``storage.kernels`` describes; re-exported there."""

from __future__ import annotations

import numpy as np

from storage import jit


# ---- primitive readers -------------------------------------------------------------------------
@jit.njit(inline="always", cache=True, nogil=True)
def _u8(buf, pos):
    # an unsigned index: numba then skips its negative-index wraparound (callers check bounds)
    return np.int64(buf[np.uint64(pos)])


@jit.njit(cache=True, nogil=True)
def read_int16(buf, pos):
    """Big-endian signed int16 at ``pos`` (caller checks bounds)."""
    v = (_u8(buf, pos) << 8) | _u8(buf, pos + 1)
    return v - 65536 if v >= 32768 else v


@jit.njit(cache=True, nogil=True)
def read_int32(buf, pos):
    """Big-endian signed int32 at ``pos`` (caller checks bounds)."""
    v = ((_u8(buf, pos) << 24) | (_u8(buf, pos + 1) << 16) | (_u8(buf, pos + 2) << 8)
         | _u8(buf, pos + 3))
    return v - 4294967296 if v >= 2147483648 else v


@jit.njit(cache=True, nogil=True)
def read_uint32(buf, pos):
    """Big-endian uint32 at ``pos`` (caller checks bounds)."""
    return ((_u8(buf, pos) << 24) | (_u8(buf, pos + 1) << 16) | (_u8(buf, pos + 2) << 8)
            | _u8(buf, pos + 3))


@jit.njit(cache=True, nogil=True)
def read_int64(buf, pos):
    """Big-endian int64 at ``pos`` (caller checks bounds); wraps like Java's ``getLong``."""
    v = np.int64(0)
    for i in range(8):
        v = (v << 8) | _u8(buf, pos + i)
    return v


@jit.njit(inline="always", cache=True, nogil=True)
def _read_unsigned_varint(buf, pos, end, max_shift):
    """The 7-bit groups of a varint at ``pos``, least significant first: ``(raw, next_pos)``,
    ``next_pos == -1`` when the bytes end first or a group would shift past ``max_shift``."""
    if pos + 1 < end:                              # fast path: one or two bytes
        b = _u8(buf, pos)
        if b < 0x80:
            return b, np.int64(pos + 1)
        c = _u8(buf, pos + 1)
        if c < 0x80:
            return (b & 0x7F) | (c << 7), np.int64(pos + 2)
    raw = np.int64(0)
    shift = 0
    while True:
        if pos >= end:
            return np.int64(0), np.int64(-1)
        b = _u8(buf, pos)
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, np.int64(pos)
        shift += 7
        if shift > max_shift:
            return np.int64(0), np.int64(-1)


@jit.njit(inline="always", cache=True, nogil=True)
def read_varint(buf, pos, end):
    """Zig-zag varint (int32) at ``pos``: ``(value, next_pos)``, ``next_pos == -1`` when the bytes
    end before the varint does or it is longer than 5 bytes (Kafka's ``ByteUtils.readVarint``:
    bits beyond 32 of the fifth byte are dropped, as Java's int arithmetic drops them)."""
    raw, nxt = _read_unsigned_varint(buf, pos, end, 28)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), nxt


@jit.njit(inline="always", cache=True, nogil=True)
def read_varlong(buf, pos, end):
    """Zig-zag varlong (int64) at ``pos``: ``(value, next_pos)``, ``next_pos == -1`` when the
    bytes end first or it is longer than 10 bytes (Kafka's ``ByteUtils.readVarlong``)."""
    raw, nxt = _read_unsigned_varint(buf, pos, end, 63)
    # logical shift right by one: arithmetic shift, then clear the sign bit
    return ((raw >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(raw & 1), nxt


# ---- primitive writers -------------------------------------------------------------------------
@jit.njit(cache=True, nogil=True)
def size_of_varint(value):
    """Bytes taken by ``value`` (an int32) as a zig-zag varint."""
    z = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


@jit.njit(cache=True, nogil=True)
def size_of_varlong(value):
    """Bytes taken by ``value`` (an int64) as a zig-zag varlong."""
    z = (value << 1) ^ (value >> 63)
    n = 1
    while (z & ~0x7F) != 0:
        z = (z >> 7) & 0x01FFFFFFFFFFFFFF
        n += 1
    return n


@jit.njit(cache=True, nogil=True)
def write_varint(out, pos, value):
    """Write ``value`` (an int32) as a zig-zag varint at ``pos``; returns the next position.
    The caller has made room (at most 5 bytes)."""
    z = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    while z >= 0x80:
        out[pos] = (z & 0x7F) | 0x80
        pos += 1
        z >>= 7
    out[pos] = z
    return pos + 1


@jit.njit(cache=True, nogil=True)
def write_varlong(out, pos, value):
    """Write ``value`` (an int64) as a zig-zag varlong at ``pos``; returns the next position.
    The caller has made room (at most 10 bytes)."""
    z = (value << 1) ^ (value >> 63)
    while (z & ~0x7F) != 0:
        out[pos] = (z & 0x7F) | 0x80
        pos += 1
        z = (z >> 7) & 0x01FFFFFFFFFFFFFF
    out[pos] = z
    return pos + 1
