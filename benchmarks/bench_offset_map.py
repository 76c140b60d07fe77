"""Offset map: keyed SipHash-128 + ordered table, batch put/get of 16-byte keys.

Baseline: hashlib.md5 of the same keys in a Python loop (what a naive port of Kafka's MD5 map
would spend on hashing alone), measured in the same run.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from benchmarks.common import Figure
from cleaner.config import DEFAULT_DEDUPE_BUFFER_SIZE
from cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap
from cleaner.offset_map_kernels import hash_kernel

KEY_BYTES = 16
TARGET_KEYS_PER_SECOND = 10_000_000


def _keys(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    buf = rng.integers(0, 256, count * KEY_BYTES, dtype=np.uint8)
    starts = np.arange(count, dtype=np.int64) * KEY_BYTES
    lengths = np.full(count, KEY_BYTES, dtype=np.int32)
    return buf, starts, lengths


def _seconds(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _md5_keys_per_second(buf: np.ndarray, count: int) -> float:
    data = buf.tobytes()
    md5 = hashlib.md5
    start = time.perf_counter()
    for i in range(0, count * KEY_BYTES, KEY_BYTES):
        md5(data[i:i + KEY_BYTES]).digest()
    return count / (time.perf_counter() - start)


def run(quick: bool) -> list[Figure]:
    count = 1_000_000 if quick else 4_000_000
    repeats = 2 if quick else 3
    buf, starts, lengths = _keys(count, 1)
    miss_buf, _, _ = _keys(count, 2)
    offsets = np.arange(count, dtype=np.int64)
    memory = DEFAULT_DEDUPE_BUFFER_SIZE

    warm = OffsetMap(4096)  # compile (or load) the kernels outside the timings
    warm.put_batch(buf[:160], starts[:10], lengths[:10], offsets[:10])
    warm.get_batch(buf[:160], starts[:10], lengths[:10])
    hashes = np.empty((count, 2), dtype=np.uint64)
    hash_kernel(np.uint64(1), np.uint64(2), buf[:160], starts[:10], lengths[:10], hashes[:10])

    md5_rate = _md5_keys_per_second(buf, min(count, 300_000))

    fresh = OffsetMap(memory)
    fresh_rate = count / _seconds(lambda: fresh.put_batch(buf, starts, lengths, offsets))
    peak_allocated = fresh.allocated_bytes

    reused = fresh
    put_seconds = []
    for _ in range(repeats):
        reused.clear()
        put_seconds.append(_seconds(lambda: reused.put_batch(buf, starts, lengths, offsets)))
    put_rate = count / min(put_seconds)
    overwrite_rate = count / min(
        _seconds(lambda: reused.put_batch(buf, starts, lengths, offsets)) for _ in range(repeats))
    hit = []
    get_rate = count / min(_seconds(lambda: hit.append(reused.get_batch(buf, starts, lengths)))
                           for _ in range(repeats))
    assert (hit[-1] == offsets).all()
    miss_rate = count / min(_seconds(lambda: reused.get_batch(miss_buf, starts, lengths))
                            for _ in range(repeats))
    hash_rate = count / min(_seconds(lambda: hash_kernel(
        np.uint64(1), np.uint64(2), buf, starts, lengths, hashes)) for _ in range(repeats))

    full = OffsetMap(memory)
    fill = full.usable_slots
    fill_buf, fill_starts, fill_lengths = _keys(fill + 1, 3)
    consumed = full.put_batch(fill_buf, fill_starts, fill_lengths,
                              np.arange(fill + 1, dtype=np.int64))
    assert consumed == fill and full.is_full
    bytes_per_key = full.allocated_bytes / full.size

    table = f"{count:,} distinct 16 B keys, {memory >> 20} MiB map"
    return [
        Figure("put_batch, reused map (grows from 64 Ki slots)", put_rate, "keys/s",
               target=TARGET_KEYS_PER_SECOND, baseline=md5_rate, baseline_name="md5 loop",
               note=table),
        Figure("put_batch, fresh map (first touch of its pages)", fresh_rate, "keys/s",
               baseline=md5_rate, baseline_name="md5 loop",
               note=f"table grew to {peak_allocated >> 20} MiB"),
        Figure("put_batch, every key already present", overwrite_rate, "keys/s",
               target=TARGET_KEYS_PER_SECOND, baseline=md5_rate, baseline_name="md5 loop"),
        Figure("get_batch, hits", get_rate, "keys/s", target=TARGET_KEYS_PER_SECOND,
               baseline=md5_rate, baseline_name="md5 loop"),
        Figure("get_batch, misses", miss_rate, "keys/s", target=TARGET_KEYS_PER_SECOND,
               baseline=md5_rate, baseline_name="md5 loop"),
        Figure("SipHash-1-3-128 alone", hash_rate, "keys/s", baseline=md5_rate,
               baseline_name="md5 loop"),
        Figure("bytes per key, map full at load factor 0.9", bytes_per_key, "B/key",
               note=f"{BYTES_PER_ENTRY} B/entry; {full.size:,} keys in {full.allocated_bytes:,} B "
                    f"of a {memory:,} B cap (Kafka 24 B/entry, Redpanda 40)"),
    ]
