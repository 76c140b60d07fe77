"""CleanerConfig: Kafka's log.cleaner.* keys and defaults, validation naming the key."""

from __future__ import annotations

import math

import pytest

from cleaner.config import CleanerConfig
from storage.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    config = CleanerConfig()
    assert config.num_threads == 1
    assert config.dedupe_buffer_size == 134217728
    assert config.dedupe_buffer_load_factor == 0.9
    assert config.io_buffer_size == 524288
    assert config.max_message_size == 1048588
    assert config.max_io_bytes_per_second == math.inf
    assert config.backoff_ms == 15000
    assert config.enable_cleaner is True
    assert config.uncleanable_retries == 3
    assert config.uncleanable_retry_backoff_ms == 60000


def test_per_cleaner_sizes_split_between_threads() -> None:
    config = CleanerConfig(num_threads=3)
    assert config.map_memory_per_cleaner == 134217728 // 3
    assert config.io_buffer_per_cleaner == 524288 // 3 // 2
    huge = CleanerConfig(dedupe_buffer_size=2**33)
    assert huge.map_memory_per_cleaner == 2**31 - 1


def test_from_properties_reads_dotted_keys() -> None:
    config = CleanerConfig.from_properties({
        "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "4194304",
        "log.cleaner.io.buffer.load.factor": "0.75", "log.cleaner.io.buffer.size": "1048576",
        "message.max.bytes": "33554432", "log.cleaner.io.max.bytes.per.second": "1e6",
        "log.cleaner.backoff.ms": "100", "log.cleaner.enable": "false",
        "log.cleaner.uncleanable.retries": "0", "log.cleaner.uncleanable.retry.backoff.ms": "5",
    })
    assert config == CleanerConfig(2, 4194304, 0.75, 1048576, 33554432, 1e6, 100, False, 0, 5)
    assert CleanerConfig.from_properties(config.to_properties()) == config


def test_unknown_cleaner_key_is_refused_even_when_ignoring_unknown_keys() -> None:
    with pytest.raises(InvalidConfigError) as err:
        CleanerConfig.from_properties({"log.cleaner.thread": "2"}, ignore_unknown=True)
    assert err.value.key == "log.cleaner.thread"


def test_other_broker_keys_are_refused_unless_ignored() -> None:
    with pytest.raises(InvalidConfigError):
        CleanerConfig.from_properties({"num.network.threads": "3"})
    config = CleanerConfig.from_properties(
        {"num.network.threads": "3", "log.cleaner.threads": "2"}, ignore_unknown=True)
    assert config.num_threads == 2


def test_topic_defaults_under_log_cleaner_are_left_to_log_config() -> None:
    config = CleanerConfig.from_properties({"log.cleaner.min.cleanable.ratio": "0.1",
                                            "log.cleaner.delete.retention.ms": "1"})
    assert config == CleanerConfig()


@pytest.mark.parametrize("fields, key", [
    ({"num_threads": 0}, "log.cleaner.threads"),
    ({"dedupe_buffer_size": 0}, "log.cleaner.dedupe.buffer.size"),
    ({"dedupe_buffer_load_factor": 0.0}, "log.cleaner.io.buffer.load.factor"),
    ({"dedupe_buffer_load_factor": 1.5}, "log.cleaner.io.buffer.load.factor"),
    ({"io_buffer_size": -1}, "log.cleaner.io.buffer.size"),
    ({"max_message_size": -1}, "message.max.bytes"),
    ({"max_io_bytes_per_second": 0.0}, "log.cleaner.io.max.bytes.per.second"),
    ({"backoff_ms": -1}, "log.cleaner.backoff.ms"),
    ({"uncleanable_retries": -1}, "log.cleaner.uncleanable.retries"),
    ({"uncleanable_retry_backoff_ms": -1}, "log.cleaner.uncleanable.retry.backoff.ms"),
    ({"enable_cleaner": "yes"}, "log.cleaner.enable"),
])
def test_invalid_values_name_their_key(fields: dict, key: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        CleanerConfig(**fields)
    assert err.value.key == key
    assert key in str(err.value)


def test_a_map_that_cannot_hold_one_message_is_refused() -> None:
    # 48 bytes = 2 slots; 2 * 0.5 is not > 1 (Kafka's Cleaner requirement)
    with pytest.raises(InvalidConfigError) as err:
        CleanerConfig(dedupe_buffer_size=48, dedupe_buffer_load_factor=0.5)
    assert err.value.key == "log.cleaner.dedupe.buffer.size"
    assert "log.cleaner.threads" in str(err.value)
    CleanerConfig(dedupe_buffer_size=72, dedupe_buffer_load_factor=0.5)
    with pytest.raises(InvalidConfigError):
        CleanerConfig(num_threads=2, dedupe_buffer_size=72, dedupe_buffer_load_factor=0.5)


def test_unparsable_value_names_its_key() -> None:
    with pytest.raises(InvalidConfigError) as err:
        CleanerConfig.from_properties({"log.cleaner.backoff.ms": "soon"})
    assert err.value.key == "log.cleaner.backoff.ms"


def test_thread_count_may_at_most_halve_or_double_on_reconfiguration() -> None:
    current = CleanerConfig(num_threads=4)
    current.check_reconfiguration(CleanerConfig(num_threads=2))
    current.check_reconfiguration(CleanerConfig(num_threads=8))
    for threads in (1, 9):
        with pytest.raises(InvalidConfigError) as err:
            current.check_reconfiguration(CleanerConfig(num_threads=threads))
        assert err.value.key == "log.cleaner.threads"


def test_with_overrides_changes_one_setting() -> None:
    config = CleanerConfig().with_overrides({"log.cleaner.io.max.bytes.per.second": "1024"})
    assert config.max_io_bytes_per_second == 1024.0
    assert config.num_threads == 1
