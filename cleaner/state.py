"""A partition's cleaning state (Kafka's ``LogCleaningState``): IN_PROGRESS, ABORTED or
PAUSED(n); a partition with no state is idle. ``cleaner.manager`` owns the transitions."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CleaningPhase(enum.Enum):
    IN_PROGRESS = "in_progress"
    """A cleaner (or retention of a compacted log) is working on the partition."""
    ABORTED = "aborted"
    """Someone asked the running clean to stop and is waiting for it."""
    PAUSED = "paused"
    """Cleaning must not start; ``paused_count`` pauses are held, each released by a resume."""


@dataclass(frozen=True)
class CleaningState:
    phase: CleaningPhase
    paused_count: int = 0

    def __str__(self) -> str:
        if self.phase is CleaningPhase.PAUSED:
            return f"LogCleaningPaused({self.paused_count})"
        return "LogCleaningInProgress" if self.phase is CleaningPhase.IN_PROGRESS else \
            "LogCleaningAborted"


IN_PROGRESS = CleaningState(CleaningPhase.IN_PROGRESS)
ABORTED = CleaningState(CleaningPhase.ABORTED)


def paused(count: int) -> CleaningState:
    """PAUSED(count), count >= 1."""
    if count < 1:
        raise ValueError(f"a paused state holds at least one pause, got {count}")
    return CleaningState(CleaningPhase.PAUSED, count)
