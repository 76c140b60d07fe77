"""``LogConfig``: one partition log's settings, named after Kafka's topic keys.

Field ``segment_bytes`` is the topic key ``segment.bytes``; ``from_properties`` takes the dotted keys
(topic keys, or the broker synonyms such as ``log.segment.bytes``). Defaults are Kafka's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from dataclasses import dataclass
from typing import Any, Mapping

from storage.errors import InvalidConfigError

# the dotted-key helper the three config parsers share (re-exported: cleaner and node import
# these names from here)
from storage.dotted_keys import (  # noqa: E402
    INT,
    INT_MAX,
    INT_MIN,
    LONG,
    LONG_MAX,
    LONG_MIN,
    check_integer,
    convert,
    parse_integer,
    to_properties,
    unknown_key,
)

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
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000   # producer.id.expiration.ms (a broker key)

READ_UNCOMMITTED = "read_uncommitted"   # Kafka's isolation.level values (a reader's setting)
READ_COMMITTED = "read_committed"
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
# Kafka's type and atLeast of every integer topic key (LogConfig.CONFIG); None: no lower bound.
# A value outside its type's range is refused too: above 2 GiB a segment.bytes gets stuck.
INTEGER_KEYS: dict[str, tuple[str, int | None]] = {
    "segment.bytes": (INT, 14),             # atLeast(LegacyRecord.RECORD_OVERHEAD_V0)
    "segment.ms": (LONG, 1),
    "segment.jitter.ms": (LONG, 0),
    "segment.index.bytes": (INT, 4),
    "index.interval.bytes": (INT, 0),
    "retention.ms": (LONG, -1),
    "retention.bytes": (LONG, None),
    "delete.retention.ms": (LONG, 0),
    "min.compaction.lag.ms": (LONG, 0),
    "max.compaction.lag.ms": (LONG, 1),
    "file.delete.delay.ms": (LONG, 0),
    "flush.messages": (LONG, 1),
    "flush.ms": (LONG, 0),
    "max.message.bytes": (INT, 0),
}
# broker keys in a coarser unit are Java ints before they are multiplied (KafkaConfig)
_UNIT_KEYS: dict[str, tuple[str, int | None]] = {
    "log.roll.hours": (INT, 1),
    "log.roll.jitter.hours": (INT, 0),
    "log.retention.minutes": (INT, None),
    "log.retention.hours": (INT, None),
}
# KafkaConfig.logRetentionTimeMillis: a negative broker retention means unlimited (-1)
_RETENTION_KEYS = frozenset({"log.retention.ms", "log.retention.minutes", "log.retention.hours"})
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
        for key in ("cleanup.policy", "message.timestamp.type"):
            if not isinstance(getattr(self, TOPIC_KEYS[key]), str):
                raise InvalidConfigError(f"{key}={getattr(self, TOPIC_KEYS[key])!r} is not text",
                                         key=key, value=getattr(self, TOPIC_KEYS[key]))
        if not isinstance(self.preallocate, bool):
            raise InvalidConfigError(f"preallocate={self.preallocate!r} is not a boolean",
                                     key="preallocate", value=self.preallocate)
        policies = self.cleanup_policies
        if not policies or not policies <= {COMPACT, DELETE}:
            raise InvalidConfigError(
                f"cleanup.policy={self.cleanup_policy!r}: expected compact, delete or both",
                key="cleanup.policy", value=self.cleanup_policy)
        for key, (kind, minimum) in INTEGER_KEYS.items():
            check_integer(key, getattr(self, TOPIC_KEYS[key]), kind, minimum)
        if not _is_number(self.min_cleanable_dirty_ratio) \
                or not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
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
    def max_batch_bytes(self) -> int:
        """The largest batch the log accepts: it must fit in ``max.message.bytes`` and in one
        segment (``segment.bytes``). Producers size their batches by it."""
        return min(self.segment_bytes, self.max_message_bytes)

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
        return to_properties(self, TOPIC_KEYS)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> LogConfig:
        """Build from dotted keys, e.g. ``{"segment.bytes": "1024"}``; unknown keys are refused."""
        return cls(**_fields_from_properties(properties))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and not math.isnan(value)


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
            raise unknown_key("log", key, raw)
        name = TOPIC_KEYS[topic_key]
        precedence = _PRECEDENCE.get(key, 3)
        if rank.get(name, -1) > precedence:
            continue
        rank[name] = precedence
        fields[name] = _parse(key, types[name], raw, multiplier)
        if multiplier == 1 and topic_key in INTEGER_KEYS:
            check_integer(key, fields[name], *INTEGER_KEYS[topic_key])   # names the key given
    return fields


def _parse(key: str, kind: Any, raw: Any, multiplier: int) -> Any:
    if kind in (int, "int"):
        value = parse_integer(key, raw)
        if key in _UNIT_KEYS:
            check_integer(key, value, *_UNIT_KEYS[key])
        if key in _RETENTION_KEYS and value < 0:
            return -1
        return value * multiplier
    return convert(key, kind, raw)
