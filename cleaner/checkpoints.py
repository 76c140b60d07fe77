"""``CleanerCheckpoints``: the ``cleaner-offset-checkpoint`` of every log directory of a cleaner
manager (where each partition's last clean stopped, i.e. its first dirty offset).

File format and crash safety are ``storage.checkpoint.OffsetCheckpointFile``'s. A missing file
reads as empty. I/O errors are logged and reported to ``on_dir_failure`` (Kafka's
LogDirFailureChannel), never raised: one bad directory must not stop the cleaner elsewhere.

Where the file lives is a seam (``checkpoint_file``): by default the manager reads and writes
``<dir>/cleaner-offset-checkpoint`` itself; a manager in another process than the directory's
owner (the cluster's coordinator) passes a factory whose objects ask the owner to read and write
it. Such an object raises ``OSError`` for a directory that failed and ``CheckpointError`` for a
file it cannot parse, like the local file does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Mapping, Protocol

from storage.checkpoint import OffsetCheckpointFile
from storage.errors import CheckpointError
from storage.files import CLEANER_OFFSET_CHECKPOINT, TopicPartition

logger = logging.getLogger(__name__)


def dir_key(log_dir: Path | str) -> Path:
    """The one spelling of a log directory used as a key (absolute, symlinks kept)."""
    return Path(os.path.abspath(log_dir))


class CheckpointFileLike(Protocol):
    """One directory's cleaner checkpoint: ``OffsetCheckpointFile`` or a remote stand-in.
    ``read`` raises ``FileNotFoundError`` when there is none yet."""

    def read(self) -> dict[TopicPartition, int]: ...

    def write(self, offsets: Mapping[TopicPartition, int]) -> None: ...


def local_checkpoint_file(log_dir: Path) -> CheckpointFileLike:
    """The default: ``<log_dir>/cleaner-offset-checkpoint`` on this host's disk."""
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)


class CleanerCheckpoints:
    """Not thread-safe: guarded by the cleaner manager's lock."""

    def __init__(self, log_dirs: Iterable[Path | str],
                 on_dir_failure: Callable[[Path, BaseException], None] | None = None,
                 checkpoint_file: Callable[[Path], CheckpointFileLike] = local_checkpoint_file
                 ) -> None:
        self._open = checkpoint_file
        self._files = {dir_key(d): checkpoint_file(dir_key(d)) for d in log_dirs}
        self._offline: set[Path] = set()
        self._on_dir_failure = on_dir_failure

    @property
    def log_dirs(self) -> list[Path]:
        return list(self._files)

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    def read(self, log_dir: Path) -> dict[TopicPartition, int]:
        """One directory's checkpoint; empty when missing, offline or unreadable (logged)."""
        checkpoint = self._files.get(log_dir)
        if checkpoint is None:
            return {}
        try:
            return _read(checkpoint)
        except (OSError, CheckpointError) as err:
            self._failed(log_dir, err)
            return {}

    def read_all(self) -> dict[TopicPartition, int]:
        merged: dict[TopicPartition, int] = {}
        for log_dir in self._files:
            merged.update(self.read(log_dir))
        return merged

    def update(self, log_dir: Path, update: tuple[TopicPartition, int] | None = None,
               remove: TopicPartition | None = None,
               live_partitions: Collection[TopicPartition] | None = None) -> None:
        """Rewrite one directory's checkpoint: drop ``remove``, set ``update``, and with
        ``live_partitions`` drop every partition not in it."""
        checkpoint = self._writable(log_dir)
        if checkpoint is None:
            return
        try:
            current = _read(checkpoint)
            if live_partitions is not None:
                current = {tp: o for tp, o in current.items() if tp in live_partitions}
            if remove is not None:
                current.pop(remove, None)
            if update is not None:
                current[update[0]] = update[1]
            checkpoint.write(current)
        except (OSError, CheckpointError) as err:
            self._failed(log_dir, err)

    def truncate(self, log_dir: Path, tp: TopicPartition, offset: int) -> None:
        """Lower ``tp``'s offset to ``offset`` if it is above it."""
        checkpoint = self._writable(log_dir)
        if checkpoint is None:
            return
        try:
            existing = _read(checkpoint)
            if existing.get(tp, 0) > offset:
                existing[tp] = offset
                checkpoint.write(existing)
        except (OSError, CheckpointError) as err:
            self._failed(log_dir, err)

    def take_offline(self, log_dir: Path) -> None:
        self._files.pop(log_dir, None)
        self._offline.add(log_dir)

    def add_dir(self, log_dir: Path) -> None:
        """Start managing ``log_dir`` (a directory added, or back online after a restart)."""
        self._offline.discard(log_dir)
        self._files.setdefault(log_dir, self._open(log_dir))

    def _writable(self, log_dir: Path) -> CheckpointFileLike | None:
        checkpoint = self._files.get(log_dir)
        if checkpoint is None:
            if log_dir in self._offline:
                logger.warning("Not updating the cleaner checkpoint of offline dir %s", log_dir)
                return None
            raise ValueError(f"{log_dir} is not a log directory of this cleaner manager")
        return checkpoint

    def _failed(self, log_dir: Path, err: Exception) -> None:
        logger.error("Failed to access checkpoint file %s in dir %s: %s",
                     CLEANER_OFFSET_CHECKPOINT, log_dir, err)
        if isinstance(err, OSError) and self._on_dir_failure is not None:
            self._on_dir_failure(log_dir, err)


def _read(checkpoint: CheckpointFileLike) -> dict[TopicPartition, int]:
    try:
        return checkpoint.read()
    except FileNotFoundError:
        return {}
