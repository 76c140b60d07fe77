"""Coordinator logic without Ray: real node servers and real cleaner workers on real files behind
in-process handles (or a hand-driven worker), the loop driven one round at a time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cluster.cleaning.coordinator import Coordinator
from cluster.errors import ActorUnavailableError
from cluster.metrics.sink import RecordingMetrics
from storage.errors import LogCleaningAbortedError
from storage.files import TopicPartition
from tests.cluster.fakes import (
    COMPACT,
    SMALL_CLEANER,
    ManualWorker,
    fill,
    make_workers,
    open_nodes,
    read_all,
)


def run_until(coordinator: Coordinator, condition, rounds: int = 200) -> None:
    for _ in range(rounds):
        coordinator.run_once()
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("condition not reached")


def test_the_loop_compacts_every_dirty_log_and_the_owner_checkpoints_it(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 2)
    (d0, n0), (d1, n1) = nodes.items()
    n0.call("create_partition", "t", 0, COMPACT)
    n1.call("create_partition", "t", 1, COMPACT)
    latest0 = fill(n0, "t", 0, 400, 10)
    latest1 = fill(n1, "t", 1, 400, 25)
    coordinator = Coordinator(nodes, make_workers(nodes, 2), SMALL_CLEANER)
    run_until(coordinator, lambda: coordinator.status().cleans_completed >= 2)
    assert {r.key: r.value for r in read_all(n0, "t", 0)} == latest0
    assert len(read_all(n0, "t", 0)) == 10 and len(read_all(n1, "t", 1)) == 25
    assert n0.call("read_cleaner_checkpoint") == {TopicPartition("t", 0): 400}
    assert {r.key: r.value for r in read_all(n1, "t", 1)} == latest1


def test_a_new_coordinator_resumes_from_the_checkpoints(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 300, 10)
    first = Coordinator(nodes, make_workers(nodes, 1), SMALL_CLEANER)
    run_until(first, lambda: first.status().cleans_completed == 1)
    fill(node, "t", 0, 300, 10, start=300)
    worker = ManualWorker()
    second = Coordinator(nodes, [worker], SMALL_CLEANER)   # a restart: nothing in memory
    second.run_once()
    assert worker.assignments and worker.assignments[0].first_dirty_offset == 300


def test_a_cleaner_dying_mid_clean_leaves_the_log_as_before_and_is_retried(
        tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    log_dir, node = next(iter(nodes.items()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 300, 10)
    before = [(r.offset, r.key, r.value) for r in read_all(node, "t", 0)]
    worker = ManualWorker()
    coordinator = Coordinator(nodes, [worker], SMALL_CLEANER)
    coordinator.run_once()
    a = worker.assignments[0]
    partial = Path(a.partition_dir) / "00000000000000000000.log.cleaned"
    partial.write_bytes(b"half a segment")   # what a killed cleaner leaves
    worker.dead = True
    worker.pendings[0].future.set_exception(ActorUnavailableError("killed", actor="manual"))
    coordinator.run_once()
    assert not partial.exists()
    assert [(r.offset, r.key, r.value) for r in read_all(node, "t", 0)] == before
    status = coordinator.status()
    assert status.cleans_failed == 1 and status.recent[-1].outcome == "cleaner died"
    assert status.workers[0].state == "recovering"
    worker.dead = False
    run_until(coordinator, lambda: len(worker.assignments) == 2)   # back, and the log retried
    assert worker.assignments[1].topic_partition == a.topic_partition


def test_abort_and_pause_waits_for_the_running_clean_to_stop(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 300, 10)
    worker = ManualWorker()
    coordinator = Coordinator(nodes, [worker], SMALL_CLEANER)
    coordinator.run_once()
    paused = threading.Event()

    def pause() -> None:
        coordinator.abort_and_pause("t", 0, timeout_s=10)
        paused.set()
    threading.Thread(target=pause, daemon=True).start()
    deadline = threading.Event()
    while not worker.aborted and not deadline.wait(0.01):
        pass
    assert worker.aborted == [worker.assignments[0].assignment_id] and not paused.is_set()
    worker.pendings[0].future.set_exception(LogCleaningAbortedError("aborted"))
    coordinator.run_once()
    assert paused.wait(5)
    coordinator.run_once()
    assert len(worker.assignments) == 1   # paused: not handed out again
    assert coordinator.explain("t", 0).status.value == "paused"
    assert coordinator.resume("t", 0)
    assert not coordinator.resume("t", 0)   # not paused any more: ignored, not raised
    coordinator.run_once()
    assert len(worker.assignments) == 2


def test_pauses_nest_and_an_operator_releases_only_the_pauses_an_operator_took(
        tmp_path: Path) -> None:
    """Two operator pauses need two resumes; a pause held by the node (truncation, deletion,
    a directory move, retention) is never released by an operator's resume, and explain says who
    holds what. A clean requested while paused is refused at once."""
    from cleaner.state import paused as paused_state
    from cluster.errors import PartitionPausedError

    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 300, 10)
    coordinator = Coordinator(nodes, [ManualWorker()], SMALL_CLEANER)
    coordinator.abort_and_pause("t", 0, timeout_s=5)
    coordinator.abort_and_pause("t", 0, timeout_s=5)
    assert coordinator.pauses("t", 0) == (2, 2)
    with pytest.raises(PartitionPausedError, match="2 by an operator"):
        coordinator.request_clean("t", 0)
    assert coordinator.resume("t", 0) and coordinator.pauses("t", 0) == (1, 1)
    assert coordinator.resume("t", 0) and coordinator.pauses("t", 0) == (0, 0)
    # a pause the node takes (here: as truncation would) is not the operator's to release
    coordinator._manager.set_cleaning_state(TopicPartition("t", 0), paused_state(1))
    assert coordinator.pauses("t", 0) == (0, 1)
    assert not coordinator.resume("t", 0)
    assert coordinator.pauses("t", 0) == (0, 1)
    coordinator.run_once()
    reason = coordinator.explain("t", 0).reason
    assert "held by truncation" in reason and "operator" not in reason
    coordinator.abort_and_pause("t", 0, timeout_s=5)
    assert "1 by an operator" in coordinator.explain("t", 0).reason


def test_trigger_cleans_a_log_below_its_dirty_ratio(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, {**COMPACT, "min.cleanable.dirty.ratio": "0.99"})
    fill(node, "t", 0, 300, 10)
    coordinator = Coordinator(nodes, make_workers(nodes, 1), SMALL_CLEANER)
    for _ in range(3):
        coordinator.run_once()
    assert coordinator.cleans_completed("t", 0) == 0
    assert coordinator.trigger_clean("t", 0) == 0
    run_until(coordinator, lambda: coordinator.cleans_completed("t", 0) == 1)
    assert len(read_all(node, "t", 0)) == 10


def test_an_offline_directory_is_reported_and_the_others_still_clean(
        tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 2)
    (d0, n0), (d1, n1) = nodes.items()
    n0.call("create_partition", "t", 0, COMPACT)
    n1.call("create_partition", "t", 1, COMPACT)
    fill(n0, "t", 0, 300, 10)
    fill(n1, "t", 1, 300, 10)
    # what the first OSError after load does to a directory (tests/node/test_offline.py)
    n0.target.log_dir._health.fail(OSError(5, "Input/output error"), "test")
    metrics = RecordingMetrics()
    coordinator = Coordinator(nodes, make_workers(nodes, 1), SMALL_CLEANER, metrics=metrics)
    run_until(coordinator, lambda: coordinator.cleans_completed("t", 1) == 1)
    assert d0 in coordinator.status().offline_dirs
    # the node exports strata_log_dir_offline; a second series from here doubled every sum()
    assert metrics.get("strata_log_dir_offline", directory=d0) is None
    assert metrics.get("strata_log_dir_offline", directory=d1) is None
    assert metrics.get("strata_uncleanable_partitions", directory=d1) == 0


def test_retention_of_compacted_logs_runs_in_the_loop(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, {**COMPACT, "cleanup.policy": "compact,delete",
                                           "retention.bytes": "4096",
                                           "min.cleanable.dirty.ratio": "0.99"})
    fill(node, "t", 0, 600, 600)
    coordinator = Coordinator(nodes, [], SMALL_CLEANER, retention_check_interval_ms=0)
    coordinator.run_once()
    assert node.call("offsets", "t", 0)[0] > 0


def finish(worker: ManualWorker, index: int) -> None:
    """End the worker's ``index``-th clean as a success that cleaned its whole range."""
    from cleaner.cleaner import CleanResult
    from cleaner.stats import CleanerStats

    a = worker.assignments[index]
    worker.pendings[index].future.set_result(CleanResult(
        a.topic_partition, a.first_dirty_offset, a.first_uncleanable_offset,
        a.first_uncleanable_offset, CleanerStats().snapshot(), 1))


