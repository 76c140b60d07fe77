"""Failed cleans, retries with backoff, and the uncleanable partitions of each log directory.

Kafka marks a partition uncleanable at its first failure and only a restart clears it
(KAFKA-7215). Here a failure makes selection skip the partition for ``retry_backoff_ms``; the
failure number ``retries + 1`` in a row marks it uncleanable (``retries = 0`` is Kafka's
behaviour); ``reset`` re-enables it without a restart; a clean that moves the checkpoint forward
clears its failures.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from storage.files import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UncleanablePartition:
    """A partition the cleaner gave up on, and why."""

    topic_partition: TopicPartition
    log_dir: Path
    failures: int
    error: str
    since_ms: int


@dataclass(frozen=True)
class CleaningFailure:
    """The latest of ``failures`` failed cleans in a row of one partition."""

    log_dir: Path
    failures: int
    error: str
    last_failure_ms: int
    retry_at_ms: int


def describe(error: BaseException | str) -> str:
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"


class UncleanableTracker:
    """Not thread-safe: guarded by the cleaner manager's lock."""

    def __init__(self, retries: int, retry_backoff_ms: int) -> None:
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self._failures: dict[TopicPartition, CleaningFailure] = {}
        self._uncleanable: dict[Path, dict[TopicPartition, UncleanablePartition]] = {}

    def record_failure(self, tp: TopicPartition, log_dir: Path, error: BaseException | str,
                       now: int) -> bool:
        """Count a failed clean; returns whether the partition is now uncleanable."""
        previous = self._failures.get(tp)
        failures = previous.failures + 1 if previous is not None else 1
        text = describe(error)
        self._failures[tp] = CleaningFailure(log_dir, failures, text, now,
                                             now + self.retry_backoff_ms)
        if failures > self.retries:
            logger.error("Partition %s in %s failed to clean %d times (last: %s); marking it "
                         "uncleanable", tp, log_dir, failures, text)
            self.mark(log_dir, tp, text, now)
            return True
        logger.warning("Cleaning of %s in %s failed (%d of %d allowed): %s; retrying in %d ms",
                       tp, log_dir, failures, self.retries + 1, text, self.retry_backoff_ms)
        return False

    def succeeded(self, tp: TopicPartition) -> None:
        self._failures.pop(tp, None)

    def mark(self, log_dir: Path, tp: TopicPartition, error: str, now: int) -> None:
        failure = self._failures.get(tp)
        self._uncleanable.setdefault(log_dir, {})[tp] = UncleanablePartition(
            tp, log_dir, failure.failures if failure else 0, error, now)

    def failure(self, tp: TopicPartition) -> CleaningFailure | None:
        return self._failures.get(tp)

    def uncleanable(self, log_dir: Path, tp: TopicPartition) -> UncleanablePartition | None:
        return self._uncleanable.get(log_dir, {}).get(tp)

    def is_uncleanable(self, tp: TopicPartition) -> bool:
        return any(tp in parts for parts in self._uncleanable.values())

    def partitions(self, log_dir: Path) -> dict[TopicPartition, UncleanablePartition]:
        return dict(self._uncleanable.get(log_dir, {}))

    def blocked(self, tp: TopicPartition, log_dir: Path, now: int) -> bool:
        """Uncleanable in ``log_dir``, or still backing off after a failure."""
        if tp in self._uncleanable.get(log_dir, {}):
            return True
        failure = self._failures.get(tp)
        return failure is not None and now < failure.retry_at_ms

    def retrying(self) -> int:
        return sum(1 for f in self._failures.values() if f.failures <= self.retries)

    def reset(self, tp: TopicPartition | None = None) -> list[TopicPartition]:
        """Re-enable one partition (or all, forgetting every failure); returns those re-enabled."""
        reset = []
        for parts in self._uncleanable.values():
            for candidate in [p for p in parts if tp is None or p == tp]:
                del parts[candidate]
                reset.append(candidate)
        if tp is None:
            self._failures.clear()
        else:
            self._failures.pop(tp, None)
        self._drop_empty_dirs()
        return reset

    def keep_only(self, live: Collection[TopicPartition]) -> None:
        """Forget partitions that no longer exist (Kafka's maintainUncleanablePartitions)."""
        for parts in self._uncleanable.values():
            for tp in [tp for tp in parts if tp not in live]:
                del parts[tp]
        for tp in [tp for tp in self._failures if tp not in live]:
            del self._failures[tp]
        self._drop_empty_dirs()

    def forget_dir(self, log_dir: Path) -> None:
        self._uncleanable.pop(log_dir, None)
        for tp in [tp for tp, f in self._failures.items() if f.log_dir == log_dir]:
            del self._failures[tp]

    def _drop_empty_dirs(self) -> None:
        self._uncleanable = {d: p for d, p in self._uncleanable.items() if p}
