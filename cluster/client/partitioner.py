"""Kafka's default partitioner: ``(murmur2(key) & 0x7fffffff) % partitions`` for keyed records,
as the Java client computes it, so a key lands on the same partition whoever produced it.

The hash is ``cluster.client.murmur.murmur2_hash``, compiled here into a numba kernel that runs over
all keys of a batch at once (keys concatenated in one buffer with start/length arrays); never
Python's salted ``hash()``.
"""

from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from cluster.client.murmur import murmur2_hash
from storage import kernel_cache

kernel_cache.use()   # before the first cached kernel: see storage.kernel_cache


# the one definition of the hash (cluster.client.murmur), compiled
_murmur2 = numba.njit(cache=True, nogil=True)(murmur2_hash)


@numba.njit(cache=True, nogil=True)
def _partitions(buf, starts, lengths, count, out):
    for i in range(starts.shape[0]):
        out[i] = (np.int64(_murmur2(buf, starts[i], lengths[i])) & 0x7FFFFFFF) % count


def murmur2(key: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as a signed 32-bit int."""
    h = int(_murmur2(np.frombuffer(key or b"\0", dtype=np.uint8), 0, len(key)))
    return h - (1 << 32) if h >= 1 << 31 else h


def partitions_for_keys(keys: Sequence[bytes], count: int) -> np.ndarray:
    """The partition of every key (none may be None), as Kafka's default partitioner picks it."""
    if count <= 0:
        raise ValueError(f"partition count must be positive, got {count}")
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    starts = np.zeros(len(keys), dtype=np.int64)
    if len(keys) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8)
    out = np.empty(len(keys), dtype=np.int64)
    _partitions(buf, starts, lengths, count, out)
    return out


def partitions_for_buffer(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                          count: int) -> np.ndarray:
    """``partitions_for_keys`` of keys held as Arrow holds a binary column: key i is
    ``data[starts[i]:starts[i] + lengths[i]]`` (``data`` a ``uint8`` array, ``starts`` and
    ``lengths`` int64); one kernel call, no per-key Python."""
    if count <= 0:
        raise ValueError(f"partition count must be positive, got {count}")
    out = np.empty(len(starts), dtype=np.int64)
    _partitions(data if len(data) else np.zeros(1, dtype=np.uint8), starts, lengths, count, out)
    return out


def warm_up() -> None:
    partitions_for_keys([b"warm", b"up"], 3)
