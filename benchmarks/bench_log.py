"""Partition log benchmarks: the first append of a fresh process, append, sequential read, recovery
after an unclean shutdown, and open after a clean shutdown, each beside a raw file baseline of the
same bytes in the same run.

Appends and raw writes alternate, each after an ``os.sync()`` so that neither starts with the
other's dirty pages still being written back, and the best of the runs is kept for both; recovery,
the clean open and their raw baselines are each the best of ``REPEATS`` runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from benchmarks.common import MB, Figure, raw_read_seconds, raw_write_seconds
from storage.config import LogConfig
from storage.kernels import warm_up
from storage.log import Log
from storage.records import build_batch_columns, scan_batches

RECORDS_PER_BATCH = 1000


def make_batches(count: int) -> list[bytes]:
    """Producer-encoded batches: 1000 records of a 16 B key and a 100 B value each."""
    rng = np.random.default_rng(0)
    batches = []
    for b in range(count):
        keys = [bytes(k) for k in rng.integers(0, 256, (RECORDS_PER_BATCH, 16), dtype=np.uint8)]
        values = [b"v" * 100] * RECORDS_PER_BATCH
        ts = np.full(RECORDS_PER_BATCH, 1_700_000_000_000 + b, dtype=np.int64)
        batches.append(build_batch_columns(keys, values, ts))
    return batches


def _best_append_and_raw(root: Path, config: LogConfig, batches: list[bytes],
                         runs: int) -> tuple[float, float, Log]:
    """Best append and best raw write seconds of ``runs`` alternating runs, and the log of the
    last run, still open."""
    append_s, raw_s = float("inf"), float("inf")
    log: Log | None = None
    for _ in range(runs):
        os.sync()
        raw_s = min(raw_s, raw_write_seconds(root / "raw.bin", batches))
        (root / "raw.bin").unlink()
        if log is not None:
            log.close()
            shutil.rmtree(log.dir)
        os.sync()
        log = Log.open(root / "bench-0", config)
        start = time.perf_counter()
        for data in batches:
            log.append_batch(data)
        append_s = min(append_s, time.perf_counter() - start)
    assert log is not None
    return append_s, raw_s, log


def run(quick: bool = False) -> list[Figure]:
    first = _first_append_ms()
    warm_up()
    # --quick still recovers 138 MB: at 17.5 MB the recovery figure was mostly fixed costs
    batch_count = 1100 if quick else 1500
    runs = 1 if quick else 3
    batches = make_batches(batch_count)
    total_bytes = sum(len(b) for b in batches)
    records = batch_count * RECORDS_PER_BATCH
    figures: list[Figure] = [
        Figure("first append in a fresh process (Log.open + one record)", first.append_ms, "ms",
               note=f"after {first.imports_ms:,.0f} ms of imports; target: under 100 ms")]
    root = Path(tempfile.mkdtemp(prefix="strata-bench-log-"))
    try:
        rolling = LogConfig(segment_bytes=64 * 1024 * 1024)
        rolled_s, rolled_raw, log = _best_append_and_raw(root, rolling, batches, runs)
        log.close()
        shutil.rmtree(log.dir)
        config = LogConfig()   # Kafka's defaults: 1 GiB segments
        append_s, raw, log = _best_append_and_raw(root, config, batches, runs)
        figures.append(Figure("append, producer-encoded batches, every record validated",
                              records / append_s, "records/s", target=5_000_000,
                              baseline=records / raw, baseline_name="raw write"))
        figures.append(Figure("append throughput", total_bytes / append_s / MB, "MB/s",
                              baseline=total_bytes / raw / MB, baseline_name="raw write",
                              note="target: at least half the raw write"))
        figures.append(Figure("append throughput, rolling every 64 MiB",
                              total_bytes / rolled_s / MB, "MB/s",
                              baseline=total_bytes / rolled_raw / MB, baseline_name="raw write",
                              note="each rolled segment fsynced in the background, as Kafka does"))
        log.flush()
        end = log.log_end_offset

        raw_read = sum(raw_read_seconds(s.log_path) for s in log.segments())
        start = time.perf_counter()
        offset, read_bytes = 0, 0
        while offset < end:
            fetch = log.read_raw(offset, 1024 * 1024)
            if fetch is None:
                break
            read_bytes += len(fetch.data)
            offset = _next_offset(fetch.data)
        read_s = time.perf_counter() - start
        figures.append(Figure("sequential read (whole batches, 1 MiB fetches), CRC-checked",
                              read_bytes / read_s / MB, "MB/s", target=1000,
                              baseline=read_bytes / raw_read / MB, baseline_name="raw read",
                              note="every batch's CRC and offsets verified"))
        start = time.perf_counter()
        decoded = sum(1 for _ in log.read(0, end))
        decode_s = time.perf_counter() - start
        assert decoded == records
        figures.append(Figure("sequential read, decoded records (Log.read), CRC-checked",
                              decoded / decode_s, "records/s",
                              note="into Record objects, which dominate the cost"))
        segment_files = [s.log_path for s in log.segments()]
        log.close()

        recover_s = float("inf")
        for _ in range(REPEATS):   # no recovery point: unclean, every segment recovered again
            start = time.perf_counter()
            recovered = Log.open(root / "bench-0", config)
            recover_s = min(recover_s, time.perf_counter() - start)
            assert recovered.log_end_offset == end
            recovered.close()
        raw_read = min(raw_read, min(sum(raw_read_seconds(path) for path in segment_files)
                                     for _ in range(REPEATS)))
        figures.append(Figure("recovery after unclean shutdown, CRC-checked",
                              total_bytes / recover_s / MB, "MB/s", target=1000,
                              baseline=total_bytes / raw_read / MB, baseline_name="raw read",
                              note=f"{total_bytes / MB:,.0f} MB; best of {REPEATS}, as the raw "
                                   f"read"))

        segments = 5000 if quick else 50_000
        seg_config = LogConfig(segment_bytes=len(batches[0]) // 8)
        few = _one_batch_segments(root / "few-0", seg_config, FEW_SEGMENTS)
        few_rate = _fetch_rate(few)
        few.close()
        end = _one_batch_segments(root / "many-0", seg_config, segments).log_end_offset
        open_s = float("inf")
        for _ in range(REPEATS - 1):
            start = time.perf_counter()
            Log.open(root / "many-0", seg_config, recovery_point=end,
                     had_clean_shutdown=True).close()
            open_s = min(open_s, time.perf_counter() - start)
        start = time.perf_counter()
        reopened = Log.open(root / "many-0", seg_config, recovery_point=end, had_clean_shutdown=True)
        open_s = min(open_s, time.perf_counter() - start)
        count = reopened.number_of_segments
        first_use_rate = _first_reads(reopened)
        many_rate = _fetch_rate(reopened)
        reopened.close()
        figures.append(Figure("first read of each closed segment after a clean open",
                              first_use_rate, "segments/s",
                              note="its indexes checked against its .log then, not at the open"))
        figures.append(Figure(f"fetch at a random offset, log of {count:,} segments",
                              many_rate, "fetches/s", baseline=few_rate,
                              baseline_name=f"the same in a log of {FEW_SEGMENTS} segments",
                              note="target: at least 0.5 (a fetch costs O(log segments)); "
                                   "every segment read once before"))
        stat_s = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            for path in (root / "many-0").iterdir():
                path.stat()
            stat_s = min(stat_s, time.perf_counter() - start)
        figures.append(Figure("open after clean shutdown", count / open_s, "segments/s",
                              target=10_000, baseline=count / stat_s,
                              baseline_name="listdir+stat of every file",
                              note=f"best of {REPEATS}, as listdir+stat; closed segments' "
                                   f"indexes checked at their first use"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


FEW_SEGMENTS = 100
REPEATS = 3   # recovery, open and their baselines: the best of this many (the machine is shared)
FETCH_SAMPLES = 5000

_FIRST_APPEND = """
import sys, tempfile, time
start = time.perf_counter()
from storage import Log, Record
imported = time.perf_counter()
with tempfile.TemporaryDirectory() as root:
    log = Log.open(root + "/first-0")
    log.append([Record(key=b"k", value=b"v")])
    appended = time.perf_counter()
    log.close()
