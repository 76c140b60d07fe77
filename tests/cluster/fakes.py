"""In-process stand-ins for the Ray actors (STYLE.md P10): real ``LogDirServer`` nodes and real
``CleanerWorker``s on real files behind ``LocalHandle``s, plus a worker whose cleans the test
finishes by hand."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cleaner.config import CleanerConfig
from cluster.errors import ActorUnavailableError
from cluster.handles import LocalHandle
from cluster.cleaning.worker import CleanAssignment, CleanerWorker
from node.server import LogDirServer
from storage.records import Record, build_batch

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.1"}
SMALL_CLEANER = CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=10,
                              uncleanable_retry_backoff_ms=0)


def open_nodes(root: Path, count: int) -> dict[str, LocalHandle]:
    handles = {}
    for i in range(count):
        server = LogDirServer(root / f"d{i}", start_tasks=False)
        handles[str(server.path)] = LocalHandle(server, f"node-{i}")
    return handles


def make_workers(nodes: dict[str, LocalHandle], count: int,
                 config: CleanerConfig = SMALL_CLEANER) -> list[LocalHandle]:
    def swap_for(log_dir: str):
        return lambda topic, partition, base, old: nodes[log_dir].call(
            "swap_cleaned", topic, partition, base, old)
    return [LocalHandle(CleanerWorker(i, config, swap_for), f"cleaner-{i}") for i in range(count)]


def fill(node: LocalHandle, topic: str, partition: int, n: int, keys: int,
         start: int = 0) -> dict[bytes, bytes]:
    """``n`` one-record batches cycling over ``keys`` keys, then a roll; returns latest per key."""
    latest = {}
    for i in range(start, start + n):
        key, value = b"k%d" % (i % keys), b"v%d" % i
        node.call("append_batch", topic, partition,
                  build_batch([Record(key=key, value=value, timestamp=1_700_000_000_000 + i)]))
        latest[key] = value
    node.call("roll", topic, partition)
    return latest


def read_all(node: LocalHandle, topic: str, partition: int) -> list[Record]:
    return list(node.target.log_dir.log(topic, partition).read())


class ManualPending:
    def __init__(self) -> None:
        self.future: Future[Any] = Future()

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: float | None = None) -> Any:
        return self.future.result(timeout)


class ManualWorker:
    """A worker handle whose cleans never run: the test ends them with ``finish``/``fail``."""

    def __init__(self, name: str = "manual", host: str = "local") -> None:
        self.name = name
        self.host = host
        self.assignments: list[CleanAssignment] = []
        self.pendings: list[ManualPending] = []
        self.aborted: list[int] = []
        self.dead = False

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        if self.dead:
            raise ActorUnavailableError(f"{self.name} is dead", actor=self.name)
        if method == "abort":
            self.aborted.append(args[0])
            return True
        return None

    def submit(self, method: str, *args: Any, **kwargs: Any) -> ManualPending:
        pending = ManualPending()
        if method == "clean":
            self.assignments.append(args[0])
            self.pendings.append(pending)
        elif self.dead:
            pending.future.set_exception(ActorUnavailableError("dead", actor=self.name))
        else:
            pending.future.set_result(0)
        return pending
