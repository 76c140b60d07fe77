"""Numba kernels of the Spark reader: the per-record work of turning located record fields into
Arrow columns (STYLE.md P16; measured by ``benchmarks/bench_spark.py``).

``storage.kernels.walk_records`` locates every key and value of a batch (position and length, -1
for null); ``gather`` copies those slices into one contiguous buffer and writes the Arrow offsets,
which is what a ``binary`` column is made of; ``gather_at`` does the same for one of several
stored batches whose values make one column. Same conventions as ``storage.kernels``: read-only
``uint8`` input, fresh writable outputs, ``cache=True``.
"""

from __future__ import annotations

import numba
import numpy as np

from storage import kernel_cache

kernel_cache.use()   # before the first cached kernel: see storage.kernel_cache


@numba.njit(cache=True, nogil=True)
def gather_at(buf, positions, lengths, out, offsets, row, cursor):
    """``gather`` as one part of a column built from several buffers: the slices go to ``out``
    from byte ``cursor`` on, their starts to ``offsets[row:row + len(lengths)]``. Returns the
    cursor after the last slice (the caller writes the column's final offset)."""
    for i in range(lengths.shape[0]):
        offsets[row + i] = cursor
        n = lengths[i]
        if n > 0:
            p = positions[i]
            for j in range(n):          # a byte loop: 8x faster than a slice copy in numba
                out[np.uint64(cursor + j)] = buf[np.uint64(p + j)]
            cursor += n
    return cursor


@numba.njit(cache=True, nogil=True)
def gather(buf, positions, lengths, out, offsets):
    """Copy ``buf[positions[i]:positions[i] + lengths[i]]`` for every i (nothing for a length of
    -1) into ``out``, back to back; ``offsets`` (int32, ``len(lengths) + 1`` entries) receives the
    start of each slice in ``out`` and the end of the last. Returns the bytes written."""
    cursor = gather_at(buf, positions, lengths, out, offsets, 0, 0)
    offsets[lengths.shape[0]] = cursor
    return cursor


def gather_column(buf: np.ndarray, positions: np.ndarray,
                  lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(data, int32 offsets) of the slices; ``buf`` is a read-only ``uint8`` array."""
    total = int(lengths[lengths > 0].sum())
    out = np.empty(total, dtype=np.uint8)
    offsets = np.empty(len(lengths) + 1, dtype=np.int32)
    gather(buf, positions, lengths, out, offsets)
    return out, offsets


def warm_up() -> None:
    buf = np.frombuffer(b"abcd", dtype=np.uint8)
    positions, lengths = np.array([0, 2], dtype=np.int64), np.array([2, -1], dtype=np.int64)
    gather_column(buf, positions, lengths)
    gather_at(buf, positions, lengths, np.empty(2, dtype=np.uint8), np.empty(3, dtype=np.int32),
              0, 0)
