"""``GroupCoordinatorConfig``: the group coordinator's settings, named after Kafka's keys
(``from_properties({"group.initial.rebalance.delay.ms": "0"})``), with Kafka's defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from storage.dotted_keys import check_integer, convert, unknown_key

KEYS: dict[str, str] = {
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
}
OFFSETS_TOPIC = "__consumer_offsets"
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000     # Kafka's ClassicGroupNewMemberJoinTimeoutMs


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Validated at creation; every error names the Kafka key."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1

    def __post_init__(self) -> None:
        check_integer("offsets.topic.num.partitions", self.offsets_topic_num_partitions, "int",
                      at_least=1)
        check_integer("offsets.topic.segment.bytes", self.offsets_topic_segment_bytes, "int",
                      at_least=14)
        check_integer("offsets.retention.minutes", self.offsets_retention_minutes, "int",
                      at_least=1)
        check_integer("offsets.retention.check.interval.ms",
                      self.offsets_retention_check_interval_ms, at_least=1)
        check_integer("offset.metadata.max.bytes", self.offset_metadata_max_bytes, "int",
                      at_least=0)
        check_integer("group.min.session.timeout.ms", self.group_min_session_timeout_ms, "int",
                      at_least=0)
        check_integer("group.max.session.timeout.ms", self.group_max_session_timeout_ms, "int",
                      at_least=self.group_min_session_timeout_ms)
        check_integer("group.initial.rebalance.delay.ms", self.group_initial_rebalance_delay_ms,
                      "int", at_least=0)
        check_integer("group.max.size", self.group_max_size, "int", at_least=1)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> GroupCoordinatorConfig:
        """Build from Kafka's dotted keys; an unknown key raises ``InvalidConfigError``."""
        kinds = {f.name: str(f.type).split("|")[0].strip() for f in dataclasses.fields(cls)}
        values = {}
        for key, raw in properties.items():
            if key not in KEYS:
                raise unknown_key("group coordinator", key, raw)
            values[KEYS[key]] = convert(key, kinds[KEYS[key]], raw)
        return cls(**values)