print((imported - start) * 1000, (appended - imported) * 1000)
"""


class FirstAppend(NamedTuple):
    """A fresh interpreter's import of ``storage`` and its first ``Log.open`` + ``append``."""

    imports_ms: float
    append_ms: float


def _first_append_ms() -> FirstAppend:
    """The first append of a fresh process, measured in one (the numba kernels load from their
    on-disk cache there, as in any new process; the best of three runs)."""
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", _FIRST_APPEND], check=True,
                             capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1]).stdout.split()
        runs.append(FirstAppend(float(out[0]), float(out[1])))
    return min(runs, key=lambda run: run.append_ms)


def _one_batch_segments(path: Path, config: LogConfig, count: int) -> Log:
    """A log of ``count`` segments of one one-record batch each, flushed and closed cleanly
    (returned closed: its log end offset is still read)."""
    small = build_batch_columns([b"k"], [b"v"], np.array([1], dtype=np.int64))
    log = Log.open(path, config, recovery_point=0, had_clean_shutdown=True)
    for _ in range(count):
        log.append_batch(small)
        log.roll()
    log.flush()
    log.close()
    return log


def _first_reads(log: Log) -> float:
    """Segments per second of one ``read_raw`` at every segment's base offset: after a clean
    open each is a closed segment's first use, which checks its indexes against its ``.log``
    (the fetch rate is then measured on segments past that, as the log of ``FEW_SEGMENTS``,
    written in this process, is)."""
    bases = log.segment_base_offsets()
    start = time.perf_counter()
    for base in bases:
        assert log.read_raw(base, 64 * 1024) is not None or base == log.log_end_offset
    return len(bases) / (time.perf_counter() - start)


def _fetch_rate(log: Log) -> float:
    """Fetches per second of ``read_raw`` at ``FETCH_SAMPLES`` random offsets of ``log``."""
    rng = np.random.default_rng(1)
    offsets = rng.integers(log.log_start_offset, log.log_end_offset, FETCH_SAMPLES).tolist()
    start = time.perf_counter()
    for offset in offsets:
        assert log.read_raw(offset, 64 * 1024) is not None
    return FETCH_SAMPLES / (time.perf_counter() - start)


def _next_offset(data: bytes) -> int:
    scan = scan_batches(data)
    return int(scan.last_offsets[-1]) + 1
