"""The cleaning state machine of a set of partitions (Kafka LogCleanerManager's ``inProgress``
map and its transitions), for ``cleaner.manager.CleanerManager``:

    call                    from            to
    grab/deletable_logs     none            IN_PROGRESS
    abort_and_pause         none            PAUSED(1)
                            IN_PROGRESS     ABORTED, then blocks until the cleaner's done_* call
                            PAUSED(n)       PAUSED(n+1)
    resume_cleaning         PAUSED(1)       none
                            PAUSED(n>1)     PAUSED(n-1)
    done_cleaning           IN_PROGRESS     none, and the checkpoint becomes the end offset
                            ABORTED         PAUSED(1), waking the aborter (no checkpoint update)
    done_deleting           as done_cleaning, without the checkpoint

Any other transition raises ``CleanerStateError``. ``CleaningStates`` owns the states, the offset
each clean started from and the condition an aborter waits on; the values are ``cleaner.state``'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from cleaner.state import ABORTED, IN_PROGRESS, CleaningPhase, CleaningState, paused
from storage.errors import StorageError
from storage.files import TopicPartition


class CleanerStateError(StorageError):
    """An illegal transition of a partition's cleaning state (Kafka's IllegalStateException):
    finishing a clean nobody started, resuming a partition that is not paused, aborting a clean
    that is already being aborted. A bug in the caller, unlike ``LogCleaningAbortedError``, which
    is the normal way a running clean is told to stop."""


class CleaningAbortTimeoutError(StorageError):
    """``abort_and_pause_cleaning`` gave up waiting for the running clean to stop. The partition
    stays ABORTED and becomes PAUSED(1) when the cleaner reports back; the caller owns that pause
    (``wait_until_paused`` again, then ``resume_cleaning``)."""


class CleaningStates:
    """The cleaning state of each partition (no entry = none). Not locked by itself: call every
    method with ``lock`` held (the manager's re-entrant lock; ``wait_until_paused`` waits on a
    condition of it, releasing it)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._states: dict[TopicPartition, CleaningState] = {}
        self._cleaning_from: dict[TopicPartition, int] = {}
        self._paused_cond = threading.Condition(lock)

    def get(self, tp: TopicPartition) -> CleaningState | None:
        return self._states.get(tp)

    def __contains__(self, tp: object) -> bool:
        return tp in self._states

    def values(self) -> Iterator[CleaningState]:
        return iter(list(self._states.values()))

    def is_paused(self, tp: TopicPartition) -> bool:
        state = self._states.get(tp)
        return state is not None and state.phase is CleaningPhase.PAUSED

    def force(self, tp: TopicPartition, state: CleaningState | None) -> None:
        """Set ``tp``'s state bypassing the transition rules (Kafka's ``setCleaningState``)."""
        if state is None:
            self._states.pop(tp, None)
        else:
            self._states[tp] = state

    def start(self, tp: TopicPartition, from_offset: int | None = None) -> None:
        """none -> IN_PROGRESS (the caller checked ``tp`` has no state); ``from_offset``: the
        first dirty offset of a clean."""
        self._states[tp] = IN_PROGRESS
        if from_offset is not None:
            self._cleaning_from[tp] = from_offset

    def pause(self, tp: TopicPartition) -> None:
        """The transition of ``abort_and_pause`` (without its wait)."""
        state = self._states.get(tp)
        if state is None:
            self._states[tp] = paused(1)
        elif state == IN_PROGRESS:
            self._states[tp] = ABORTED
        elif state.phase is CleaningPhase.PAUSED:
            self._states[tp] = paused(state.paused_count + 1)
        else:
            raise CleanerStateError(
                f"compaction for partition {tp} cannot be aborted and paused since it is in "
                f"{state} state", topic_partition=tp, state=str(state))

    def wait_until_paused(self, tp: TopicPartition, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_paused(tp):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise CleaningAbortTimeoutError(
                    f"cleaning of {tp} did not stop within {timeout} s; it is still "
                    f"{self._states.get(tp)}", topic_partition=tp, timeout=timeout)
            self._paused_cond.wait(remaining)

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        """Release one pause of each partition; all are checked before any is changed."""
        tps = list(tps)
        for tp in tps:
            state = self._states.get(tp)
            if state is None or state.phase is not CleaningPhase.PAUSED:
                what = "it is not paused" if state is None else f"it is in {state} state"
                raise CleanerStateError(
                    f"compaction for partition {tp} cannot be resumed since {what}",
                    topic_partition=tp, state=str(state))
        for tp in tps:
            count = self._states[tp].paused_count
            if count <= 1:
                del self._states[tp]
            else:
                self._states[tp] = paused(count - 1)

    def cleaning_from(self, tp: TopicPartition) -> int | None:
        return self._cleaning_from.get(tp)

    def finish(self, tp: TopicPartition) -> None:
        """IN_PROGRESS -> none (the caller checked the state)."""
        del self._states[tp]
        self._cleaning_from.pop(tp, None)

    def done_not_in_progress(self, tp: TopicPartition) -> None:
        """A done_* call for a partition not IN_PROGRESS: ABORTED -> PAUSED(1), waking the
        aborter; any other state raises ``CleanerStateError``."""
        state = self._states.get(tp)
        if state == ABORTED:
            self._states[tp] = paused(1)
            self._cleaning_from.pop(tp, None)
            self._paused_cond.notify_all()
            return
        if state is None:
            raise CleanerStateError(f"state for partition {tp} should exist", topic_partition=tp,
                                    state=None)
        raise CleanerStateError(f"in-progress partition {tp} cannot be in {state} state",
                                topic_partition=tp, state=str(state))


__all__ = ["CleanerStateError", "CleaningAbortTimeoutError", "CleaningStates"]
