"""Storage-level demo: append a keyed dataset to a partition log under ./data, cut the active segment
as a power loss would, reopen (recovery truncates the torn tail), and show what was kept."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.config import LogConfig  # noqa: E402
from storage.kernels import warm_up  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.records import build_batch_columns  # noqa: E402

RECORDS = 1_000_000
BATCH = 1000
KEYS = 50_000


def main() -> int:
    console = Console()
    root = Path("data") / "demo-storage"
    shutil.rmtree(root, ignore_errors=True)
    path = root / "orders-0"
    warm_up()
    config = LogConfig(segment_bytes=16 * 1024 * 1024)
    log = Log.open(path, config)
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("appending 1,000,000 keyed records", total=RECORDS)
        for first in range(0, RECORDS, BATCH):
            ids = rng.integers(0, KEYS, BATCH)
            keys = [b"key-%08d" % k for k in ids.tolist()]
            values = [b"value-%012d-" % (first + i) + b"x" * 80 for i in range(BATCH)]
            timestamps = np.full(BATCH, 1_700_000_000_000 + first, dtype=np.int64)
            log.append_batch(build_batch_columns(keys, values, timestamps))
            progress.advance(task, BATCH)
    log.flush()
    elapsed = time.perf_counter() - start
    size = log.size_in_bytes
    console.print(f"appended {RECORDS:,} records ({size / 1e6:,.1f} MB) in {elapsed:.2f} s "
                  f"into {log.number_of_segments} segments; recovery point {log.recovery_point:,}")
    for i in range(5):
        log.append_batch(build_batch_columns([b"late-%d" % i], [b"unflushed"],
                                             np.array([1_700_000_000_000], dtype=np.int64)))
    active = log.active_segment.log_path
    log.close()
    torn = active.stat().st_size - 17
    os.truncate(active, torn)
    console.print(f"simulated power loss: cut {active.name} to {torn:,} bytes (mid-batch)")
    start = time.perf_counter()
    reopened = Log.open(path, config, recovery_point=RECORDS)
    elapsed = time.perf_counter() - start
    table = Table(title="after recovery")
    for column in ("log start", "log end", "recovery point", "segments", "bytes truncated",
                   "segments re-validated", "open time"):
        table.add_column(column, justify="right")
    result = reopened.load_result
    table.add_row(f"{reopened.log_start_offset:,}", f"{reopened.log_end_offset:,}",
                  f"{reopened.recovery_point:,}", str(reopened.number_of_segments),
                  f"{result.truncated_bytes:,}", str(result.recovered_segments),
                  f"{elapsed * 1000:.0f} ms")
    console.print(table)
    last = list(reopened.read(reopened.log_end_offset - 3))
    console.print("last records:", [(r.offset, r.key.decode()) for r in last])
    reopened.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
