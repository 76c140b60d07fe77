"""The coordinator's timer: Kafka's CoordinatorTimer contract (a key's operation replaced by a
new schedule, dropped by cancel, claimed once) on the real thread timer and on the fake one."""

from __future__ import annotations

import threading

from node.groups.timer import FakeTimer, ThreadTimer
from storage.clock import FakeClock


def test_fake_timer_runs_due_operations_in_deadline_order(clock: FakeClock) -> None:
    timer = FakeTimer(clock)
    ran: list[str] = []
    timer.schedule("late", 200, lambda: ran.append("late"))
    timer.schedule("early", 100, lambda: ran.append("early"))
    assert timer.poll() == []
    clock.advance(150)
    assert timer.poll() == ["early"]
    clock.advance(50)
    assert timer.poll() == ["late"]
    assert ran == ["early", "late"] and timer.keys == []


def test_scheduling_a_key_again_replaces_its_operation(clock: FakeClock) -> None:
    timer = FakeTimer(clock)
    ran: list[str] = []
    timer.schedule("k", 100, lambda: ran.append("first"))
    timer.schedule("k", 300, lambda: ran.append("second"))
    clock.advance(100)
    assert timer.poll() == []
    assert timer.deadline("k") == clock.milliseconds() + 200
    clock.advance(200)
    timer.poll()
    assert ran == ["second"]


def test_cancelled_key_never_runs(clock: FakeClock) -> None:
    timer = FakeTimer(clock)
    ran: list[str] = []
    timer.schedule("k", 100, lambda: ran.append("k"))
    timer.cancel("k")
    clock.advance(100)
    assert timer.poll() == [] and ran == [] and not timer.is_scheduled("k")


def test_claim_fails_for_a_replaced_operation(clock: FakeClock) -> None:
    timer = FakeTimer(clock)

    def first() -> None: ...

    def second() -> None: ...
    timer.schedule("k", 100, first)
    timer.schedule("k", 100, second)
    assert not timer.claim("k", first)
    assert timer.claim("k", second)
    assert not timer.claim("k", second)


def test_operation_scheduling_a_due_key_runs_it_in_the_same_poll(clock: FakeClock) -> None:
    timer = FakeTimer(clock)
    ran: list[str] = []
    timer.schedule("a", 0, lambda: timer.schedule("b", 0, lambda: ran.append("b")))
    assert timer.poll() == ["a", "b"] and ran == ["b"]


def test_thread_timer_runs_operations_on_its_thread_and_stops_at_close() -> None:
    timer = ThreadTimer()
    done = threading.Event()
    where: list[str] = []

    def operation() -> None:
        where.append(threading.current_thread().name)
        done.set()
    timer.schedule("k", 10, operation)
    assert done.wait(5)
    assert where == ["group-coordinator-timer"]
    timer.schedule("never", 60_000, lambda: where.append("never"))
    timer.close()
    assert not timer.is_scheduled("never")
    assert where == ["group-coordinator-timer"]


def test_thread_timer_counts_a_failing_operation_and_goes_on() -> None:
    timer = ThreadTimer()
    done = threading.Event()

    def failing() -> None:
        raise RuntimeError("boom")
    timer.schedule("bad", 0, failing)
    timer.schedule("good", 20, done.set)
    try:
        assert done.wait(5)
        assert timer.failures == 1
    finally:
        timer.close()
