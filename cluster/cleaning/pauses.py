"""Who holds the pauses of cleaning: ``PauseBook`` keeps, beside the cleaner manager's pause count
of each partition, which pauses an operator took (``strata cleaner pause``: only those can be
resumed by ``strata cleaner resume``) and the named reasons of a node's pauses (``move``), and
takes and releases pauses, one partition or many in one call (a topic deletion pauses every
compacted partition of a directory at once).

A pause stops the clean running on the partition (its worker's abort flag, read at every chunk)
and returns once it has stopped; the partition is not cleaned again until every pause is
released. Thread-safe: the book's lock guards its counters and is never held across a call to a
worker or a wait on the manager.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable

from cleaner.manager import CleanerManager, CleanerStateError, CleaningPhase
from storage.files import TopicPartition

logger = logging.getLogger(__name__)


class PauseBook:
    """The pauses of cleaning of one coordinator. ``stop_cleans(tps)`` tells the workers cleaning
    any of ``tps`` to abort (it does not wait); the manager's ``abort_and_pause_cleaning`` waits
    for each abort and counts the pause."""

    def __init__(self, manager: CleanerManager, stop_cleans: Callable[[set[TopicPartition]], None],
                 timeout_s: float) -> None:
        self._manager = manager
        self._stop_cleans = stop_cleans
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._operator: dict[TopicPartition, int] = {}        # taken by an operator
        self._reasons: dict[TopicPartition, Counter[str]] = {}   # node pauses with a reason

    def pause(self, tps: Iterable[TopicPartition], timeout_s: float | None = None, *,
              operator: bool = True, reason: str = "") -> None:
        """Stop any clean of each partition of ``tps`` and keep it from starting until resumed;
        an ``operator`` pause is counted apart from a node's, a node's ``reason`` is recorded."""
        tps = list(dict.fromkeys(tps))
        self._stop_cleans(set(tps))
        timeout = self._timeout if timeout_s is None else timeout_s
        for tp in tps:
            self._manager.abort_and_pause_cleaning(tp, timeout)
        with self._lock:
            for tp in tps:
                if operator:
                    self._operator[tp] = self._operator.get(tp, 0) + 1
                if reason:
                    self._reasons.setdefault(tp, Counter())[reason] += 1

    def resume_node(self, tps: Iterable[TopicPartition], reason: str = "") -> list[bool]:
        """Release a node's pause of each partition of ``tps`` (one taken for ``reason`` when
        given); False (logged) for a partition that holds none."""
        done = []
        for tp in tps:
            if reason:
                with self._lock:
                    held = self._reasons.get(tp)
                    if held is not None and held[reason] > 0:
                        held[reason] -= 1
                        if not +held:
                            del self._reasons[tp]
            try:
                self._manager.resume_cleaning(tp)
                done.append(True)
            except CleanerStateError as err:
                logger.warning("resume of %s ignored: %s", tp, err)
                done.append(False)
        return done

    def resume_operator(self, tp: TopicPartition) -> bool:
        """Release one pause an operator took; False (logged) when the operator holds none: the
        pauses of truncation, deletion, a directory move or retention are the node's to release,
        and a restarted coordinator forgot the operator's."""
        with self._lock:            # the manager's lock is never taken inside this one
            held = self._operator.pop(tp, 0)
            if held > 1:
                self._operator[tp] = held - 1
        if not held:
            logger.warning("resume of %s ignored: no pause of an operator is held", tp)
            return False
        try:
            self._manager.resume_cleaning(tp)
        except CleanerStateError as err:
            logger.warning("resume of %s ignored: %s", tp, err)
            with self._lock:
                self._operator.pop(tp, None)
            return False
        return True

    def reasons(self, tp: TopicPartition) -> dict[str, int]:
        """The named reasons of the node pauses held on the partition, with their counts."""
        with self._lock:
            return dict(+self._reasons.get(tp, Counter()))

    def held(self, tp: TopicPartition) -> tuple[int, int]:
        """(pauses an operator holds, all pauses held) of the partition's cleaning."""
        state = self._manager.cleaning_state(tp)
        held = state.paused_count if state is not None and state.phase is CleaningPhase.PAUSED \
            else 0
        with self._lock:
            return min(self._operator.get(tp, 0), held), held


def pause_holders(operator: int, held: int) -> str:
    """Who holds the ``held`` pauses of a partition, ``operator`` of them an operator's."""
    parts = []
    if operator:
        parts.append(f"{operator} by an operator (strata cleaner resume releases one)")
    if held - operator:
        parts.append(f"{held - operator} held by truncation, deletion, a directory move or "
                     "retention")
    return "; ".join(parts) or "no pause held"
