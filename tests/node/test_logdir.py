"""LogManagerTest scenarios for one directory: create, keys, per-topic configs, async delete,
clean-shutdown marker, checkpoints, invalid names, loading progress and failed loads."""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import pickle
import threading
from pathlib import Path

import pytest

from node import (
    InvalidLogDirError,
    LoadProgress,
    LogDir,
    LogDirClosedError,
    LogDirConfig,
    PartitionId,
    UnknownPartitionError,
)
from storage.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import InvalidConfigError, InvalidTopicError
from storage.files import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
)
from storage.loader import LoadResult, LogLoader
from storage.records import Record
from storage.scheduler import FakeScheduler
from tests.node.conftest import OpenDir


def append(log, count: int, clock: FakeClock, key: bool = True) -> None:
    for i in range(count):
        log.append([Record(key=str(i).encode() if key else None, value=b"test",
                           timestamp=clock.milliseconds())])


def test_create_log_makes_topic_partition_dir(open_dir: OpenDir) -> None:
    d = open_dir()
    log = d.get_or_create_log("kafka", 0)
    assert (d.path / "kafka-0").is_dir()
    assert log.dir == d.path / "kafka-0"
    assert d.get_or_create_log("kafka", 0) is log
    assert d.log("kafka", 0) is log
    assert d.get_log("kafka", 1) is None
    with pytest.raises(UnknownPartitionError):
        d.log("kafka", 1)


def test_open_creates_missing_directory_with_kafka_defaults(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b"
    with LogDir.open(path) as d:
        assert path.is_dir()
        assert d.recovery_threads == 2
        assert d.config == LogDirConfig()
        assert d.default_config == LogConfig()
        assert any(t.name == f"logdir-{path.name}" for t in threading.enumerate())
    assert not any(t.name == f"logdir-{path.name}" for t in threading.enumerate())


def test_open_refuses_a_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InvalidLogDirError, match="not a directory"):
        LogDir.open(tmp_path / "f")


def test_logs_are_keyed_by_topic_partition_tuples(open_dir: OpenDir) -> None:
    d = open_dir()
    a = d.get_or_create_log("t", 0)
    b = d.get_or_create_log("t", 1)
    logs = d.logs()
    assert logs == {("t", 0): a, ("t", 1): b}
    assert ("t", 0) in logs and logs[("t", 1)] is b
    assert logs[TopicPartition("t", 0)] is a and TopicPartition("t", 1) in logs
    assert sorted(logs) == [("t", 0), ("t", 1)]
    assert [key.topic for key in logs] == ["t", "t"]
    assert isinstance(next(iter(logs)), PartitionId)


def test_topic_configs_override_the_default(open_dir: OpenDir) -> None:
    d = open_dir(default_config=LogConfig(segment_bytes=4096),
                 topic_configs={"c": {"cleanup.policy": "compact"}})
    assert d.get_or_create_log("c", 0).config.compact
    assert d.get_or_create_log("c", 0).config.segment_bytes == 4096
    assert not d.get_or_create_log("p", 0).config.compact


def test_bad_topic_config_fails_the_open(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="no.such.key"):
        LogDir.open(tmp_path, topic_configs={"t": {"no.such.key": "1"}})


def test_invalid_topic_name_is_refused(open_dir: OpenDir) -> None:
    d = open_dir()
    with pytest.raises(InvalidTopicError):
        d.get_or_create_log("bad topic", 0)
    assert d.online


def test_log_dir_config_from_kafka_keys() -> None:
    c = LogDirConfig.from_properties({"log.retention.check.interval.ms": "1000",
                                      "num.recovery.threads.per.data.dir": 4})
    assert c.log_retention_check_interval_ms == 1000
    assert c.num_recovery_threads_per_data_dir == 4
    assert LogDirConfig.from_properties(c.to_properties()) == c
    with pytest.raises(InvalidConfigError, match="num.recovery.threads.per.data.dir"):
        LogDirConfig(num_recovery_threads_per_data_dir=0)
    with pytest.raises(InvalidConfigError, match="unknown"):
        LogDirConfig.from_properties({"log.dirs": "/x"})


