"""What a node does for a cluster: topic overrides kept in the directory, loading in the
background, and the owner's half of a clean run by another process."""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from cleaner.checkpoints import CheckpointChange
from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from cleaner.manager import CleanerManager
from node.server import LogDirServer
from storage.errors import CheckpointError, StorageError
from storage.files import TOPIC_CONFIGS_FILE, TopicPartition
from storage.records import Record, build_batch
from storage.view import LogView

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048"}


def fill(server: LogDirServer, topic: str = "c", partition: int = 0, n: int = 300,
         keys: int = 17) -> None:
    for i in range(n):
        server.append_batch(topic, partition, build_batch(
            [Record(key=b"%d" % (i % keys), value=b"%d" % i, timestamp=i)]))
    server.roll(topic, partition)


def test_topic_overrides_survive_a_restart(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, COMPACT)
    server.create_partition("plain", 0)
    assert server.log_dir.log("c", 0).config.compact
    server.close()
    content = json.loads((tmp_path / "d" / TOPIC_CONFIGS_FILE).read_text())
    assert content == {"version": 1, "topics": {"c": COMPACT}}
    again = LogDirServer(tmp_path / "d", start_tasks=False)
    assert again.log_dir.log("c", 0).config.segment_bytes == 2048
    assert not again.log_dir.log("plain", 0).config.compact
    assert again.topic_configs() == {"c": COMPACT}
    with pytest.raises(StorageError, match="other settings"):
        again.create_partition("c", 1, {"cleanup.policy": "delete"})
    assert again.delete_partition("c", 0)
    assert again.topic_configs() == {}
    again.close()


def test_a_topic_configs_file_of_another_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / TOPIC_CONFIGS_FILE).write_text('{"version": 7, "topics": {}}')
    with pytest.raises(CheckpointError, match="version 7"):
        LogDirServer(tmp_path / "d", start_tasks=False)


def test_background_load_reports_progress_and_errors(tmp_path: Path) -> None:
    first = LogDirServer(tmp_path / "d", start_tasks=False)
    first.create_partition("c", 0, COMPACT)
    first.close()
    server = LogDirServer(tmp_path / "d", start_tasks=False, load_in_background=True)
    assert server.partitions() == [("c", 0)]   # waits for the load
    assert server.loaded and server.load_progress().done
    locked = LogDirServer(tmp_path / "d", start_tasks=False, load_in_background=True)
    with pytest.raises(StorageError, match="already in use"):
        locked.partitions()
    assert not locked.loaded
    server.close()


def test_a_remote_style_clean_swaps_through_the_owner(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, COMPACT)
    fill(server)
    snapshot = pickle.loads(pickle.dumps(server.cleaning_snapshots()[0]))
    manager = CleanerManager([tmp_path / "d"], checkpoint_file=lambda _d: RemoteCheckpoint(server))
    chosen = manager.grab_filthiest_compacted_log({snapshot.topic_partition: snapshot})
    assert chosen is not None
    view = LogView.open(snapshot.dir, snapshot.config,
                        lambda base, old: server.swap_cleaned("c", 0, base, old))
    result = Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)).clean(
        view, chosen.first_dirty_offset, first_uncleanable_offset=chosen.first_uncleanable_offset)
    manager.done_cleaning(chosen.topic_partition, tmp_path / "d", result.next_dirty_offset)
    assert server.read_cleaner_checkpoint() == {TopicPartition("c", 0): 300}
    records = list(server.log_dir.log("c", 0).read())
    assert len(records) == 17
    server.close()


class RemoteCheckpoint:
    def __init__(self, server: LogDirServer) -> None:
        self.server = server

    def read(self) -> dict[TopicPartition, int]:
        return self.server.read_cleaner_checkpoint()

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        return self.server.update_cleaner_checkpoint(change)


