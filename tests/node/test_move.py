"""Moving a partition between log directories while it serves (KIP-113), on real files: two
``LogDirServer`` in one process, the target driving the move as in a cluster.

Crash points are recreated as STYLE.md P14 says: the move is stopped at each step (by a source
whose link fails there, or by writing the step's files), both directories are closed without a
clean shutdown where a kill would leave them, and reopened. Ports the scenarios of Kafka's
LogManagerTest (testRecoverAbandonedFutureLogs..., testReplaceCurrentWithFutureLog...) and
ReplicaManagerTest's alter-log-dir cases.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cleaner.checkpoints import CheckpointChange
from node import move
from node.errors import (LogDirOfflineError, MoveAbortedError, MoveRefusedError,
                         PartitionMovedError, UnknownPartitionError)
from node.move import CopyRecord, MoveState
from node.mover import SwitchResult
from node.server import LogDirServer
from storage import files
from storage.config import LogConfig
from storage.files import TopicPartition
from storage.records import ControlType, Record, build_batch

SMALL = {"segment.bytes": "4096", "index.interval.bytes": "256"}
PID = 7001
NOW_MS = int(time.time() * 1000)   # producers idle for a day expire at load: stamp them now


def server(path: Path, **kwargs: Any) -> LogDirServer:
    return LogDirServer(path, start_tasks=False, default_config=LogConfig(), **kwargs)


def batch(i: int, *, pid: int = -1, seq: int = -1, txn: bool = False, n: int = 4) -> bytes:
    return build_batch([Record(key=b"k%d" % ((i * n + j) % 13), value=b"value-%06d" % (i * n + j),
                               timestamp=NOW_MS + i) for j in range(n)],
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=seq, is_transactional=txn)


def records(s: LogDirServer, topic: str = "t", partition: int = 0, **kw: Any) -> list[tuple]:
    lg = s.log_dir.log(topic, partition)
    return [(r.offset, r.key, r.value) for r in lg.read(lg.log_start_offset, **kw)]


def fill(s: LogDirServer, batches: int = 60) -> None:
    """Several segments, an idempotent producer, an aborted transaction (a .txnindex), a raised
    log start offset and a cleaner offset."""
    s.create_partition("t", 0, SMALL)
    for i in range(batches):
        s.append_batch("t", 0, batch(i, pid=PID, seq=4 * i))
    lg = s.log_dir.log("t", 0)
    lg.append_batch(batch(0, pid=PID + 1, seq=0, txn=True))
    lg.append_end_txn_marker(ControlType.ABORT, producer_id=PID + 1, producer_epoch=0,
                             coordinator_epoch=1)
    for i in range(batches, batches + 5):
        s.append_batch("t", 0, batch(i, pid=PID, seq=4 * i))
    s.delete_records("t", 0, 6)
    s.update_cleaner_checkpoint(CheckpointChange(offsets={TopicPartition("t", 0): 40}))
    assert lg.number_of_segments >= 3 or batches < 60


class Link:
    """The source node as the target sees it, failing at a chosen step (a kill there)."""

    def __init__(self, source: LogDirServer, fail: str = "", after: bool = False) -> None:
        self.source, self.fail, self.after = source, fail, after

    def move_source(self, topic: str, partition: int) -> Any:
        return self._step("move_source", topic, partition)

    def move_switch_out(self, *args: Any) -> SwitchResult:
        return self._step("move_switch_out", *args)

    def _step(self, name: str, *args: Any) -> Any:
        if self.fail == name and not self.after:
            raise ConnectionError(f"killed before {name}")
        result = getattr(self.source, name)(*pickle.loads(pickle.dumps(args)))
        if self.fail == name:
            raise ConnectionError(f"killed after {name}")
        return pickle.loads(pickle.dumps(result))


def test_move_carries_every_record_and_the_partition_state(tmp_path: Path) -> None:
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a)
    lg = a.log_dir.log("t", 0)
    before = records(a)
    committed = records(a, isolation="read_committed")
    start, end, rp = lg.log_start_offset, lg.log_end_offset, lg.recovery_point
    result = pickle.loads(pickle.dumps(b.move_in("t", 0, str(tmp_path / "a"), Link(a))))
    assert (result.log_end_offset, result.target_dir) == (end, str(tmp_path / "b"))
    assert result.bytes_copied >= lg.size_in_bytes and result.held_ms >= 0
    moved = b.log_dir.log("t", 0)
    assert moved.load_result.recovered_segments == 0        # every index came with the files
    assert moved.load_result.rebuilt_indexes == 0
    middle = before[len(before) // 2][0]
    first = next(b.read_raw("t", 0, middle).batches())
    assert first.base_offset <= middle <= first.last_offset            # found by the index
    assert records(b) == before and records(b, isolation="read_committed") == committed
    assert (moved.log_start_offset, moved.log_end_offset) == (start, end)
    assert moved.recovery_point >= min(rp, moved.active_segment.base_offset)
    assert b.partitions() == [("t", 0)] and a.partitions() == []
    # the topic's overrides moved with it (kept in b's topic-configs.json)
    assert moved.config.segment_bytes == 4096 and b.topic_configs()["t"] == SMALL
    # cleaner offset moved from one checkpoint to the other
    assert b.read_cleaner_checkpoint() == {TopicPartition("t", 0): 40}
    assert TopicPartition("t", 0) not in a.read_cleaner_checkpoint()
    # producer state moved: a retried batch is a duplicate, the next sequence goes on
    dup = b.append_batch("t", 0, batch(64, pid=PID, seq=4 * 64))
    assert dup.first_offset < end and b.offsets("t", 0)[1] == end
    assert b.append_batch("t", 0, batch(65, pid=PID, seq=4 * 65)).first_offset == end
    # the source answers "moved", its old directory waits for the delete path
    with pytest.raises(PartitionMovedError) as err:
        a.append_batch("t", 0, batch(99))
    assert pickle.loads(pickle.dumps(err.value)).target_dir == str(tmp_path / "b")
    with pytest.raises(PartitionMovedError):
        a.read_raw("t", 0, start)
    names = os.listdir(tmp_path / "a")
    assert [n for n in names if n.endswith("-delete")] and "t-0" not in names
    assert not [n for n in os.listdir(tmp_path / "b") if n.endswith("-future")]
    assert not (tmp_path / "b" / "t-0" / files.MOVE_STATE_FILE).exists()
    a.close(), b.close()
    # both reopen as they were left: one live copy, in b
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    assert a.partitions() == [] and b.partitions() == [("t", 0)]
    assert records(b)[: len(before)] == before
    assert b.log_dir.log("t", 0).log_start_offset == start
    assert b.log_dir.log("t", 0).config.segment_bytes == 4096
    a.close(), b.close()


def test_appends_during_a_move_land_once_in_the_new_directory(tmp_path: Path) -> None:
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    a.create_partition("t", 0, SMALL)
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        i = 0
        owner = a
        while not stop.is_set() or i < 400:
            data = batch(i, pid=PID, seq=4 * i)
            try:
                info = owner.append_batch("t", 0, data)
            except PartitionMovedError:
                owner = b
                continue
            except UnknownPartitionError:
                continue        # b before it serves the partition: retry
            except BaseException as err:  # noqa: BLE001
                errors.append(err)
                return
            acked.append((info.first_offset, b"value-%06d" % (4 * i)))
            i += 1

    thread = threading.Thread(target=produce)
    thread.start()
    while len(acked) < 300:
        time.sleep(0.001)
    b.move_in("t", 0, str(tmp_path / "a"), Link(a))
    stop.set()
    thread.join()
    assert not errors
    values = records(b)
    assert len(values) == 4 * len(acked)                      # nothing lost, nothing twice
    by_offset = {o: v for o, _k, v in values}
    assert all(by_offset[o] == v for o, v in acked)
    assert [o for o, _k, _v in values] == list(range(len(values)))
    a.close(), b.close()


@pytest.mark.parametrize("step, after", [("move_source", False), ("move_switch_out", False)])
def test_a_move_stopped_before_the_switch_is_abandoned_and_the_source_serves(
        tmp_path: Path, step: str, after: bool) -> None:
    """Kill points "before copy" and "during copy": the future goes, the source keeps all."""
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a)
    before = records(a)
    with pytest.raises((MoveAbortedError, ConnectionError)):
        b.move_in("t", 0, str(tmp_path / "a"), Link(a, step, after))
    assert not [n for n in os.listdir(tmp_path / "b") if "-future" in n]
    assert records(a) == before and b.partitions() == []
    a.append_batch("t", 0, batch(200))
    a.close(), b.close()


def test_a_switch_whose_answer_was_lost_still_completes(tmp_path: Path) -> None:
    """The source committed, then the link died before the target heard of it: the target
    finds the commit on disk and promotes the future."""
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a)
    before = records(a)
    result = b.move_in("t", 0, str(tmp_path / "a"), Link(a, "move_switch_out", after=True))
    assert result.held_ms == -1.0
    assert records(b) == before and a.partitions() == []
    a.close(), b.close()


def crash_mid_copy(tmp_path: Path, a: LogDirServer) -> Path:
    """A future directory as a target killed during its copy leaves it: the state listing the
    first two segments as copied (as the mover writes it after each round) and their files."""
    future = a.log_dir.path.parent / "b" / files.future_dir_name("t", 0, "c" * 32)
    future.mkdir(parents=True)
    MoveState("t", 0, str(tmp_path / "a"), "c" * 32).write(future)
    snap = a.move_source("t", 0)
    record = CopyRecord()
    move.copy_round(Path(snap.partition_dir), future, snap.segments[:2], record)
    MoveState.read(future).with_copied(record).write(future)
    return future


def test_a_target_restarted_mid_copy_keeps_the_future_and_the_next_move_resumes_it(
        tmp_path: Path) -> None:
    """Kafka keeps a ``-future`` log across a restart and its ReplicaAlterLogDirsThread fetches
    on from the future's high watermark: the future never loads as a second live partition nor
    is reported as a leftover, and the next move copies only what the first did not."""
    a = server(tmp_path / "a")
    fill(a)
    future = crash_mid_copy(tmp_path, a)
    kept = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in future.glob("*.log")}
    assert len(kept) == 2
    b = server(tmp_path / "b")
    assert future.exists() and b.partitions() == [] and b.stats().invalid_dirs == ()
    a.append_batch("t", 0, batch(300))        # the source serves on meanwhile
    before = records(a)
    total = a.move_source("t", 0).size_bytes
    done = sum(size for size, _ in MoveState.read(future).copy_record().segments.values())
    [status] = b.move_status()               # listed as Kafka lists a future replica
    assert (status.phase, status.future_dir, status.bytes_copied) == \
        ("interrupted", str(future), done)

    result = b.move_in("t", 0, str(tmp_path / "a"), Link(a))
    assert records(b) == before and a.partitions() == []
    assert result.bytes_copied == total - done
    moved = tmp_path / "b" / "t-0"
    assert {n: ((moved / n).stat().st_ino, (moved / n).stat().st_mtime_ns) for n in kept} == kept
    assert not [n for n in os.listdir(tmp_path / "b") if "-future" in n]
    assert b.move_status() == []
    b.append_batch("t", 0, batch(301))
    a.close(), b.close()
    again = server(tmp_path / "b")
    assert records(again)[:len(before)] == before
    again.close()


def test_a_resumed_copy_drops_the_files_its_state_does_not_list(tmp_path: Path) -> None:
    """A segment file the killed copy wrote but did not record (the active segment of then, or
    one the source has dropped since) is not kept: it could hold bytes the source no longer
    has. Only the listed segments are resumed from."""
    a = server(tmp_path / "a")
    fill(a)
    future = crash_mid_copy(tmp_path, a)
    stale = future / files.log_file(future, 10**9).name
    stale.write_bytes(batch(0))
    b = server(tmp_path / "b")
    before = records(a)
    b.move_in("t", 0, str(tmp_path / "a"), Link(a))
    assert records(b) == before
    assert not (tmp_path / "b" / "t-0" / stale.name).exists()
    a.close(), b.close()


def test_a_resumable_future_from_another_source_is_abandoned_by_the_next_move(
        tmp_path: Path) -> None:
    """The partition moved elsewhere meanwhile: the copy from its old place is not resumed."""
    a = server(tmp_path / "a")
    fill(a)
    future = crash_mid_copy(tmp_path, a)
    b = server(tmp_path / "b")
    assert future.exists()
    c = server(tmp_path / "c")
    c.move_in("t", 0, str(tmp_path / "a"), Link(a))
    before = records(c)
    b.move_in("t", 0, str(tmp_path / "c"), Link(c))
    assert records(b) == before and not future.exists()
    a.close(), b.close(), c.close()


def test_a_resumable_future_whose_source_partition_is_gone_is_abandoned_at_load(
        tmp_path: Path) -> None:
    a = server(tmp_path / "a")
    fill(a)
    future = crash_mid_copy(tmp_path, a)
    c = server(tmp_path / "c")
    c.move_in("t", 0, str(tmp_path / "a"), Link(a))
    b = server(tmp_path / "b")
    assert not future.exists() and b.partitions() == [] and b.stats().invalid_dirs == ()
    a.close(), b.close(), c.close()


def test_a_complete_future_whose_source_did_not_commit_is_abandoned(tmp_path: Path) -> None:
    """Killed after the move state said complete, before the source's rename (the commit)."""
    a = server(tmp_path / "a")
    fill(a)
    future = crash_mid_copy(tmp_path, a)
    lg = a.log_dir.log("t", 0)
    move.complete_state(MoveState.read(future), lg, 40).write(future)
    b = server(tmp_path / "b")
    assert not future.exists() and b.partitions() == [] and a.partitions() == [("t", 0)]
    a.close(), b.close()


