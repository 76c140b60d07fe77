"""Record format throughput: building, validating, decoding and scanning v2 batches.

Each figure sits beside a raw baseline over the same bytes in the same run: plain ``bytes``
concatenation of the keys and values for the builders, CRC32C alone for append validation and the
CRC-checked scan, a plain-Python ``struct`` walk for the header-only scan, a bytes copy for
decoding.
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np

from benchmarks.common import Figure, best_of
from storage import kernels
from storage.records import (
    Record,
    RecordBatch,
    build_batch,
    build_batch_columns,
    scan_batches,
)
from storage.validation import validate_for_append

RECORDS_PER_BATCH = 1000
KEY_BYTES = 16
VALUE_BYTES = 100
TS = 1_700_000_000_000
M = 1_000_000
GB = 1_000_000_000


def _columns(batch: int) -> tuple[list[bytes], list[bytes], np.ndarray]:
    rng = np.random.default_rng(batch)
    keys = [b"key-%012d" % (batch * RECORDS_PER_BATCH + i) for i in range(RECORDS_PER_BATCH)]
    payload = rng.integers(0, 256, VALUE_BYTES * RECORDS_PER_BATCH, dtype=np.uint8).tobytes()
    values = [payload[i * VALUE_BYTES:(i + 1) * VALUE_BYTES] for i in range(RECORDS_PER_BATCH)]
    timestamps = TS + np.arange(RECORDS_PER_BATCH, dtype=np.int64)
    return keys, values, timestamps


def _python_walk(segment: np.ndarray) -> int:
    """The same header walk in plain Python: the baseline of the kernel."""
    view = memoryview(segment)
    header = struct.Struct(">qi")
    pos, count, end = 0, 0, len(view)
    while end - pos > 17:
        _, length = header.unpack_from(view, pos)
        pos += length + 12
        count += 1
    return count


def _rate(count: float, seconds: float, unit: float) -> float:
    return count / seconds / unit


def run(quick: bool) -> list[Figure]:
    kernels.warm_up()
    batches = 20 if quick else 100
    repeats = 3 if quick else 5
    columns = [_columns(b) for b in range(batches)]
    record_lists = [[Record(k, v, int(t)) for k, v, t in zip(*c)] for c in columns]
    n_records = batches * RECORDS_PER_BATCH
    figures: list[Figure] = []

    def concat() -> None:
        for keys, values, _ in columns:
            b"".join([b"".join(keys), b"".join(values)])

    concat_rate = _rate(n_records, best_of(repeats, concat), M)

    def build_columns() -> None:
        for keys, values, timestamps in columns:
            build_batch_columns(keys, values, timestamps)

    figures.append(Figure(
        "build_batch_columns, 1000 x (16 B key, 100 B value)",
        _rate(n_records, best_of(repeats, build_columns), M), "M records/s", target=1.0,
        baseline=concat_rate, baseline_name="bytes join of keys+values"))

    def build_records() -> None:
        for recs in record_lists:
            build_batch(recs)

    figures.append(Figure(
        "build_batch from Record objects, 1000 per batch",
        _rate(n_records, best_of(repeats, build_records), M), "M records/s",
        baseline=concat_rate, baseline_name="bytes join of keys+values"))

    encoded = [memoryview(build_batch_columns(*c)) for c in columns]

    def validate() -> None:
        for view in encoded:
            validate_for_append(view, require_keys=True, max_message_bytes=1 << 21)

    def crc_only() -> None:
        for view in encoded:
            crc32c.crc32c(view[21:])

    figures.append(Figure(
        "validate_for_append, uncompressed, require_keys",
        _rate(n_records, best_of(repeats, validate), M), "M records/s", target=5.0,
        baseline=_rate(n_records, best_of(repeats, crc_only), M), baseline_name="crc32c alone",
        note=f"{best_of(repeats, validate) / batches * 1e6:.0f} us per 1000-record batch"))

    decode_batches = encoded[:10]

    def decode() -> None:
        for view in decode_batches:
            RecordBatch(view).records()

    def copy_out() -> None:
        for view in decode_batches:
            bytes(view)

    decoded = len(decode_batches) * RECORDS_PER_BATCH
    figures.append(Figure(
        "RecordBatch.records() into Record objects",
        _rate(decoded, best_of(repeats, decode), M), "M records/s",
        baseline=_rate(decoded, best_of(repeats, copy_out), M), baseline_name="bytes copy"))

    target_bytes = (20 if quick else 200) * M
    one = b"".join(bytes(v) for v in encoded)
    segment = np.frombuffer(one * max(1, target_bytes // len(one)), dtype=np.uint8)
    size = len(segment)
    view = memoryview(segment)
    scan_crc = best_of(repeats, lambda: scan_batches(segment, check_crc=True))
    figures.append(Figure(
        f"scan_batches(check_crc=True) over {size / M:.0f} MB",
        size / scan_crc / GB, "GB/s",
        baseline=size / best_of(repeats, lambda: crc32c.crc32c(view)) / GB,
        baseline_name="crc32c of the whole buffer",
        note=f"{len(scan_batches(segment))} batches"))
    small = b"".join(build_batch_columns(keys[:10], values[:10], timestamps[:10],
                                         base_offset=10 * i)
                     for i, (keys, values, timestamps) in enumerate(columns))
    small_segment = np.frombuffer(small * max(1, target_bytes // 4 // len(small)), dtype=np.uint8)
    walked = len(scan_batches(small_segment))
    figures.append(Figure(
        f"scan_batches header walk, {walked:,} batches of 10 records",
        _rate(walked, best_of(repeats, lambda: scan_batches(small_segment)), M), "M batches/s",
        baseline=_rate(walked, best_of(1, lambda: _python_walk(small_segment)), M),
        baseline_name="struct.unpack_from loop"))
    return figures