def test_file_references_after_async_delete(open_dir: OpenDir, clock: FakeClock,
                                            scheduler: FakeScheduler) -> None:
    d = open_dir()
    log = d.get_or_create_log("t", 0)
    append(log, 10, clock)
    log.flush()
    segment = log.active_segment
    name = segment.log_path.name
    removed = d.delete_log("t", 0)
    assert removed is log and removed.dir.name.endswith("-delete")
    assert not (d.path / "t-0").exists()
    assert segment.log_path == removed.dir / name and segment.log_path.exists()
    assert segment.offset_index.path.parent == removed.dir
    assert d.logs() == {} and d.stats().logs_to_delete == 1
    assert d.delete_log("t", 0) is None
    clock.advance(log.config.file_delete_delay_ms - 1)
    scheduler.tick()
    assert removed.dir.exists()
    clock.advance(1)
    scheduler.tick()
    assert not removed.dir.exists() and not segment.log_path.exists()
    assert d.stats().logs_to_delete == 0


def test_delete_rewrites_checkpoints_without_the_partition(open_dir: OpenDir,
                                                           clock: FakeClock) -> None:
    d = open_dir()
    for p in range(2):
        log = d.get_or_create_log("t", p)
        append(log, 5, clock)
        log.flush()
        log.maybe_increment_log_start_offset(2)
        log.roll()
    d.checkpoint()
    cleaner = OffsetCheckpointFile(d.path / CLEANER_OFFSET_CHECKPOINT)
    cleaner.write({TopicPartition("t", 0): 3, TopicPartition("t", 1): 3})
    d.delete_log("t", 0)
    recovery = OffsetCheckpointFile(d.path / RECOVERY_POINT_CHECKPOINT).read()
    assert recovery == {TopicPartition("t", 1): 5}
    assert OffsetCheckpointFile(d.path / LOG_START_OFFSET_CHECKPOINT).read() == {
        TopicPartition("t", 1): 2}
    assert cleaner.read() == {TopicPartition("t", 1): 3}


def test_create_and_delete_longest_legal_topic(open_dir: OpenDir, clock: FakeClock,
                                               scheduler: FakeScheduler) -> None:
    topic = "a" * 249
    d = open_dir(topic_configs={topic: {"file.delete.delay.ms": "1000"}})
    log = d.get_or_create_log(topic, 0)
    append(log, 3, clock)
    assert (d.path / f"{topic}-0").is_dir()
    removed = d.delete_log(topic, 0)
    assert removed is not None and len(removed.dir.name) <= 255
    clock.advance(1000)
    scheduler.tick()
    assert list(d.path.glob("a*")) == []