def switch_then_kill(tmp_path: Path) -> tuple[list[tuple], int]:
    """Run the source's switch, then leave both directories as a kill would: the future
    committed but not promoted. Returns the records and the log start offset."""
    a = server(tmp_path / "a")
    fill(a)
    before = records(a)
    start = a.log_dir.log("t", 0).log_start_offset
    b_path = tmp_path / "b"
    b_path.mkdir()
    future = b_path / files.future_dir_name("t", 0, "d" * 32)
    future.mkdir()
    MoveState("t", 0, str(tmp_path / "a"), "d" * 32).write(future)
    a.move_switch_out("t", 0, str(future), "d" * 32, str(b_path), CopyRecord())
    a.close()
    return before, start


def test_a_committed_future_becomes_the_live_log_when_the_target_reopens(tmp_path: Path) -> None:
    """Kafka's testRecoverAbandonedFutureLogs (source gone, complete future): promoted, with the
    log start offset, cleaner offset and producer state it carried."""
    before, start = switch_then_kill(tmp_path)
    b = server(tmp_path / "b")
    assert b.partitions() == [("t", 0)] and records(b) == before
    assert b.log_dir.log("t", 0).log_start_offset == start
    assert b.read_cleaner_checkpoint() == {TopicPartition("t", 0): 40}
    assert b.append_batch("t", 0, batch(64, pid=PID, seq=4 * 64)).first_offset < \
        b.offsets("t", 0)[1]                                   # a duplicate: state moved
    a = server(tmp_path / "a")
    assert a.partitions() == [] and a.stats().logs_to_delete == 1
    a.close(), b.close()


