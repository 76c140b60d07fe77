"""The ``checkpoint_file`` seam of ``CleanerManager``: a manager in another process than the
directory's owner keeps every checkpoint in the owner's hands, and the manager's I/O-error policy
applies to whatever the stand-in raises."""

from __future__ import annotations

from pathlib import Path

from cleaner.checkpoints import CheckpointChange
from cleaner.config import CleanerConfig
from cleaner.manager import CleanerManager
from storage.clock import FakeClock
from storage.files import CLEANER_OFFSET_CHECKPOINT, TopicPartition
from tests.cleaner.fakes import batches_log

TP = TopicPartition("remote", 0)


class MemoryCheckpoint:
    """An owner-held checkpoint: entries in memory, failing on demand."""

    def __init__(self) -> None:
        self.entries: dict[TopicPartition, int] | None = None
        self.fail: OSError | None = None
        self.writes = 0

    def read(self) -> dict[TopicPartition, int]:
        if self.fail is not None:
            raise self.fail
        if self.entries is None:
            raise FileNotFoundError("no checkpoint yet")
        return dict(self.entries)

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        if self.fail is not None:
            raise self.fail
        self.entries = change.apply(self.entries or {})
        self.writes += 1
        return dict(self.entries)


def test_a_remote_checkpoint_receives_every_read_and_write(tmp_path: Path,
                                                          clock: FakeClock) -> None:
    stores: dict[Path, MemoryCheckpoint] = {}

    def open_file(log_dir: Path) -> MemoryCheckpoint:
        return stores.setdefault(log_dir, MemoryCheckpoint())

    log_dir = tmp_path / "logs"
    log = batches_log(log_dir, TP, 20)
    manager = CleanerManager([log_dir], CleanerConfig(), clock=clock, checkpoint_file=open_file)
    chosen = manager.grab_filthiest_compacted_log({TP: log})
    assert chosen is not None and chosen.first_dirty_offset == 0
    manager.done_cleaning(TP, log_dir, 15)
    assert stores[log_dir].entries == {TP: 15}
    assert manager.cleaner_checkpoints(log_dir) == {TP: 15}
    assert not (log_dir / CLEANER_OFFSET_CHECKPOINT).exists()   # never touched the local disk


def test_an_os_error_from_a_remote_checkpoint_reports_the_directory(tmp_path: Path,
                                                                   clock: FakeClock) -> None:
    store = MemoryCheckpoint()
    failed: list[Path] = []
    log_dir = tmp_path / "logs"
    log = batches_log(log_dir, TP, 20)
    manager = CleanerManager([log_dir], CleanerConfig(), clock=clock,
                             checkpoint_file=lambda _d: store,
                             on_dir_failure=lambda d, _e: failed.append(d))
    store.fail = OSError("owner says: disk gone")
    assert manager.cleaner_checkpoints(log_dir) == {}
    assert failed == [log_dir]
    manager.handle_log_dir_failure(log_dir)
    assert manager.grab_filthiest_compacted_log({TP: log}) is None
    store.fail = None
    manager.add_log_dir(log_dir)   # back online after the owner restarted
    assert manager.grab_filthiest_compacted_log({TP: log}) is not None
