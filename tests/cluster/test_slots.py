"""``CleanerSlot``: the coordinator's state of one cleaner worker moves only along its documented
transitions (a hand-driven worker behind an in-process handle; no Ray)."""

from __future__ import annotations

import pickle
import threading

import pytest

from cluster.handles import LocalHandle
from cluster.cleaning.slots import CleanerSlot, SlotState, SlotStateError
from cluster.cleaning.clean_assignment import CleanAssignment
from storage.config import LogConfig
from storage.files import TopicPartition

ASSIGNMENT = CleanAssignment(7, TopicPartition("kv", 3), "/d0", "/d0/kv-3", LogConfig(), 0, 100)


class GatedWorker:
    """``clean`` returns when the test opens the gate; ``ping`` answers at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.cleaned: list[CleanAssignment] = []

    def clean(self, assignment: CleanAssignment) -> str:
        self.gate.wait(10)
        self.cleaned.append(assignment)
        return "done"

    def ping(self) -> int:
        return 0


def wait_for(condition) -> None:
    for _ in range(500):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("condition not reached")


def test_a_slot_runs_one_clean_then_is_idle_again() -> None:
    worker = GatedWorker()
    slot = CleanerSlot(0, LocalHandle(worker, "cleaner-0"))
    assert slot.idle and slot.status().state == "idle"
    slot.assign(ASSIGNMENT, ticket=4)
    assert slot.state is SlotState.CLEANING and not slot.finished()
    assert slot.status().topic == "kv" and slot.status().partition == 3
    worker.gate.set()
    wait_for(slot.finished)
    assert slot.pending is not None and slot.pending.result(0) == "done"
    assert worker.cleaned == [ASSIGNMENT]
    slot.free()
    assert slot.idle and slot.assignment is None and slot.ticket == 0


def test_a_busy_slot_refuses_a_second_assignment_with_a_typed_error() -> None:
    worker = GatedWorker()
    slot = CleanerSlot(2, LocalHandle(worker, "cleaner-2"))
    slot.assign(ASSIGNMENT, ticket=0)
    with pytest.raises(SlotStateError, match="cleaner slot 2: cannot assign while cleaning") \
            as caught:
        slot.assign(ASSIGNMENT, ticket=0)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.slot, copy.state, str(copy)) == (2, "cleaning", str(caught.value))
    worker.gate.set()


def test_a_lost_worker_is_pinged_until_it_answers() -> None:
    worker = GatedWorker()
    handle = LocalHandle(worker, "cleaner-1")
    slot = CleanerSlot(1, handle)
    handle.dead = True
    slot.lost()
    assert slot.state is SlotState.RECOVERING and slot.status().state == "recovering"
    wait_for(lambda: slot.pending is not None and slot.pending.done())
    assert not slot.poll_recovery()            # the ping failed: asked again
    assert slot.state is SlotState.RECOVERING
    handle.dead = False
    wait_for(slot.poll_recovery)
    assert slot.idle