def test_a_requested_clean_is_one_started_after_the_request(tmp_path: Path) -> None:
    nodes = open_nodes(tmp_path, 1)
    node = next(iter(nodes.values()))
    node.call("create_partition", "t", 0, COMPACT)
    fill(node, "t", 0, 300, 10)
    worker = ManualWorker()
    coordinator = Coordinator(nodes, [worker], SMALL_CLEANER)
    coordinator.run_once()                       # a clean of its own, running
    before = coordinator.manager.max_dirty_percent
    fill(node, "t", 0, 300, 10, start=300)       # rolled after that clean started
    ticket = coordinator.request_clean("t", 0)
    finish(worker, 0)
    coordinator.run_once()
    assert coordinator.cleans_completed("t", 0) == 1
    assert not coordinator.clean_request_done("t", 0, ticket)   # it started before the request
    assert len(worker.assignments) == 2 and worker.assignments[1].first_dirty_offset == 300
    # a requested clean is no selection among all logs: the gauges keep the last real one
    assert coordinator.manager.max_dirty_percent == before > 0
    finish(worker, 1)
    coordinator.run_once()
    assert coordinator.clean_request_done("t", 0, ticket)
    nothing = coordinator.request_clean("t", 0)  # nothing dirty below the active segment
    coordinator.run_once()
    coordinator.run_once()
    assert coordinator.clean_request_done("t", 0, nothing) and len(worker.assignments) == 2
