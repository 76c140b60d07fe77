"""The transaction calls of a node (``LogDirServer``) on real files: markers written as the
coordinator and flushed, a partition deleted meanwhile skipped, read_committed records."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.server import LogDirServer
from storage.records import ControlType, Record, build_batch


def _txn_batch(pid: int, *values: bytes) -> bytes:
    return build_batch([Record(key=v, value=v, timestamp=1) for v in values], producer_id=pid,
                       producer_epoch=0, base_sequence=0, is_transactional=True)


@pytest.fixture
def server(tmp_path: Path):
    s = LogDirServer(tmp_path / "logs", start_tasks=False)
    yield s
    s.close()


def test_markers_close_transactions_and_skip_a_partition_that_is_gone(server) -> None:
    server.create_partition("t", 0)
    server.create_partition("t", 1)
    server.append_batches([("t", 0, _txn_batch(7, b"a", b"b")), ("t", 1, _txn_batch(8, b"c"))])
    assert server.last_stable_offset("t", 0) == 0
    assert server.read_records("t", 0, 0, isolation="read_committed") == []
    written = server.write_txn_markers([
        ("t", 0, 7, 1, int(ControlType.COMMIT), 1),
        ("t", 1, 8, 1, int(ControlType.ABORT), 1),
        ("gone", 0, 9, 1, int(ControlType.ABORT), 1)])
    assert written == [("t", 0), ("t", 1)]
    assert server.last_stable_offset("t", 0) == 3 and server.last_stable_offset("t", 1) == 2
    assert [r.value for r in server.read_records("t", 0, 0, isolation="read_committed")] == \
        [b"a", b"b"]
    assert server.read_records("t", 1, 0, isolation="read_committed") == []
    assert [r.value for r in server.read_records("t", 1, 0)] == [b"c"]     # uncommitted
    assert server.log_dir.log("t", 0).recovery_point == 3     # flushed with its marker


def test_markers_of_a_routed_topic_go_through_its_writer(server) -> None:
    """``route_txn_markers``: the group coordinator appends the markers of
    ``__consumer_offsets`` itself (and applies them); other topics' are appended as before."""
    server.create_partition("__consumer_offsets", 2)
    server.create_partition("t", 0)
    server.append_batches([("__consumer_offsets", 2, _txn_batch(7, b"o")),
                           ("t", 0, _txn_batch(7, b"a"))])
    routed = []

    def writer(partition, log, control, producer_id, epoch, coordinator_epoch) -> None:
        routed.append((partition, control, producer_id, epoch, coordinator_epoch))
        log.append_end_txn_marker(control, producer_id=producer_id, producer_epoch=epoch,
                                  coordinator_epoch=coordinator_epoch)
    server.route_txn_markers("__consumer_offsets", writer)
    written = server.write_txn_markers([
        ("__consumer_offsets", 2, 7, 1, int(ControlType.COMMIT), 4),
        ("t", 0, 7, 1, int(ControlType.COMMIT), 4)])
    assert written == [("__consumer_offsets", 2), ("t", 0)]
    assert routed == [(2, ControlType.COMMIT, 7, 1, 4)]
    assert server.last_stable_offset("__consumer_offsets", 2) == 2
    assert server.last_stable_offset("t", 0) == 2
    assert server.log_dir.log("__consumer_offsets", 2).recovery_point == 2
