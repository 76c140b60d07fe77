"""A cleaner worker whose clean meets a full disk: it removes its ``.cleaned`` files, closes every
descriptor it opened (its ``LogView`` and the cleaned segment), raises ``CleanerIOError`` rather
than a raw ``OSError``, and the owning node's partition stays as it was. Real node server and
worker on a real, small tmpfs; no Ray."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Callable

import pytest

from cleaner.errors import CleanerIOError
from cluster.cleaning.coordinator import Coordinator
from cluster.cleaning.worker import CleanAssignment, CleanerWorker
from storage.files import TopicPartition
from tests.cleaner.test_cleaner_disk_full import fill_to, open_paths
from tests.cluster.fakes import SMALL_CLEANER, fill, make_workers, open_nodes

# large index steps written early (no mmap write into a hole of a full tmpfs: that is SIGBUS)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "65536", "segment.index.bytes": "65536",
           "index.interval.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


def test_a_worker_clean_on_a_full_disk_leaves_nothing_behind_and_raises_a_typed_error(
        tmpfs: Callable[[str], Path]) -> None:
    mount = tmpfs("2m")
    nodes = open_nodes(mount, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 3000, 3000)          # distinct keys: a clean rewrites nearly every byte
    log = node.target.log_dir.log("t", 0)
    records = [(r.offset, r.key, r.value) for r in log.read(0)]
    files_before = {p.name: p.read_bytes() for p in log.dir.iterdir() if ".log" in p.name}
    worker = CleanerWorker(0, SMALL_CLEANER, lambda d: lambda t, p, base, old: nodes[d].call(
        "swap_cleaned", t, p, base, old))
    assignment = CleanAssignment(1, TopicPartition("t", 0), str(node.target.path), str(log.dir),
                                 log.config, 0, log.active_segment.base_offset)
    fill_to(mount, 40 * 1024)

    with pytest.raises(CleanerIOError) as caught:
        worker.clean(assignment)
    assert caught.value.errno == 28 and ".log.cleaned" in caught.value.path
    assert caught.value.partition == "t-0"
    assert not [p for p in os.listdir(log.dir) if ".cleaned" in p or ".swap" in p]
    assert not [p for p in open_paths(mount) if ".cleaned" in p]
    assert worker.status().busy_with is None
    assert {p.name: p.read_bytes() for p in log.dir.iterdir() if ".log" in p.name} == \
        files_before
    assert [(r.offset, r.key, r.value) for r in log.read(0)] == records

    (mount / "ballast").unlink()
    assert node.target.close()
    assert open_paths(mount) == []      # neither the worker nor the node holds a file there


def test_the_coordinator_counts_a_full_disk_clean_as_a_failure_of_that_partition(
        tmpfs: Callable[[str], Path]) -> None:
    mount = tmpfs("2m")
    nodes = open_nodes(mount, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 3000, 3000)
    log = node.target.log_dir.log("t", 0)
    records = [(r.offset, r.key, r.value) for r in log.read(0)]
    fill_to(mount, 40 * 1024)
    config = dataclasses.replace(SMALL_CLEANER, uncleanable_retries=0)
    coordinator = Coordinator(nodes, make_workers(nodes, 1, config), config)
    for _ in range(300):
        coordinator.run_once()
        if coordinator.status().uncleanable:
            break
        threading.Event().wait(0.01)
    status = coordinator.status()
    assert [(u.topic, u.partition) for u in status.uncleanable] == [("t", 0)]
    assert status.uncleanable[0].error.startswith("CleanerIOError: ")
    assert status.cleans_completed == 0
    assert not [p for p in os.listdir(log.dir) if ".cleaned" in p or ".swap" in p]
    assert [(r.offset, r.key, r.value) for r in log.read(0)] == records
    (mount / "ballast").unlink()
    assert node.target.close()
