"""Fixtures of the cluster tests: ``start_cluster`` deploys a Strata cluster (its own namespace,
its own directories under tmp_path) on the session's Ray head and stops it at teardown;
``module_cluster_of`` does the same for a module-scoped fixture (a 3-directory cluster with the
module's config, in the namespace it names); ``wait_for`` polls a condition with a timeout (never
a fixed sleep)."""

from __future__ import annotations

import itertools
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

_ids = itertools.count()

FAST = {"log.cleaner.backoff.ms": 100, "log.cleaner.dedupe.buffer.size": 4 << 20,
        "log.cleaner.uncleanable.retry.backoff.ms": 200,
        "log.flush.offset.checkpoint.interval.ms": 500}


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` of a command a test stops with SIGINT (Ctrl-C): a suite started in the
    background (``./scripts/test &``) runs with SIGINT ignored, its children inherit that, and a
    Python started so never raises KeyboardInterrupt. The command gets the terminal's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05,
             what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - an actor restarting; ask again
            value = None
            if time.monotonic() > deadline:
                raise
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(interval)


@contextmanager
def module_cluster_of(ray_session: str, root: Path, config: dict[str, Any],
                      namespace: str) -> Iterator[Any]:
    """A cluster of 3 directories under ``root`` with ``FAST`` and ``config``, in ``namespace``
    on the session's Ray head, stopped when the block ends (a module-scoped fixture's body)."""
    from cluster import Cluster

    cluster = Cluster.start(log_dirs=[str(root / f"d{i}") for i in range(3)], cleaners=1,
                            config={**FAST, **config}, namespace=namespace,
                            address=ray_session)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def start_cluster(ray_session: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    from cluster import Cluster

    started: list[Any] = []

    def start(dirs: int = 3, cleaners: int = 1, config: dict[str, Any] | None = None,
              paths: list[Path] | None = None, **start_kwargs: Any) -> Any:
        log_dirs = [str(p) for p in paths] if paths else [str(tmp_path / f"d{i}")
                                                           for i in range(dirs)]
        cluster = Cluster.start(log_dirs=log_dirs, cleaners=cleaners,
                                config={**FAST, **(config or {})},
                                namespace=f"strata-test-{next(_ids)}", address=ray_session,
                                **start_kwargs)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
