"""The group coordinator's keys (``group.*``, ``offsets.*``) are the server's: they reach the
directory's coordinator, and a bad value is refused naming its key."""

from __future__ import annotations

import pytest

from node.groups.config import GroupCoordinatorConfig
from node.kafka.config import KafkaServerConfig
from storage.errors import InvalidConfigError


def test_the_group_keys_build_the_coordinators_config() -> None:
    config = KafkaServerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "7", "offsets.topic.segment.bytes": "1048576"})
    assert config.group_coordinator == GroupCoordinatorConfig(
        group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=7,
        offsets_topic_segment_bytes=1048576)
    assert KafkaServerConfig().group_coordinator == GroupCoordinatorConfig()


def test_a_bad_group_key_is_refused_naming_it() -> None:
    with pytest.raises(InvalidConfigError,
                       match="offsets.topic.num.partitions=0 is below the minimum 1") as err:
        KafkaServerConfig.from_properties({"offsets.topic.num.partitions": "0"})
    assert err.value.fields["key"] == "offsets.topic.num.partitions"
    with pytest.raises(InvalidConfigError, match="group.bogus"):
        KafkaServerConfig.from_properties({"group.bogus": "1"})