def test_a_truncation_racing_a_remote_checkpoint_update_is_never_undone(tmp_path: Path) -> None:
    """One writer per file: the cleaner manager's changes (sent by the coordinator) and the
    node's own truncations are each one atomic update at the owner, so an entry the node lowered
    is never written back with an older, higher value the manager had read before."""
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    a, b = TopicPartition("c", 0), TopicPartition("c", 1)
    for tp in (a, b):
        server.create_partition(tp.topic, tp.partition, COMPACT)
    server.update_cleaner_checkpoint(CheckpointChange(offsets={b: 10_000}))
    manager = CleanerManager([tmp_path / "d"], checkpoint_file=lambda _d: RemoteCheckpoint(server))

    def coordinator() -> None:
        for offset in range(1, 201):
            manager.update_checkpoints(tmp_path / "d", update=(a, offset))

    def node() -> None:
        for offset in range(9_999, 9_799, -1):
            server.log_dir.update_cleaner_offsets(CheckpointChange(lower={b: offset}))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # interleave the two threads as finely as the GIL allows
    try:
        threads = [threading.Thread(target=coordinator), threading.Thread(target=node)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert server.read_cleaner_checkpoint() == {a: 200, b: 9800}
    server.close()


def test_a_checkpoint_change_lowers_but_never_raises(tmp_path: Path) -> None:
    a, b, c = (TopicPartition("t", p) for p in range(3))
    change = CheckpointChange(offsets={c: 7}, remove=frozenset([a]), lower={b: 5, c: 9})
    assert change.apply({a: 1, b: 20}) == {b: 5, c: 7}
    assert CheckpointChange(lower={b: 50}).apply({b: 20}) == {b: 20}
    assert CheckpointChange(live_partitions=frozenset([b])).apply({a: 1, b: 2}) == {b: 2}


def test_cleaner_checkpoint_writes_keep_only_live_partitions(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, COMPACT)
    with pytest.raises(FileNotFoundError):
        server.read_cleaner_checkpoint()
    server.update_cleaner_checkpoint(CheckpointChange(
        offsets={TopicPartition("c", 0): 5, TopicPartition("gone", 0): 9}))
    assert server.read_cleaner_checkpoint() == {TopicPartition("c", 0): 5}
    assert server.stats().online   # a missing checkpoint is not an I/O failure
    server.close()


def test_stale_cleaned_files_are_removed_by_the_owner(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, COMPACT)
    fill(server)
    partition_dir = server.log_dir.log("c", 0).dir
    LogView.open(partition_dir, server.log_dir.log("c", 0).config,
                 lambda *_: None).create_cleaned_segment(0).close()
    assert [n for n in os.listdir(partition_dir) if n.endswith(".cleaned")]
    assert server.remove_cleaned_files("c", 0) >= 1
    assert not [n for n in os.listdir(partition_dir) if n.endswith(".cleaned")]
    with pytest.raises(StorageError, match="no cleaned segment"):
        server.swap_cleaned("c", 0, 0, [0])
    server.close()


def test_truncation_below_the_active_segment_pauses_cleaning(tmp_path: Path) -> None:
    events: list[str] = []

    @contextmanager
    def pause(tp: TopicPartition) -> Iterator[None]:
        events.append(f"pause {tp}")
        yield
        events.append(f"resume {tp}")

    server = LogDirServer(tmp_path / "d", start_tasks=False, pause_cleaning=pause)
    server.create_partition("c", 0, COMPACT)
    fill(server)
    server.update_cleaner_checkpoint(CheckpointChange(offsets={TopicPartition("c", 0): 300}))
    assert server.truncate_to("c", 0, 10)
    assert events == ["pause c-0", "resume c-0"]
    assert server.offsets("c", 0) == (0, 10)
    assert server.read_cleaner_checkpoint()[TopicPartition("c", 0)] <= 10
    server.close()


def test_retention_of_compacted_logs_runs_on_request(tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    server.create_partition("c", 0, {**COMPACT, "cleanup.policy": "compact,delete",
                                     "retention.bytes": "2048"})
    fill(server)
    assert server.delete_old_segments([("c", 0), ("gone", 3)]) > 0
    assert server.offsets("c", 0)[0] > 0
    server.close()


def test_loading_waits_have_a_limit(tmp_path: Path) -> None:
    gate = threading.Event()
    server = LogDirServer(tmp_path / "d", start_tasks=False, load_in_background=True,
                          load_wait_s=0.05, on_load_progress=lambda _p: gate.wait(5))
    try:
        with pytest.raises(StorageError, match="still loading"):
            server.partitions()
    finally:
        gate.set()
        server.close()
