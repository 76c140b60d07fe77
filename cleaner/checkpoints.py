"""``CleanerCheckpoints``: the ``cleaner-offset-checkpoint`` of every log directory of a cleaner
manager (where each partition's last clean stopped, i.e. its first dirty offset).

File format and crash safety are ``storage.checkpoint.OffsetCheckpointFile``'s. A missing file
reads as empty. I/O errors are logged and reported to ``on_dir_failure`` (Kafka's
LogDirFailureChannel), never raised: one bad directory must not stop the cleaner elsewhere.

Where the file lives is a seam (``checkpoint_file``): by default the manager reads and updates
``<dir>/cleaner-offset-checkpoint`` itself; a manager in another process than the directory's
owner (the cluster's coordinator) passes a factory whose objects ask the owner to read and update
it. Such an object raises ``OSError`` for a directory that failed and ``CheckpointError`` for a
file it cannot parse, like the local file does.

One writer, one atomic update: the manager never writes a file it read earlier. Every change is a
``CheckpointChange`` that the file's owner applies as one read-modify-write under its own lock, so
a change the owner made meanwhile (a truncation lowering an entry, a deleted partition dropped) is
never overwritten with an older copy.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol

from storage.checkpoint import OffsetCheckpointFile
from storage.errors import CheckpointError
from storage.files import CLEANER_OFFSET_CHECKPOINT, TopicPartition

logger = logging.getLogger(__name__)


def dir_key(log_dir: Path | str) -> Path:
    """The one spelling of a log directory used as a key (absolute, symlinks kept)."""
    return Path(os.path.abspath(log_dir))


@dataclass(frozen=True)
class CheckpointChange:
    """One change of a cleaner checkpoint, applied by the file's owner in one step: drop
    ``remove``, set ``offsets``, set ``defaults`` where a partition has no entry, lower each entry of ``lower`` to its offset if it is above it
    (never raising one), then, when ``live_partitions`` is given, drop every entry not in it."""

    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    remove: frozenset[TopicPartition] = frozenset()
    live_partitions: frozenset[TopicPartition] | None = None
    lower: Mapping[TopicPartition, int] = field(default_factory=dict)
    defaults: Mapping[TopicPartition, int] = field(default_factory=dict)

    def apply(self, current: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The checkpoint after this change (``current`` is left as it is)."""
        result = dict(current)
        for tp in self.remove:
            result.pop(tp, None)
        result.update(self.offsets)
        for tp, offset in self.defaults.items():
            result.setdefault(tp, offset)
        for tp, offset in self.lower.items():
            if result.get(tp, 0) > offset:
                result[tp] = offset
        if self.live_partitions is not None:
            result = {tp: o for tp, o in result.items() if tp in self.live_partitions}
        return result


class CheckpointFileLike(Protocol):
    """One directory's cleaner checkpoint, local or owned by another process. ``read`` raises
    ``FileNotFoundError`` when there is none yet; ``update`` applies a change atomically (a missing
    file reads as empty) and returns the checkpoint it wrote."""

    def read(self) -> dict[TopicPartition, int]: ...

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]: ...


class LocalCheckpointFile:
    """``<log_dir>/cleaner-offset-checkpoint`` on this host's disk, updated under a lock that
    every ``LocalCheckpointFile`` of the same path in this process shares."""

    _locks: dict[Path, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self._file = OffsetCheckpointFile(path)
        with self._locks_guard:
            self._lock = self._locks.setdefault(dir_key(path), threading.Lock())

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        return self._file.read()

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        with self._lock:
            try:
                current = self._file.read()
            except FileNotFoundError:
                current = {}
            updated = change.apply(current)
            if updated != current or not self._file.path.exists():
                self._file.write(updated)
            return updated


def local_checkpoint_file(log_dir: Path) -> CheckpointFileLike:
    """The default: ``<log_dir>/cleaner-offset-checkpoint`` on this host's disk."""
    return LocalCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)


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
        """Change one directory's checkpoint in one step: drop ``remove``, set ``update``, and with
        ``live_partitions`` drop every partition not in it."""
        self._apply(log_dir, CheckpointChange(
            offsets=dict([update]) if update is not None else {},
            remove=frozenset([remove]) if remove is not None else frozenset(),
            live_partitions=frozenset(live_partitions) if live_partitions is not None else None))

    def truncate(self, log_dir: Path, tp: TopicPartition, offset: int) -> None:
        """Lower ``tp``'s offset to ``offset`` if it is above it."""
        self._apply(log_dir, CheckpointChange(lower={tp: offset}))

    def _apply(self, log_dir: Path, change: CheckpointChange) -> None:
        checkpoint = self._writable(log_dir)
        if checkpoint is None:
            return
        try:
            checkpoint.update(change)
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
