"""Per-record kernel of the cleaner (numba): gather the bytes of the records a clean keeps.

A v2 record is self-contained (its timestamp and offset are deltas from the batch header), so a
filtered batch that keeps its base offset and base timestamp can reuse the kept records' bytes
verbatim; only the header (count, max timestamp, length, CRC) is rewritten. Records are located by
``storage.kernels.walk_records``.
"""

from __future__ import annotations

import numba
import numpy as np


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
    """Compile (or load from cache) the kernel once, at process start."""
    body = np.frombuffer(bytes(range(16)), dtype=np.uint8)
    gather_records(body, np.zeros(1, np.int64), np.ones(1, np.int64), np.ones(1, np.bool_),
                   np.zeros(16, np.uint8))
