"""``TopicMetadata`` create and delete against real ``LogDirServer`` nodes behind ``LocalHandle``s
(no Ray): one batched call per directory, the table lock never held across a node call, a
half-failed create rolled back (never left routed), and a delete interrupted half-way recorded in
the directories and finished by the next coordinator (``resume_deletions``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cluster.errors import ActorUnavailableError, TopicExistsError, UnknownTopicError
from cluster.handles import LocalHandle
from cluster.metadata.topics import TopicMetadata
from cluster.metadata.placement import DirRoom
from node.server import LogDirServer
from storage.config import LogConfig
from tests.cluster.fakes import open_nodes


def _rooms(nodes: dict) -> list[DirRoom]:
    return [DirRoom(d, free_bytes=1 << 30, log_bytes=0, partitions=0) for d in sorted(nodes)]


def _held(nodes: dict, topic: str) -> list[int]:
    return sorted(p for h in nodes.values() for t, p in h.call("partitions") if t == topic)


class Counting(LocalHandle):
    """Counts the calls by method; ``gate`` (when set) holds ``create_partitions`` until set."""

    def __init__(self, inner: LocalHandle) -> None:
        super().__init__(inner.target, inner.name)
        self.calls: dict[str, int] = {}
        self.gate: threading.Event | None = None
        self.fail_after_delete_batches: int | None = None

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        self.calls[method] = self.calls.get(method, 0) + 1
        if method == "create_partitions" and self.gate is not None:
            assert self.gate.wait(30)
        if method == "delete_partitions" and self.fail_after_delete_batches is not None:
            if self.fail_after_delete_batches == 0:
                raise ActorUnavailableError(f"actor {self.name} died", actor=self.name)
            self.fail_after_delete_batches -= 1
        return super().call(method, *args, **kwargs)


def test_create_and_delete_make_one_call_per_directory_and_batch(tmp_path: Path) -> None:
    nodes = {d: Counting(h) for d, h in open_nodes(tmp_path, 2).items()}
    meta = TopicMetadata(nodes, LogConfig())
    seen: list[tuple[str, int, int]] = []
    info = meta.create_topic("big", 3000, {}, _rooms(nodes),
                             on_progress=lambda *p: seen.append(p))
    assert sorted(info.partitions) == list(range(3000)) and _held(nodes, "big") == \
        list(range(3000))
    # 1,500 partitions a directory, at most 2,000 a call: one call each, none per partition
    assert [h.calls.get("create_partitions") for h in nodes.values()] == [1, 1]
    assert all("create_partition" not in h.calls for h in nodes.values())
    assert seen[0] == ("create partitions", 0, 3000) and seen[-1] == ("create partitions",
                                                                        3000, 3000)
    assert meta.delete_topic("big", on_progress=lambda *p: seen.append(p)) == 3000
    assert [h.calls.get("delete_partitions") for h in nodes.values()] == [1, 1]
    assert seen[-1] == ("delete partitions", 3000, 3000)
    assert _held(nodes, "big") == [] and meta.topics() == []
    for h in nodes.values():
        assert h.call("topic_deletions") == []
        h.target.close()


def test_routes_answer_while_a_create_waits_for_a_node(tmp_path: Path) -> None:
    nodes = {d: Counting(h) for d, h in open_nodes(tmp_path, 2).items()}
    meta = TopicMetadata(nodes, LogConfig())
    meta.create_topic("served", 2, {}, _rooms(nodes))
    gate = threading.Event()
    for h in nodes.values():
        h.gate = gate
    creating = threading.Thread(target=meta.create_topic,
                                args=("slow", 4, {}, _rooms(nodes)), daemon=True)
    creating.start()
    try:
        time.sleep(0.2)     # the create is now inside a node call
        began = time.monotonic()
        assert meta.route("served", 1) in nodes
        assert "served" in meta.routes() and "slow" not in meta.routes()
        with pytest.raises(TopicExistsError, match="being created"):
            meta.create_topic("slow", 1, {}, _rooms(nodes))
        assert time.monotonic() - began < 1.0, "the table lock was held across a node call"
    finally:
        gate.set()
        creating.join(30)
    assert sorted(meta.routes("slow")["slow"]) == [0, 1, 2, 3]
    for h in nodes.values():
        h.target.close()


def test_a_create_that_fails_on_one_directory_is_rolled_back_not_left_routed(
        tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 3)
    meta = TopicMetadata(nodes, LogConfig())
    last = sorted(nodes)[-1]
    original = nodes[last].target.create_partitions

    def fail_half_way(topic: str, partitions: Any, config: Any = None) -> int:
        original(topic, list(partitions)[:1], config)        # one created, then the disk fails
        raise OSError("disk failed")
    nodes[last].target.create_partitions = fail_half_way
    with pytest.raises(OSError):
        meta.create_topic("half", 6, {}, _rooms(nodes))
    assert "half" not in meta.routes()
    assert _held(nodes, "half") == []                        # the others' were deleted too
    with pytest.raises(UnknownTopicError):
        meta.route("half", 0)
    nodes[last].target.create_partitions = original
    assert sorted(meta.create_topic("half", 6, {}, _rooms(nodes)).partitions) == list(range(6))
    for h in nodes.values():
        h.target.close()


def test_a_delete_interrupted_half_way_is_finished_by_the_next_coordinator(
        tmp_path: Path) -> None:
    nodes = {d: Counting(h) for d, h in open_nodes(tmp_path, 2).items()}
    meta = TopicMetadata(nodes, LogConfig())
    meta.create_topic("gone", 5000, {"retention.ms": "60000"}, _rooms(nodes))
    meta.create_topic("kept", 2, {}, _rooms(nodes))
    first = sorted(nodes)[0]
    nodes[first].fail_after_delete_batches = 1               # its second batch: the node dies
    with pytest.raises(ActorUnavailableError):
        meta.delete_topic("gone")
    assert "gone" not in meta.routes()
    left = _held(nodes, "gone")
    assert 0 < len(left) < 5000
    with pytest.raises(TopicExistsError, match="being deleted"):
        meta.create_topic("gone", 1, {}, _rooms(nodes))
    # the whole cluster restarts: new servers on the same directories, a new table
    for h in nodes.values():
        h.target.close()
    reopened = {d: LocalHandle(LogDirServer(d, start_tasks=False), f"node-{i}")
                for i, d in enumerate(sorted(nodes))}
    assert reopened[first].call("topic_deletions") == ["gone"]
    fresh = TopicMetadata(reopened, LogConfig())
    fresh.refresh()
    assert "gone" not in fresh.routes() and sorted(fresh.routes()) == ["kept"]
    assert fresh.resume_deletions() == ["gone"]
    assert _held(reopened, "gone") == []
    assert [h.call("topic_deletions") for h in reopened.values()] == [[], []]
    assert [h.call("topic_configs").get("gone") for h in reopened.values()] == [None, None]
    assert sorted(fresh.create_topic("gone", 2, {}, _rooms(reopened)).partitions) == [0, 1]
    for h in reopened.values():
        h.target.close()
