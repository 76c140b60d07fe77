"""Time as an object, so retention, rolling, compaction lag and tombstone horizons can be tested
with a fake clock instead of sleeping."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What storage reads the time from. Implementations are thread-safe."""

    def milliseconds(self) -> int:
        """Wall-clock time in ms since the epoch (record timestamps, file mtimes)."""
        ...

    def nanoseconds(self) -> int:
        """Monotonic time in ns, for measuring durations."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``; a fake clock advances instead."""
        ...


class SystemClock:
    """The real clock."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to (Kafka's MockTime). ``sleep`` advances it."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._lock = threading.Lock()
        self._ms = start_ms
        self._ns = 0

    def milliseconds(self) -> int:
        with self._lock:
            return self._ms

    def nanoseconds(self) -> int:
        with self._lock:
            return self._ns

    def advance(self, ms: int) -> None:
        with self._lock:
            self._ms += ms
            self._ns += ms * 1_000_000

    def sleep(self, seconds: float) -> None:
        self.advance(int(seconds * 1000))


SYSTEM_CLOCK = SystemClock()
