"""The node's half of Kafka's topic verbs on real files: a dynamic topic config applied to the live
logs and kept across a reopen, DeleteRecords raising the log start offset, ListOffsets by
earliest / latest / timestamp, and describe's figures."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from node.errors import PolicyViolationError, UnknownPartitionError
from node.server import LogDirServer
from storage.clock import FakeClock
from storage.errors import InvalidConfigError, OffsetOutOfRangeError
from storage.records import Record, build_batch


def _fill(server: LogDirServer, topic: str, batches: int, per_batch: int = 10,
          start_ts: int = 1_000) -> None:
    for b in range(batches):
        records = [Record(key=b"k%d" % i, value=b"v", timestamp=start_ts + b * 100 + i)
                   for i in range(per_batch)]
        server.append_batch(topic, 0, build_batch(records))


def test_alter_topic_config_applies_to_live_logs_and_survives_a_reopen(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    server = LogDirServer(tmp_path / "d", start_tasks=False, clock=clock)
    server.create_partition("t", 0, {"segment.bytes": "500"})
    _fill(server, "t", 12)
    log = server.log_dir.log("t", 0)
    assert log.number_of_segments > 2 and server.cleanup_logs() == 0   # retention.ms is 7 days
    assert server.alter_topic_config("t", {"segment.bytes": "500", "retention.ms": "1000"}) == {
        "segment.bytes": "500", "retention.ms": "1000"}
    assert log.config.retention_ms == 1000
    deleted = server.cleanup_logs()        # the live log follows the new retention at once
    assert deleted > 0 and log.log_start_offset > 0
    server.close()

    again = LogDirServer(tmp_path / "d", start_tasks=False, clock=clock)
    assert again.topic_configs() == {"t": {"segment.bytes": "500", "retention.ms": "1000"}}
    assert again.log_dir.log("t", 0).config.retention_ms == 1000
    with pytest.raises(InvalidConfigError) as refused:
        again.alter_topic_config("t", {"retention.ms": "soon"})
    assert refused.value.key == "retention.ms"
    assert again.topic_configs()["t"]["retention.ms"] == "1000"     # nothing changed
    with pytest.raises(UnknownPartitionError):
        again.alter_topic_config("other", {"retention.ms": "5"})
    again.close()


def test_delete_records_raises_the_log_start_and_reads_below_it_fail(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("t", 0, {"segment.bytes": "500"})
    _fill(server, "t", 10)
    assert server.delete_records("t", 0, 35) == 35
    with pytest.raises(OffsetOutOfRangeError):
        server.read_raw("t", 0, 34)
    assert server.delete_records("t", 0, 20) == 35          # below the start: unchanged
    err = pickle.loads(pickle.dumps(pytest.raises(
        OffsetOutOfRangeError, server.delete_records, "t", 0, 101).value))
    assert err.offset == 101                                 # above the log end (100)
    with pytest.raises(OffsetOutOfRangeError):
        server.delete_records("t", 0, -5)
    assert server.delete_records("t", 0, -1) == 100          # -1: the high watermark
    server.close()
    again = LogDirServer(tmp_path / "d", start_tasks=False)
    assert again.offsets("t", 0) == (100, 100)               # checkpointed, kept
    again.close()


def test_delete_records_of_a_compacted_topic_is_a_policy_violation(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, {"cleanup.policy": "compact"})
    _fill(server, "c", 2)
    with pytest.raises(PolicyViolationError):
        server.delete_records("c", 0, 5)
    assert server.offsets("c", 0) == (0, 20)
    server.close()


def test_list_offset_earliest_latest_and_by_timestamp(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("t", 0, {"segment.bytes": "500"})
    _fill(server, "t", 10)                     # batch b holds timestamps 1000+100b .. +9
    server.delete_records("t", 0, 15)
    assert server.list_offset("t", 0, -2) == (15, None)
    assert server.list_offset("t", 0, -1) == (100, None)
    assert server.list_offset("t", 0, 1_503) == (53, 1_503)
    assert server.list_offset("t", 0, 1_550) == (60, 1_600)   # the next record at or after
    assert server.list_offset("t", 0, 1_000) == (15, 1_105)   # not below the log start
    assert server.list_offset("t", 0, 99_999) is None
    described = server.describe_partitions("t")
    assert [(p.log_start_offset, p.log_end_offset, p.last_stable_offset) for p in described] == [
        (15, 100, 100)]
    assert described[0].size_bytes == server.log_dir.log("t", 0).size_in_bytes
    assert described[0].config == {"segment.bytes": "500"}
    server.close()


def test_log_deletion_after_delete_records(tmp_path: Path) -> None:
    """Ports Kafka's UnifiedLogTest.testLogDeletionAfterDeleteRecords through the node's verbs:
    15 single-record batches in segments of 5, DeleteRecords to 1, 6 and 15, each followed by a
    retention check, leaves 3, 2 and 1 segments."""
    clock = FakeClock()
    batch = build_batch([Record(key=None, value=b"test", timestamp=clock.milliseconds())])
    server = LogDirServer(tmp_path / "d", start_tasks=False, clock=clock)
    server.create_partition("t", 0, {"segment.bytes": str(len(batch) * 5)})
    for _ in range(15):
        server.append_batch("t", 0, batch)
    log = server.log_dir.log("t", 0)
    assert log.number_of_segments == 3 and log.log_start_offset == 0
    for offset, segments in ((1, 3), (6, 2), (15, 1)):
        assert server.delete_records("t", 0, offset) == offset
        server.cleanup_logs()
        assert (log.number_of_segments, log.log_start_offset) == (segments, offset)
    server.close()
