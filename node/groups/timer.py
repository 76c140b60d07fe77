"""The group coordinator's timer (Kafka's ``CoordinatorTimer``): operations keyed by name, run
once after a delay; scheduling a key again replaces its pending operation, ``cancel`` drops it.

The keys are Kafka's: ``heartbeat-<group>-<member>``, ``join-<group>``, ``sync-<group>``.

An operation runs on the timer's thread, outside any lock of the timer, so it may take its
partition's lock and schedule or cancel keys. Between the moment the timer picks an operation
and the moment the operation holds its partition's lock, a request may have rescheduled or
cancelled its key: an operation therefore first ``claim``s its key (Kafka's
``tasks.remove(key, this)`` in the timeout's write event) and does nothing when the claim fails.

``ThreadTimer`` is the real one (one thread, a heap); ``FakeTimer`` runs due operations only
from ``poll()``, against a ``FakeClock`` (Kafka's ``MockCoordinatorTimer``).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

from storage.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

Operation = Callable[[], None]


class CoordinatorTimer(Protocol):
    """What the coordinator schedules its timeouts on. Implementations are thread-safe."""

    def schedule(self, key: str, delay_ms: int, operation: Operation) -> None:
        """Run ``operation`` in ``delay_ms``, replacing any operation pending under ``key``."""
        ...

    def cancel(self, key: str) -> None:
        """Drop the operation pending under ``key``, if any."""
        ...

    def claim(self, key: str, operation: Operation) -> bool:
        """Remove ``key`` if ``operation`` is still the one scheduled under it; False when it was
        cancelled or replaced since (the caller must then do nothing)."""
        ...

    def is_scheduled(self, key: str) -> bool:
        ...

    def close(self) -> None:
        """Drop every pending operation and stop running them."""
        ...


@dataclass(order=True)
class _Timeout:
    deadline_ms: int
    seq: int
    key: str = field(compare=False)
    operation: Operation = field(compare=False)


class _Timeouts:
    """The pending timeouts by key and by deadline (stale heap entries are skipped lazily)."""

    def __init__(self) -> None:
        self.by_key: dict[str, _Timeout] = {}
        self.heap: list[_Timeout] = []
        self._seq = itertools.count()

    def add(self, key: str, deadline_ms: int, operation: Operation) -> None:
        timeout = _Timeout(deadline_ms, next(self._seq), key, operation)
        self.by_key[key] = timeout
        heapq.heappush(self.heap, timeout)

    def claim(self, key: str, operation: Operation) -> bool:
        current = self.by_key.get(key)
        if current is None or current.operation is not operation:
            return False
        del self.by_key[key]
        return True

    def next_due(self, now_ms: int) -> _Timeout | None:
        """Pop the earliest live timeout due at ``now_ms`` (``by_key`` keeps it until claimed)."""
        while self.heap:
            head = self.heap[0]
            if self.by_key.get(head.key) is not head:
                heapq.heappop(self.heap)
                continue
            if head.deadline_ms > now_ms:
                return None
            return heapq.heappop(self.heap)
        return None

    def next_deadline(self) -> int | None:
        while self.heap and self.by_key.get(self.heap[0].key) is not self.heap[0]:
            heapq.heappop(self.heap)
        return self.heap[0].deadline_ms if self.heap else None

    def clear(self) -> None:
        self.by_key.clear()
        self.heap.clear()


class ThreadTimer:
    """The real timer: one thread, started at creation, stopped by ``close()``. An operation
    that raises is logged and counted (``failures``), never stops the thread."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, name: str = "group-coordinator-timer") -> None:
        self._clock = clock
        self._timeouts = _Timeouts()
        self._cond = threading.Condition()
        self._closed = False
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, key: str, delay_ms: int, operation: Operation) -> None:
        with self._cond:
            if self._closed:
                return
            self._timeouts.add(key, self._clock.milliseconds() + max(0, delay_ms), operation)
            self._cond.notify_all()

    def cancel(self, key: str) -> None:
        with self._cond:
            self._timeouts.by_key.pop(key, None)

    def claim(self, key: str, operation: Operation) -> bool:
        with self._cond:
            return self._timeouts.claim(key, operation)

    def is_scheduled(self, key: str) -> bool:
        with self._cond:
            return key in self._timeouts.by_key

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._timeouts.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = self._clock.milliseconds()
                    due = self._timeouts.next_due(now)
                    if due is not None:
                        break
                    deadline = self._timeouts.next_deadline()
                    wait = None if deadline is None else min(
                        max(deadline - now, 1) / 1000, threading.TIMEOUT_MAX)
                    self._cond.wait(timeout=wait)
            if not _execute(due):
                self.failures += 1
            with self._cond:
                self._timeouts.claim(due.key, due.operation)


class FakeTimer:
    """Kafka's ``MockCoordinatorTimer``: operations run only from ``poll()``, when the fake
    clock has reached their deadline, in deadline order."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._timeouts = _Timeouts()
        self._lock = threading.RLock()

    def schedule(self, key: str, delay_ms: int, operation: Operation) -> None:
        with self._lock:
            self._timeouts.add(key, self._clock.milliseconds() + max(0, delay_ms), operation)

    def cancel(self, key: str) -> None:
        with self._lock:
            self._timeouts.by_key.pop(key, None)

    def claim(self, key: str, operation: Operation) -> bool:
        with self._lock:
            return self._timeouts.claim(key, operation)

    def is_scheduled(self, key: str) -> bool:
        with self._lock:
            return key in self._timeouts.by_key

    def deadline(self, key: str) -> int | None:
        """When ``key``'s operation is due (ms on the clock); None when none is pending."""
        with self._lock:
            timeout = self._timeouts.by_key.get(key)
            return None if timeout is None else timeout.deadline_ms

    @property
    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._timeouts.by_key)

    def poll(self) -> list[str]:
        """Run every operation due now (and those they schedule that are due too); return
        their keys in the order they ran."""
        ran: list[str] = []
        while True:
            with self._lock:
                due = self._timeouts.next_due(self._clock.milliseconds())
            if due is None:
                return ran
            _execute(due, reraise=True)
            with self._lock:
                self._timeouts.claim(due.key, due.operation)
            ran.append(due.key)

    def close(self) -> None:
        with self._lock:
            self._timeouts.clear()


def _execute(timeout: _Timeout, reraise: bool = False) -> bool:
    """Run one operation; False (logged) when it raised."""
    try:
        timeout.operation()
    except BaseException:  # noqa: BLE001 - a failed timeout must not stop the timer thread
        logger.exception("group coordinator timeout %s failed", timeout.key)
        if reraise:
            raise
        return False
    return True
