"""Numba kernels of the Spark reader: the per-record work of turning located record fields into
Arrow columns (STYLE.md P16; measured by ``benchmarks/bench_spark.py``).

``storage.kernels.walk_records`` locates every key and value of a batch (position and length, -1
for null); ``gather`` copies those slices into one contiguous buffer and writes the Arrow offsets,
which is what a ``binary`` column is made of. Same conventions as ``storage.kernels``: read-only
``uint8`` input, fresh writable outputs, ``cache=True``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def gather(buf, positions, lengths, out, offsets):
    """Copy ``buf[positions[i]:positions[i] + lengths[i]]`` for every i (nothing for a length of
    -1) into ``out``, back to back; ``offsets`` (int32, ``len(lengths) + 1`` entries) receives the
    start of each slice in ``out`` and the end of the last. Returns the bytes written."""
    cursor = 0
    for i in range(lengths.shape[0]):
        offsets[i] = cursor
        n = lengths[i]
        if n > 0:
            p = positions[i]
            for j in range(n):
                out[np.uint64(cursor + j)] = buf[np.uint64(p + j)]
            cursor += n
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
    gather_column(buf, np.array([0, 2], dtype=np.int64), np.array([2, -1], dtype=np.int64))
