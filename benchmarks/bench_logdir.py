"""Log directory benchmarks: open after a clean shutdown (segments/s, beside a listdir+stat of
every file) and open after a kill (time follows the bytes past each recovery point, not the size
of the directory: two runs over the same directory, reporting both times and MB re-validated).

The directories are built once per run: one partition is written through ``Log`` and copied to
make the others, then the checkpoint and marker files are written as a shutdown or a kill leaves
them. Every open reads from the page cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import MB, Figure, raw_read_seconds
from node import LogDir
from storage.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage.config import LogConfig
from storage.files import RECOVERY_POINT_CHECKPOINT, TopicPartition
from storage.kernels import warm_up
from storage.log import Log
from storage.records import build_batch_columns

SEGMENTS_PER_PARTITION = 10
REPEATS = 3


def run(quick: bool = False) -> list[Figure]:
    warm_up()
    root = Path(tempfile.mkdtemp(prefix="strata-bench-logdir-"))
    try:
        return (clean_open(root / "clean", 200 if quick else 1000)
                + unclean_open(root / "unclean", 10 if quick else 20,
                               4 * MB if quick else 16 * MB))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _batch(records: int, value_bytes: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    keys = [bytes(k) for k in rng.integers(0, 256, (records, 16), dtype=np.uint8)]
    return build_batch_columns(keys, [b"v" * value_bytes] * records,
                               np.full(records, 1_700_000_000_000, dtype=np.int64))


def _build(directory: Path, partitions: int, config: LogConfig, batch: bytes,
           batches_per_segment: int, segments: int) -> tuple[list[TopicPartition], list[int]]:
    """``partitions`` copies of one log of ``segments`` full segments and an empty active one;
    returns the partitions and the segment base offsets (the same in every copy)."""
    directory.mkdir(parents=True)
    template = directory / "t-0"
    log = Log.open(template, config, recovery_point=0, had_clean_shutdown=True)
    for _ in range(segments):
        for _ in range(batches_per_segment):
            log.append_batch(batch)
        log.roll()
    bases = log.segment_base_offsets()
    log.flush()
    log.close()
    for p in range(1, partitions):
        shutil.copytree(template, directory / f"t-{p}")
    return [TopicPartition("t", p) for p in range(partitions)], bases


def clean_open(directory: Path, partitions: int) -> list[Figure]:
    config = LogConfig(segment_bytes=64 * 1024)
    tps, bases = _build(directory, partitions, config, _batch(10, 100, 0), 1,
                        SEGMENTS_PER_PARTITION - 1)
    OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).write(
        {tp: bases[-1] for tp in tps})
    CleanShutdownFile(directory).write()
    best, segments = float("inf"), 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        d = LogDir.open(directory, default_config=config, start_tasks=False)
        best = min(best, time.perf_counter() - start)
        segments = sum(log.number_of_segments for log in d.logs().values())
        assert d.had_clean_shutdown
        d.close()
    start = time.perf_counter()
    for sub in os.scandir(directory):
        if sub.is_dir():
            for entry in os.scandir(sub.path):
                entry.stat()
    stat_s = time.perf_counter() - start
    return [Figure(f"open after clean shutdown, {partitions} partitions x "
                   f"{SEGMENTS_PER_PARTITION} segments", segments / best, "segments/s",
                   target=10_000, baseline=segments / stat_s,
                   baseline_name="listdir+stat of every file",
                   note=f"{best * 1000:.0f} ms, one loading thread")]


def unclean_open(directory: Path, partitions: int, bytes_per_partition: int) -> list[Figure]:
    segment_bytes = 256 * 1024
    config = LogConfig(segment_bytes=segment_bytes)
    batch = _batch(100, 100, 1)
    per_segment = segment_bytes // len(batch)
    segments = max(2, bytes_per_partition // (per_segment * len(batch)))
    tps, bases = _build(directory, partitions, config, batch, per_segment, segments)
    size = sum(f.stat().st_size for f in directory.rglob("*.log"))
    raw_s = sum(raw_read_seconds(f) for f in directory.rglob("*.log"))

    # a kill leaves no marker and the recovery points of the last checkpoint: first at the last
    # full segment of each log (that segment and the empty active one are re-validated), then at
    # 0 (everything is)
    end = {tp: bases[-1] for tp in tps}
    clean_s, _ = _open(directory, config, end, clean=True)
    tail_s, tail_bytes = _open(directory, config, {tp: bases[-2] for tp in tps}, clean=False)
    full_s, full_bytes = _open(directory, config, {tp: 0 for tp in tps}, clean=False)
    note = f"directory {size / MB:.0f} MB in {partitions} partitions"
    return [
        Figure("open after clean shutdown (the same directory)", clean_s * 1000, "ms",
               note=f"0 MB re-validated; {note}"),
        Figure("open after kill, recovery points at the last segments", tail_s * 1000, "ms",
               note=f"{tail_bytes / MB:.1f} MB re-validated"),
        Figure("open after kill, recovery points at 0", full_s * 1000, "ms",
               note=f"{full_bytes / MB:.1f} MB re-validated"),
        Figure("recovery after kill, CRC-checked bytes past the recovery points",
               full_bytes / (full_s - clean_s) / MB, "MB/s", baseline=size / raw_s / MB,
               baseline_name="raw read",
               note=f"time above the clean open {(tail_s - clean_s) * 1000:.0f} ms vs "
                    f"{(full_s - clean_s) * 1000:.0f} ms for {tail_bytes / MB:.1f} vs "
                    f"{full_bytes / MB:.1f} MB; Kafka ~42 MB/s"),
    ]


def _open(directory: Path, config: LogConfig, recovery_points: dict[TopicPartition, int], *,
          clean: bool) -> tuple[float, int]:
    """Best open time of the directory left as a clean shutdown or a kill leaves it with these
    recovery points, and the bytes of the segments the open re-validated."""
    best, recovered = float("inf"), 0
    for _ in range(REPEATS):
        OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).write(recovery_points)
        if clean:
            CleanShutdownFile(directory).write()
        else:
            CleanShutdownFile(directory).delete()
        start = time.perf_counter()
        d = LogDir.open(directory, default_config=config, start_tasks=False)
        best = min(best, time.perf_counter() - start)
        assert d.had_clean_shutdown == clean
        recovered = 0
        for log in d.logs().values():
            count = log.load_result.recovered_segments
            recovered += sum(s.size for s in log.segments()[-count:]) if count else 0
        d.close()
    return best, recovered
