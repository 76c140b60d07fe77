"""How ``cluster.client.data_path.produce_batches`` packs batches into node calls: a call leaves
with ``batch_bytes`` while its directory is idle, and grows (up to ``BUSY_CALL_BYTES``) while a call
is running there; every call is one buffer the node appends in place. A real ``LogDirServer`` on
real files behind a ``LocalHandle`` whose first append waits for the test."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

from cluster.client.data_path import produce_batches
from cluster.handles import LocalHandle
from node.server import LogDirServer
from storage.records import Record, build_batch


class _HeldFirstCall(LocalHandle):
    """Appends for real; the first ``append_buffer_or_moved`` waits until ``release`` is set."""

    def __init__(self, server: LogDirServer) -> None:
        super().__init__(server, "node-0")
        self.calls: list[int] = []              # batches per call, in call order
        self.arrived = threading.Event()
        self.release = threading.Event()

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        if method == "append_buffer_or_moved":
            self.calls.append(len(args[0]))
            if len(self.calls) == 1:
                self.arrived.set()
                assert self.release.wait(30)
        return super().call(method, *args, timeout=timeout, **kwargs)


class _OneDir:
    def __init__(self, path: str) -> None:
        self.path = path

    def partition_dir(self, topic: str, partition: int) -> str:
        return self.path


def test_a_busy_directory_gets_the_batches_that_pile_up_in_one_call_an_idle_one_at_once(
        tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d0", start_tasks=False)
    server.create_partition("t", 0)
    server.create_partition("t", 1)
    node = _HeldFirstCall(server)
    batches = [("t", i % 2, build_batch([Record(key=b"k%d" % i, value=b"v" * 500,
                                                timestamp=i)])) for i in range(100)]
    size = len(batches[0][2])
    consumed = threading.Event()

    def items() -> Iterator[tuple[str, int, bytes]]:
        yield from batches
        consumed.set()

    result: list[Any] = []
    producer = threading.Thread(target=lambda: result.append(produce_batches(
        _OneDir(str(server.path)), {str(server.path): node}, items(), flush=False,
        batch_bytes=2 * size, window=4)))
    producer.start()
    assert node.arrived.wait(30)
    assert node.calls == [2]                   # batch_bytes packed, directory idle: sent at once
    assert consumed.wait(30)                   # the rest piled up while the first call ran
    node.release.set()
    producer.join(30)
    assert node.calls == [2, 98]               # ... and went in one call
    assert result[0].records == 100 and result[0].calls == 2
    for partition in (0, 1):
        got = [r.key for r in server.read_records("t", partition, 0)]
        assert got == [b"k%d" % i for i in range(partition, 100, 2)]
    server.close()
