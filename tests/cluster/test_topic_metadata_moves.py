"""``TopicMetadata`` while a partition moves between real ``LogDirServer`` nodes (no Ray): between
the source's commit and the target's promotion no directory holds the partition, and the table
must still know it exists, where it goes, and refuse to create it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from cluster.errors import TopicExistsError
from cluster.metadata.topics import TopicMetadata
from cluster.metadata.placement import DirRoom
from node.move import CopyRecord, SourceSnapshot
from node.mover import SwitchResult
from node.server import LogDirServer
from storage.config import LogConfig
from storage.records import Record, build_batch
from tests.cluster.fakes import open_nodes


class SwitchWatcher:
    """The source as the target sees it, running ``after_switch`` once the source has committed
    the move and before the target promotes its copy."""

    def __init__(self, source: LogDirServer, after_switch: Callable[[], None]) -> None:
        self._source = source
        self._after_switch = after_switch

    def move_source(self, topic: str, partition: int) -> SourceSnapshot:
        return self._source.move_source(topic, partition)

    def move_switch_out(self, topic: str, partition: int, future_dir: str, unique: str,
                        target_dir: str, record: CopyRecord) -> SwitchResult:
        switched = self._source.move_switch_out(topic, partition, future_dir, unique,
                                                target_dir, record)
        self._after_switch()
        return switched


def _rooms(nodes: dict) -> list[DirRoom]:
    return [DirRoom(d, free_bytes=1 << 30, log_bytes=0, partitions=0) for d in sorted(nodes)]


@pytest.fixture
def nodes(tmp_path: Path):
    handles = open_nodes(tmp_path, 2)
    yield handles
    for h in handles.values():
        h.target.close()


def test_a_partition_between_the_sources_commit_and_the_promotion_is_routed_to_its_target(
        nodes: dict) -> None:
    """No directory lists the partition in that moment; a refresh must not forget the topic
    (a create, or a Kafka client's auto-creation, would then make a second, empty copy of it in
    another directory, and acknowledge records there that the moved partition never holds)."""
    meta = TopicMetadata(nodes, LogConfig())
    source_dir, target_dir = sorted(nodes)
    meta.create_topic("moving", 1, {}, [r for r in _rooms(nodes) if r.log_dir == source_dir])
    nodes[source_dir].call("append_batch", "moving", 0,
                           build_batch([Record(value=b"kept", timestamp=1)]))
    seen: dict[str, Any] = {}

    def in_the_window() -> None:
        held = [tp for h in nodes.values() for tp in h.call("partitions")]
        seen["held"] = held
        meta.refresh()
        seen["routes"] = meta.routes("moving")
        with pytest.raises(TopicExistsError):
            meta.create_topic("moving", 3, {}, _rooms(nodes))
        seen["refused"] = True

    target = nodes[target_dir].target
    target.move_in("moving", 0, source_dir, SwitchWatcher(nodes[source_dir].target,
                                                          in_the_window))
    assert seen["held"] == []                  # the window this test is about
    assert seen["routes"] == {"moving": {0: target_dir}} and seen["refused"]
    meta.refresh()
    assert meta.routes("moving") == {"moving": {0: target_dir}}
    assert [h.call("partitions") for h in nodes.values()] == [[], [("moving", 0)]]
    assert [r.value for r in target.log_dir.log("moving", 0).read()] == [b"kept"]

