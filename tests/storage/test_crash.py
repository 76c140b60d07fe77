"""kill -9 of a process that appends and flushes: every flushed record survives, offsets stay
contiguous, and the log keeps working after recovery."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log

CHILD = r"""
import sys
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record

path = sys.argv[1]
log = Log.open(path, LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
offset = log.log_end_offset
print(f"start {offset}", flush=True)
while True:
    n = 1 + offset % 7
    log.append([Record(key=str(offset + i).encode(), value=str(offset + i).encode() * 3,
                       timestamp=1_700_000_000_000 + offset + i) for i in range(n)])
    offset += n
    if offset % 3 == 0:
        log.flush()
        print(f"flushed {offset}", flush=True)
"""


def test_kill_9_during_appends_loses_no_flushed_record(tmp_path: Path) -> None:
    path = tmp_path / "crash-0"
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    acked = 0
    for _round in range(5):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                                 text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("start"), line
        start = int(line.split()[1])
        assert start >= acked
        deadline = time.monotonic() + rng.uniform(0.3, 1.2)
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if line.startswith("flushed"):
                acked = int(line.split()[1])
        child.send_signal(signal.SIGKILL)
        for line in child.stdout:
            if line.startswith("flushed"):
                acked = int(line.split()[1])
        child.wait()
        log = Log.open(path, LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
        records = list(log.read(0))
        assert [r.offset for r in records] == list(range(len(records)))
        assert len(records) >= acked
        assert all(r.value == str(r.offset).encode() * 3 for r in records)
        log.close()
    assert acked > 100
