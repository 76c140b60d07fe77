"""Hostile input at the door of a log directory (issue 12): a topic name or partition number Kafka
refuses never reaches the disk, and the broker-level integer settings of the directory and the
cleaner keep Kafka's types and ranges. The tables live in tests/storage/test_hostile_input.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleaner.config import CleanerConfig
from cleaner.config import KEYS as CLEANER_KEYS
from node import LogDirConfig
from node.config import KEYS as LOG_DIR_KEYS
from node.server import LogDirServer
from storage.errors import InvalidConfigError, InvalidTopicError
from storage.records import Record
from tests.node.conftest import OpenDir
from tests.storage.test_hostile_input import (
    BAD_CONFIG_TEXT,
    BAD_PARTITIONS,
    BAD_TOPICS,
    GOOD_PARTITIONS,
    snapshot_files,
)

PARTITION_CALLS = {
    "get_or_create_log": lambda d, t, p: d.get_or_create_log(t, p),
    "get_log": lambda d, t, p: d.get_log(t, p),
    "log": lambda d, t, p: d.log(t, p),
    "delete_log": lambda d, t, p: d.delete_log(t, p),
}


@pytest.mark.parametrize("call", sorted(PARTITION_CALLS))
@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_a_bad_topic_name_is_refused_and_nothing_is_written(open_dir: OpenDir, tmp_path: Path,
                                                            call: str, topic: object) -> None:
    d = open_dir()
    d.get_or_create_log("t", 0)
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidTopicError) as raised:
        PARTITION_CALLS[call](d, topic, 0)
    assert raised.value.topic == topic
    assert snapshot_files(tmp_path) == before
    assert d.online and list(d.logs()) == [("t", 0)]


@pytest.mark.parametrize("call", sorted(PARTITION_CALLS))
@pytest.mark.parametrize("partition", BAD_PARTITIONS)
def test_a_bad_partition_number_is_refused_and_nothing_is_written(
        open_dir: OpenDir, tmp_path: Path, call: str, partition: object) -> None:
    d = open_dir()
    d.get_or_create_log("t", 1)    # True == 1 and 1.0 == 1: none of them may reach it
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidTopicError) as raised:
        PARTITION_CALLS[call](d, "t", partition)
    assert raised.value.topic == "t" and raised.value.partition is partition
    assert snapshot_files(tmp_path) == before
    assert d.online and list(d.logs()) == [("t", 1)]


@pytest.mark.parametrize("partition", GOOD_PARTITIONS)
def test_a_partition_number_in_range_survives_a_restart(open_dir: OpenDir, tmp_path: Path,
                                                        partition: int) -> None:
    d = open_dir()
    d.get_or_create_log("t", partition).append([Record(key=b"k", value=b"v", timestamp=0)])
    assert d.log("t", int(partition)) is d.get_log("t", partition)
    d.close()
    again = open_dir()
    assert list(again.logs()) == [("t", int(partition))]
    assert [r.value for r in again.log("t", int(partition)).read()] == [b"v"]


@pytest.mark.parametrize("partition", [1.5, True, 2**31, 2**63])
def test_the_reproduced_partition_numbers_leave_no_partition_behind(
        open_dir: OpenDir, tmp_path: Path, partition: object) -> None:
    """The exact reproduction: these were accepted, written as ``t-1.5``, ``t-True``, ... and
    unreachable after a restart."""
    d = open_dir()
    with pytest.raises(InvalidTopicError):
        d.get_or_create_log("t", partition)   # type: ignore[arg-type]
    d.close()
    assert not [p for p in (tmp_path / "logs").iterdir() if p.is_dir()]
    assert list(open_dir().logs()) == []


def test_a_newline_topic_no_longer_breaks_the_clean_shutdown(open_dir: OpenDir,
                                                             tmp_path: Path) -> None:
    """The exact reproduction: ``t\\n`` passed the name check, and every later checkpoint write
    and clean shutdown of the directory failed."""
    d = open_dir()
    d.get_or_create_log("ok", 0).append([Record(key=b"k", value=b"v", timestamp=0)])
    with pytest.raises(InvalidTopicError, match=r"'t\\n'"):
        d.get_or_create_log("t\n", 0)
    d.checkpoint()
    d.close()
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert list(open_dir().logs()) == [("ok", 0)]


@pytest.mark.parametrize(("topic", "partition"), [
    *[pytest.param(t.values[0], 0, id=f"topic-{t.id}") for t in BAD_TOPICS],
    *[pytest.param("u", p.values[0], id=f"partition-{p.id}") for p in BAD_PARTITIONS],
])
def test_the_node_server_writes_no_topic_config_for_a_refused_partition(
        tmp_path: Path, topic: object, partition: object) -> None:
    """``create_partition`` wrote the topic's overrides to ``topic-configs.json`` before the log
    refused the name, leaving a config for a partition that was never created."""
    server = LogDirServer(tmp_path / "logs", start_tasks=False)
    try:
        server.create_partition("t", 1, {"segment.bytes": "1024"})
        before = snapshot_files(tmp_path)
        with pytest.raises(InvalidTopicError):
            server.create_partition(topic, partition, {"segment.bytes": "2048"})
        assert snapshot_files(tmp_path) == before
        assert server.topic_configs() == {"t": {"segment.bytes": "1024"}}
        assert server.partitions() == [("t", 1)]
    finally:
        server.close()


# ---- broker-level integer settings (node and cleaner) -----------------------------------------
# (config class, its key -> field table, Kafka key, value): Kafka's types are in the comments of
# node/config.py and cleaner/config.py
BAD_BROKER_CONFIGS = [
    *[(LogDirConfig, LOG_DIR_KEYS, key, value) for key, value in [
        ("log.retention.check.interval.ms", 2**63),
        ("log.flush.scheduler.interval.ms", 2**63),
        ("log.flush.offset.checkpoint.interval.ms", 2**31),
        ("log.flush.start.offset.checkpoint.interval.ms", 2**31),
        ("log.initial.task.delay.ms", 2**63),
        ("num.recovery.threads.per.data.dir", 2**31),
        ("producer.id.expiration.ms", 2**31),
        ("producer.id.expiration.check.interval.ms", 2**31),
        ("num.recovery.threads.per.data.dir", 0),
        ("producer.id.expiration.ms", 1.5),
        ("producer.id.expiration.ms", True)]],
    *[(CleanerConfig, CLEANER_KEYS, key, value) for key, value in [
        ("log.cleaner.threads", 2**31),
        ("log.cleaner.dedupe.buffer.size", 2**63),
        ("log.cleaner.io.buffer.size", 2**31),
        ("message.max.bytes", 2**31),
        ("log.cleaner.backoff.ms", 2**63),
        ("log.cleaner.uncleanable.retries", 2**31),
        ("log.cleaner.uncleanable.retry.backoff.ms", 2**63),
        ("producer.id.expiration.ms", 2**31),
        ("log.cleaner.io.buffer.size", -1),
        ("log.cleaner.threads", 1.5)]],
]


@pytest.mark.parametrize(("config", "keys", "key", "value"), BAD_BROKER_CONFIGS,
                         ids=[f"{c.__name__}-{k}={v}" for c, _, k, v in BAD_BROKER_CONFIGS])
def test_a_broker_setting_outside_kafkas_range_is_refused_naming_the_key(
        config: type, keys: dict[str, str], key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        config(**{keys[key]: value})
    assert raised.value.key == key and raised.value.value is value
    with pytest.raises(InvalidConfigError) as raised:
        config.from_properties({key: str(value)})
    assert raised.value.key == key and key in str(raised.value)


@pytest.mark.parametrize("text", BAD_CONFIG_TEXT)
def test_node_and_cleaner_integers_take_only_what_javas_parser_takes(text: str) -> None:
    with pytest.raises(InvalidConfigError):
        LogDirConfig.from_properties({"num.recovery.threads.per.data.dir": text})
    with pytest.raises(InvalidConfigError):
        CleanerConfig.from_properties({"log.cleaner.io.buffer.size": text})


def test_the_int32_edges_are_accepted() -> None:
    assert LogDirConfig.from_properties(
        {"log.flush.offset.checkpoint.interval.ms": str(2**31 - 1)}
    ).log_flush_offset_checkpoint_interval_ms == 2**31 - 1
    assert CleanerConfig.from_properties(
        {"message.max.bytes": str(2**31 - 1)}).max_message_size == 2**31 - 1
