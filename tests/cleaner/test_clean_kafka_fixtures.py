"""The cleaner's checks accept what real Kafka brokers wrote: every partition directory of
tests/fixtures/kafka-real (magic 0, 1 and 2, every codec, consumer offsets, KRaft metadata)
cleans with every batch CRC-checked, and keeps the latest value of every key."""

from __future__ import annotations

import shutil
from pathlib import Path

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.scheduler import FakeScheduler


def partition_dirs(root: Path) -> list[Path]:
    found = []
    for segment in sorted(root.rglob("*.log")):
        try:
            files.topic_partition_of(segment.parent)
        except StorageError:
            continue
        if segment.parent not in found and segment.stat().st_size > 0:
            found.append(segment.parent)
    return found


def latest_values(log: Log) -> dict[bytes, bytes]:
    latest: dict[bytes, bytes | None] = {}
    for record in log.read():
        if record.key is not None:
            latest[record.key] = record.value
    return {k: v for k, v in latest.items() if v is not None}


def test_every_real_kafka_partition_cleans_with_crc_checks(kafka_fixtures: Path,
                                                           tmp_path: Path) -> None:
    dirs = partition_dirs(kafka_fixtures)
    assert len(dirs) >= 40
    for i, source in enumerate(dirs):
        target = tmp_path / str(i) / source.name
        shutil.copytree(source, target)
        for path in target.iterdir():
            path.chmod(0o644)
        clock = FakeClock()
        log = Log.open(target, LogConfig(cleanup_policy="compact", file_delete_delay_ms=0),
                       clock=clock, scheduler=FakeScheduler(clock))
        before = latest_values(log)
        if log.active_segment.size:
            log.roll()
        Cleaner(CleanerConfig(dedupe_buffer_size=1 << 24), clock=clock).clean(
            log, 0, clock.milliseconds())
        assert latest_values(log) == before, source
        log.close()
