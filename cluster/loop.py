"""``ControlLoop``: a background loop with an owner, a start and a stop (STYLE.md P11).

The body returns how long to sleep before the next round; an exception in the body is logged and
counted (``failures``, ``last_failure``) and the loop goes on after ``error_backoff_s``: one bad
round never kills the loop (P10). ``wake`` cuts the current sleep short.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

logger = logging.getLogger(__name__)


class ControlLoop:
    """Runs ``body`` on a daemon thread named ``name`` until ``stop``.

    Contract: ``body`` runs once per round, never concurrently with itself; it returns the seconds
    to sleep before the next round (negative means none). An exception from ``body`` is counted
    and logged, and the next round starts after ``error_backoff_s``. ``start`` twice starts one
    thread; ``stop`` wakes the loop, lets the current round finish and joins the thread (up to
    ``timeout``; from the loop's own thread it does not wait). ``rounds``, ``failures`` and
    ``last_failure`` are for status reports and tests.
    """

    def __init__(self, name: str, body: Callable[[], float], *,
                 error_backoff_s: float = 1.0) -> None:
        self.name = name
        self._body = body
        self._error_backoff_s = error_backoff_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.failures = 0
        self.last_failure: str | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self._body()
            except Exception as err:  # noqa: BLE001 - the loop logs and goes on (P10)
                self.failures += 1
                self.last_failure = f"{type(err).__name__}: {err}"
                logger.exception("%s: round failed", self.name)
                delay = self._error_backoff_s
            self.rounds += 1
            self._wake.wait(max(delay, 0.0))
            self._wake.clear()
