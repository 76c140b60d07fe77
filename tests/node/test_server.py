"""The node actor's plain class: forwards to LogDir with plain, picklable values; no ray import."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from node import LoadProgress, LogDirOfflineError, UnknownPartitionError
from node.server import LogDirServer
from storage.records import Record, build_batch

ROOT = Path(__file__).resolve().parents[2]


def test_server_forwards_to_its_log_dir(tmp_path: Path) -> None:
    seen: list[LoadProgress] = []
    server = LogDirServer(tmp_path / "logs", start_tasks=False, on_load_progress=seen.append)
    assert seen and server.load_progress() == seen[-1] and seen[-1].done
    created = server.create_partition("t", 0)
    assert (created.topic, created.partition, created.log_end_offset) == ("t", 0, 0)
    data = build_batch([Record(key=b"k", value=b"v", timestamp=1)] * 3)
    info = pickle.loads(pickle.dumps(server.append_batch("t", 0, data)))
    assert (info.first_offset, info.last_offset) == (0, 2)
    fetch = pickle.loads(pickle.dumps(server.read_raw("t", 0, 0)))
    assert [r.offset for b in fetch.batches() for r in b.records()] == [0, 1, 2]
    assert server.flush("t", 0) == 3 and server.offsets("t", 0) == (0, 3)
    assert server.partitions() == [("t", 0)]
    stats = pickle.loads(pickle.dumps(server.stats()))
    assert stats.partitions[0].log_end_offset == 3
    with pytest.raises(UnknownPartitionError):
        server.append_batch("t", 1, data)
    assert server.delete_partition("t", 0) and not server.delete_partition("t", 0)
    assert server.partitions() == []
    server.close()
    server.close()


def test_server_errors_pickle_with_their_fields(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "logs", start_tasks=False)
    server.create_partition("t", 0)
    server.append_batch("t", 0, build_batch([Record(key=b"k", value=b"v", timestamp=1)]))
    (tmp_path / "logs" / "t-0").rename(tmp_path / "gone")
    (tmp_path / "logs" / "t-0").write_text("not a directory any more")
    with pytest.raises(LogDirOfflineError) as failure:
        server.log_dir.log("t", 0).roll()   # the next segment cannot be created: ENOTDIR
    err = pickle.loads(pickle.dumps(failure.value))
    assert err.directory == str(tmp_path / "logs") and "ENOTDIR" in err.reason
    assert not server.stats().online
    server.close()


def test_node_imports_neither_ray_nor_pyspark() -> None:
    code = ("import sys, node, node.server, node.logdir\n"
            "bad = [m for m in ('ray', 'pyspark') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