def test_a_kill_after_the_future_was_renamed_settles_from_its_move_state(tmp_path: Path) -> None:
    """Killed after the future was renamed live, before its checkpoints were written."""
    before, start = switch_then_kill(tmp_path)
    b_path = tmp_path / "b"
    [future] = [p for p in b_path.iterdir() if p.name.endswith("-future")]
    live = move.promote(b_path, future, MoveState.read(future))
    assert (live / files.MOVE_STATE_FILE).exists()
    b = server(b_path)
    assert records(b) == before and b.log_dir.log("t", 0).log_start_offset == start
    assert not (live / files.MOVE_STATE_FILE).exists()
    assert b.read_cleaner_checkpoint() == {TopicPartition("t", 0): 40}
    b.close()


def test_the_source_directory_is_deleted_later_by_the_delete_path(tmp_path: Path) -> None:
    """Killed before the source's -delete directory was removed: it is queued at load and
    removed after file.delete.delay.ms."""
    from storage.clock import FakeClock
    from storage.scheduler import FakeScheduler

    switch_then_kill(tmp_path)
    clock, scheduler = FakeClock(), FakeScheduler(FakeClock())
    a = LogDirServer(tmp_path / "a", clock=clock, scheduler=scheduler, start_tasks=False)
    assert [n for n in os.listdir(tmp_path / "a") if n.endswith("-delete")]
    clock.advance(10 * 60_000)
    assert a.log_dir.delete_queued_logs() == 1
    assert not [n for n in os.listdir(tmp_path / "a") if n.endswith("-delete")]
    a.close()


