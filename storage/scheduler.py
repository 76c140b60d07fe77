"""Delayed and periodic tasks (Kafka's Scheduler / KafkaScheduler / MockScheduler).

A log uses a scheduler for the deletes that wait ``file.delete.delay.ms`` and for the flush after a
roll. ``ThreadScheduler`` owns one thread with a start and a stop (STYLE.md P11); a task that raises is
logged and counted, never silently lost, and never stops the thread. ``FakeScheduler`` runs due tasks
when a test calls ``tick()`` after advancing a ``FakeClock``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

from storage.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


class Scheduler(Protocol):
    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int | None = None) -> None:
        """Run ``fn`` after ``delay_ms``, then every ``period_ms`` if given."""
        ...


@dataclass(order=True)
class _Task:
    due_ms: int
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    period_ms: int | None = field(compare=False, default=None)


class ThreadScheduler:
    """One background thread running due tasks in order. Thread-safe."""

    def __init__(self, name: str = "strata-scheduler", clock: Clock = SYSTEM_CLOCK) -> None:
        self._name = name
        self._clock = clock
        self._tasks: list[_Task] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.failures = 0
        self.last_failure: BaseException | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def shutdown(self, run_pending: bool = False) -> None:
        """Stop the thread. With ``run_pending`` the one-shot tasks still queued run first."""
        with self._cond:
            self._stopping = True
            pending = [t for t in self._tasks if t.period_ms is None] if run_pending else []
            self._tasks.clear()
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for task in sorted(pending):
            self._execute(task)

    @property
    def is_running(self) -> bool:
        return self._thread is not None

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int | None = None) -> None:
        with self._cond:
            if self._thread is None:
                self.start()
            due = self._clock.milliseconds() + max(0, delay_ms)
            heapq.heappush(self._tasks, _Task(due, next(self._seq), name, fn, period_ms))
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    now = self._clock.milliseconds()
                    if self._tasks and self._tasks[0].due_ms <= now:
                        break
                    wait = (min((self._tasks[0].due_ms - now) / 1000, threading.TIMEOUT_MAX)
                            if self._tasks else None)
                    self._cond.wait(timeout=wait)
                if self._stopping:
                    return
                task = heapq.heappop(self._tasks)
            self._execute(task)
            if task.period_ms is not None:
                with self._cond:
                    if not self._stopping:
                        task.due_ms = self._clock.milliseconds() + task.period_ms
                        task.seq = next(self._seq)
                        heapq.heappush(self._tasks, task)

    def _execute(self, task: _Task) -> None:
        try:
            task.fn()
        except BaseException as err:  # noqa: BLE001 - a task failure must not kill the thread
            self.failures += 1
            self.last_failure = err
            log.exception("scheduled task %s failed", task.name)


class FakeScheduler:
    """Kafka's MockScheduler: tasks run only from ``tick()``, against a fake clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tasks: list[_Task] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int | None = None) -> None:
        with self._lock:
            heapq.heappush(self._tasks, _Task(self._clock.milliseconds() + max(0, delay_ms),
                                              next(self._seq), name, fn, period_ms))

    def tick(self) -> int:
        """Run every task due now (and periodic ones as often as they are due); return how many ran."""
        ran = 0
        while True:
            with self._lock:
                if not self._tasks or self._tasks[0].due_ms > self._clock.milliseconds():
                    return ran
                task = heapq.heappop(self._tasks)
            task.fn()
            ran += 1
            if task.period_ms is not None:
                with self._lock:
                    task.due_ms += task.period_ms
                    task.seq = next(self._seq)
                    heapq.heappush(self._tasks, task)

    @property
    def pending(self) -> list[str]:
        with self._lock:
            return [t.name for t in sorted(self._tasks)]


_default: ThreadScheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> ThreadScheduler:
    """The process-wide scheduler used by logs opened without one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ThreadScheduler("strata-default-scheduler")
            _default.start()
        return _default
