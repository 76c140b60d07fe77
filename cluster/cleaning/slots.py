"""``CleanerSlot``: what the coordinator knows of one cleaner worker, and the only place that
changes it.

States and the calls that move between them::

    IDLE ──assign──> CLEANING ──free──> IDLE            (the clean finished, failed or aborted)
    CLEANING ──lost──> RECOVERING                         (the worker died during the clean)
    IDLE ──lost──> RECOVERING                             (the worker did not answer a reset)
    RECOVERING ──recovered──> IDLE                        (it answers a ping again)

A slot is not thread-safe: the coordinator changes its slots under its own lock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from cluster.handles import Handle, Pending
from cluster.status import WorkerSlot
from cluster.cleaning.clean_assignment import CleanAssignment


class SlotState(str, enum.Enum):
    IDLE = "idle"
    CLEANING = "cleaning"
    RECOVERING = "recovering"


class SlotStateError(RuntimeError):
    """A slot was asked for a transition its state does not allow (a coordinator bug)."""

    def __init__(self, message: str, slot: int = -1, state: str = "") -> None:
        super().__init__(message, slot, state)
        self.slot = slot
        self.state = state

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class CleanerSlot:
    index: int
    handle: Handle
    state: SlotState = SlotState.IDLE
    assignment: CleanAssignment | None = None
    pending: Pending[Any] | None = None
    ticket: int = 0                    # the clean request it serves (0: none)

    def assign(self, assignment: CleanAssignment, ticket: int) -> None:
        """IDLE -> CLEANING: start ``assignment`` on the worker."""
        self._expect(SlotState.IDLE, "assign")
        self.state, self.assignment, self.ticket = SlotState.CLEANING, assignment, ticket
        self.pending = self.handle.submit("clean", assignment)

    def finished(self) -> bool:
        """Whether a clean is running and its answer (result or error) has arrived."""
        return (self.state is SlotState.CLEANING and self.pending is not None
                and self.pending.done())

    def free(self) -> None:
        """CLEANING or RECOVERING -> IDLE."""
        self.state, self.assignment, self.pending, self.ticket = SlotState.IDLE, None, None, 0

    def lost(self) -> None:
        """-> RECOVERING: the worker is gone; ping it until it answers."""
        self.state, self.assignment, self.ticket = SlotState.RECOVERING, None, 0
        self.pending = self.handle.submit("ping")

    def poll_recovery(self) -> bool:
        """RECOVERING: whether the worker answered its ping (the slot is then IDLE); a failed
        ping is sent again."""
        if self.state is not SlotState.RECOVERING or self.pending is None \
                or not self.pending.done():
            return False
        try:
            self.pending.result(0)
        except Exception:  # noqa: BLE001 - still restarting: ask again
            self.pending = self.handle.submit("ping")
            return False
        self.free()
        return True

    @property
    def idle(self) -> bool:
        return self.state is SlotState.IDLE

    def status(self) -> WorkerSlot:
        tp = self.assignment.topic_partition if self.assignment is not None else None
        return WorkerSlot(cleaner_id=self.index, name=self.handle.name, host=self.handle.host,
                          state=self.state.value, topic=tp.topic if tp else None,
                          partition=tp.partition if tp else None)

    def _expect(self, state: SlotState, action: str) -> None:
        if self.state is not state:
            raise SlotStateError(f"cleaner slot {self.index}: cannot {action} while "
                                 f"{self.state.value}", slot=self.index, state=self.state.value)