def test_a_future_whose_source_cannot_be_seen_is_kept_and_never_loaded(tmp_path: Path) -> None:
    b_path = tmp_path / "b"
    future = b_path / files.future_dir_name("t", 0, "e" * 32)
    future.mkdir(parents=True)
    MoveState("t", 0, str(tmp_path / "unmounted"), "e" * 32, complete=True).write(future)
    (future / "00000000000000000000.log").write_bytes(b"")
    b = server(b_path)
    assert b.partitions() == [] and future.exists()
    assert [i.name for i in b.stats().invalid_dirs] == [future.name]
    b.close()


def test_moves_are_refused_with_a_reason(tmp_path: Path) -> None:
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a, batches=10)
    with pytest.raises(MoveRefusedError) as err:
        a.move_in("t", 0, str(tmp_path / "a"), Link(a))
    assert err.value.reason == "same-dir"
    with pytest.raises(MoveRefusedError) as err:
        b.move_in("t", 0, str(tmp_path / "a"))     # no way to reach the source's node
    assert err.value.reason == "unknown-dir"
    with pytest.raises(UnknownPartitionError):
        b.move_in("t", 5, str(tmp_path / "a"), Link(a))
    a.create_partition("t", 1, SMALL)
    a.delete_partition("t", 1)
    with pytest.raises(MoveRefusedError) as err:
        b.move_in("t", 1, str(tmp_path / "a"), Link(a))
    assert err.value.reason == "being-deleted" and "being deleted" in str(err.value)
    assert not [n for n in os.listdir(tmp_path / "b") if "-future" in n]
    a.close(), b.close()


