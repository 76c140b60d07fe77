"""LogCompactionTester-style checks: a random keyed stream with duplicates and tombstones, cleaned
many times with small maps and small segments; and cleaning processes killed at random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from cleaner.offset_map import OffsetMap
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record
from storage.scheduler import FakeScheduler

DELETE_RETENTION_MS = 60_000


def produce(log: Log, rng: random.Random, messages: int, keys: int,
            deletes_percent: int) -> dict[bytes, tuple[int, bytes | None]]:
    """Append a random stream; return the oracle: key -> (offset, value or None) of its last record."""
    oracle: dict[bytes, tuple[int, bytes | None]] = {}
    batch: list[Record] = []
    target = rng.randrange(1, 20)
    for i in range(messages):
        key = str(rng.randrange(keys)).encode()
        value = None if rng.randrange(100) < deletes_percent else f"{i}".encode()
        batch.append(Record(key=key, value=value, timestamp=1_700_000_000_000 + i))
        if len(batch) == target or i == messages - 1:
            info = log.append(batch)
            for j, record in enumerate(batch):
                oracle[record.key] = (info.first_offset + j, record.value)
            batch = []
            target = rng.randrange(1, 20)
    return oracle


def last_wins_view(log: Log) -> dict[bytes, tuple[int, bytes | None]]:
    view: dict[bytes, tuple[int, bytes | None]] = {}
    previous = -1
    for record in log.read():
        assert record.offset > previous
        previous = record.offset
        view[record.key] = (record.offset, record.value)
    return view


def clean_until_done(log: Log, cleaner: Cleaner, now: int, first_dirty: int = 0) -> int:
    passes = 0
    while first_dirty < log.active_segment.base_offset:
        result = cleaner.clean(log, first_dirty, now)
        first_dirty = result.next_dirty_offset
        passes += 1
    return passes


def test_random_stream_keeps_latest_value_of_every_key(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=8 * 1024, cleanup_policy="compact", file_delete_delay_ms=0,
                       delete_retention_ms=DELETE_RETENTION_MS)
    log = Log.open(tmp_path / "compact-0", config, recovery_point=0, had_clean_shutdown=True,
                   clock=clock, scheduler=FakeScheduler(clock))
    rng = random.Random(42)
    cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=600 * 24, dedupe_buffer_load_factor=0.9),
                      clock=clock, offset_map=OffsetMap(600 * 24, 0.9))
    oracle: dict[bytes, tuple[int, bytes | None]] = {}
    for round_ in range(3):
        oracle.update(produce(log, rng, 6000, 2000, 10))
        log.roll()
        passes = clean_until_done(log, cleaner, clock.milliseconds())
        assert passes > 1, "the small map must need several passes"
        view = last_wins_view(log)
        assert view == oracle
        del round_
    live = {k: v for k, v in oracle.items() if v[1] is not None}
    size_before = log.size_in_bytes
    clock.advance(DELETE_RETENTION_MS + 1)
    log.roll()
    clean_until_done(log, cleaner, clock.milliseconds())
    view = last_wins_view(log)
    assert view == live, "tombstones past their horizon are gone and no deleted key reappears"
    assert log.size_in_bytes < size_before


CHILD = r"""
import sys, random
from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from cleaner.offset_map import OffsetMap
from storage.config import LogConfig
from storage.log import Log

path = sys.argv[1]
config = LogConfig(segment_bytes=4096, cleanup_policy="compact", file_delete_delay_ms=0)
log = Log.open(path, config)
cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=300 * 24), offset_map=OffsetMap(300 * 24, 0.9))
print("ready", flush=True)
while True:
    first_dirty = 0
    while first_dirty < log.active_segment.base_offset:
        first_dirty = cleaner.clean(log, first_dirty).next_dirty_offset
"""


def test_killed_cleaning_process_leaves_log_before_or_after(tmp_path: Path) -> None:
    path = tmp_path / "killed-0"
    config = LogConfig(segment_bytes=4096, cleanup_policy="compact", file_delete_delay_ms=0)
    log = Log.open(path, config)
    oracle = produce(log, random.Random(3), 5000, 700, 5)
    log.roll()
    log.flush()
    log.close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    rng = random.Random(11)
    for _attempt in range(6):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=env,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.01, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait()
        reopened = Log.open(path, config)
        assert last_wins_view(reopened) == oracle
        leftovers = [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert leftovers == []
        reopened.close()
