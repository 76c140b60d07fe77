"""``CleanerConfig``: the log cleaner's broker settings, named after Kafka's ``log.cleaner.*`` keys.

Field ``num_threads`` is ``log.cleaner.threads``; ``from_properties`` takes the dotted keys. Defaults
are Kafka's (kafka-storage.md §5), plus two settings of ours for retrying a failed partition before
giving up on it (peers.md §3 row 1; Kafka gives up at the first failure until a restart).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from storage.config import (BROKER_SYNONYMS, DEFAULT_PRODUCER_ID_EXPIRATION_MS, INT, INT_MAX, LONG,
                            check_integer)
from storage.dotted_keys import convert, to_properties, unknown_key
from storage.errors import InvalidConfigError

DEFAULT_NUM_THREADS = 1
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024 + 12
DEFAULT_MAX_IO_BYTES_PER_SECOND = math.inf
DEFAULT_BACKOFF_MS = 15_000
DEFAULT_ENABLE_CLEANER = True
DEFAULT_UNCLEANABLE_RETRIES = 3
DEFAULT_UNCLEANABLE_RETRY_BACKOFF_MS = 60_000

BYTES_PER_MAP_ENTRY = 24

# Kafka's type and lower bound of each integer key (CleanerConfig, ServerConfigs,
# TransactionLogConfig); the two uncleanable.* keys are ours
_INTEGERS: dict[str, tuple[str, int]] = {
    "log.cleaner.threads": (INT, 1),          # Kafka allows 0; a pool of 0 cleaners never cleans
    "log.cleaner.dedupe.buffer.size": (LONG, 1),
    "log.cleaner.io.buffer.size": (INT, 0),
    "message.max.bytes": (INT, 0),
    "log.cleaner.backoff.ms": (LONG, 0),
    "log.cleaner.uncleanable.retries": (INT, 0),
    "log.cleaner.uncleanable.retry.backoff.ms": (LONG, 0),
    "producer.id.expiration.ms": (INT, 1),
}

# dotted key -> field name
KEYS: dict[str, str] = {
    "log.cleaner.threads": "num_threads",
    "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
    "log.cleaner.io.buffer.load.factor": "dedupe_buffer_load_factor",
    "log.cleaner.io.buffer.size": "io_buffer_size",
    "message.max.bytes": "max_message_size",
    "log.cleaner.io.max.bytes.per.second": "max_io_bytes_per_second",
    "log.cleaner.backoff.ms": "backoff_ms",
    "log.cleaner.enable": "enable_cleaner",
    "log.cleaner.uncleanable.retries": "uncleanable_retries",
    "log.cleaner.uncleanable.retry.backoff.ms": "uncleanable_retry_backoff_ms",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
}
_PREFIX = "log.cleaner."
# log.cleaner.* keys that are broker defaults of topic settings: they belong to LogConfig
_TOPIC_SYNONYMS = frozenset(key for key in BROKER_SYNONYMS if key.startswith(_PREFIX))


@dataclass(frozen=True)
class CleanerConfig:
    """The cleaner's settings. Frozen; derive a changed copy with ``with_overrides``."""

    num_threads: int = DEFAULT_NUM_THREADS
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    dedupe_buffer_load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR
    io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_io_bytes_per_second: float = DEFAULT_MAX_IO_BYTES_PER_SECOND
    backoff_ms: int = DEFAULT_BACKOFF_MS
    enable_cleaner: bool = DEFAULT_ENABLE_CLEANER
    uncleanable_retries: int = DEFAULT_UNCLEANABLE_RETRIES
    """Failed cleans retried (after ``uncleanable_retry_backoff_ms``) before the partition is
    marked uncleanable; 0 gives Kafka's behaviour."""
    uncleanable_retry_backoff_ms: int = DEFAULT_UNCLEANABLE_RETRY_BACKOFF_MS
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    """A producer whose last batch is this old is no longer active: its last batch loses the
    place a clean keeps for an active producer's last batch (Kafka's ``activeProducers``)."""

    def __post_init__(self) -> None:
        for key, (kind, minimum) in _INTEGERS.items():
            check_integer(key, getattr(self, KEYS[key]), kind, minimum)
        if not isinstance(self.enable_cleaner, bool):
            raise InvalidConfigError(
                f"log.cleaner.enable={self.enable_cleaner!r} is not a boolean",
                key="log.cleaner.enable", value=self.enable_cleaner)
        factor = self.dedupe_buffer_load_factor
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not 0.0 < factor <= 1.0:
            raise InvalidConfigError(
                f"log.cleaner.io.buffer.load.factor={factor!r} is outside (0, 1]",
                key="log.cleaner.io.buffer.load.factor", value=factor)
        rate = self.max_io_bytes_per_second
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
            raise InvalidConfigError(
                f"log.cleaner.io.max.bytes.per.second={rate!r} is not a positive number",
                key="log.cleaner.io.max.bytes.per.second", value=rate)
        slots = self.map_memory_per_cleaner // BYTES_PER_MAP_ENTRY
        if not slots * factor > 1:
            raise InvalidConfigError(
                f"log.cleaner.dedupe.buffer.size={self.dedupe_buffer_size} gives each of "
                f"{self.num_threads} cleaner threads an offset map of {slots} slots, too small to "
                "fit even a single message at load factor "
                f"{factor}, so log cleaning would never make progress. Increase "
                "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads",
                key="log.cleaner.dedupe.buffer.size", value=self.dedupe_buffer_size)

    @property
    def map_memory_per_cleaner(self) -> int:
        """Bytes of each cleaner's offset map: ``min(dedupe / threads, Int.MaxValue)``."""
        return min(self.dedupe_buffer_size // self.num_threads, INT_MAX)

    @property
    def io_buffer_per_cleaner(self) -> int:
        """Size of each of a cleaner's read and write buffers: ``io / threads / 2``."""
        return self.io_buffer_size // self.num_threads // 2

    def check_reconfiguration(self, new: CleanerConfig) -> None:
        """Kafka's ``validateReconfiguration``: the thread count may at most halve or double."""
        if new.num_threads < self.num_threads / 2:
            raise InvalidConfigError(
                f"log.cleaner.threads cannot be reduced to less than half the current value "
                f"{self.num_threads}", key="log.cleaner.threads", value=new.num_threads)
        if new.num_threads > self.num_threads * 2:
            raise InvalidConfigError(
                f"log.cleaner.threads cannot be increased to more than double the current value "
                f"{self.num_threads}", key="log.cleaner.threads", value=new.num_threads)

    def with_overrides(self, properties: Mapping[str, Any], *,
                       ignore_unknown: bool = False) -> CleanerConfig:
        return dataclasses.replace(self, **_fields(properties, ignore_unknown))

    def to_properties(self) -> dict[str, str]:
        return to_properties(self, KEYS)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], *,
                        ignore_unknown: bool = False) -> CleanerConfig:
        """Build from dotted keys, e.g. ``{"log.cleaner.threads": "2"}``.

        An unknown ``log.cleaner.*`` key is always refused. Other keys are refused too, unless
        ``ignore_unknown`` (for a whole broker config file); the ``log.cleaner.*`` defaults of
        topic settings (``log.cleaner.min.cleanable.ratio``, ...) belong to ``LogConfig`` and are
        skipped.
        """
        return cls(**_fields(properties, ignore_unknown))


def _fields(properties: Mapping[str, Any], ignore_unknown: bool) -> dict[str, Any]:
    types = {f.name: f.type for f in dataclasses.fields(CleanerConfig)}
    fields: dict[str, Any] = {}
    for key, raw in properties.items():
        name = KEYS.get(key)
        if name is None:
            if key in _TOPIC_SYNONYMS:
                continue
            if key.startswith(_PREFIX) or not ignore_unknown:
                raise unknown_key("log cleaner", key, raw)
            continue
        fields[name] = convert(key, types[name], raw)
    return fields
