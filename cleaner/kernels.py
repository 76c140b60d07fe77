"""Per-record kernels of the cleaner (numba): the keys of a run of batches into the offset map, the
records a clean keeps of a run of batches, and the check of a chunk's batch offsets.

Both take *plain* batches only: v2, uncompressed, neither transactional nor control
and stop at any other batch. Everything else (legacy entries, compressed
batches, transactions and their markers) keeps the per-batch Python path of ``cleaner.cleaner`` and
``cleaner.batch_filter``, which these kernels reproduce rule for rule on the common case: a run of
a thousand batches costs one call instead of a thousand rounds of Python.

A v2 record is self-contained (its timestamp and offset are deltas from the batch header), so a
filtered batch that keeps its base offset and base timestamp can reuse the kept records' bytes
verbatim; only the header (length, count, max timestamp, CRC) is rewritten. Records are located by
``storage.kernels.walk_records``, the readers' own parser, with the read path's bound on the records
count; a batch it refuses stops the kernel *before* that batch, and the caller's per-batch path
then raises the typed error for it. The CRC of a rewritten batch is left to the caller (hardware
CRC32C through the ``crc32c`` package): the kernel reports where each one goes.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from cleaner.offset_map_kernels import (LATEST, OUT_OF_BOUNDS, STATUS, get_kernel, item_pointer,
                                        put_kernel)
from storage import jit
from storage.kernels import (LOG_OVERHEAD, MAGIC_OFFSET, MIN_RECORD_SIZE, REC_END, REC_KEY_LEN,
                             REC_KEY_POS, REC_OFFSET_DELTA, REC_START, REC_TIMESTAMP_DELTA,
                             REC_VALUE_LEN, RECORD_ROWS, V2_ATTRIBUTES_OFFSET,
                             V2_BASE_TIMESTAMP_OFFSET, V2_HEADER_SIZE, V2_LENGTH_OFFSET,
                             V2_MAX_TIMESTAMP_OFFSET, V2_PRODUCER_ID_OFFSET,
                             V2_RECORDS_COUNT_OFFSET, read_int16, read_int32, read_int64,
                             walk_records)
from storage.kernels import OK as WALK_OK

jit.load(globals())   # the storage kernels above as numba's dispatchers: the kernels below call
#                       them (and load sets numba's cache directory: storage.kernel_cache)


# how a kernel run ended (the ``status`` of its result)
DONE = 0          # every batch of the run was handled
MAP_FULL = 1      # map_batches: the map filled up inside batch ``next``
PER_BATCH = 2     # batch ``next`` needs the per-batch path (not plain, unreadable records, or a
#                   tombstone that needs its delete horizon): nothing of it was counted
EMPTY = 3         # filter_batches: batch ``next`` kept no record and its producer may still need
#                   it (read and counted; the caller decides whether it stays as an empty batch)

# fields of filter_batches' result vector
R_NEXT, R_STATUS, R_OUT_END, R_READ_RECORDS, R_READ_BYTES, R_KEPT_RECORDS = 0, 1, 2, 3, 4, 5
R_INVALID, R_MAX_TIMESTAMP, R_MAX_TIMESTAMP_OFFSET, R_LAST_OFFSET, R_REWRITTEN = 6, 7, 8, 9, 10
RESULT_FIELDS = 11

_PLAIN_MASK = 0x07 | 0x10 | 0x20        # compression, transactional, control
_TIMESTAMP_TYPE_MASK = 0x08
_DELETE_HORIZON_MASK = 0x40


@intrinsic
def _memmove(typingctx, dst, dst_at, src, src_at, count):  # type: ignore[no-untyped-def]
    """``llvm.memmove`` of ``count`` bytes from ``src[src_at:]`` to ``dst[dst_at:]`` (uint8
    arrays), unchecked: ``_copy_bytes`` checks the bounds."""
    signature = types.void(dst, dst_at, src, src_at, count)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        dst_array, dst_index, src_array, src_index, size = args
        dst_pointer = item_pointer(context, builder, sig.args[0], dst_array, dst_index)
        src_pointer = item_pointer(context, builder, sig.args[2], src_array, src_index)
        cgutils.raw_memmove(builder, dst_pointer, src_pointer, size, 1)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(inline="always")
def _copy_bytes(dst, dst_at, src, src_at, count):  # type: ignore[no-untyped-def]
    """``dst[dst_at:dst_at + count] = src[src_at:src_at + count]`` as one ``memmove``: numba
    compiles that slice assignment to a byte loop about 20 times slower (3 GB/s against 55 on
    256 KiB of batches), which made copying kept batches whole the costliest part of a clean
    that keeps most records. Raises ``IndexError`` where the slice assignment would fail."""
    if dst_at < 0 or src_at < 0 or count < 0 or dst_at + count > dst.shape[0] \
            or src_at + count > src.shape[0]:
        raise IndexError("a copy of batch bytes outside its buffers")
    _memmove(dst, dst_at, src, src_at, count)


@numba.njit(cache=True, nogil=True)
def first_misplaced_batch(bases, lasts, previous_last, upper):  # type: ignore[no-untyped-def]
    """The index of the first batch whose base offset is not above the last offset before it
    (``previous_last`` for the first), whose last offset is below its base offset, or whose last
    offset is past ``upper``; -1 when every batch is in place."""
    before = previous_last
    for i in range(bases.shape[0]):
        if bases[i] <= before or lasts[i] < bases[i] or lasts[i] > upper:
            return i
        before = lasts[i]
    return -1


@numba.njit(inline="always")
def _is_plain(buf, pos):  # type: ignore[no-untyped-def]
    """The batch at ``pos`` is v2, uncompressed, neither transactional nor control."""
    return buf[pos + MAGIC_OFFSET] == 2 and \
        (read_int16(buf, pos + V2_ATTRIBUTES_OFFSET) & _PLAIN_MASK) == 0


@numba.njit(inline="always")
def _records(buf, pos, size):  # type: ignore[no-untyped-def]
    """The record table of the batch at ``pos`` (``walk_records``' rows), or an empty table when
    the records cannot be read (its count impossible for its bytes, or a malformed record)."""
    begin = pos + V2_HEADER_SIZE
    end = pos + size
    count = read_int32(buf, pos + V2_RECORDS_COUNT_OFFSET)
    if count < 0 or count > (end - begin) // MIN_RECORD_SIZE:
        return np.empty((RECORD_ROWS, 0), np.int64), False
    table = np.empty((RECORD_ROWS, count), np.int64)
    _read, status, _where = walk_records(buf, begin, end, table)
    return table, status == WALK_OK


@numba.njit(cache=True, nogil=True)
def map_batches(t, state, cap, grow_load, growth, stop_at, k0, k1, buf, positions, sizes,
                last_offsets, first, last, start):  # type: ignore[no-untyped-def]
    """Put the keys of the batches ``first..last-1`` of ``buf`` into the offset map (its
    table ``t`` and ``state``, ``put_kernel``'s arguments), each record at or past ``start``
    (records before it count as null keys, as the per-batch path counts them). After each batch
    wholly put whose last offset is at or past ``start``, the map's latest offset becomes it.

    Returns ``(next, consumed, status)``: ``consumed`` records put or skipped in all;
    ``DONE`` (``next == last``), ``MAP_FULL`` (the map filled up inside batch ``next``) or
    ``PER_BATCH`` (batch ``next`` is not plain or cannot be read; nothing of it was put)."""
    consumed_total = np.int64(0)
    for j in range(first, last):
        pos = positions[j]
        if not _is_plain(buf, pos):
            return j, consumed_total, PER_BATCH
        table, readable = _records(buf, pos, sizes[j])
        if not readable:
            return j, consumed_total, PER_BATCH
        count = table.shape[1]
        base = read_int64(buf, pos)
        offsets = np.empty(count, np.int64)
        lengths = np.empty(count, np.int64)
        for i in range(count):
            offset = base + table[REC_OFFSET_DELTA, i]
            offsets[i] = offset
            lengths[i] = table[REC_KEY_LEN, i] if offset >= start else -1
        consumed = put_kernel(t, state, cap, grow_load, growth, stop_at, k0, k1, buf,
                              table[REC_KEY_POS], lengths, offsets)
        if state[STATUS] == OUT_OF_BOUNDS:      # cannot happen: the walk bounded every key
            return j, consumed_total, PER_BATCH
        consumed_total += consumed
        if consumed < count:
            return j, consumed_total, MAP_FULL
        if last_offsets[j] >= start:
            state[LATEST] = last_offsets[j]
    return last, consumed_total, DONE


@numba.njit(cache=True, nogil=True)
def gather_records(buf, rec_start, rec_end, keep, out):  # type: ignore[no-untyped-def]
    """Copy the kept records' bytes into ``out`` in order; return the number of bytes written
    (the per-batch path's rewrite of a decompressed batch)."""
    n = 0
    for i in range(keep.shape[0]):
        if keep[i]:
            s = rec_start[i]
            e = rec_end[i]
            _copy_bytes(out, n, buf, s, e - s)
            n += e - s
    return n


@numba.njit(inline="always")
def _put_int32(out, pos, value):  # type: ignore[no-untyped-def]
    for k in range(4):
        out[pos + k] = (value >> (8 * (3 - k))) & 0xFF


@numba.njit(inline="always")
def _put_int64(out, pos, value):  # type: ignore[no-untyped-def]
    for k in range(8):
        out[pos + k] = (value >> (8 * (7 - k))) & 0xFF


@numba.njit(cache=True, nogil=True)
def filter_batches(t, n, k0, k1, latest, buf, positions,  # type: ignore[no-untyped-def]
                   sizes, last_offsets, first, last, now_ms, upper_bound, out, out_pos, rewritten,
                   result):
    """What a clean keeps of the batches ``first..last-1`` of ``buf``, written to ``out``
    from ``out_pos`` (``batch_filter.filter_batch``'s rules for a non-transactional v2 batch).

    A record is kept when its offset is past ``latest`` (the map's latest offset), or it has a key,
    its offset is at or past the key's offset in the map (table ``t`` of ``n`` slots, hash key
    ``k0, k1``), and it has a value or the batch's delete horizon (if any) is after ``now_ms``.
    A batch that keeps every record is copied whole; one that keeps some is rewritten with its
    base offset, base timestamp and producer fields, the kept records' bytes, its new count,
    length and max timestamp (the header's under log-append time, else the kept records' largest),
    its CRC left for the caller at ``out[rewritten[k]:]`` for each of the ``R_REWRITTEN`` batches
    rewritten. A batch that keeps none is dropped when it has no producer and is not the round's
    last (its next offset is not ``upper_bound``); otherwise the kernel stops with ``EMPTY``.
    Unkeyed records at or below ``latest`` are dropped and counted as invalid.

    Fills ``result`` (``R_*``): the batch to go on from, the status (``DONE``, ``EMPTY`` or
    ``PER_BATCH``), the end of the bytes written, the records and bytes read and kept, the invalid
    records, the largest max timestamp of the batches written and the last offset of the first
    batch carrying it (-1, -1 when none), the last offset of the last batch written (-1 when none).
    ``out`` must have room for the run's bytes (a batch never grows)."""
    read_records = np.int64(0)
    read_bytes = np.int64(0)
    kept_records = np.int64(0)
    invalid = np.int64(0)
    max_ts = np.int64(-1)
    max_ts_offset = np.int64(-1)
    last_written = np.int64(-1)
    n_rewritten = 0
    status = DONE
    j = first
    while j < last:
        pos = positions[j]
        size = sizes[j]
        if not _is_plain(buf, pos):
            status = PER_BATCH
            break
        table, readable = _records(buf, pos, size)
        if not readable:
            status = PER_BATCH
            break
        count = table.shape[1]
        base = read_int64(buf, pos)
        attributes = read_int16(buf, pos + V2_ATTRIBUTES_OFFSET)
        base_ts = read_int64(buf, pos + V2_BASE_TIMESTAMP_OFFSET)
        retain_deletes = (attributes & _DELETE_HORIZON_MASK) == 0 or now_ms < base_ts
        lengths = np.empty(count, np.int64)
        for i in range(count):
            has_key = table[REC_KEY_LEN, i] >= 0
            lengths[i] = table[REC_KEY_LEN, i] if has_key and \
                base + table[REC_OFFSET_DELTA, i] <= latest else -1
        mapped = np.empty(count, np.int64)
        get_kernel(t, n, k0, k1, buf, table[REC_KEY_POS], lengths, mapped)
        keep = np.empty(count, np.bool_)
        kept = 0
        batch_invalid = 0
        tombstone = False
        for i in range(count):
            offset = base + table[REC_OFFSET_DELTA, i]
            has_key = table[REC_KEY_LEN, i] >= 0
            has_value = table[REC_VALUE_LEN, i] >= 0
            k = offset > latest or (has_key and offset >= mapped[i]
                                    and (has_value or retain_deletes))
            keep[i] = k
            if k:
                kept += 1
                tombstone = tombstone or not has_value
            elif not has_key:
                batch_invalid += 1
        if tombstone and (attributes & _DELETE_HORIZON_MASK) == 0:
            status = PER_BATCH          # the batch needs a delete horizon: rebuilt per batch
            break
        read_records += count
        read_bytes += size
        invalid += batch_invalid
        if kept == 0:
            if read_int64(buf, pos + V2_PRODUCER_ID_OFFSET) >= 0 \
                    or last_offsets[j] + 1 == upper_bound:
                status = EMPTY
                break
            j += 1
            continue
        if kept == count:
            _copy_bytes(out, out_pos, buf, pos, size)
            batch_max_ts = read_int64(buf, pos + V2_MAX_TIMESTAMP_OFFSET)
            written = size
        else:
            _copy_bytes(out, out_pos, buf, pos, V2_HEADER_SIZE)
            w = out_pos + V2_HEADER_SIZE
            largest_delta = np.int64(-(2 ** 63))
            for i in range(count):
                if keep[i]:
                    s = table[REC_START, i]
                    e = table[REC_END, i]
                    _copy_bytes(out, w, buf, s, e - s)
                    w += e - s
                    delta = table[REC_TIMESTAMP_DELTA, i]
                    if delta > largest_delta:
                        largest_delta = delta
            written = w - out_pos
            if attributes & _TIMESTAMP_TYPE_MASK:
                batch_max_ts = read_int64(buf, pos + V2_MAX_TIMESTAMP_OFFSET)
            else:
                batch_max_ts = base_ts + largest_delta
            _put_int32(out, out_pos + V2_LENGTH_OFFSET, written - LOG_OVERHEAD)
            _put_int64(out, out_pos + V2_MAX_TIMESTAMP_OFFSET, batch_max_ts)
            _put_int32(out, out_pos + V2_RECORDS_COUNT_OFFSET, kept)
            rewritten[n_rewritten] = out_pos
            n_rewritten += 1
        kept_records += kept
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            max_ts_offset = last_offsets[j]
        last_written = last_offsets[j]
        out_pos += written
        j += 1
    result[R_NEXT] = j
    result[R_STATUS] = status
    result[R_OUT_END] = out_pos
    result[R_READ_RECORDS] = read_records
    result[R_READ_BYTES] = read_bytes
    result[R_KEPT_RECORDS] = kept_records
    result[R_INVALID] = invalid
    result[R_MAX_TIMESTAMP] = max_ts
    result[R_MAX_TIMESTAMP_OFFSET] = max_ts_offset
    result[R_LAST_OFFSET] = last_written
    result[R_REWRITTEN] = n_rewritten
