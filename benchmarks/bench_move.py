"""Moving a partition between log directories (KIP-113), node against node in this process
(``LogDirServer.move_in`` with the source's ``LogDirServer`` as its link: the copy rounds, the
switch and the promotion, without Ray's call cost):

* move throughput: MB/s of a partition of ``SIZE_MB`` moved, beside a raw copy of the same
  bytes in the same run (``shutil.copyfile`` of every file, then an fsync of each: what the
  move must at least do);
* the switch: how long appends are held (``MoveResult.held_ms``) while an appender thread
  writes to the partition, over ``MOVES`` moves back and forth (p99 and max), and the longest
  append call seen during the moves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.common import MB, Figure
from node.server import LogDirServer
from storage.kernels import warm_up
from storage.records import build_batch_columns

RECORDS_PER_BATCH = 2000
VALUE_BYTES = 100
PAUSE_TARGET_MS = 100.0


def run(quick: bool = False) -> list[Figure]:
    warm_up()
    root = Path(tempfile.mkdtemp(prefix="strata-bench-move-"))
    try:
        return _figures(root, size_mb=32 if quick else 128, moves=6 if quick else 20)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _batch(seed: int, records: int = RECORDS_PER_BATCH) -> bytes:
    rng = np.random.default_rng(seed)
    keys = [bytes(k) for k in rng.integers(0, 256, (records, 16), dtype=np.uint8)]
    return build_batch_columns(keys, [b"v" * VALUE_BYTES] * records,
                               np.full(records, int(time.time() * 1000), dtype=np.int64))


def _figures(root: Path, size_mb: int, moves: int) -> list[Figure]:
    a, b = LogDirServer(root / "a", start_tasks=False), LogDirServer(root / "b", start_tasks=False)
    try:
        a.create_partition("bench", 0, {"segment.bytes": str(64 * MB)})
        batch = _batch(1)
        while a.log_dir.log("bench", 0).size_in_bytes < size_mb * MB:
            a.append_batch("bench", 0, batch)
        a.flush("bench", 0)
        size = a.log_dir.log("bench", 0).size_in_bytes
        raw_s = _raw_copy(root / "a" / "bench-0", root / "raw")
        shutil.rmtree(root / "raw")
        result = b.move_in("bench", 0, str(root / "a"), a)
        move_s = result.elapsed_ms / 1000
        held, slowest = _switches(a, b, root, moves)
    finally:
        a.close(), b.close()
    return [
        Figure(f"move of a {size / MB:.0f} MB partition between directories, MB/s",
               size / move_s / MB, "MB/s", baseline=size / raw_s / MB,
               baseline_name="raw copy + fsync of its files",
               note=f"{result.rounds} copy rounds; in process (Ray adds one call per round)"),
        Figure("appends held at the switch, p99", float(np.percentile(held, 99)), "ms",
               note=f"max {max(held):.1f} ms over {len(held)} moves under appends; longest "
                    f"append call during them {slowest:.1f} ms; goal < {PAUSE_TARGET_MS:.0f} ms"),
    ]


def _raw_copy(source: Path, target: Path) -> float:
    start = time.perf_counter()
    target.mkdir()
    for name in sorted(os.listdir(source)):
        shutil.copyfile(source / name, target / name)
        fd = os.open(target / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def _switches(a: LogDirServer, b: LogDirServer, root: Path,
              moves: int) -> tuple[list[float], float]:
    """Move the partition back and forth ``moves`` times while a thread appends to wherever it
    lives; returns the held times and the longest append call (ms)."""
    from node.errors import PartitionMovedError, UnknownPartitionError

    stop = threading.Event()
    slowest = [0.0]
    batch = _batch(2, records=100)     # ~13 KB a call, one call a millisecond at most
    owner = {"node": b}

    def append() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                owner["node"].append_batch("bench", 0, batch)
            except (PartitionMovedError, UnknownPartitionError):
                owner["node"] = a if owner["node"] is b else b
            finally:     # a call that waited for the switch and then heard "moved" counts
                slowest[0] = max(slowest[0], (time.perf_counter() - began) * 1000)
            stop.wait(0.001)

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    held = []
    try:
        for i in range(moves):
            source, target = (b, a) if i % 2 == 0 else (a, b)
            result = target.move_in("bench", 0, str(source.path), source)
            held.append(result.held_ms)
            for name in os.listdir(source.path):      # keep the disk from filling up
                if name.endswith("-delete"):
                    shutil.rmtree(source.path / name, ignore_errors=True)
    finally:
        stop.set()
        thread.join(30)
    return held, slowest[0]
