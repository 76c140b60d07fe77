"""Every Ray call of the cluster's plain classes goes through these handles (STYLE.md P10), so the
coordinator, the workers and the client logic run in tests with in-process fakes.

A handle names one actor and calls its methods by name: ``call`` waits for the result, ``submit``
returns a ``Pending``. Errors come back as the typed error the actor raised (Ray's wrapper is
removed), and a dead or restarting actor is ``ActorUnavailableError``. ``LocalHandle`` calls a
plain object in this process (on a thread for ``submit``): the fake of the tests, and the way to run
everything in one process.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Generic, Protocol, TypeVar

from cluster.errors import ActorUnavailableError

T = TypeVar("T")


class Pending(Protocol[T]):
    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> T:
        """The call's value; raises what the call raised."""
        ...


class Handle(Protocol):
    """One actor, called by method name.

    Contract: ``call`` returns what the method returned or raises the typed error the method
    raised (never Ray's wrapper); a dead, restarting or unreachable actor is
    ``ActorUnavailableError``, and a ``timeout`` that runs out raises the runtime's timeout error
    (Ray's ``GetTimeoutError``). In both cases the call may or may not have run: callers retry
    only methods that are safe to repeat. ``submit`` starts the same call and returns a ``Pending``
    whose ``result`` behaves like ``call``. ``name`` is the actor's name, ``host`` the node it
    runs on (placement and metrics).
    """

    name: str
    host: str

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        ...

    def submit(self, method: str, *args: Any, **kwargs: Any) -> Pending[Any]: ...


# ---- in process --------------------------------------------------------------------------------
class LocalHandle:
    """Calls a plain object directly. ``dead=True`` makes every call fail as a dead actor would."""

    def __init__(self, target: Any, name: str, host: str = "local") -> None:
        self.target = target
        self.name = name
        self.host = host
        self.dead = False

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        if self.dead:
            raise ActorUnavailableError(f"actor {self.name} is dead", actor=self.name)
        return getattr(self.target, method)(*args, **kwargs)

    def submit(self, method: str, *args: Any, **kwargs: Any) -> Pending[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(self.call(method, *args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                future.set_exception(err)
        threading.Thread(target=run, name=f"{self.name}.{method}", daemon=True).start()
        return _FuturePending(future)


class _FuturePending(Generic[T]):
    def __init__(self, future: Future[T]) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> T:
        return self._future.result(timeout)


# ---- Ray -----------------------------------------------------------------------------------------
class RayHandle:
    """A Ray actor handle. Picklable (Ray actor handles are), so it can be an actor argument."""

    def __init__(self, actor: Any, name: str, host: str = "") -> None:
        self.actor = actor
        self.name = name
        self.host = host

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        return RayPending(getattr(self.actor, method).remote(*args, **kwargs),
                          self.name).result(timeout)

    def submit(self, method: str, *args: Any, **kwargs: Any) -> RayPending:
        return RayPending(getattr(self.actor, method).remote(*args, **kwargs), self.name)

    def kill_and_restart(self) -> None:
        """End the actor's process at once (no ``finally``, as ``kill -9``); Ray starts it again
        (every Strata actor is restarted forever), rebuilding it from its constructor's
        arguments. Calls in flight fail with ``ActorUnavailableError``."""
        import ray

        ray.kill(self.actor, no_restart=False)


class RayPending:
    def __init__(self, ref: Any, actor: str) -> None:
        self.ref = ref
        self.actor = actor

    def done(self) -> bool:
        import ray

        ready, _ = ray.wait([self.ref], timeout=0)
        return bool(ready)

    def result(self, timeout: float | None = None) -> Any:
        import ray

        try:
            return ray.get(self.ref, timeout=timeout)
        except ray.exceptions.RayTaskError as err:
            cause = err.cause
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as err:
            raise ActorUnavailableError(f"actor {self.actor} is unavailable: {err}",
                                        actor=self.actor, reason=str(err)) from None


class NamedHandle(RayHandle):
    """A ``RayHandle`` found by name on first use (and looked up again until found), so an actor
    can hold handles of actors that do not exist yet. Picklable."""

    def __init__(self, name: str, namespace: str, host: str = "") -> None:
        super().__init__(None, name, host)
        self.namespace = namespace

    def _actor(self) -> Any:
        if self.actor is None:
            self.actor = lookup(self.name, self.namespace).actor
        return self.actor

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        self._actor()
        return super().call(method, *args, timeout=timeout, **kwargs)

    def submit(self, method: str, *args: Any, **kwargs: Any) -> RayPending:
        self._actor()
        return super().submit(method, *args, **kwargs)

    def kill_and_restart(self) -> None:
        self._actor()
        super().kill_and_restart()


class CoordinatorLink:
    """``cluster.runtime.node_service.PauseLink`` over the coordinator actor, looked up at each use
    (it may be restarting, or not started yet)."""

    def __init__(self, name: str, namespace: str, timeout_s: float = 120.0) -> None:
        self.name = name
        self.namespace = namespace
        self.timeout_s = timeout_s

    def abort_and_pause(self, topic: str, partition: int, reason: str = "") -> bool:
        extra = {"reason": reason} if reason else {}
        return bool(lookup(self.name, self.namespace).call(
            "pause_internal", topic, partition, self.timeout_s, timeout=self.timeout_s + 5,
            **extra))

    def resume(self, topic: str, partition: int, reason: str = "") -> None:
        extra = {"reason": reason} if reason else {}
        lookup(self.name, self.namespace).call("resume_internal", topic, partition,
                                               timeout=self.timeout_s, **extra)


    def abort_and_pause_many(self, partitions: list[tuple[str, int]]) -> bool:
        return bool(lookup(self.name, self.namespace).call(
            "pause_internal_many", partitions, self.timeout_s, timeout=self.timeout_s + 5))

    def resume_many(self, partitions: list[tuple[str, int]]) -> None:
        lookup(self.name, self.namespace).call("resume_internal_many", partitions,
                                               timeout=self.timeout_s)


def lookup(name: str, namespace: str, host: str = "") -> RayHandle:
    """The named actor's handle; ``ActorUnavailableError`` if there is no such actor."""
    import ray

    try:
        return RayHandle(ray.get_actor(name, namespace=namespace), name, host)
    except ValueError as err:
        raise ActorUnavailableError(f"no actor {name} in namespace {namespace}", actor=name,
                                    reason=str(err)) from None


def wait_all(pendings: list[Pending[Any]], timeout: float | None = None) -> list[Any]:
    """Results of every pending call, in order (the first error raises)."""
    return [p.result(timeout) for p in pendings]
