"""The node's buffer append RPC (``LogDirServer.append_buffer_or_moved``), the transport of
``Cluster.produce_batches``: several partitions' batches packed in one buffer."""

from __future__ import annotations

from pathlib import Path

from node import UnknownPartitionError
from node.server import LogDirServer
from storage.records import Record, build_batch


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