def test_shutdown_with_zero_file_delete_delay(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    d = LogDir.open(path, topic_configs={"t": {"file.delete.delay.ms": "0"}})
    log = d.get_or_create_log("t", 0)
    log.append([Record(key=b"k", value=b"v", timestamp=0)])
    d.delete_log("t", 0)
    d.close()
    clock = FakeClock()
    scheduler = FakeScheduler(clock)
    with LogDir.open(path, topic_configs={"t": {"file.delete.delay.ms": "0"}}, clock=clock,
                     scheduler=scheduler, config=LogDirConfig(log_initial_task_delay_ms=0)) as d:
        assert d.logs() == {}
        scheduler.tick()
        assert [p.name for p in path.iterdir() if p.is_dir()] == []


def test_clean_shutdown_marker_written_at_close_and_deleted_at_open(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    clock = FakeClock()
    d = LogDir.open(path, default_config=LogConfig(segment_bytes=1024), clock=clock,
                    scheduler=FakeScheduler(clock))
    for p in range(3):
        append(d.get_or_create_log("t", p), 100, clock)
    d.close(broker_epoch=3)
    marker = CleanShutdownFile(path)
    assert marker.read_epoch() == 3
    recovery = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT).read()
    assert recovery == {TopicPartition("t", p): 100 for p in range(3)}

    d = LogDir.open(path, default_config=LogConfig(segment_bytes=1024), clock=clock,
                    scheduler=FakeScheduler(clock))
    assert d.had_clean_shutdown and d.clean_shutdown_epoch == 3
    assert not marker.exists()   # a crash from here on counts as unclean
    assert all(log.load_result.recovered_segments == 0 for log in d.logs().values())
    assert all(log.number_of_segments > 1 for log in d.logs().values())
    assert all(log.log_end_offset == 100 for log in d.logs().values())
    d.close()


def test_failed_load_leaves_no_marker_and_no_lock(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk error (EIO) while loading one partition fails the whole open (STYLE.md P7); a stray
    entry is only that partition's problem (the stray-file table in test_stray_files.py)."""
    path = tmp_path / "logs"
    with LogDir.open(path) as d:
        d.get_or_create_log("t", 0).append([Record(key=b"k", value=b"v", timestamp=0)])
    assert CleanShutdownFile(path).exists()
    (path / "u-0").mkdir()
    real_load = LogLoader.load

    def failing_disk(loader: LogLoader) -> LoadResult:
        if loader.dir.name == "u-0":
            raise OSError(errno.EIO, "Input/output error", str(loader.dir))
        return real_load(loader)

    monkeypatch.setattr(LogLoader, "load", failing_disk)
    with pytest.raises(OSError) as failure:
        LogDir.open(path, recovery_threads=1)
    assert any("u-0" in note for note in getattr(failure.value, "__notes__", []))
    assert not CleanShutdownFile(path).exists()
    monkeypatch.setattr(LogLoader, "load", real_load)
    with LogDir.open(path) as d:
        assert not d.had_clean_shutdown
        assert set(d.logs()) == {("t", 0), ("u", 0)}
        assert d.log("t", 0).log_end_offset == 1


def test_invalid_directory_names_are_reported_and_left_alone(open_dir: OpenDir, tmp_path: Path,
                                                             clock: FakeClock,
                                                             scheduler: FakeScheduler) -> None:
    path = tmp_path / "logs"
    bad = ["foo", "topic-x", "t-1.notauuid-delete", f"t-2.{'a' * 32}-future", "bad topic-0",
           "t-01"]
    for name in [*bad, "t-0"]:
        (path / name).mkdir(parents=True)
        (path / name / "00000000000000000000.log").write_bytes(b"")
    (path / "stray-file").write_text("left alone")
    d = open_dir(path)
    assert set(d.logs()) == {("t", 0)}
    assert sorted(i.name for i in d.invalid_dirs) == sorted(bad)
    assert all(i.reason for i in d.stats().invalid_dirs)
    clock.advance(10 * 60_000)
    scheduler.tick()
    for name in bad:
        assert (path / name / "00000000000000000000.log").exists()


def test_delete_dirs_found_at_open_are_deleted_after_the_delay(
        open_dir: OpenDir, tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    path = tmp_path / "logs"
    doomed = path / f"t-0.{'b' * 32}-delete"
    doomed.mkdir(parents=True)
    (doomed / "00000000000000000000.log").write_bytes(b"garbage is never loaded")
    d = open_dir(path)
    assert d.logs() == {} and d.stats().logs_to_delete == 1
    scheduler.tick()
    assert doomed.exists()
    clock.advance(LogConfig().file_delete_delay_ms)
    scheduler.tick()
    assert not doomed.exists()


def test_checkpoint_recovery_points_of_every_log(open_dir: OpenDir, clock: FakeClock) -> None:
    d = open_dir()
    tps = [("test-a", 1), ("test-b", 1)]
    logs = [d.get_or_create_log(*tp) for tp in tps]
    for log in logs:
        append(log, 50, clock)
        log.flush()
    assert d.checkpoint_recovery_points()
    checkpoint = OffsetCheckpointFile(d.path / RECOVERY_POINT_CHECKPOINT).read()
    for tp, log in zip(tps, logs):
        assert checkpoint[TopicPartition(*tp)] == log.recovery_point == 50


def test_checkpoint_rewrites_only_what_changed(open_dir: OpenDir, clock: FakeClock) -> None:
    d = open_dir()
    logs = [d.get_or_create_log("t", p) for p in range(5)]
    for log in logs:
        append(log, 10, clock)
        log.flush()
    assert d.checkpoint_recovery_points()
    file = d.path / RECOVERY_POINT_CHECKPOINT
    inode = file.stat().st_ino
    assert not d.checkpoint_recovery_points()   # nothing changed: no rewrite, no fsync
    assert file.stat().st_ino == inode
    append(logs[2], 5, clock)
    logs[2].flush()
    assert d.checkpoint_recovery_points()
    assert file.stat().st_ino != inode
    checkpoint = OffsetCheckpointFile(file).read()
    assert checkpoint == {TopicPartition("t", p): 15 if p == 2 else 10 for p in range(5)}


def test_log_start_offset_checkpoint_lists_only_advanced_logs(tmp_path: Path,
                                                              open_dir: OpenDir,
                                                              clock: FakeClock) -> None:
    d = open_dir()
    moved, still = d.get_or_create_log("t", 0), d.get_or_create_log("t", 1)
    for log in (moved, still):
        append(log, 10, clock)
    moved.maybe_increment_log_start_offset(4)
    d.checkpoint()
    assert OffsetCheckpointFile(d.path / LOG_START_OFFSET_CHECKPOINT).read() == {
        TopicPartition("t", 0): 4}
    d.close()
    reopened = open_dir()
    assert reopened.log("t", 0).log_start_offset == 4
    assert reopened.log("t", 1).log_start_offset == 0


def test_unreadable_checkpoint_reads_as_empty(tmp_path: Path, caplog) -> None:
    path = tmp_path / "logs"
    with LogDir.open(path, default_config=LogConfig(segment_bytes=1024)) as d:
        append(d.get_or_create_log("t", 0), 100, FakeClock())
    (path / RECOVERY_POINT_CHECKPOINT).write_text("7\nnot a checkpoint\n")
    with caplog.at_level(logging.WARNING):
        d = LogDir.open(path, default_config=LogConfig(segment_bytes=1024))
    assert "unreadable checkpoint" in caplog.text
    assert d.log("t", 0).log_end_offset == 100   # clean shutdown: nothing to recover anyway
    d.close()


def test_load_progress_is_visible_while_loading(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    with LogDir.open(path, default_config=LogConfig(segment_bytes=200)) as d:
        for p in range(3):
            append(d.get_or_create_log("t", p), 10, FakeClock())
        segments = sum(log.number_of_segments for log in d.logs().values())
    seen: list[LoadProgress] = []
    first_loaded, resume = threading.Event(), threading.Event()

    def on_progress(progress: LoadProgress) -> None:
        seen.append(progress)
        if progress.remaining_logs == 2:
            first_loaded.set()
            assert resume.wait(10)

    result: list[LogDir] = []
    opener = threading.Thread(target=lambda: result.append(
        LogDir.open(path, recovery_threads=1, on_load_progress=on_progress)))
    opener.start()
    assert first_loaded.wait(10)
    during = seen[-1]
    assert (during.total_logs, during.remaining_logs, during.done) == (3, 2, False)
    assert during.total_segments == segments
    assert 0 < during.remaining_segments < segments
    assert not result   # open() is still loading
    resume.set()
    opener.join(10)
    d = result[0]
    assert [p.remaining_logs for p in seen] == [3, 2, 1, 0, 0]
    assert seen[-1].done and seen[-1].remaining_segments == 0
    assert d.load_progress().done and d.stats().load_time_ms >= 0
    d.close()


def test_calls_after_close_raise_closed(open_dir: OpenDir) -> None:
    d = open_dir()
    d.get_or_create_log("t", 0)
    d.close()
    d.close()
    for call in (d.logs, lambda: d.get_or_create_log("t", 1), d.checkpoint,
                 lambda: d.delete_log("t", 0)):
        with pytest.raises(LogDirClosedError):
            call()
    assert d.stats().closed and d.stats().partitions == ()


def test_stats_snapshot_with_dirty_bytes_from_cleaner_checkpoint(open_dir: OpenDir,
                                                                  clock: FakeClock) -> None:
    d = open_dir(default_config=LogConfig(segment_bytes=300),
                 topic_configs={"c": {"cleanup.policy": "compact"}})
    compacted, plain = d.get_or_create_log("c", 0), d.get_or_create_log("p", 0)
    append(compacted, 30, clock)
    append(plain, 30, clock)
    segments = compacted.segments()
    assert len(segments) >= 3
    OffsetCheckpointFile(d.path / CLEANER_OFFSET_CHECKPOINT).write(
        {TopicPartition("c", 0): segments[1].base_offset})
    stats = d.stats()
    by_topic = {p.topic: p for p in stats.partitions}
    c = by_topic["c"]
    assert c.size_bytes == compacted.size_in_bytes
    assert c.segments == len(segments) and c.log_end_offset == 30
    assert c.dirty_bytes == sum(s.size for s in segments[1:])
    assert c.dirty_ratio == pytest.approx(c.dirty_bytes / c.size_bytes)
    assert by_topic["p"].dirty_bytes == 0 and by_topic["p"].cleanup_policy == "delete"
    assert stats.online and stats.offline_reason is None and stats.partitions_count == 2
    assert stats.log_bytes == compacted.size_in_bytes + plain.size_in_bytes
    assert stats.disk_total_bytes > 0 and stats.disk_free_bytes > 0
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert dataclasses.asdict(stats)["partitions"][0]["topic"] == "c"


def test_stats_without_cleaner_checkpoint_counts_a_compacted_log_all_dirty(
        open_dir: OpenDir, clock: FakeClock) -> None:
    d = open_dir(topic_configs={"c": {"cleanup.policy": "compact"}})
    append(d.get_or_create_log("c", 0), 5, clock)
    (partition,) = d.stats().partitions
    assert partition.dirty_ratio == 1.0 and partition.dirty_bytes == partition.size_bytes


def test_stats_report_the_last_stable_offset_an_open_transaction_holds_back(
        open_dir: OpenDir, clock: FakeClock) -> None:
    from storage.records import ControlType, build_batch
    d = open_dir()
    log = d.get_or_create_log("t", 0)
    append(log, 3, clock)
    log.append_batch(build_batch([Record(key=b"k", value=b"v", timestamp=clock.milliseconds())],
                                 producer_id=9, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
    append(log, 2, clock)
    (partition,) = d.stats().partitions
    assert (partition.last_stable_offset, partition.log_end_offset) == (3, 6)
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=9, producer_epoch=0)
    (partition,) = d.stats().partitions
    assert partition.last_stable_offset == partition.log_end_offset == 7


def test_directory_created_by_open_is_fsynced_and_empty_of_logs(tmp_path: Path) -> None:
    with LogDir.open(tmp_path / "new") as d:
        assert d.logs() == {} and d.stats().partitions_count == 0
    assert sorted(os.listdir(tmp_path / "new")) == [
        ".kafka_cleanshutdown", ".lock", LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT]


def test_delete_refused_by_the_cleaner_keeps_the_log(open_dir: OpenDir) -> None:
    def refuse(tp):
        raise RuntimeError(f"cannot abort cleaning of {tp}")

    d = open_dir(pause_cleaning=refuse)
    log = d.get_or_create_log("t", 0)
    with pytest.raises(RuntimeError, match="cannot abort"):
        d.delete_log("t", 0)
    assert d.log("t", 0) is log and (d.path / "t-0").is_dir() and d.online


def test_delete_pauses_cleaning_while_the_log_is_still_listed(tmp_path: Path) -> None:
    """A clean finishing while the pause waits must still find its log to swap into."""
    from contextlib import contextmanager

    listed: list[bool] = []
    opened: list[LogDir] = []

    @contextmanager
    def pause(tp):
        listed.append(opened[0].get_log(tp.topic, tp.partition) is not None)
        yield

    opened.append(LogDir.open(tmp_path / "logs", start_tasks=False, pause_cleaning=pause))
    d = opened[0]
    d.get_or_create_log("t", 0)
    assert d.delete_log("t", 0) is not None
    assert listed == [True] and d.get_log("t", 0) is None
    assert d.delete_log("t", 0) is None and listed == [True]   # nothing to pause for
    d.close()
