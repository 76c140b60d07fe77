"""``CleanRequests``: the cleans asked for by ``strata cleaner trigger`` (``Coordinator.request_clean``)
and the tickets that say when each was served.

A request is a ticket per partition, stamped with the coordinator's poll count when it came: it is
due once a later poll has seen the partition (so a segment rolled just before the request is
cleaned too). The coordinator takes a due request when a worker starts its clean, puts it back
when that clean was aborted (it runs again once the partition is unpaused), and marks it done when
the clean finished, or at once when there is nothing to clean. A newer request for the same
partition replaces an older one that has not started; ``is_done(ticket)`` is true once any clean
that served a ticket at least as new has finished.

Thread-safe: one lock of its own, never held across a call to anything else.
"""

from __future__ import annotations

import itertools
import threading

from storage.files import TopicPartition


class CleanRequests:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[TopicPartition, tuple[int, int]] = {}   # -> (ticket, polls then)
        self._tickets = itertools.count(1)
        self._done: dict[TopicPartition, int] = {}

    def add(self, tp: TopicPartition, polls: int) -> int:
        """A new request for ``tp`` made after ``polls`` polls; returns its ticket."""
        with self._lock:
            ticket = next(self._tickets)
            self._waiting[tp] = (ticket, polls)
            return ticket

    def again(self, tp: TopicPartition, ticket: int, polls: int) -> None:
        """The clean serving ``ticket`` was aborted: wait again (unless a newer request did)."""
        with self._lock:
            self._waiting.setdefault(tp, (ticket, polls))

    def waiting(self) -> list[TopicPartition]:
        """The partitions with a request not started yet."""
        with self._lock:
            return list(self._waiting)

    def due(self, polls: int) -> list[tuple[TopicPartition, int]]:
        """(partition, ticket) of the requests a poll has seen since they came (``polls`` is the
        count of polls now)."""
        with self._lock:
            return [(tp, ticket) for tp, (ticket, asked) in self._waiting.items()
                    if asked < polls]

    def started(self, tp: TopicPartition, ticket: int) -> None:
        """A clean serving ``ticket`` started: the request no longer waits."""
        with self._lock:
            if self._waiting.get(tp, (0, 0))[0] == ticket:
                del self._waiting[tp]

    def done(self, tp: TopicPartition, ticket: int) -> None:
        """The request ``ticket`` (and every older one of ``tp``) is served."""
        with self._lock:
            if self._waiting.get(tp, (0, 0))[0] == ticket:
                del self._waiting[tp]
            self._done[tp] = max(self._done.get(tp, 0), ticket)

    def is_done(self, tp: TopicPartition, ticket: int) -> bool:
        with self._lock:
            return self._done.get(tp, 0) >= ticket
