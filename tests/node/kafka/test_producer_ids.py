"""Producer ids for idempotent producers: never handed out twice, restarts included."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.kafka.producer_ids import FILE_NAME, ProducerIdAllocator
from storage.errors import CheckpointError


def test_ids_are_unique_and_a_restart_starts_after_the_reserved_block(tmp_path: Path) -> None:
    first = ProducerIdAllocator(tmp_path, block_size=10)
    handed = [first.allocate() for _ in range(3)]
    assert handed == [0, 1, 2]
    second = ProducerIdAllocator(tmp_path, block_size=10)    # a restart
    assert second.allocate() == 10
    assert [second.allocate() for _ in range(10)][-1] == 20   # crosses into the next block
    assert ProducerIdAllocator(tmp_path, block_size=10).allocate() == 30


def test_the_block_is_durable_before_an_id_of_it_is_returned(tmp_path: Path) -> None:
    ProducerIdAllocator(tmp_path, block_size=1000).allocate()
    assert (tmp_path / FILE_NAME).read_text() == "0\n1\n1000\n"


def test_an_unreadable_checkpoint_is_refused_not_reset(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("0\n2\n5\n6\n")
    with pytest.raises(CheckpointError):
        ProducerIdAllocator(tmp_path)
