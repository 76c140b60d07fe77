"""Producer ids for idempotent producers (InitProducerId without a transactional id), never
handed out twice by one directory, restarts included.

Kafka's controller hands producer ids out in blocks of 1000 and persists the end of each block
before any id of it is used (``ProducerIdManager``); a restart starts at the next block, so an
id is never reused, at the cost of skipping what remained of the block. This single-directory
allocator does the same with a checkpoint in the directory, ``producer-id-block-checkpoint``
(``storage.checkpoint`` layout, version 0, one entry)::

    Entry => NextBlockStart: int64   (every id below it may have been handed out)

A cluster allocates ids for all its directories in one place; this one serves a directory
served on its own.
"""

from __future__ import annotations

import threading
from pathlib import Path

from storage.checkpoint import CheckpointFile
from storage.errors import CheckpointError

FILE_NAME = "producer-id-block-checkpoint"
BLOCK_SIZE = 1000          # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
VERSION = 0


class _BlockStartFormatter:
    def format(self, entry: int) -> str:
        return str(entry)

    def parse(self, fields: list[str]) -> int:
        if len(fields) != 1 or int(fields[0]) < 0:
            raise ValueError(f"expected one non-negative integer, found {fields}")
        return int(fields[0])


class ProducerIdAllocator:
    """Hands out producer ids from durable blocks of ``block_size`` in ``directory``.

    Thread-safe. ``allocate`` fsyncs the checkpoint when it opens a block, so an id it returns
    is never returned again, by this process or after a restart."""

    def __init__(self, directory: Path, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size={block_size} must be at least 1")
        self._file = CheckpointFile(Path(directory) / FILE_NAME, VERSION, _BlockStartFormatter())
        self._block_size = block_size
        self._lock = threading.Lock()
        try:
            entries = self._file.read()
        except FileNotFoundError:
            entries = []
        if len(entries) > 1:
            raise CheckpointError(
                f"checkpoint file {self._file.path}: {len(entries)} entries, expected one",
                path=self._file.path, count=len(entries))
        self._next = entries[0] if entries else 0
        self._block_end = self._next

    def allocate(self) -> int:
        """A producer id never handed out before."""
        with self._lock:
            if self._next >= self._block_end:
                end = self._next + self._block_size
                self._file.write([end])
                self._block_end = end
            producer_id = self._next
            self._next += 1
            return producer_id
