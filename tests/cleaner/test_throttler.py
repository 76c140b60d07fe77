"""Throttler: Kafka's rate limiter, driven by a fake clock."""

from __future__ import annotations

import math
import threading

import pytest

from cleaner.throttler import Throttler
from storage.clock import FakeClock
from storage.errors import InvalidConfigError


def test_no_sleep_within_the_check_interval(clock: FakeClock) -> None:
    throttler = Throttler(1000, clock=clock)
    start = clock.milliseconds()
    throttler.maybe_throttle(10_000_000)
    clock.advance(300)
    throttler.maybe_throttle(1)  # elapsed must be strictly above the interval
    assert clock.milliseconds() == start + 300
    assert throttler.statistics().sleeps == 0


def test_sleeps_until_the_interval_matches_the_desired_rate(clock: FakeClock) -> None:
    start = clock.milliseconds()
    throttler = Throttler(1000, clock=clock)  # 1 byte per ms
    throttler.maybe_throttle(600)
    clock.advance(400)
    throttler.maybe_throttle(400)  # 1000 bytes in 400 ms: sleep 1000/1 - 400 = 600 ms
    assert throttler.statistics().sleep_ms == 600
    assert clock.milliseconds() == start + 1000


def test_sleep_is_rounded_half_up_like_java(clock: FakeClock) -> None:
    throttler = Throttler(2000, clock=clock)  # 2 bytes per ms
    clock.advance(301)
    throttler.maybe_throttle(1003)  # 501.5 - 301 = 200.5 -> 201
    assert throttler.statistics().sleep_ms == 201


def test_below_the_rate_nothing_sleeps_and_the_period_restarts(clock: FakeClock) -> None:
    throttler = Throttler(1000, clock=clock)
    clock.advance(500)
    throttler.maybe_throttle(100)
    clock.advance(301)
    throttler.maybe_throttle(300)  # 300 bytes in 301 ms of the new period: under the rate
    assert throttler.statistics().sleeps == 0
    assert throttler.statistics().observed_bytes == 400


def test_unlimited_rate_never_sleeps(clock: FakeClock) -> None:
    throttler = Throttler(math.inf, clock=clock)
    clock.advance(301)
    throttler.maybe_throttle(10**12)
    assert throttler.statistics().sleeps == 0


def test_rate_change_applies_to_the_next_check(clock: FakeClock) -> None:
    throttler = Throttler(math.inf, clock=clock)
    throttler.set_rate(1000)
    clock.advance(500)
    throttler.maybe_throttle(700)
    assert throttler.statistics().sleep_ms == 200
    assert throttler.rate == 1000


def test_invalid_rate_is_refused(clock: FakeClock) -> None:
    with pytest.raises(InvalidConfigError):
        Throttler(0, clock=clock)
    with pytest.raises(InvalidConfigError):
        Throttler(10, clock=clock).set_rate(-1)


def test_is_shared_by_threads(clock: FakeClock) -> None:
    throttler = Throttler(1000, clock=clock)

    def work() -> None:
        for _ in range(100):
            throttler.maybe_throttle(10)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert throttler.statistics().observed_bytes == 4000
