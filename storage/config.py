"""``LogConfig``: one partition log's settings, named after Kafka's topic keys.

Field ``segment_bytes`` is the topic key ``segment.bytes``; ``from_properties`` takes the dotted keys
(topic keys, or the broker synonyms such as ``log.segment.bytes``). Defaults are Kafka's.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import dataclass
from typing import Any, Mapping

from storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_SEGMENT_JITTER_MS = 0
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_RETENTION_BYTES = -1
DEFAULT_CLEANUP_POLICY = "delete"
DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000
DEFAULT_MIN_COMPACTION_LAG_MS = 0
DEFAULT_MAX_COMPACTION_LAG_MS = LONG_MAX
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
DEFAULT_FILE_DELETE_DELAY_MS = 60_000
DEFAULT_FLUSH_MESSAGES = LONG_MAX
DEFAULT_FLUSH_MS = LONG_MAX
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
DEFAULT_PREALLOCATE = False
DEFAULT_MESSAGE_TIMESTAMP_TYPE = "CreateTime"

COMPACT = "compact"
DELETE = "delete"

# topic key -> field name; broker synonyms map onto the same fields
TOPIC_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "preallocate": "preallocate",
    "message.timestamp.type": "message_timestamp_type",
}

BROKER_SYNONYMS: dict[str, tuple[str, int]] = {
    # broker key -> (topic key, multiplier to ms)
    "log.segment.bytes": ("segment.bytes", 1),
    "log.roll.ms": ("segment.ms", 1),
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.roll.jitter.ms": ("segment.jitter.ms", 1),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3_600_000),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.retention.ms": ("retention.ms", 1),
    "log.retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "log.retention.bytes": ("retention.bytes", 1),
    "log.cleanup.policy": ("cleanup.policy", 1),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 1),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "message.max.bytes": ("max.message.bytes", 1),
    "log.preallocate": ("preallocate", 1),
    "log.message.timestamp.type": ("message.timestamp.type", 1),
}
# Kafka resolves ms > minutes > hours: the finer key wins when several are given.
_PRECEDENCE = {"log.roll.ms": 2, "log.roll.hours": 0, "log.roll.jitter.ms": 2,
               "log.roll.jitter.hours": 0, "log.retention.ms": 2, "log.retention.minutes": 1,
               "log.retention.hours": 0}


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log. Frozen; derive a changed copy with ``with_overrides``."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    segment_jitter_ms: int = DEFAULT_SEGMENT_JITTER_MS
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    retention_ms: int = DEFAULT_RETENTION_MS
    retention_bytes: int = DEFAULT_RETENTION_BYTES
    cleanup_policy: str = DEFAULT_CLEANUP_POLICY
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS
    max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS
    min_cleanable_dirty_ratio: float = DEFAULT_MIN_CLEANABLE_DIRTY_RATIO
    file_delete_delay_ms: int = DEFAULT_FILE_DELETE_DELAY_MS
    flush_messages: int = DEFAULT_FLUSH_MESSAGES
    flush_ms: int = DEFAULT_FLUSH_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    preallocate: bool = DEFAULT_PREALLOCATE
    message_timestamp_type: str = DEFAULT_MESSAGE_TIMESTAMP_TYPE

    def __post_init__(self) -> None:
        policies = self.cleanup_policies
        if not policies or not policies <= {COMPACT, DELETE}:
            raise InvalidConfigError(
                f"cleanup.policy={self.cleanup_policy!r}: expected compact, delete or both",
                key="cleanup.policy", value=self.cleanup_policy)
        _at_least("segment.bytes", self.segment_bytes, 14)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.jitter.ms", self.segment_jitter_ms, 0)
        _at_least("segment.index.bytes", self.segment_index_bytes, 4)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} is outside [0, 1]",
                key="min.cleanable.dirty.ratio", value=self.min_cleanable_dirty_ratio)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min.compaction.lag.ms={self.min_compaction_lag_ms} is larger than "
                f"max.compaction.lag.ms={self.max_compaction_lag_ms}",
                key="min.compaction.lag.ms", value=self.min_compaction_lag_ms)
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfigError(
                f"message.timestamp.type={self.message_timestamp_type!r}: expected CreateTime "
                "or LogAppendTime", key="message.timestamp.type", value=self.message_timestamp_type)

    @functools.cached_property
    def cleanup_policies(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.cleanup_policy.split(",") if p.strip())

    @functools.cached_property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policies

    @functools.cached_property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policies

    @property
    def max_segment_ms(self) -> int:
        """``segment.ms``, shortened to ``max.compaction.lag.ms`` for compacted topics so the
        active segment rolls and becomes cleanable in bounded time (KIP-354)."""
        if self.compact:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Kafka's ``abs(rand) % min(jitter, segment.ms)``, fixed per segment."""
        if self.segment_jitter_ms == 0:
            return 0
        bound = min(self.segment_jitter_ms, self.max_segment_ms)
        return (rng or random).randrange(bound) if bound > 0 else 0

    def with_overrides(self, properties: Mapping[str, Any]) -> LogConfig:
        """A copy with dotted keys (topic keys or broker synonyms) applied."""
        return dataclasses.replace(self, **_fields_from_properties(properties))

    def to_properties(self) -> dict[str, str]:
        out = {}
        for key, name in TOPIC_KEYS.items():
            value = getattr(self, name)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> LogConfig:
        """Build from dotted keys, e.g. ``{"segment.bytes": "1024"}``; unknown keys are refused."""
        return cls(**_fields_from_properties(properties))


def _at_least(key: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidConfigError(f"{key}={value!r} is not an integer", key=key, value=value)
    if value < minimum:
        raise InvalidConfigError(f"{key}={value} is below the minimum {minimum}", key=key, value=value)


def _fields_from_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    rank: dict[str, int] = {}
    types = {f.name: f.type for f in dataclasses.fields(LogConfig)}
    for key, raw in properties.items():
        multiplier = 1
        topic_key = key
        if key in BROKER_SYNONYMS:
            topic_key, multiplier = BROKER_SYNONYMS[key]
        elif key not in TOPIC_KEYS:
            raise InvalidConfigError(f"unknown log config key {key!r}", key=key, value=raw)
        name = TOPIC_KEYS[topic_key]
        precedence = _PRECEDENCE.get(key, 3)
        if rank.get(name, -1) > precedence:
            continue
        rank[name] = precedence
        fields[name] = _parse(key, types[name], raw, multiplier)
    return fields


def _parse(key: str, kind: Any, raw: Any, multiplier: int) -> Any:
    text = str(raw).strip()
    try:
        if kind in (int, "int"):
            return int(text) * multiplier
        if kind in (float, "float"):
            return float(text)
        if kind in (bool, "bool"):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        return text
    except ValueError as err:
        raise InvalidConfigError(f"{key}={raw!r} is not a valid {kind}", key=key, value=raw) from err
