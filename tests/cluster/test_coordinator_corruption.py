"""The coordinator's view of a corrupt partition (issue 12): its cleans fail with the cleaner's
typed error, it becomes uncleanable naming the damaged file, its bytes stay as they were, and the
other partitions keep being cleaned. Real node servers and cleaner workers, no Ray."""

from __future__ import annotations

import threading
from pathlib import Path

from cluster.cleaning.coordinator import Coordinator
from storage.records import scan_batches
from tests.cluster.fakes import COMPACT, SMALL_CLEANER, fill, make_workers, open_nodes, read_all


def test_a_corrupt_partition_becomes_uncleanable_and_the_others_are_cleaned(
        tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    node.call("create_partition", "t", 1, COMPACT)
    fill(node, "t", 0, 400, 10)
    latest = fill(node, "t", 1, 400, 10)
    damaged = node.target.log_dir.log("t", 0).segments()[1]
    data = bytearray(damaged.log_path.read_bytes())
    at = data.index(b"v1")                 # a value inside the second segment
    data[at] ^= 0x01
    damaged.log_path.write_bytes(data)
    coordinator = Coordinator(nodes, make_workers(nodes, 1), SMALL_CLEANER)
    for _ in range(300):
        coordinator.run_once()
        status = coordinator.status()
        if status.uncleanable and status.cleans_completed >= 1:
            break
        threading.Event().wait(0.01)
    status = coordinator.status()
    assert [(u.topic, u.partition) for u in status.uncleanable] == [("t", 0)]
    assert "CorruptSegmentError" in status.uncleanable[0].error
    assert str(damaged.log_path) in status.uncleanable[0].error
    assert damaged.log_path.read_bytes() == bytes(data)
    assert {r.key: r.value for r in read_all(node, "t", 1)} == latest
    assert len(read_all(node, "t", 1)) == 10


def test_a_flipped_base_offset_makes_the_partition_uncleanable_and_leaves_it_as_it_was(
        tmp_path: Path) -> None:
    """A base offset lies outside the batch's CRC: a flipped bit there passes the CRC, and the
    worker must refuse the batch by its offsets, as readers do."""
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 400, 10)
    log = node.target.log_dir.log("t", 0)
    damaged = log.segments()[0]
    later_base = log.segments()[1].base_offset
    later = [(r.offset, r.value) for r in log.read(later_base)]
    data = bytearray(damaged.log_path.read_bytes())
    position = int(scan_batches(bytes(data)).positions[3])
    data[position + 7] ^= 0x08              # base offset 3 -> 11, over the batches after it
    damaged.log_path.write_bytes(data)
    coordinator = Coordinator(nodes, make_workers(nodes, 1), SMALL_CLEANER)
    for _ in range(300):
        coordinator.run_once()
        if coordinator.status().uncleanable:
            break
        threading.Event().wait(0.01)
    status = coordinator.status()
    assert [(u.topic, u.partition) for u in status.uncleanable] == [("t", 0)]
    assert "CorruptSegmentError" in status.uncleanable[0].error
    assert f"{damaged.log_path}: corrupt batch at position" in status.uncleanable[0].error
    assert status.cleans_completed == 0
    assert damaged.log_path.read_bytes() == bytes(data)
    assert not [p for p in damaged.log_path.parent.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert [(r.offset, r.value) for r in log.read(later_base)] == later
