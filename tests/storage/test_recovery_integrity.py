"""Recovery and open-time integrity (issues 11 and 12): recovery keeps batches larger than today's
``max.message.bytes``, indexes are flushed with their segment and checked (and rebuilt) on open, the
active segment's tail is checked after a clean shutdown, swap files are validated before a swap
completes, a wrong log-start-offset checkpoint deletes nothing, temp files of atomic writes never
follow a planted symlink, and truncation and splitting keep timestamps and mtimes. Real files
throughout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.checkpoint import OffsetCheckpointFile
from storage.files import TopicPartition
from storage.log import Log
from storage.producer_state import ProducerStateManager


# ---- temp files of atomic writes -------------------------------------------------------------
def test_checkpoint_write_does_not_follow_a_symlink_planted_at_its_tmp_name(
        tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "recovery-point-offset-checkpoint"
    (tmp_path / "recovery-point-offset-checkpoint.tmp").symlink_to(victim)
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 42})
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink()
    assert checkpoint.read() == {TopicPartition("t", 0): 42}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_producer_snapshot_write_does_not_follow_a_symlink_planted_at_its_tmp_name(
        tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    manager = ProducerStateManager(tmp_path / "t-0")
    (tmp_path / "t-0").mkdir()
    target = tmp_path / "t-0" / "00000000000000000000.snapshot"
    target.with_name(target.name + ".tmp").symlink_to(victim)
    written = manager.take_snapshot(0)
    assert written == target
    assert victim.read_bytes() == b"precious"
    assert not target.is_symlink() and target.is_file()


def test_stale_tmp_file_is_replaced_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.with_name(path.name + ".tmp").write_bytes(b"x" * 1000)
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 1): 7})
    assert path.read_bytes() == b"0\n1\nt 1 7\n"
