"""Cleaner benchmarks: one cleaner over small records, large records and a high-cardinality log,
each beside a raw read+write of the same bytes in the same run; plus the cleaning process's
resident memory against its map and buffers.

Each log is cleaned ``REPEATS`` times, each time a fresh copy of it, and read+written raw as many
times, the two alternating; the best of each is kept (one run of either moved by 2x between runs
on the shared machine). Every timed run starts after an ``os.sync()``, so that none starts with
another's dirty pages still being written back. The baseline, the raw copy, is not fsynced, while
the clean fsyncs its cleaned segment once before the swap, as it must, within its time; the note
of the first figure of each log gives the ratio to the same copy fsynced once at its end, too."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from benchmarks.common import MB, Figure
from cleaner import Cleaner, CleanerConfig
from cleaner.cleaner import warm_up as warm_cleaner
from storage.config import LogConfig
from storage.kernels import warm_up as warm_storage
from storage.log import Log
from storage.records import build_batch_columns

LAST_STATS_LINE: list[str] = []
REPEATS = 3   # cleans and raw copies: the best of this many (the machine is shared)


def fill(path: Path, records: int, keys: int, value_size: int, batch: int,
         segment_bytes: int, rng: np.random.Generator, *, distinct: bool = False) -> Log:
    log = Log.open(path, LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact",
                                   max_message_bytes=max(batch * (value_size + 64), 1 << 20)))
    value = b"v" * value_size
    done = 0
    while done < records:
        n = min(batch, records - done)
        ids = np.arange(done, done + n) if distinct else rng.integers(0, keys, n)
        key_list = [b"%016d" % k for k in ids.tolist()]
        ts = np.full(n, 1_700_000_000_000, dtype=np.int64)
        log.append_batch(build_batch_columns(key_list, [value] * n, ts))
        done += n
    log.roll()
    log.flush()
    return log


def raw_copy_seconds(log: Log, target: Path, *, durable: bool = False) -> float:
    """Read every closed segment and write it to another file: the raw read+write baseline (no
    fsync), or with ``durable`` the same copy fsynced once at its end, as durable as the cleaned
    segment is before its swap."""
    os.sync()
    start = time.perf_counter()
    with open(target, "wb") as out:
        for segment in log.segments()[:-1]:
            with open(segment.log_path, "rb") as f:
                while chunk := f.read(1 << 20):
                    out.write(chunk)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    return time.perf_counter() - start


def clean_seconds(log: Log, cleaner: Cleaner) -> tuple[float, int]:
    """Clean ``log`` whole, pass after pass: (seconds, passes)."""
    os.sync()
    start = time.perf_counter()
    first_dirty, passes = 0, 0
    while first_dirty < log.active_segment.base_offset:
        result = cleaner.clean(log, first_dirty)
        LAST_STATS_LINE[:] = [result.stats.log_line(0, log.name, first_dirty,
                                                    result.next_dirty_offset)]
        first_dirty = result.next_dirty_offset
        passes += 1
    return time.perf_counter() - start, passes


def measure(name: str, log: Log, config: CleanerConfig, root: Path, target_records: float | None,
            target_mb: float | None) -> list[Figure]:
    """The best of ``REPEATS`` cleans of fresh copies of ``log`` (left as it is) and of as many
    raw copies of its closed segments, alternating."""
    records = log.log_end_offset
    size = sum(s.size for s in log.segments()[:-1])
    cleaner = Cleaner(config)
    rss_before = psutil.Process().memory_info().rss
    raw = durable_raw = elapsed = float("inf")
    for repeat in range(REPEATS):
        raw = min(raw, raw_copy_seconds(log, root / f"{name}.raw"))
        durable_raw = min(durable_raw, raw_copy_seconds(log, root / f"{name}.raw", durable=True))
        copy_dir = root / f"copy{repeat}-0"
        shutil.copytree(log.dir, copy_dir)
        copy = Log.open(copy_dir, log.config)
        try:
            seconds, passes = clean_seconds(copy, cleaner)
            elapsed = min(elapsed, seconds)
        finally:
            copy.close()
            shutil.rmtree(copy_dir)
    rss_growth = psutil.Process().memory_info().rss - rss_before
    note = (f"{passes} pass(es), {size / MB:,.0f} MB, RSS +{rss_growth / 2**20:,.0f} MiB; "
            f"best of {REPEATS}, as the raw copy; the raw copy fsynced once at its end: "
            f"{size / durable_raw / MB:,.0f} MB/s (ratio {durable_raw / elapsed:.2f})")
    return [
        Figure(f"cleaner, {name}: records/s", records / elapsed, "records/s",
               target=target_records, baseline=records / raw, baseline_name="raw read+write",
               note=note),
        Figure(f"cleaner, {name}: MB/s", size / elapsed / MB, "MB/s", target=target_mb,
               baseline=size / raw / MB, baseline_name="raw read+write"),
    ]


def run(quick: bool = False) -> list[Figure]:
    warm_storage()
    warm_cleaner()
    rng = np.random.default_rng(5)
    root = Path(tempfile.mkdtemp(prefix="strata-bench-cleaner-"))
    figures: list[Figure] = []
    try:
        _warm_clean(root)
        small = 400_000 if quick else 3_000_000
        log = fill(root / "small-0", small, small // 10, 100, 1000, 64 * 2**20, rng)
        figures += measure("small records (16 B key, 100 B value, 10% live keys)", log,
                           CleanerConfig(), root, 2_000_000, None)
        print(f"    stats line: {LAST_STATS_LINE[0].strip()}".replace("\n", "\n    "))
        log.close()

        large = 200 if quick else 4000
        log = fill(root / "large-0", large, large // 4, 100_000, 10, 256 * 2**20, rng)
        figures += measure("large records (100 KB values)", log, CleanerConfig(), root, None,
                           1000)
        log.close()

        distinct = 500_000 if quick else 5_000_000
        log = fill(root / "card-0", distinct, distinct, 100, 1000, 256 * 2**20, rng,
                   distinct=True)
        figures += measure(f"high cardinality ({distinct:,} distinct keys, 128 MiB map)", log,
                           CleanerConfig(), root, None, 50)
        log.close()
        rss = psutil.Process(os.getpid()).memory_info().rss
        figures.append(Figure("resident memory of the cleaning process", rss / 2**20, "MiB",
                              note="bound: 128 MiB map + I/O buffers + 200 MiB"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


def _warm_clean(root: Path) -> None:
    """One tiny clean so every kernel variant the cleaner uses is compiled before timing."""
    rng = np.random.default_rng(0)
    log = fill(root / "warm-0", 2000, 100, 10, 100, 1 << 20, rng)
    Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)).clean(log, 0)
    log.close()
