"""Wake-ups for long-polling fetches: every append to a watched log bumps a counter, and
fetches parked on the event loop wake when it moves.

Appends run on any thread (the server's request threads, or an in-process writer of the same
``LogDir``); ``Log.on_offsets_changed`` calls ``notify`` after each append that moved a log
end. A waiter first notes ``version``, reads, and then waits for a change since that version,
so an append between its read and its wait is never missed.
"""

from __future__ import annotations

import asyncio
import threading

from storage.log import Log


class AppendSignal:
    """A change counter for the logs of one directory. Thread-safe; waiters are coroutines of
    any event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def version(self) -> int:
        return self._version

    def watch(self, log: Log) -> None:
        """Have every later append to ``log`` call ``notify``."""
        if log.on_offsets_changed != self.notify:
            log.on_offsets_changed = self.notify

    def notify(self, _log: Log | None = None) -> None:
        """Bump the counter and wake every waiter."""
        with self._lock:
            self._version += 1
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:   # that loop is closed: its server has stopped
                pass

    async def wait_changed(self, since: int, timeout_s: float) -> bool:
        """Wait until the counter differs from ``since`` (True) or ``timeout_s`` passed
        (False)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            if self._version != since:
                return True
            self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, max(timeout_s, 0.0))
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
