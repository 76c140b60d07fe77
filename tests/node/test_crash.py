"""kill -9 of a process that owns a directory of many partitions while it appends and flushes:
the reopen finds every flushed record, and re-validates each log only from its checkpointed
recovery point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from node import LogDir
from storage.checkpoint import OffsetCheckpointFile
from storage.config import LogConfig
from storage.files import RECOVERY_POINT_CHECKPOINT, TopicPartition

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 20


def segments_from(directory: Path, recovery_point: int) -> int:
    """How many segments an unclean load must re-validate: from the one holding the point on."""
    bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
    start = max((i for i, base in enumerate(bases) if base <= recovery_point), default=0)
    return len(bases) - start


def test_kill_9_while_appending_loses_no_flushed_record(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    child = subprocess.Popen([sys.executable, "-m", "tests.node._child", "produce", str(path),
                              str(PARTITIONS)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    flushed = [0] * PARTITIONS
    rounds = 0
    for line in child.stdout:
        if line.startswith("flushed "):
            flushed = [int(x) for x in line.split()[1:]]
        rounds += 1
        if rounds == 40 and line.startswith("unflushed"):
            break
        if rounds > 40 and line.startswith("flushed"):
            break   # it is appending the next round right now
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert min(flushed) >= 200

    checkpoint = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT).read()
    expected_recovery = {p: segments_from(path / f"t-{p}", checkpoint[TopicPartition("t", p)])
                         for p in range(PARTITIONS)}
    with LogDir.open(path, default_config=LogConfig(segment_bytes=4096),
                     start_tasks=False) as d:
        assert not d.had_clean_shutdown
        assert len(d.logs()) == PARTITIONS
        total_segments = total_recovered = 0
        for p in range(PARTITIONS):
            log = d.log("t", p)
            assert log.log_end_offset >= flushed[p]
            records = list(log.read(0, flushed[p]))
            assert [r.offset for r in records] == list(range(flushed[p]))
            assert all(r.value == f"{p}:{r.offset}".encode() for r in records)
            assert log.load_result.recovered_segments <= expected_recovery[p]
            total_segments += log.number_of_segments
            total_recovered += log.load_result.recovered_segments
        assert total_recovered < total_segments / 2   # only the tails, not everything
