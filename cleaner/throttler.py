"""``Throttler``: Kafka's I/O rate limiter for the log cleaner (``log.cleaner.io.max.bytes.per.second``).

Every cleaner read and write reports its bytes through ``maybe_throttle``. Once per check interval
(300 ms for the cleaner) the throttler compares the rate observed since the last check with the
desired rate and, when above it, sleeps ``round(observed / (rate / 1000) - elapsed_ms)`` ms: long
enough that the bytes of the interval would have come in at exactly the desired rate.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import InvalidConfigError

DEFAULT_CHECK_INTERVAL_MS = 300


@dataclass(frozen=True)
class ThrottlerStats:
    """A snapshot of a throttler (plain values; pickles, ``dataclasses.asdict`` gives a row)."""

    desired_rate_bytes_per_second: float
    observed_bytes: float
    sleeps: int
    sleep_ms: int


class Throttler:
    """Shared by every cleaner thread; thread-safe.

    The check and the sleep happen under one lock, as in Kafka, so while one thread sleeps the
    others block in ``maybe_throttle`` too: the limit is for all cleaners together. The rate can be
    changed at any time with ``set_rate`` (KAFKA-13996); the next check uses it.
    """

    def __init__(self, bytes_per_second: float, *,
                 check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        _check_rate(bytes_per_second)
        self._clock = clock
        self._rate = float(bytes_per_second)
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._lock = threading.Lock()
        self._period_start_ns = clock.nanoseconds()
        self._observed_so_far = 0.0
        self._observed_total = 0.0
        self._sleeps = 0
        self._sleep_ms = 0

    @property
    def rate(self) -> float:
        """The desired rate in bytes per second (``inf`` = unlimited)."""
        return self._rate

    def set_rate(self, bytes_per_second: float) -> None:
        _check_rate(bytes_per_second)
        self._rate = float(bytes_per_second)

    def maybe_throttle(self, observed: float) -> None:
        """Account ``observed`` bytes and sleep if the rate of this interval is above the limit."""
        desired = self._rate
        with self._lock:
            self._observed_so_far += observed
            self._observed_total += observed
            elapsed_ns = self._clock.nanoseconds() - self._period_start_ns
            if elapsed_ns <= self._check_interval_ns or self._observed_so_far <= 0:
                return
            rate = self._observed_so_far * 1e9 / elapsed_ns
            if rate > desired:
                elapsed_ms = elapsed_ns // 1_000_000
                # Java's Math.round: half up
                sleep_ms = math.floor(self._observed_so_far / (desired / 1000) - elapsed_ms + 0.5)
                if sleep_ms > 0:
                    self._clock.sleep(sleep_ms / 1000)
                    self._sleeps += 1
                    self._sleep_ms += sleep_ms
            self._period_start_ns = self._clock.nanoseconds()
            self._observed_so_far = 0.0

    def statistics(self) -> ThrottlerStats:
        with self._lock:
            return ThrottlerStats(self._rate, self._observed_total, self._sleeps, self._sleep_ms)


def _check_rate(bytes_per_second: float) -> None:
    if not bytes_per_second > 0:
        raise InvalidConfigError(
            f"log.cleaner.io.max.bytes.per.second={bytes_per_second!r} is not a positive number",
            key="log.cleaner.io.max.bytes.per.second", value=bytes_per_second)
