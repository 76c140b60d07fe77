"""``TopicMetadata.alter_topic_config`` and ``add_partitions`` against real ``LogDirServer``
nodes behind ``LocalHandle``s (no Ray): a refused key changes no directory, a directory that
fails half-way is completed by running the same alter again, new partitions take the topic's
overrides and the placement's spread."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cluster.errors import ActorUnavailableError, InvalidPartitionsError
from cluster.metadata.topics import TopicMetadata
from cluster.metadata.placement import DirRoom
from storage.config import LogConfig
from storage.errors import InvalidConfigError
from tests.cluster.fakes import open_nodes


def _rooms(nodes: dict) -> list[DirRoom]:
    return [DirRoom(d, free_bytes=1 << 30, log_bytes=0, partitions=0) for d in sorted(nodes)]


def _overrides(nodes: dict, topic: str) -> list[dict[str, str]]:
    return [h.call("topic_configs").get(topic) for _, h in sorted(nodes.items())]


def test_a_refused_alter_changes_no_directory_and_a_rerun_completes_a_half_done_one(
        tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 3)
    meta = TopicMetadata(nodes, LogConfig())
    meta.create_topic("t", 3, {"retention.ms": "5000"}, _rooms(nodes))
    for bad, key in (({"retention.ms": "x"}, "retention.ms"), ({"nope": "1"}, "nope"),
                     ({"log.retention.ms": "1"}, "log.retention.ms")):
        with pytest.raises(InvalidConfigError) as refused:
            meta.alter_topic_config("t", bad)
        assert refused.value.key == key
    with pytest.raises(InvalidConfigError) as refused:
        meta.alter_topic_config("t", {}, delete=["segment.ms"])
    assert refused.value.key == "segment.ms"
    assert _overrides(nodes, "t") == [{"retention.ms": "5000"}] * 3

    last = sorted(nodes)[-1]
    nodes[last].dead = True
    with pytest.raises(ActorUnavailableError):
        meta.alter_topic_config("t", {"segment.ms": "60000"}, delete=["retention.ms"])
    nodes[last].dead = False
    assert _overrides(nodes, "t")[-1] == {"retention.ms": "5000"}
    info = meta.alter_topic_config("t", {"segment.ms": "60000"}, delete=["retention.ms"])
    assert info.config == {"segment.ms": "60000"}
    assert _overrides(nodes, "t") == [{"segment.ms": "60000"}] * 3
    for h in nodes.values():
        h.target.close()


def test_add_partitions_spreads_the_new_ones_with_the_topic_overrides(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 3)
    meta = TopicMetadata(nodes, LogConfig())
    meta.create_topic("t", 1, {"segment.ms": "60000"}, _rooms(nodes))
    info = meta.add_partitions("t", 6, _rooms(nodes))
    assert sorted(info.partitions) == list(range(6))
    assert sorted(Counter(info.partitions.values()).values()) == [2, 2, 2]
    for partition, log_dir in info.partitions.items():
        assert nodes[log_dir].target.log_dir.log("t", partition).config.segment_ms == 60000
    with pytest.raises(InvalidPartitionsError):
        meta.add_partitions("t", 6, _rooms(nodes))
    for h in nodes.values():
        h.target.close()
