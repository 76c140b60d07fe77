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


def test_append_buffer_or_moved_appends_each_span_and_keeps_no_view_of_the_buffer(
        tmp_path: Path) -> None:
    """The client's produce transport: the batches of one call packed in one buffer, appended in
    span order; a partition not served here gets its error in place of each of its spans; the
    log holds its own copy (the buffer is Ray's object-store memory, released after the call)."""
    server = LogDirServer(tmp_path / "logs", start_tasks=False)
    server.create_partition("t", 0)
    server.create_partition("t", 1)
    batches = [("t", 0, build_batch([Record(key=b"a", value=b"1", timestamp=1)] * 2)),
               ("gone", 0, build_batch([Record(key=b"x", value=b"9", timestamp=1)])),
               ("t", 1, build_batch([Record(key=b"b", value=b"2", timestamp=1)])),
               ("t", 0, build_batch([Record(key=b"c", value=b"3", timestamp=1)] * 3)),
               ("gone", 0, build_batch([Record(key=b"y", value=b"8", timestamp=1)]))]
    buffer = bytearray(b"".join(data for _, _, data in batches))
    spans, position = [], 0
    for topic, partition, data in batches:
        spans.append((topic, partition, position, position + len(data)))
        position += len(data)
    results = server.append_buffer_or_moved(spans, buffer)
    buffer[:] = bytes(len(buffer))        # the call is over: its buffer may be reused
    assert [(r.first_offset, r.last_offset) for r in (results[0], results[2], results[3])] == \
        [(0, 1), (0, 0), (2, 4)]
    assert isinstance(results[1], UnknownPartitionError) and results[4] is results[1]
    assert [r.value for r in server.read_records("t", 0, 0)] == [b"1", b"1", b"3", b"3", b"3"]
    assert [r.value for r in server.read_records("t", 1, 0)] == [b"2"]
    server.close()
