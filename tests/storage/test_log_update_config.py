"""``Log.update_config`` (Kafka's ``UnifiedLog.updateConfig``, the dynamic topic config) on real
files: the next roll, retention and the flush policy follow the new config at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record


def _append(log: Log, count: int, ts: int) -> None:
    for i in range(count):
        log.append([Record(key=b"k%d" % i, value=b"v" * 40, timestamp=ts + i)])


def test_update_config_makes_the_active_segment_roll_at_the_new_segment_bytes(
        tmp_path: Path) -> None:
    clock = FakeClock(10_000_000)
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), clock=clock)
    _append(log, 20, 1_000)
    assert log.number_of_segments == 1
    log.update_config(dataclasses.replace(log.config, segment_bytes=600))
    _append(log, 20, 2_000)
    assert log.number_of_segments > 2
    assert all(s.size <= 600 for s in log.segments()[1:])


def test_update_config_retention_ms_applies_at_the_next_check(tmp_path: Path) -> None:
    clock = FakeClock(10_000_000)
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600), clock=clock)
    _append(log, 40, 1_000)
    assert log.delete_old_segments() == 0                 # 7 days by default
    log.update_config(dataclasses.replace(log.config, retention_ms=1_000))
    assert log.delete_old_segments() > 0 and log.log_start_offset > 0
    log.close()


def test_update_config_keeps_what_the_active_segments_files_were_made_with(
        tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096, preallocate=True))
    _append(log, 3, 1_000)
    made = log.active_segment.config
    log.update_config(dataclasses.replace(log.config, preallocate=False, flush_messages=1,
                                          segment_index_bytes=4096, segment_bytes=8192))
    assert log.config.flush_messages == 1 and not log.config.preallocate
    active = log.active_segment.config
    assert active.preallocate and active.segment_bytes == 8192   # its file was sized for it
    assert active.segment_index_bytes == made.segment_index_bytes
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096))
    assert reopened.log_end_offset == 3
    reopened.close()


def test_the_largest_batch_a_log_accepts_is_the_smaller_of_segment_and_message_bytes() -> None:
    """``LogConfig.max_batch_bytes``: what producers (the client, the node encoding a small
    produce) size their batches by."""
    assert LogConfig(segment_bytes=4096, max_message_bytes=1 << 20).max_batch_bytes == 4096
    assert LogConfig(segment_bytes=1 << 20, max_message_bytes=1000).max_batch_bytes == 1000
    assert LogConfig().with_overrides({"max.message.bytes": "2048"}).max_batch_bytes == 2048
