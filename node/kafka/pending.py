"""Answers that complete later: a handler of the group APIs returns a
``concurrent.futures.Future`` of its response body, built from the group coordinator's futures
(a JoinGroup may park for a whole rebalance). ``KafkaApis`` awaits it with
``asyncio.wrap_future``, so no thread and no event loop waits on it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


def done(value: T) -> Future[T]:
    """A future already completed with ``value``."""
    future: Future[T] = Future()
    future.set_result(value)
    return future


def then(future: Future[T], answer: Callable[[T], U]) -> Future[U]:
    """A future of ``answer(result of future)``; it fails with what ``future`` or ``answer``
    raised. ``answer`` runs in the thread that completes ``future``: keep it cheap. Once its
    awaiter cancelled it (the connection closed), the answer is dropped."""
    out: Future[U] = Future()

    def complete(source: Future[T]) -> None:
        if out.cancelled():
            return
        try:
            value = answer(source.result())
        except BaseException as err:  # noqa: BLE001 - handed to whoever awaits ``out``
            _settle(out, exception=err)
        else:
            _settle(out, value)

    future.add_done_callback(complete)
    return out


def all_of(futures: Sequence[Future[Any]]) -> Future[list[Any]]:
    """A future of every result of ``futures``, in their order, once all are done; it fails
    with the first failure in that order."""
    out: Future[list[Any]] = Future()
    if not futures:
        out.set_result([])
        return out
    remaining = [len(futures)]
    lock = threading.Lock()

    def complete(_: Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        try:
            values = [f.result() for f in futures]
        except BaseException as err:  # noqa: BLE001 - handed to whoever awaits ``out``
            _settle(out, exception=err)
        else:
            _settle(out, values)

    for future in futures:
        future.add_done_callback(complete)
    return out


def _settle(out: Future[Any], value: Any = None, exception: BaseException | None = None) -> None:
    """Complete ``out`` unless its awaiter cancelled it meanwhile."""
    try:
        if exception is not None:
            out.set_exception(exception)
        else:
            out.set_result(value)
    except InvalidStateError:
        pass
