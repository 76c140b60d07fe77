"""Hostile input at the door (issue 12): topic names, partition numbers, offsets and config values
that Kafka refuses are refused here too, with a typed error naming the value, and a refused call
writes nothing. The tables below are shared with the node, cleaner and cluster tests of the same
door (tests/node/test_hostile_input.py, tests/cluster/test_hostile_input.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import InvalidConfigError, InvalidOffsetError, InvalidTopicError
from storage.log import Log
from tests.storage.helpers import batch_of, values

# ---- the tables -------------------------------------------------------------------------------
BAD_TOPICS = [
    pytest.param("t\n", id="newline"),       # passed the old `^...$` pattern
    pytest.param("t\r", id="carriage-return"),
    pytest.param("t ", id="trailing-space"),
    pytest.param(" t", id="leading-space"),
    pytest.param("tö", id="unicode-letter"),
    pytest.param("ｔ", id="fullwidth-letter"),
    pytest.param("t/x", id="slash"),
    pytest.param("t" * 250, id="250-chars"),
    pytest.param(".", id="dot"),
    pytest.param("..", id="dot-dot"),
    pytest.param("", id="empty"),
    pytest.param(b"t", id="bytes"),
    pytest.param(None, id="none"),
]
GOOD_TOPICS = ["t" * 249, "a.b_c-D9", "..x", "-"]

BAD_PARTITIONS = [
    pytest.param(1.5, id="float"),
    pytest.param(1.0, id="whole-float"),
    pytest.param(True, id="true"),
    pytest.param(False, id="false"),
    pytest.param(2**31, id="2^31"),
    pytest.param(2**63, id="2^63"),
    pytest.param(-1, id="negative"),
    pytest.param("1", id="text"),
    pytest.param(None, id="none"),
    pytest.param(np.float64(1.0), id="numpy-float"),
    pytest.param(np.True_, id="numpy-bool"),
]
GOOD_PARTITIONS = [0, 1, 2**31 - 1, np.int64(7), np.int32(3)]

BAD_OFFSETS = [
    pytest.param(0.5, id="float"),
    pytest.param(2.0, id="whole-float"),
    pytest.param(True, id="true"),
    pytest.param("1", id="text"),
    pytest.param(2**63, id="2^63"),
    pytest.param(np.float64(1.0), id="numpy-float"),
]

# (Kafka key, value) pairs LogConfig refuses, from from_properties and from the constructor.
# Kafka's types: segment.bytes, segment.index.bytes, max.message.bytes, index.interval.bytes
# are Java ints; every other integer topic key is a long (LogConfig.CONFIG).
BAD_TOPIC_CONFIGS = [
    ("segment.bytes", 2**31),                # above 2 GiB the partition got stuck
    ("segment.bytes", 13),                   # below LegacyRecord.RECORD_OVERHEAD_V0
    ("segment.index.bytes", 2**31),
    ("segment.index.bytes", 3),
    ("max.message.bytes", 2**31),
    ("max.message.bytes", -1),
    ("index.interval.bytes", 2**31),
    ("index.interval.bytes", -1),
    ("segment.ms", 2**63),
    ("segment.ms", 0),
    ("segment.jitter.ms", 2**63),
    ("retention.ms", 2**63),
    ("retention.ms", -2),
    ("retention.bytes", 2**63),
    ("retention.bytes", -(2**63) - 1),
    ("delete.retention.ms", 2**63),
    ("min.compaction.lag.ms", 2**63),
    ("max.compaction.lag.ms", 2**63),
    ("file.delete.delay.ms", 2**63),
    ("flush.messages", 2**63),
    ("flush.messages", 0),
    ("flush.ms", 2**63),
    ("segment.bytes", 1.5),
    ("segment.bytes", True),
    ("min.cleanable.dirty.ratio", True),
    ("min.cleanable.dirty.ratio", float("nan")),
    ("preallocate", "yes"),
]
GOOD_TOPIC_CONFIGS = [("segment.bytes", 2**31 - 1), ("segment.bytes", 14),
                      ("segment.index.bytes", 2**31 - 1), ("max.message.bytes", 2**31 - 1),
                      ("retention.bytes", -(2**63)), ("segment.ms", 2**63 - 1)]
# values only text can carry: Java's parseInt refuses them, Python's int() did not
BAD_CONFIG_TEXT = ["1_000", "١٠٢٤", "0x400", "1e3", "", "True"]


def snapshot_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> content): what 'nothing written' compares."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# ---- topic names ------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_a_topic_name_kafka_refuses_is_refused_naming_the_topic(topic: object) -> None:
    with pytest.raises(InvalidTopicError) as raised:
        files.validate_topic(topic)   # type: ignore[arg-type]
    assert raised.value.topic == topic
    with pytest.raises(InvalidTopicError):
        files.partition_dir_name(topic, 0)   # type: ignore[arg-type]


@pytest.mark.parametrize("topic", GOOD_TOPICS)
def test_a_legal_topic_name_is_accepted(topic: str) -> None:
    files.validate_topic(topic)
    assert files.partition_dir_name(topic, 0) == f"{topic}-0"


@pytest.mark.parametrize("name", ["t\n-0", "t -0", "tö-0", "t-2147483648", "t-99999999999999999999",
                                  "t-²", "t-٣", "t-+1", "t- 1"])
def test_a_partition_directory_kafka_could_not_parse_is_refused(name: str) -> None:
    with pytest.raises(InvalidTopicError) as raised:
        files.parse_partition_dir(name)
    assert raised.value.directory == name


def test_the_largest_partition_directory_parses() -> None:
    parsed = files.parse_partition_dir("t-2147483647")
    assert parsed.topic_partition == files.TopicPartition("t", 2**31 - 1)


# ---- partition numbers ------------------------------------------------------------------------
@pytest.mark.parametrize("partition", BAD_PARTITIONS)
def test_a_partition_number_that_is_not_an_int32_is_refused(partition: object) -> None:
    with pytest.raises(InvalidTopicError) as raised:
        files.validate_partition(partition, "orders")
    assert raised.value.topic == "orders"
    assert raised.value.partition is partition
    assert "orders" in str(raised.value) and repr(partition) in str(raised.value)
    with pytest.raises(InvalidTopicError):
        files.partition_dir_name("orders", partition)   # type: ignore[arg-type]


@pytest.mark.parametrize("partition", GOOD_PARTITIONS)
def test_a_partition_number_in_int32_range_is_accepted_as_a_plain_int(partition: int) -> None:
    number = files.validate_partition(partition, "orders")
    assert type(number) is int and number == partition
    assert files.partition_dir_name("orders", partition) == f"orders-{int(partition)}"


def test_the_refusal_errors_survive_pickling() -> None:
    with pytest.raises(InvalidTopicError) as topic_error:
        files.validate_partition(1.5, "orders")
    with pytest.raises(InvalidOffsetError) as offset_error:
        files.validate_offset(0.5, "target_offset", partition="orders-0")
    for err in (topic_error.value, offset_error.value):
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is type(err) and str(copy) == str(err) and copy.fields == err.fields


# ---- offsets ----------------------------------------------------------------------------------
@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Log:
    lg = Log.open(tmp_path / "orders-0", LogConfig(segment_bytes=200), clock=clock)
    for i in range(0, 12, 3):
        lg.append_batch(batch_of(i, i + 1, i + 2))
    lg.flush()
    yield lg
    lg.close()


OFFSET_CALLS = {
    "truncate_to": lambda lg, v: lg.truncate_to(v),
    "truncate_fully_and_start_at": lambda lg, v: lg.truncate_fully_and_start_at(v),
    "maybe_increment_log_start_offset": lambda lg, v: lg.maybe_increment_log_start_offset(v),
    "flush": lambda lg, v: lg.flush(v),
    "read_raw": lambda lg, v: lg.read_raw(v),
    "read start_offset": lambda lg, v: list(lg.read(start_offset=v)),
    "read max_offset": lambda lg, v: list(lg.read(max_offset=v)),
}


@pytest.mark.parametrize("call", sorted(OFFSET_CALLS))
@pytest.mark.parametrize("offset", BAD_OFFSETS)
def test_an_offset_that_is_not_an_integer_is_refused_and_the_log_is_unchanged(
        log: Log, tmp_path: Path, call: str, offset: object) -> None:
    before = snapshot_files(tmp_path)
    state = (log.log_start_offset, log.log_end_offset, log.recovery_point)
    with pytest.raises(InvalidOffsetError) as raised:
        OFFSET_CALLS[call](log, offset)
    assert raised.value.offset is offset and raised.value.partition == log.name
    assert raised.value.argument in str(raised.value) and log.name in str(raised.value)
    assert snapshot_files(tmp_path) == before
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == state
    assert values(log.read()) == list(range(12))


@pytest.mark.parametrize("call", ["truncate_to", "truncate_fully_and_start_at",
                                  "maybe_increment_log_start_offset", "flush", "read max_offset"])
def test_a_negative_offset_is_refused_where_it_means_nothing(log: Log, tmp_path: Path,
                                                             call: str) -> None:
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidOffsetError):
        OFFSET_CALLS[call](log, -1)
    assert snapshot_files(tmp_path) == before
    assert values(log.read()) == list(range(12))


def test_truncate_to_half_keeps_every_record(log: Log) -> None:
    """The exact reproduction: ``truncate_to(0.5)`` emptied the log."""
    with pytest.raises(InvalidOffsetError, match="target_offset=0.5"):
        log.truncate_to(0.5)
    assert values(log.read()) == list(range(12))
    assert log.log_end_offset == 12


def test_a_numpy_integer_offset_is_an_offset(log: Log) -> None:
    assert log.truncate_to(np.int64(6)) is True
    assert values(log.read(start_offset=np.int32(3))) == [3, 4, 5]
    assert type(log.log_end_offset) is int


# ---- config ranges ----------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "value"), BAD_TOPIC_CONFIGS)
def test_a_topic_config_outside_kafkas_range_is_refused_naming_the_key(key: str,
                                                                      value: object) -> None:
    from storage.config import TOPIC_KEYS

    with pytest.raises(InvalidConfigError) as raised:
        LogConfig(**{TOPIC_KEYS[key]: value})
    assert raised.value.key == key and raised.value.value is value
    assert key in str(raised.value)
    with pytest.raises(InvalidConfigError) as raised:
        LogConfig.from_properties({key: str(value).lower() if isinstance(value, bool) else value})
    assert raised.value.key == key and key in str(raised.value)


@pytest.mark.parametrize(("key", "value"), GOOD_TOPIC_CONFIGS)
def test_the_edges_of_kafkas_ranges_are_accepted(key: str, value: int) -> None:
    from storage.config import TOPIC_KEYS

    assert getattr(LogConfig.from_properties({key: str(value)}), TOPIC_KEYS[key]) == value


def test_segment_bytes_of_2_gib_is_refused() -> None:
    """The exact reproduction: segment.bytes=2**31 was accepted and the partition got stuck."""
    with pytest.raises(InvalidConfigError, match=r"segment.bytes=2147483648 is above the maximum "
                                                 r"2147483647"):
        LogConfig.from_properties({"segment.bytes": str(2**31)})
    with pytest.raises(InvalidConfigError, match="log.segment.bytes=2147483648"):
        LogConfig.from_properties({"log.segment.bytes": 2**31})


@pytest.mark.parametrize("text", BAD_CONFIG_TEXT)
def test_an_integer_setting_takes_only_what_javas_parser_takes(text: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        LogConfig.from_properties({"segment.bytes": text})
    assert raised.value.key == "segment.bytes"


@pytest.mark.parametrize(("key", "value"), [("log.roll.hours", 2**31), ("log.roll.hours", 0),
                                            ("log.roll.jitter.hours", -1),
                                            ("log.retention.hours", 2**31),
                                            ("log.retention.minutes", 2**31),
                                            ("log.index.size.max.bytes", 2**31),
                                            ("log.index.interval.bytes", 2**31),
                                            ("message.max.bytes", 2**31)])
def test_a_broker_key_outside_kafkas_range_is_refused_naming_that_key(key: str,
                                                                     value: int) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        LogConfig.from_properties({key: str(value)})
    assert raised.value.key == key


@pytest.mark.parametrize("key", ["log.retention.hours", "log.retention.minutes",
                                 "log.retention.ms"])
def test_a_negative_broker_retention_means_unlimited(key: str) -> None:
    """KafkaConfig.logRetentionTimeMillis: a negative retention of any unit is -1."""
    assert LogConfig.from_properties({key: "-1"}).retention_ms == -1
