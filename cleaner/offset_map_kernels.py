"""Numba kernels of ``cleaner.offset_map``: SipHash-1-3-128 and the ordered hash table.

The table is one flat ``uint64`` array, slot ``i`` = words ``[3i, 3i+1, 3i+2]`` = ``h0, h1, offset``;
``h0 == 0`` marks an empty slot. The state vector (int64) holds ``table_slots, size, latest_offset,
null_keys, status, bad_index``. Everything here is per-key work; ``OffsetMap`` is the only caller.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from storage import kernel_cache

kernel_cache.use()   # before the first cached kernel: see storage.kernel_cache

BYTES_PER_ENTRY = 24
WORDS_PER_ENTRY = 3
_GROWTH_CHUNK = 4096  # old slots whose new positions the in-place rehash computes at a time
_BLOCK = 16  # keys hashed (and their slots prefetched) a block ahead of their table probes
_RING_MASK = 2 * _BLOCK - 1  # the hashes of two blocks: the one probed and the one ahead

# state vector shared with the kernels (int64 words)
TABLE_SLOTS, SIZE, LATEST, NULLS, STATUS, BAD_INDEX = range(6)
OK, NO_ROOM, OUT_OF_BOUNDS = 0, 1, 2

_U64 = np.uint64
_C0 = _U64(0x736F6D6570736575)
_C1 = _U64(0x646F72616E646F6D)
_C2 = _U64(0x6C7967656E657261)
_C3 = _U64(0x7465646279746573)
_EE = _U64(0xEE)
_DD = _U64(0xDD)
_ONE = _U64(1)
C_ROUNDS = 1  # SipHash-1-3: one round per message word,
D_ROUNDS = 3  # three per output word
_R8, _R13, _R16, _R17, _R21, _R32, _R56 = (_U64(b) for b in (8, 13, 16, 17, 21, 32, 56))
_R64 = _U64(64)


def item_pointer(context, builder, array_type, array, index):  # type: ignore[no-untyped-def]
    """(At compile time, in an intrinsic's codegen) the LLVM pointer to ``array[index]`` of an
    argument of type ``array_type``, unchecked: the callers check the bounds or only hint."""
    view = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, view, [index],
                                    wraparound=False)


@intrinsic
def _prefetch(typingctx, array, index):  # type: ignore[no-untyped-def]
    """``llvm.prefetch`` (read, high locality) of ``array[index]``: a hint, never a fault."""
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        pointer = item_pointer(context, builder, sig.args[0], *args)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0")
        builder.call(function, [builder.bitcast(pointer, byte_pointer), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def _load64(typingctx, array, index):  # type: ignore[no-untyped-def]
    """The little-endian uint64 at bytes ``array[index:index + 8]`` of a uint8 array, as one
    unaligned load (byte-swapped on a big-endian host); the caller checks the bounds."""
    signature = types.uint64(array, index)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        pointer = item_pointer(context, builder, sig.args[0], *args)
        word = builder.load(builder.bitcast(pointer, ir.IntType(64).as_pointer()), align=1)
        return builder.bswap(word) if sys.byteorder == "big" else word

    return signature, codegen


@numba.njit(inline="always")
def _rotl(x, b):  # type: ignore[no-untyped-def]
    return (x << b) | (x >> (_R64 - b))


@numba.njit(inline="always")
def _sipround(v0, v1, v2, v3):  # type: ignore[no-untyped-def]
    v0 += v1
    v1 = _rotl(v1, _R13)
    v1 ^= v0
    v0 = _rotl(v0, _R32)
    v2 += v3
    v3 = _rotl(v3, _R16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, _R21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, _R17)
    v1 ^= v2
    v2 = _rotl(v2, _R32)
    return v0, v1, v2, v3


@numba.njit(inline="always")
def _siphash128(k0, k1, buf, start, length):  # type: ignore[no-untyped-def]
    """SipHash-1-3 with 128-bit output; returns the two little-endian output words."""
    v0 = k0 ^ _C0
    v1 = k1 ^ _C1 ^ _EE
    v2 = k0 ^ _C2
    v3 = k1 ^ _C3
    tail = length & 7
    end = start + length - tail
    p = start
    while p < end:
        m = _load64(buf, p)
        v3 ^= m
        for _ in range(C_ROUNDS):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
        p += 8
    b = _U64(length) << _R56
    for j in range(tail):
        b |= _U64(buf[p + j]) << (_U64(j) * _R8)
    v3 ^= b
    for _ in range(C_ROUNDS):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= _EE
    for _ in range(D_ROUNDS):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    h0 = v0 ^ v1 ^ v2 ^ v3
    v1 ^= _DD
    for _ in range(D_ROUNDS):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    h1 = v0 ^ v1 ^ v2 ^ v3
    return h0, h1


# SipHash of LANES keys of one length at once: the rounds on <LANES x i64> vectors (AVX-512 does
# them in one register each, narrower hosts in several), the message words prepared by the caller
LANES = 8
_LANE_WORDS = 33          # keys up to 256 bytes go through the lanes; longer ones one at a time
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_VEC = ir.VectorType(_I64, LANES)


def _splat(builder, x):  # type: ignore[no-untyped-def]
    v = builder.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(_VEC, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))


def _vconst(value):  # type: ignore[no-untyped-def]
    return ir.Constant(_VEC, [ir.Constant(_I64, value)] * LANES)


def _vrotl(builder, x, r):  # type: ignore[no-untyped-def]
    return builder.or_(builder.shl(x, _vconst(r)), builder.lshr(x, _vconst(64 - r)))


def _vsipround(builder, v0, v1, v2, v3):  # type: ignore[no-untyped-def]
    v0 = builder.add(v0, v1)
    v1 = builder.xor(_vrotl(builder, v1, 13), v0)
    v0 = _vrotl(builder, v0, 32)
    v2 = builder.add(v2, v3)
    v3 = builder.xor(_vrotl(builder, v3, 16), v2)
    v0 = builder.add(v0, v3)
    v3 = builder.xor(_vrotl(builder, v3, 21), v0)
    v2 = builder.add(v2, v1)
    v1 = builder.xor(_vrotl(builder, v1, 17), v2)
    v2 = _vrotl(builder, v2, 32)
    return v0, v1, v2, v3


@intrinsic
def _siphash128_lanes(typingctx, k0, k1, words, count, out):  # type: ignore[no-untyped-def]
    """SipHash-1-3-128 of ``LANES`` messages of ``count`` words each, word ``w`` of lane ``l`` at
    ``words[w * LANES + l]`` (the last word the length byte and the tail, as ``_siphash128``
    builds it); the first output words to ``out[:LANES]``, the second to ``out[LANES:]``."""
    signature = types.void(k0, k1, words, count, out)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        key0, key1, word_array, count_value, out_array = args
        state = [cgutils.alloca_once(builder, _VEC) for _ in range(4)]
        for pointer, value in zip(state, (
                builder.xor(key0, ir.Constant(_I64, int(_C0))),
                builder.xor(builder.xor(key1, ir.Constant(_I64, int(_C1))),
                            ir.Constant(_I64, int(_EE))),
                builder.xor(key0, ir.Constant(_I64, int(_C2))),
                builder.xor(key1, ir.Constant(_I64, int(_C3))))):
            builder.store(_splat(builder, value), pointer)
        word_view = context.make_array(sig.args[2])(context, builder, word_array)
        word_base = builder.bitcast(word_view.data, _VEC.as_pointer())
        with cgutils.for_range(builder, count_value) as loop:
            m = builder.load(builder.gep(word_base, [loop.index]), align=8)
            v0, v1, v2, v3 = (builder.load(p) for p in state)
            v3 = builder.xor(v3, m)
            for _ in range(C_ROUNDS):
                v0, v1, v2, v3 = _vsipround(builder, v0, v1, v2, v3)
            v0 = builder.xor(v0, m)
            for pointer, value in zip(state, (v0, v1, v2, v3)):
                builder.store(value, pointer)
        v0, v1, v2, v3 = (builder.load(p) for p in state)
        v2 = builder.xor(v2, _vconst(int(_EE)))
        for _ in range(D_ROUNDS):
            v0, v1, v2, v3 = _vsipround(builder, v0, v1, v2, v3)
        h0 = builder.xor(builder.xor(v0, v1), builder.xor(v2, v3))
        v1 = builder.xor(v1, _vconst(int(_DD)))
        for _ in range(D_ROUNDS):
            v0, v1, v2, v3 = _vsipround(builder, v0, v1, v2, v3)
        h1 = builder.xor(builder.xor(v0, v1), builder.xor(v2, v3))
        out_view = context.make_array(sig.args[4])(context, builder, out_array)
        out_base = builder.bitcast(out_view.data, _VEC.as_pointer())
        builder.store(h0, builder.gep(out_base, [ir.Constant(_I64, 0)]), align=8)
        builder.store(h1, builder.gep(out_base, [ir.Constant(_I64, 1)]), align=8)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(inline="always")
def _last_word(buf, start, length):  # type: ignore[no-untyped-def]
    tail = length & 7
    p = start + length - tail
    b = _U64(length) << _R56
    for j in range(tail):
        b |= _U64(buf[p + j]) << (_U64(j) * _R8)
    return b


@numba.njit(inline="always")
def _lanes_fit(buf_len, starts, lengths, first):  # type: ignore[no-untyped-def]
    """Keys ``first..first+LANES-1`` share one length, short enough for the lanes, and lie
    inside the buffer."""
    length = np.int64(lengths[first])
    if length < 0 or (length >> 3) + 1 > _LANE_WORDS:
        return False
    for lane in range(LANES):
        start = np.int64(starts[first + lane])
        if lengths[first + lane] != length or start < 0 or start + length > buf_len:
            return False
    return True


@numba.njit(inline="always")
def _hash_lanes(k0, k1, buf, starts, length, first, words,  # type: ignore[no-untyped-def]
                lanes_out):
    """SipHash-1-3-128 of the ``LANES`` keys of ``length`` bytes from key ``first`` into
    ``lanes_out`` (see ``_siphash128_lanes``)."""
    blocks = length >> 3
    for lane in range(LANES):
        start = np.int64(starts[first + lane])
        for b in range(blocks):
            words[b * LANES + lane] = _load64(buf, start + 8 * b)
        words[blocks * LANES + lane] = _last_word(buf, start, length)
    _siphash128_lanes(k0, k1, words, blocks + 1, lanes_out)


@numba.njit(inline="always")
def _prefetch_slots(t, p):  # type: ignore[no-untyped-def]
    """Prefetch slot ``p`` and the next one (the two ``_find`` compares first), whose 48 bytes
    may straddle two cache lines."""
    _prefetch(t, 3 * p)
    _prefetch(t, 3 * p + 5)


@numba.njit(inline="always")
def _home(h0, n):  # type: ignore[no-untyped-def]
    return np.int64(((h0 >> _R32) * _U64(n)) >> _R32)


@numba.njit(inline="always")
def _before(a0, a1, b0, b1):  # type: ignore[no-untyped-def]
    return a0 < b0 or (a0 == b0 and a1 < b1)


@numba.njit(inline="always")
def _copy_slot(t, src, dst):  # type: ignore[no-untyped-def]
    t[3 * dst] = t[3 * src]
    t[3 * dst + 1] = t[3 * src + 1]
    t[3 * dst + 2] = t[3 * src + 2]


@numba.njit(inline="always")
def _write_slot(t, i, h0, h1, offset):  # type: ignore[no-untyped-def]
    t[3 * i] = h0
    t[3 * i + 1] = h1
    t[3 * i + 2] = _U64(offset)


@numba.njit(inline="always")
def _find(t, n, h0, h1):  # type: ignore[no-untyped-def]
    """Slot index of the key, or ``-(q + 1)`` where ``q`` is the slot before which it sorts."""
    p = _home(h0, n)
    # most keys sit at their home slot or the next one: both compared without a branch each
    nxt = min(p + 1, n - 1)
    at = p if (t[3 * p] == h0) & (t[3 * p + 1] == h1) else -1
    at = nxt if (t[3 * nxt] == h0) & (t[3 * nxt + 1] == h1) else at
    if at >= 0:
        return at
    s0 = t[3 * p]
    if s0 == 0:
        return -(p + 1)
    s1 = t[3 * p + 1]
    if s0 == h0 and s1 == h1:
        return p
    if _before(s0, s1, h0, h1):
        p += 1
        while p < n:
            s0 = t[3 * p]
            if s0 == 0:
                break
            s1 = t[3 * p + 1]
            if s0 == h0 and s1 == h1:
                return p
            if _before(h0, h1, s0, s1):
                break
            p += 1
        return -(p + 1)
    p -= 1
    while p >= 0:
        s0 = t[3 * p]
        if s0 == 0:
            return -(p + 1)  # an empty slot just below the larger neighbours: the key goes there
        s1 = t[3 * p + 1]
        if s0 == h0 and s1 == h1:
            return p
        if _before(s0, s1, h0, h1):
            break
        p -= 1
    return -(p + 2)


@numba.njit(inline="always")
def _insert(t, n, h0, h1, offset):  # type: ignore[no-untyped-def]
    """1 when a new entry was added, 0 when an existing one was overwritten, -1 when full."""
    found = _find(t, n, h0, h1)
    if found >= 0:
        t[3 * found + 2] = _U64(offset)
        return 0
    q = -found - 1
    if q < n and t[3 * q] == 0:
        _write_slot(t, q, h0, h1, offset)
        return 1
    e = q
    while e < n and t[3 * e] != 0:
        e += 1
    if e < n:
        for j in range(e, q, -1):
            _copy_slot(t, j - 1, j)
        _write_slot(t, q, h0, h1, offset)
        return 1
    e = q - 1
    while e >= 0 and t[3 * e] != 0:
        e -= 1
    if e < 0:
        return -1
    for j in range(e, q - 1):
        _copy_slot(t, j + 1, j)
    _write_slot(t, q - 1, h0, h1, offset)
    return 1


@numba.njit(cache=True, nogil=True)
def grow(t, n, m, count):  # type: ignore[no-untyped-def]
    """Rehash the ``count`` entries of the first ``n`` slots for a table of ``m >= n`` slots, in place.

    The i-th entry (in hash order) goes to ``min(max(home_i, new_{i-1} + 1), m - count + i)``.
    That is never below its old position ``old_i``: if ``old_i <= old home_i`` then
    ``new_i >= home_i >= old home_i`` (homes only grow with the table); otherwise the slot before
    ``old_i`` holds entry ``i-1`` (the invariant), so ``old_i = old_{i-1} + 1 <= new_{i-1} + 1``;
    and the cap ``m - count + i`` is at least ``n - count + i >= old_i``. Hence moving entries from
    the last to the first never overwrites one not yet moved. A forward pass records the recurrence
    at the start of every chunk of old slots; the backward pass recomputes one chunk's positions at
    a time, so the scratch space is a few KiB whatever the table size.
    """
    chunks = (n + _GROWTH_CHUNK - 1) // _GROWTH_CHUNK
    chunk_prev = np.empty(chunks, np.int64)
    chunk_index = np.empty(chunks, np.int64)
    prev = np.int64(-1)
    i = np.int64(0)
    top = m - count
    for c in range(chunks):
        chunk_prev[c] = prev
        chunk_index[c] = i
        for s in range(c * _GROWTH_CHUNK, min(n, (c + 1) * _GROWTH_CHUNK)):
            h0 = t[3 * s]
            position = min(max(_home(h0, m), prev + 1), top + i)
            occupied = h0 != 0
            prev = position if occupied else prev
            i += 1 if occupied else 0
    old = np.empty(_GROWTH_CHUNK, np.int64)
    new = np.empty(_GROWTH_CHUNK, np.int64)
    for c in range(chunks - 1, -1, -1):
        prev = chunk_prev[c]
        i = chunk_index[c]
        k = 0
        for s in range(c * _GROWTH_CHUNK, min(n, (c + 1) * _GROWTH_CHUNK)):
            h0 = t[3 * s]
            position = min(max(_home(h0, m), prev + 1), top + i)
            occupied = h0 != 0
            old[k] = s
            new[k] = position
            prev = position if occupied else prev
            i += 1 if occupied else 0
            k += 1 if occupied else 0
        for j in range(k - 1, -1, -1):
            if new[j] != old[j]:
                _copy_slot(t, old[j], new[j])
                t[3 * old[j]] = 0
                t[3 * old[j] + 1] = 0
                t[3 * old[j] + 2] = 0


@numba.njit(inline="always")
def _hash_block(t, n, k0, k1, buf, starts, lengths, first, last, hb0, hb1, words, lanes_out):  # type: ignore[no-untyped-def]
    """Hash keys ``first..last-1`` into the rings ``hb0/hb1`` (key ``j`` at ``j & _RING_MASK``)
    and prefetch their first two slots. The callers hash one block ahead of the block they probe,
    so every probe finds its slots requested a whole block of work earlier. Null and
    out-of-bounds keys are left out. ``LANES`` keys of one length are hashed together (``words``,
    ``lanes_out``: their scratch)."""
    buf_len = buf.shape[0]
    j = first
    while j < last:
        if j + LANES <= last and _lanes_fit(buf_len, starts, lengths, j):
            _hash_lanes(k0, k1, buf, starts, np.int64(lengths[j]), j, words, lanes_out)
            for lane in range(LANES):
                h0 = lanes_out[lane]
                if h0 == 0:
                    h0 = _ONE
                hb0[(j + lane) & _RING_MASK] = h0
                hb1[(j + lane) & _RING_MASK] = lanes_out[LANES + lane]
                _prefetch_slots(t, _home(h0, n))
            j += LANES
            continue
        length = np.int64(lengths[j])
        start = np.int64(starts[j])
        if length >= 0 and start >= 0 and start + length <= buf_len:
            h0, h1 = _siphash128(k0, k1, buf, start, length)
            if h0 == 0:
                h0 = _ONE
            hb0[j & _RING_MASK] = h0
            hb1[j & _RING_MASK] = h1
            _prefetch_slots(t, _home(h0, n))
        j += 1


@numba.njit(cache=True, nogil=True)
def put_kernel(t, state, cap, grow_load, growth, stop_at, k0, k1, buf, starts, lengths, offsets):  # type: ignore[no-untyped-def]
    """Put entries in order; stop before a keyed entry once ``size >= stop_at``; return how many
    entries were consumed (put, or skipped for a null key). A table below ``cap`` slots holding
    more than ``grow_load`` of its slots is first grown ``growth`` times, up to ``cap``."""
    n = state[TABLE_SLOTS]
    size = state[SIZE]
    grow_at = np.int64(n * grow_load) if n < cap else cap + 1
    buf_len = buf.shape[0]
    state[STATUS] = OK
    hb0 = np.empty(2 * _BLOCK, np.uint64)
    hb1 = np.empty(2 * _BLOCK, np.uint64)
    words = np.empty(_LANE_WORDS * LANES, np.uint64)
    lanes_out = np.empty(2 * LANES, np.uint64)
    count = starts.shape[0]
    consumed = 0
    stopped = False
    _hash_block(t, n, k0, k1, buf, starts, lengths, 0, min(_BLOCK, count), hb0, hb1, words,
                lanes_out)
    for first in range(0, count, _BLOCK):
        last = min(first + _BLOCK, count)
        _hash_block(t, n, k0, k1, buf, starts, lengths, last, min(last + _BLOCK, count), hb0,
                    hb1, words, lanes_out)
        for i in range(first, last):
            length = np.int64(lengths[i])
            if length < 0:
                state[NULLS] += 1
                consumed = i + 1
                continue
            start = np.int64(starts[i])
            if start < 0 or start + length > buf_len:
                state[STATUS] = OUT_OF_BOUNDS
                state[BAD_INDEX] = i
                stopped = True
                break
            if size >= stop_at:
                stopped = True
                break
            if size >= grow_at:
                m = min(growth * n, cap)
                grow(t, n, m, size)
                n = m
                state[TABLE_SLOTS] = n
                grow_at = np.int64(n * grow_load) if n < cap else cap + 1
            added = _insert(t, n, hb0[i & _RING_MASK], hb1[i & _RING_MASK], offsets[i])
            if added < 0:
                state[STATUS] = NO_ROOM
                stopped = True
                break
            size += added
            state[LATEST] = offsets[i]
            consumed = i + 1
        if stopped:
            break
    state[SIZE] = size
    return consumed


@numba.njit(cache=True, nogil=True)
def get_kernel(t, n, k0, k1, buf, starts, lengths, out):  # type: ignore[no-untyped-def]
    """Fill ``out`` with each key's offset, -1 when absent or null; return the index of the first
    out-of-bounds key, or -1."""
    buf_len = buf.shape[0]
    hb0 = np.empty(2 * _BLOCK, np.uint64)
    hb1 = np.empty(2 * _BLOCK, np.uint64)
    words = np.empty(_LANE_WORDS * LANES, np.uint64)
    lanes_out = np.empty(2 * LANES, np.uint64)
    count = starts.shape[0]
    _hash_block(t, n, k0, k1, buf, starts, lengths, 0, min(_BLOCK, count), hb0, hb1, words,
                lanes_out)
    for first in range(0, count, _BLOCK):
        last = min(first + _BLOCK, count)
        _hash_block(t, n, k0, k1, buf, starts, lengths, last, min(last + _BLOCK, count), hb0,
                    hb1, words, lanes_out)
        for i in range(first, last):
            length = np.int64(lengths[i])
            if length < 0:
                out[i] = -1
                continue
            start = np.int64(starts[i])
            if start < 0 or start + length > buf_len:
                return i
            found = _find(t, n, hb0[i & _RING_MASK], hb1[i & _RING_MASK])
            out[i] = np.int64(t[3 * found + 2]) if found >= 0 else -1
    return -1


@numba.njit(cache=True, nogil=True)
def hash_kernel(k0, k1, buf, starts, lengths, out):  # type: ignore[no-untyped-def]
    """SipHash-1-3-128 of every key into ``out[i] = (h0, h1)``, ``LANES`` keys of one length at
    a time where they fit the lanes, as the table kernels hash them."""
    words = np.empty(_LANE_WORDS * LANES, np.uint64)
    lanes_out = np.empty(2 * LANES, np.uint64)
    buf_len = buf.shape[0]
    count = starts.shape[0]
    i = 0
    while i < count:
        if i + LANES <= count and _lanes_fit(buf_len, starts, lengths, i):
            _hash_lanes(k0, k1, buf, starts, np.int64(lengths[i]), i, words, lanes_out)
            for lane in range(LANES):
                out[i + lane, 0] = lanes_out[lane]
                out[i + lane, 1] = lanes_out[LANES + lane]
            i += LANES
            continue
        h0, h1 = _siphash128(k0, k1, buf, np.int64(starts[i]), np.int64(lengths[i]))
        out[i, 0] = h0
        out[i, 1] = h1
        i += 1
