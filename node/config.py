"""``LogDirConfig``: the broker-level settings of a log directory's startup and periodic tasks,
named after Kafka's broker keys (field ``log_retention_check_interval_ms`` is the key
``log.retention.check.interval.ms``). Defaults are Kafka 4.0's. Per-topic settings live in
``storage.config.LogConfig``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from storage.config import (DEFAULT_PRODUCER_ID_EXPIRATION_MS, INT, LONG, LONG_MAX, check_integer,
                            parse_integer)
from storage.dotted_keys import unknown_key

DEFAULT_RETENTION_CHECK_INTERVAL_MS = 5 * 60 * 1000
DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS = LONG_MAX
DEFAULT_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS = 60_000
DEFAULT_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS = 60_000
DEFAULT_INITIAL_TASK_DELAY_MS = 30_000
DEFAULT_RECOVERY_THREADS_PER_DATA_DIR = 2
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 10 * 60 * 1000

KEYS: dict[str, str] = {
    "log.retention.check.interval.ms": "log_retention_check_interval_ms",
    "log.flush.scheduler.interval.ms": "log_flush_scheduler_interval_ms",
    "log.flush.offset.checkpoint.interval.ms": "log_flush_offset_checkpoint_interval_ms",
    "log.flush.start.offset.checkpoint.interval.ms":
        "log_flush_start_offset_checkpoint_interval_ms",
    "log.initial.task.delay.ms": "log_initial_task_delay_ms",
    "num.recovery.threads.per.data.dir": "num_recovery_threads_per_data_dir",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "producer.id.expiration.check.interval.ms": "producer_id_expiration_check_interval_ms",
}
# Kafka's type of each key (LogConfig.SERVER_CONFIG_DEF, ProducerStateManagerConfig) and our
# lower bound (an interval of 0 would spin its task)
_RANGES: dict[str, tuple[str, int]] = {
    "log.retention.check.interval.ms": (LONG, 1),
    "log.flush.scheduler.interval.ms": (LONG, 1),
    "log.flush.offset.checkpoint.interval.ms": (INT, 1),
    "log.flush.start.offset.checkpoint.interval.ms": (INT, 1),
    "log.initial.task.delay.ms": (LONG, 0),   # Kafka's is internal and positive; 0 is for tests
    "num.recovery.threads.per.data.dir": (INT, 1),
    "producer.id.expiration.ms": (INT, 1),
    "producer.id.expiration.check.interval.ms": (INT, 1),
}


@dataclass(frozen=True)
class LogDirConfig:
    """Settings of one log directory's loading and periodic tasks. Frozen.

    ``num_recovery_threads_per_data_dir`` sizes the pool that loads the logs after an unclean
    shutdown; after a clean one a single thread loads them (see ``LogDir._load``).
    """

    log_retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS
    log_flush_scheduler_interval_ms: int = DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS
    log_flush_offset_checkpoint_interval_ms: int = DEFAULT_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS
    log_flush_start_offset_checkpoint_interval_ms: int = (
        DEFAULT_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS)
    log_initial_task_delay_ms: int = DEFAULT_INITIAL_TASK_DELAY_MS
    num_recovery_threads_per_data_dir: int = DEFAULT_RECOVERY_THREADS_PER_DATA_DIR
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    producer_id_expiration_check_interval_ms: int = (
        DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS)

    def __post_init__(self) -> None:
        for key, name in KEYS.items():
            check_integer(key, getattr(self, name), *_RANGES[key])

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> LogDirConfig:
        """Build from Kafka's dotted keys, e.g. ``{"log.retention.check.interval.ms": "1000"}``;
        unknown keys are refused."""
        return cls(**_fields(properties))

    def with_overrides(self, properties: Mapping[str, Any]) -> LogDirConfig:
        return dataclasses.replace(self, **_fields(properties))

    def to_properties(self) -> dict[str, str]:
        return {key: str(getattr(self, name)) for key, name in KEYS.items()}


def _fields(properties: Mapping[str, Any]) -> dict[str, int]:
    fields: dict[str, int] = {}
    for key, raw in properties.items():
        if key not in KEYS:
            raise unknown_key("log directory", key, raw)
        fields[KEYS[key]] = parse_integer(key, raw)
    return fields
