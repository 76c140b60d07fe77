"""The periodic tasks of a log directory, driven by a fake clock and scheduler (LogManagerTest's
retention, flush and checkpoint scenarios, and the producer expiration check)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from node import LogDir, LogDirConfig
from storage.checkpoint import OffsetCheckpointFile
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.files import DELETED_SUFFIX, RECOVERY_POINT_CHECKPOINT, TopicPartition
from storage.records import Record, build_batch
from storage.scheduler import FakeScheduler
from tests.node.conftest import OpenDir

RETENTION_MS = 10 * 60 * 1000
SET_SIZE = len(build_batch([Record(key=b"0", value=b"test", timestamp=0)]))


def append(log, count: int, clock: FakeClock) -> int:
    last = -1
    for i in range(count):
        last = log.append([Record(key=str(i % 10).encode(), value=b"test",
                                  timestamp=clock.milliseconds())]).last_offset
    return last


def test_retention_by_time_leaves_one_segment_then_deletes_files(
        open_dir: OpenDir, clock: FakeClock, scheduler: FakeScheduler) -> None:
    d = open_dir(default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS))
    log = d.get_or_create_log("kafka", 0)
    last = append(log, 200, clock)
    assert log.number_of_segments > 1
    scheduler.tick()
    assert log.number_of_segments > 1   # nothing expired yet
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()
    assert log.number_of_segments == 1
    assert any(p.name.endswith(DELETED_SUFFIX) for p in log.dir.iterdir())
    clock.advance(log.config.file_delete_delay_ms + 1)
    scheduler.tick()
    (base,) = log.segment_base_offsets()
    assert base == last + 1
    assert {p.name.split(".")[0] for p in log.dir.iterdir()} == {f"{base:020d}"}
    assert log.read_raw(last + 1) is None   # an empty fetch at the new log start
    with pytest.raises(OffsetOutOfRangeError):
        log.read_raw(0)
    log.append([Record(key=b"k", value=b"still appendable", timestamp=clock.milliseconds())])
    assert log.log_end_offset == last + 2


def test_retention_by_size_keeps_six_segments(open_dir: OpenDir, clock: FakeClock,
                                              scheduler: FakeScheduler) -> None:
    segment_bytes = 10 * SET_SIZE
    d = open_dir(default_config=LogConfig(segment_bytes=segment_bytes,
                                          retention_bytes=5 * 10 * SET_SIZE + 10))
    log = d.get_or_create_log("kafka", 0)
    last = append(log, 200, clock)
    assert log.number_of_segments == 200 * SET_SIZE // segment_bytes
    scheduler.tick()
    assert log.number_of_segments == 6
    clock.advance(log.config.file_delete_delay_ms + 1)
    scheduler.tick()
    assert not any(p.name.endswith(DELETED_SUFFIX) for p in log.dir.iterdir())
    assert log.read_raw(last + 1) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read_raw(0)


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_retention_leaves_compacted_logs_alone(open_dir: OpenDir, clock: FakeClock,
                                               scheduler: FakeScheduler, policy: str) -> None:
    d = open_dir(default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS,
                                          retention_bytes=1024),
                 topic_configs={"c": {"cleanup.policy": policy}})
    compacted, plain = d.get_or_create_log("c", 0), d.get_or_create_log("p", 0)
    append(compacted, 200, clock)
    append(plain, 200, clock)
    segments = compacted.number_of_segments
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()
    assert compacted.number_of_segments == segments
    assert plain.number_of_segments == 1
    assert d.cleanup_logs() == 0


def test_retention_pauses_cleaning_of_each_log_it_works_on(open_dir: OpenDir, clock: FakeClock,
                                                           scheduler: FakeScheduler) -> None:
    entered: list[TopicPartition] = []
    active: list[TopicPartition] = []

    @contextmanager
    def pause(tp: TopicPartition) -> Iterator[None]:
        entered.append(tp)
        active.append(tp)
        yield
        active.remove(tp)

    d = open_dir(default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS),
                 topic_configs={"c": {"cleanup.policy": "compact"}}, pause_cleaning=pause)
    for tp in (("a", 0), ("b", 0), ("c", 0)):
        append(d.get_or_create_log(*tp), 50, clock)
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()
    assert sorted(entered, key=str) == [TopicPartition("a", 0), TopicPartition("b", 0)]
    assert active == []
    d.delete_log("c", 0)
    assert entered[-1] == TopicPartition("c", 0)


def test_a_failing_log_does_not_stop_retention_of_the_others(
        open_dir: OpenDir, clock: FakeClock, scheduler: FakeScheduler) -> None:
    @contextmanager
    def pause(tp: TopicPartition) -> Iterator[None]:
        if tp.topic == "bad":
            raise RuntimeError("cleaner refused to pause")
        yield

    d = open_dir(default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS),
                 pause_cleaning=pause)
    bad, good = d.get_or_create_log("bad", 0), d.get_or_create_log("good", 0)
    append(bad, 50, clock)
    append(good, 50, clock)
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()
    assert good.number_of_segments == 1 and bad.number_of_segments > 1
    stats = d.stats()
    assert stats.online and stats.task_failures == 1
    assert "cleaner refused to pause" in stats.last_task_failure


def test_time_based_flush(open_dir: OpenDir, clock: FakeClock,
                          scheduler: FakeScheduler) -> None:
    d = open_dir(topic_configs={"f": {"flush.ms": "1000"}})
    flushed, unflushed = d.get_or_create_log("f", 0), d.get_or_create_log("u", 0)
    append(flushed, 10, clock)
    append(unflushed, 10, clock)
    scheduler.tick()
    clock.advance(2000)
    scheduler.tick()
    assert clock.milliseconds() - flushed.last_flush_ms <= 1000
    assert flushed.recovery_point == flushed.log_end_offset == 10
    assert unflushed.recovery_point == 0


def test_recovery_point_checkpoint_task(open_dir: OpenDir, tmp_path: Path, clock: FakeClock,
                                        scheduler: FakeScheduler) -> None:
    d = open_dir()
    log = d.get_or_create_log("t", 0)
    append(log, 20, clock)
    log.flush()
    scheduler.tick()
    file = OffsetCheckpointFile(d.path / RECOVERY_POINT_CHECKPOINT)
    assert file.read() == {TopicPartition("t", 0): 20}
    append(log, 5, clock)
    log.flush()
    clock.advance(999)
    scheduler.tick()
    assert file.read() == {TopicPartition("t", 0): 20}
    clock.advance(1)
    scheduler.tick()
    assert file.read() == {TopicPartition("t", 0): 25}


def test_first_task_run_waits_for_the_initial_delay(open_dir: OpenDir, clock: FakeClock,
                                                    scheduler: FakeScheduler) -> None:
    d = open_dir(config=LogDirConfig())   # Kafka's 30 s initial delay, 60 s checkpoints
    log = d.get_or_create_log("t", 0)
    append(log, 5, clock)
    log.flush()
    scheduler.tick()
    file = d.path / RECOVERY_POINT_CHECKPOINT
    assert not file.exists()
    clock.advance(30_000)
    scheduler.tick()
    assert OffsetCheckpointFile(file).read() == {TopicPartition("t", 0): 5}


def test_start_tasks_false_runs_nothing_until_started(open_dir: OpenDir, clock: FakeClock,
                                                      scheduler: FakeScheduler) -> None:
    d = open_dir(start_tasks=False,
                 default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS))
    log = d.get_or_create_log("t", 0)
    append(log, 50, clock)
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()
    assert log.number_of_segments > 1
    d.start_tasks()
    scheduler.tick()
    assert log.number_of_segments == 1


def test_tasks_stop_at_close(open_dir: OpenDir, clock: FakeClock,
                             scheduler: FakeScheduler) -> None:
    d = open_dir(default_config=LogConfig(segment_bytes=1024, retention_ms=RETENTION_MS))
    log = d.get_or_create_log("t", 0)
    append(log, 50, clock)
    scheduler.tick()
    d.close()
    segments = sorted(p.name for p in log.dir.iterdir())
    clock.advance(RETENTION_MS + 1)
    scheduler.tick()                 # each stopped task runs once more, as a no-op, and is gone
    assert scheduler.pending == []
    assert sorted(p.name for p in log.dir.iterdir()) == segments


def test_a_delete_delay_of_long_max_never_breaks_the_scheduler(tmp_path: Path) -> None:
    with LogDir.open(tmp_path / "logs", config=LogDirConfig(log_initial_task_delay_ms=0),
                     topic_configs={"t": {"file.delete.delay.ms": str(2**63 - 1)}}) as d:
        log = d.get_or_create_log("t", 0)
        log.append([Record(key=b"k", value=b"v", timestamp=0)])
        log.roll()
        d.delete_log("t", 0)   # queued for ever; its delete task is never armed
        flushed = d.get_or_create_log("u", 0)
        flushed.append([Record(key=b"k", value=b"v", timestamp=0)])
        flushed.roll()       # the scheduler thread still runs the flush after the roll
        deadline = time.monotonic() + 10
        while flushed.recovery_point < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flushed.recovery_point == 1


def test_producer_expiration_check_forgets_idle_producers_every_interval(
        open_dir: OpenDir, clock: FakeClock, scheduler: FakeScheduler) -> None:
    day, interval = 24 * 60 * 60 * 1000, 60_000
    d = open_dir(config=LogDirConfig(producer_id_expiration_ms=day,
                                     producer_id_expiration_check_interval_ms=interval))
    log = d.get_or_create_log("t", 0)
    for producer_id in (7, 8):
        log.append_batch(build_batch([Record(key=b"k", value=b"v", timestamp=clock.milliseconds())],
                                     producer_id=producer_id, producer_epoch=0, base_sequence=0))
        clock.advance(interval)
    clock.advance(day - 2 * interval)
    scheduler.tick()
    assert set(log.producer_state.producers) == {8}    # 7 wrote a day ago, 8 a minute later
    clock.advance(interval)
    scheduler.tick()
    assert log.producer_state.producers == {}
    assert LogDirConfig.from_properties({"producer.id.expiration.ms": "5"}) \
        .producer_id_expiration_ms == 5
