"""The cluster knows its directories, on a real local Ray cluster with real directories: the
identity each directory carries (``meta.properties``, ``cluster-log-dirs``), a start without one of
them, a start told to go on without it, a partition held by two directories, and a directory of
another cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cluster.errors import (DuplicatePartitionError, ForeignLogDirError,
                            MissingLogDirError, UnknownTopicError)
from cluster.naming import TRANSACTION_STATE_TOPIC
from node.meta_properties import read_meta_properties
from storage.records import Record


def rows(n: int, prefix: bytes = b"r") -> list[Record]:
    return [Record(key=b"%s%d" % (prefix, i), value=b"%s%d" % (prefix, i), timestamp=1000 + i)
            for i in range(n)]


def copies_on_disk(dirs: list[Path], topic: str) -> dict[int, list[Path]]:
    """partition -> the directories holding a live copy of ``topic``-partition."""
    found: dict[int, list[Path]] = {}
    for d in dirs:
        for entry in d.glob(f"{topic}-*"):
            suffix = entry.name[len(topic) + 1:]
            if suffix.isdigit():
                found.setdefault(int(suffix), []).append(d)
    return found


def test_each_directory_carries_the_cluster_id_and_a_node_id_kept_across_restarts(
        start_cluster, tmp_path: Path) -> None:
    dirs = [tmp_path / "c", tmp_path / "a", tmp_path / "b"]
    c = start_cluster(paths=dirs)
    assert c.description.node_ids == {str(dirs[0]): 0, str(dirs[1]): 1, str(dirs[2]): 2}
    c.stop()
    metas = [read_meta_properties(d) for d in dirs]
    assert [m.node_id for m in metas] == [0, 1, 2]
    assert len({m.cluster_id for m in metas}) == 1 and len(metas[0].cluster_id) == 22
    assert all(m.version == 1 and m.directory_id for m in metas)
    again = start_cluster(paths=list(reversed(dirs)))
    assert again.description.node_ids == {str(dirs[0]): 0, str(dirs[1]): 1, str(dirs[2]): 2}
    assert again.description.cluster_id == metas[0].cluster_id
    again.stop()
    assert [read_meta_properties(d) for d in dirs] == metas


def test_a_start_without_a_known_directory_is_refused_and_going_on_creates_no_second_copy(
        start_cluster, tmp_path: Path) -> None:
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    c = start_cluster(paths=dirs)
    c.create_topic("orders", partitions=3)
    for p in range(3):
        c.produce("orders", p, rows(2))
    with c.begin_transaction("load-1") as txn:
        txn.produce("orders", 0, rows(1, b"t"))
    state = copies_on_disk(dirs, TRANSACTION_STATE_TOPIC)
    holder = state[0][0]                  # the directory holding the state log's partition 0
    routes = c.list_topics()[0].partitions
    lost = next(p for p, d in routes.items() if d == str(holder))
    c.stop()
    rest = [d for d in dirs if d != holder]

    with pytest.raises(MissingLogDirError) as caught:
        start_cluster(paths=rest)
    assert str(holder) in str(caught.value)
    assert list(caught.value.fields["missing"]) == [str(holder)]
    degraded = start_cluster(paths=rest, allow_missing_log_dirs=True)
    assert degraded.description.missing_log_dirs == {str(holder): dirs.index(holder)}
    with pytest.raises(UnknownTopicError, match="missing from this start"):
        degraded.produce("orders", lost, rows(1))
    with pytest.raises(MissingLogDirError):
        degraded.create_topic("fresh", partitions=1)
    with pytest.raises(MissingLogDirError):
        degraded.add_partitions("orders", 6)
    for p in range(3):
        if p != lost:
            degraded.produce("orders", p, rows(1, b"more"))
    degraded.stop()
    assert all(len(held) == 1 for held in copies_on_disk(dirs, TRANSACTION_STATE_TOPIC).values())
    assert all(len(held) == 1 for held in copies_on_disk(dirs, "orders").values())
    assert sorted(copies_on_disk(dirs, "orders")) == [0, 1, 2]

    whole = start_cluster(paths=dirs)
    assert whole.describe_transaction("load-1").state.value == "CompleteCommit"
    assert [r.value for r in whole.consume("orders", 0, isolation="read_committed")][:3] == \
        [b"r0", b"r1", b"t0"]


def test_a_partition_in_two_directories_refuses_the_start_naming_both(
        start_cluster, tmp_path: Path) -> None:
    """A crash after a move's commit and before the removal of its source, with the source's
    disk absent at the next start, then back: both copies would be live."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    c = start_cluster(paths=dirs)
    c.create_topic("t", partitions=1)
    c.produce("t", 0, rows(3))
    source = Path(c.list_topics()[0].partitions[0])
    target = next(d for d in dirs if d != source)
    c.stop()
    shutil.copytree(source / "t-0", target / "t-0")
    with pytest.raises(DuplicatePartitionError) as caught:
        start_cluster(paths=dirs)
    text = str(caught.value)
    assert "t-0" in text and str(source) in text and str(target) in text
    assert caught.value.fields["dirs"] == sorted([str(source), str(target)])
    shutil.rmtree(target / "t-0")
    again = start_cluster(paths=dirs)
    assert [r.value for r in again.consume("t", 0)] == [b"r0", b"r1", b"r2"]


def test_a_directory_of_another_cluster_refuses_the_start(start_cluster, tmp_path: Path) -> None:
    ours = [tmp_path / "a0", tmp_path / "a1"]
    theirs = tmp_path / "b0"
    start_cluster(paths=ours).stop()
    start_cluster(paths=[theirs]).stop()
    with pytest.raises(ForeignLogDirError) as caught:
        start_cluster(paths=[*ours, theirs])
    assert str(theirs) in str(caught.value) and str(ours[0]) in str(caught.value)
    assert read_meta_properties(theirs).node_id == 0     # nothing rewritten


def _files(dirs: list[Path]) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size)
            for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_start_refused_for_a_directory_of_another_cluster_opens_no_directory(
        start_cluster, tmp_path: Path) -> None:
    """Every directory is on this host, so the start reads their identity before it starts any
    actor: the refusal comes before a node actor has opened (and closed) a directory."""
    ours = [tmp_path / "a0", tmp_path / "a1"]
    theirs = tmp_path / "b0"
    start_cluster(paths=ours).stop()
    start_cluster(paths=[theirs]).stop()
    before = _files([*ours, theirs])
    with pytest.raises(ForeignLogDirError):
        start_cluster(paths=[*ours, theirs])
    assert _files([*ours, theirs]) == before