def test_a_move_into_an_offline_directory_is_refused(tmp_path: Path) -> None:
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a, batches=10)
    b.create_partition("x", 0)
    b.append_batch("x", 0, batch(0))
    (tmp_path / "b" / "x-0").rename(tmp_path / "x-gone")
    (tmp_path / "b" / "x-0").write_text("not a directory")
    with pytest.raises(LogDirOfflineError):
        b.log_dir.log("x", 0).roll()
    with pytest.raises(LogDirOfflineError):
        b.move_in("t", 0, str(tmp_path / "a"), Link(a))
    assert a.partitions() == [("t", 0)]
    a.close(), b.close()


def test_a_target_failing_mid_move_abandons_it_and_the_source_serves(tmp_path: Path) -> None:
    """The target's disk fails before the switch (its future directory is no directory any
    more): the target goes offline, the source never committed and keeps serving."""
    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a)
    before = records(a)

    class Failing(Link):
        def move_switch_out(self, *args: Any) -> SwitchResult:
            for future in (tmp_path / "b").glob("*-future"):
                for f in future.iterdir():
                    f.unlink()
                future.rmdir()
                future.write_text("the disk failed")
            return super().move_switch_out(*args)

    with pytest.raises((LogDirOfflineError, MoveAbortedError)):
        b.move_in("t", 0, str(tmp_path / "a"), Failing(a))
    assert records(a) == before and a.partitions() == [("t", 0)]
    a.append_batch("t", 0, batch(300))
    a.close(), b.close()


def test_a_bulk_read_of_the_files_follows_a_partition_moved_under_it(tmp_path: Path) -> None:
    """A reader of the segment files (Spark's) whose partition moves mid-read goes on in the new
    directory from its next offset: every batch once, in order."""
    from storage.view import read_partition_batches

    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    fill(a)
    lg = a.log_dir.log("t", 0)
    start, end, config = lg.log_start_offset, lg.log_end_offset, lg.config
    where = {"dir": tmp_path / "a" / "t-0"}
    reader = read_partition_batches(tmp_path / "a" / "t-0", config, start, end,
                                    relocate=lambda: where["dir"])
    seen = [next(reader).base_offset]
    b.move_in("t", 0, str(tmp_path / "a"), Link(a))
    for name in os.listdir(tmp_path / "a"):          # the source's copy deleted meanwhile
        if name.endswith("-delete"):
            shutil.rmtree(tmp_path / "a" / name)
    where["dir"] = tmp_path / "b" / "t-0"
    seen += [batch.base_offset for batch in reader]
    assert seen == sorted(set(seen))
    expected = [batch.base_offset for batch in read_partition_batches(
        tmp_path / "b" / "t-0", config, start, end)]
    assert seen == expected
    with pytest.raises(FileNotFoundError):     # without relocate: an error, never a short read
        list(read_partition_batches(tmp_path / "a" / "t-0", config, start, end))
    a.close(), b.close()


def test_a_clean_swapped_in_after_the_snapshot_is_copied_again(tmp_path: Path) -> None:
    """A cleaner swap the pause did not stop (no coordinator) lands between the source's
    snapshot and the copy: the replaced segments are copied afresh, the move completes and the
    target holds exactly the source's records after the clean."""
    from cleaner import Cleaner, CleanerConfig

    a, b = server(tmp_path / "a"), server(tmp_path / "b")
    a.create_partition("c", 0, {**SMALL, "cleanup.policy": "compact"})
    for i in range(80):
        a.append_batch("c", 0, batch(i))
    lg = a.log_dir.log("c", 0)
    lg.roll()

    class CleanAfterSnapshot(Link):
        calls = 0

        def move_source(self, topic: str, partition: int) -> Any:
            snap = super().move_source(topic, partition)
            CleanAfterSnapshot.calls += 1
            if CleanAfterSnapshot.calls == 2:       # the first round's snapshot
                Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)).clean(
                    lg, first_dirty_offset=0)
            return snap

    before_clean = records(a, "c")
    b.move_in("c", 0, str(tmp_path / "a"), CleanAfterSnapshot(a))
    after = records(b, "c")
    assert CleanAfterSnapshot.calls == 2 and len(after) < len(before_clean)   # cleaned, moved
    latest = {k: (o, v) for o, k, v in before_clean}
    assert {k: (o, v) for o, k, v in after} == latest
    a.close(), b.close()
