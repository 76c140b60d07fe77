"""``pending``: answers built from futures completed later, in another thread."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from node.kafka.pending import all_of, done, then


def test_then_answers_once_the_source_completes_and_carries_its_failure() -> None:
    source: Future[int] = Future()
    answer = then(source, lambda n: n * 2)
    assert not answer.done()
    source.set_result(21)
    assert answer.result(1) == 42
    failing: Future[int] = Future()
    broken = then(failing, lambda n: n)
    failing.set_exception(KeyError("gone"))
    with pytest.raises(KeyError):
        broken.result(1)
    with pytest.raises(ZeroDivisionError):
        then(done(1), lambda n: n // 0).result(1)


def test_all_of_keeps_the_order_whatever_order_they_complete_in() -> None:
    futures: list[Future[int]] = [Future() for _ in range(50)]
    joined = all_of(futures)
    threads = [threading.Thread(target=f.set_result, args=(i,))
               for i, f in reversed(list(enumerate(futures)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert joined.result(5) == list(range(50))
    assert all_of([]).result(1) == []


def test_all_of_fails_with_the_first_failure_in_order() -> None:
    first: Future[int] = Future()
    second: Future[int] = Future()
    joined = all_of([first, second])
    second.set_exception(ValueError("second"))
    assert not joined.done()
    first.set_exception(KeyError("first"))
    with pytest.raises(KeyError):
        joined.result(1)


def test_an_answer_cancelled_by_its_awaiter_is_dropped_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    source: Future[int] = Future()
    answer = then(source, lambda n: n)
    assert answer.cancel()
    source.set_result(1)
    assert answer.cancelled()
    assert not [r for r in caplog.records if r.name == "concurrent.futures"]
    joined = all_of([source])
    assert joined.result(1) == [1]
