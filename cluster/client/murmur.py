"""Kafka's ``Utils.murmur2``, the hash of its default partitioner, as one plain Python function.

This is the only definition of the hash. ``cluster.client.partitioner`` compiles this same function
with numba and runs it over many keys at once (the Spark writer, large produces). A process that
routes a few keys, such as ``strata produce`` with a small input, calls it as plain Python and does
not load numba. The arithmetic uses Python ints masked to 32 bits, and every product stays below
2**63, so compiled (int64) and interpreted results are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SEED = 0x9747B28C
M = 0x5BD1E995
MASK32 = 0xFFFFFFFF


def murmur2_hash(buf: Any, start: int, length: int) -> int:
    """The unsigned 32-bit murmur2 of ``buf[start:start + length]``. ``buf`` is ``bytes`` when
    interpreted, or a ``uint8`` array when compiled."""
    h = (SEED ^ length) & MASK32
    quads = length // 4
    for i in range(quads):
        p = start + i * 4
        k = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16) | (buf[p + 3] << 24)
        k = (k * M) & MASK32
        k ^= k >> 24
        k = (k * M) & MASK32
        h = ((h * M) & MASK32) ^ k
    tail = start + quads * 4
    rest = length % 4
    if rest == 3:
        h ^= buf[tail + 2] << 16
    if rest >= 2:
        h ^= buf[tail + 1] << 8
    if rest >= 1:
        h ^= buf[tail]
        h = (h * M) & MASK32
    h ^= h >> 13
    h = (h * M) & MASK32
    h ^= h >> 15
    return h


def partition_of(key: bytes, count: int) -> int:
    """Kafka's default partitioner for one key: ``(murmur2(key) & 0x7fffffff) % count``."""
    return (murmur2_hash(key, 0, len(key)) & 0x7FFFFFFF) % count


def partitions_of(keys: Sequence[bytes], count: int) -> list[int]:
    """``partition_of`` every key, interpreted: for a few keys (``partitions_for_keys`` compiles
    it for many)."""
    if count <= 0:
        raise ValueError(f"partition count must be positive, got {count}")
    return [partition_of(key, count) for key in keys]
