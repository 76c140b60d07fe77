"""Offline handling: after load, the first OSError from the directory (disk full, permission lost)
takes it offline once; every later call fails fast naming that error; the process lives on;
nothing flushed is lost and a reopen after the fault is fixed recovers."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from node import LogDir, LogDirOfflineError
from node.lock import DirLock, read_holder_pid
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.records import Record, build_batch
from storage.scheduler import FakeScheduler
from tests.conftest import Immutable
from tests.node.conftest import FAST_TASKS, OpenDir

# One segment larger than the file system (no roll while filling) and a sparse index whose first
# page is written early: a write into a not-yet-allocated page of an mmap'd index on a full tmpfs
# would be a SIGBUS, not an OSError (see the report on storage/index.py).
FILL_CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024, index_interval_bytes=64 * 1024,
                        segment_index_bytes=64 * 1024)


def batch(start: int, count: int = 100) -> bytes:
    return build_batch([Record(key=str(start + i).encode(), value=f"{start + i}:".encode() * 12,
                               timestamp=1_700_000_000_000) for i in range(count)])


def assert_every_call_fails(d: LogDir, log, reason: str) -> None:
    calls: list[Callable[[], object]] = [
        d.logs, lambda: d.get_or_create_log("t", 9), lambda: d.get_log("t", 0), d.checkpoint,
        lambda: d.delete_log("t", 0), d.cleanup_logs, d.flush_dirty_logs, d.delete_queued_logs,
        lambda: log.append_batch(batch(0)), lambda: log.read_raw(0), log.flush, log.roll,
        lambda: log.collect_aborted_transactions(0, 1),
    ]
    for call in calls:
        with pytest.raises(LogDirOfflineError) as failure:
            call()
        assert reason in str(failure.value)


def test_disk_full_takes_the_directory_offline_and_a_reopen_recovers(
        tmpfs: Callable[[str], Path]) -> None:
    mount = tmpfs("2m")
    ballast = mount / "ballast"
    ballast.write_bytes(b"\0" * 256 * 1024)
    d = LogDir.open(mount / "logs", default_config=FILL_CONFIG, start_tasks=False)
    log = d.get_or_create_log("t", 0)
    flushed = 0
    with pytest.raises(LogDirOfflineError) as failure:
        for round_ in range(10_000):
            log.append_batch(batch(log.log_end_offset))
            if round_ % 20 == 19:
                log.flush()
                d.checkpoint()
                flushed = log.log_end_offset
    assert flushed > 1000
    reason = d.offline_reason
    assert reason is not None and ("No space left" in reason or "short write" in reason)
    assert str(failure.value).endswith(reason)
    assert_every_call_fails(d, log, reason)
    stats = d.stats()
    assert not stats.online and stats.offline_reason == reason and stats.partitions == ()
    # the filesystem is full up to one 64 KiB step of index allocation (plus a page of slack)
    assert stats.disk_free_bytes < 2 * 64 * 1024
    d.close()   # already released; closing an offline directory is quiet

    ballast.unlink()
    with LogDir.open(mount / "logs", default_config=FILL_CONFIG, start_tasks=False) as again:
        recovered = again.log("t", 0)
        assert not again.had_clean_shutdown
        assert recovered.log_end_offset >= flushed
        assert recovered.load_result.recovery_point <= recovered.log_end_offset
        records = list(recovered.read(0, flushed))
        assert [r.offset for r in records] == list(range(flushed))
        assert all(r.value == f"{r.offset}:".encode() * 12 for r in records)
        recovered.append_batch(batch(recovered.log_end_offset))   # writable again


def test_permission_lost_on_the_active_segment_takes_the_directory_offline(
        tmp_path: Path, immutable: Immutable) -> None:
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    log = d.get_or_create_log("t", 0)
    other = d.get_or_create_log("u", 0)
    log.append_batch(batch(0))
    log.flush()
    immutable(log.active_segment.log_path)
    with pytest.raises(LogDirOfflineError, match="EPERM") as failure:
        log.append_batch(batch(100))
    assert isinstance(failure.value.__cause__, PermissionError)
    assert not d.online and "append_batch of t-0" in d.offline_reason
    assert_every_call_fails(d, other, "EPERM")
    assert other.is_closed and log.is_closed    # files released
    # .lock let go (as Kafka destroys it), still naming the process whose restart brings it back
    assert read_holder_pid(tmp_path / "logs") == os.getpid()
    DirLock.acquire(tmp_path / "logs").release(keep_pid=True)
    with pytest.raises(LogDirOfflineError):
        other.append_batch(batch(0))
    d.close()
    immutable.clear()   # the permission comes back: a new owner recovers everything flushed
    with LogDir.open(tmp_path / "logs", start_tasks=False) as again:
        assert again.log("t", 0).log_end_offset == 100
        assert [r.offset for r in again.log("t", 0).read(0)] == list(range(100))


def test_io_error_in_a_periodic_task_takes_the_directory_offline(
        open_dir: OpenDir, clock: FakeClock, scheduler: FakeScheduler,
        immutable: Immutable) -> None:
    d = open_dir()
    log = d.get_or_create_log("t", 0)
    log.append_batch(batch(0))
    log.flush()
    immutable(d.path)   # the checkpoint's temp file cannot be created
    scheduler.tick()
    assert not d.online
    assert "checkpoint recovery points failed" in d.offline_reason
    assert "EPERM" in d.offline_reason
    assert d.stats().task_failures == 0   # an I/O error is an offline directory, not a task bug
    clock.advance(FAST_TASKS.log_retention_check_interval_ms)
    scheduler.tick()   # the stopped tasks run once more as no-ops and are not re-armed
    assert scheduler.pending == []
    with pytest.raises(LogDirOfflineError):
        d.logs()


def test_offline_is_reported_once_and_the_first_error_wins(
        tmp_path: Path, immutable: Immutable, caplog) -> None:
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    log = d.get_or_create_log("t", 0)
    log.append_batch(batch(0))
    immutable(log.active_segment.log_path)
    with pytest.raises(LogDirOfflineError):
        log.append_batch(batch(100))
    first = d.offline_reason
    with pytest.raises(LogDirOfflineError):
        log.append_batch(batch(100))
    assert d.offline_reason == first
    assert caplog.text.count("goes offline") == 1
    d.close()


def test_close_is_quiet_after_offline_and_leaves_no_marker(
        tmp_path: Path, immutable: Immutable) -> None:
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    log = d.get_or_create_log("t", 0)
    log.append_batch(batch(0))
    immutable(log.active_segment.log_path)
    with pytest.raises(LogDirOfflineError):
        log.append_batch(batch(100))
    d.close()
    assert not (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert os.path.exists(tmp_path / "logs" / "t-0")


def test_going_offline_closes_every_log_writing_no_producer_snapshot(
        tmp_path: Path, immutable: Immutable) -> None:
    """Kafka's handleLogDirFailure closes the handlers of the failed directory's logs: nothing
    more is written to a disk that failed (a clean close would snapshot every log's producers,
    and fsync them)."""
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    failing = d.get_or_create_log("t", 0)
    failing.append_batch(batch(0))
    other = d.get_or_create_log("t", 1)
    other.append_batch(batch(0))
    before = sorted(p.name for p in (tmp_path / "logs" / "t-1").iterdir())
    immutable(failing.active_segment.log_path)
    with pytest.raises(LogDirOfflineError):
        failing.append_batch(batch(100))
    assert other.is_closed
    assert sorted(p.name for p in (tmp_path / "logs" / "t-1").iterdir()) == before
    assert not any(p.suffix == ".snapshot" for p in (tmp_path / "logs" / "t-1").iterdir())
    d.close()


def test_offline_stops_the_directory_s_own_scheduler_thread(
        tmp_path: Path, immutable: Immutable) -> None:
    d = LogDir.open(tmp_path / "logs")
    log = d.get_or_create_log("t", 0)
    log.append_batch(batch(0))
    log.roll()   # schedules the flush of the old segment: the directory's thread is running
    name = f"logdir-{d.path.name}"
    assert any(t.name == name for t in threading.enumerate())
    immutable(log.active_segment.log_path)
    with pytest.raises(LogDirOfflineError):
        log.append_batch(batch(100))
    deadline = time.monotonic() + 10
    while any(t.name == name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == name for t in threading.enumerate())
    d.close()


def test_threads_failing_together_do_not_deadlock(tmp_path: Path, immutable: Immutable) -> None:
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    logs = [d.get_or_create_log("t", p) for p in range(8)]
    for log in logs:
        log.append_batch(batch(0))
    outcomes: list[str] = []

    def writer(log) -> None:
        try:
            for _ in range(10_000):
                log.append_batch(batch(log.log_end_offset))
                log.flush()
            outcomes.append("finished")
        except LogDirOfflineError:
            outcomes.append("offline")

    threads = [threading.Thread(target=writer, args=(log,)) for log in logs]
    for thread in threads:
        thread.start()
    immutable(logs[3].active_segment.log_path)
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert not d.online and outcomes == ["offline"] * len(logs)
    d.close()
