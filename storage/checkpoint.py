"""Text checkpoint files of a log directory (Kafka's CheckpointFile family) and the clean-shutdown
marker.

Checkpoint layout, UTF-8 text, one item per line::

    <version>             line 1, an int; a file whose version is not ours is rejected
    <count>               line 2, the number of entry lines that follow
    <entry>               lines 3 .. count + 2, fields separated by whitespace

    recovery-point-offset-checkpoint, log-start-offset-checkpoint, cleaner-offset-checkpoint and
    replication-offset-checkpoint (one per log directory), version 0:
        Entry => Topic: str (no whitespace) | Partition: int32 | Offset: int64
        "0\\n2\\nfoo 1 5\\nbar 2 10\\n"
    leader-epoch-checkpoint (one per partition directory), version 0:
        Entry => Epoch: int32 | StartOffset: int64

An empty (0-byte) file, or one holding only the version line, reads as no entries (Kafka creates
the file empty). Reading rejects a wrong version, a malformed line or a count that does not match
with a ``CheckpointError`` naming the file and the line. Writing replaces the whole file through
``storage.durable.atomic_write``, so a crash leaves either the old or the new content and at most a
stray ``<name>.tmp``, which readers ignore.

Clean-shutdown marker ``<logdir>/.kafka_cleanshutdown`` (KIP-966)::

    {"version":0,"brokerEpoch":N}     unknown fields ignored; an empty file (Kafka before KIP-966)
                                      or an object without an integer epoch still means a clean
                                      shutdown, only without an epoch

A marker that is not a regular file, larger than 4 KiB, not UTF-8 JSON (nesting too deep
included) or not a JSON object means an unclean shutdown (``CleanShutdownFile.read``): a bad
marker costs a recovery, never a failed start or a skipped one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Generic, NamedTuple, Protocol, TypeVar

from storage.durable import atomic_write, fsync_dir
from storage.errors import CheckpointError
from storage.files import CLEAN_SHUTDOWN_FILE, TopicPartition

logger = logging.getLogger(__name__)

T = TypeVar("T")

_INT = re.compile(r"[+-]?[0-9]+")  # what Java's parseInt/parseLong accept


class EntryFormatter(Protocol[T]):
    """How one entry of a checkpoint is written as a line and read back."""

    def format(self, entry: T) -> str:
        """The line for ``entry``, without its newline."""
        ...

    def parse(self, fields: list[str]) -> T:
        """The entry of a line split on whitespace; ``ValueError`` when malformed."""
        ...


def _parse_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise ValueError(f"{text!r} is not an integer")
    return int(text)


class CheckpointFile(Generic[T]):
    """A versioned text checkpoint: the generic reader and writer behind every checkpoint class.

    Not thread-safe: one owner (log manager, cleaner manager, epoch cache) reads and writes it.
    """

    def __init__(
        self, path: Path, version: int, formatter: EntryFormatter[T], *, create: bool = False
    ) -> None:
        """With ``create``, make an empty file when none exists (Kafka's constructor does)."""
        self.path = Path(path)
        self.version = version
        self._formatter = formatter
        if create:
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                pass

    def read(self) -> list[T]:
        """Every entry in file order. A missing file raises ``FileNotFoundError``."""
        lines = self.path.read_bytes().splitlines()  # \n, \r\n or \r, like Java's readLine
        if not lines:
            return []
        version = self._int_line(lines, 1)
        if version != self.version:
            raise CheckpointError(
                f"checkpoint file {self.path}: line 1: unrecognised version {version}, "
                f"expected {self.version}",
                path=self.path,
                line_number=1,
                version=version,
                expected_version=self.version,
            )
        if len(lines) == 1:
            return []
        count = self._int_line(lines, 2)
        entries = [self._entry(lines, number) for number in range(3, len(lines) + 1)]
        if len(entries) != count:
            raise CheckpointError(
                f"checkpoint file {self.path}: line 2: expected {count} entries, found "
                f"{len(entries)}",
                path=self.path,
                line_number=2,
                expected_count=count,
                count=len(entries),
            )
        return entries

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file with ``entries``: temp file, fsync, atomic rename, directory fsync."""
        lines = [self._formatter.format(entry) for entry in entries]
        text = "".join(f"{line}\n" for line in [str(self.version), str(len(lines)), *lines])
        atomic_write(self.path, text.encode("utf-8"))

    def write_if_dir_exists(self, entries: Iterable[T]) -> None:
        """``write``, except that a directory renamed or removed meanwhile (the partition is being
        deleted) is logged instead of raised (Kafka's writeIfDirExists)."""
        try:
            self.write(entries)
        except FileNotFoundError as err:
            logger.warning(
                "Failed to write checkpoint file %s: %s. This is ok if the partition is being "
                "deleted",
                self.path,
                err,
            )

    def _line(self, lines: list[bytes], number: int) -> str:
        try:
            return lines[number - 1].decode("utf-8")
        except UnicodeDecodeError as err:
            raise self._malformed(number, repr(lines[number - 1])) from err

    def _int_line(self, lines: list[bytes], number: int) -> int:
        text = self._line(lines, number)
        try:
            return _parse_int(text)
        except ValueError as err:
            raise self._malformed(number, text) from err

    def _entry(self, lines: list[bytes], number: int) -> T:
        text = self._line(lines, number)
        try:
            return self._formatter.parse(text.split())
        except ValueError as err:
            raise self._malformed(number, text) from err

    def _malformed(self, number: int, text: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint file {self.path}: line {number}: malformed line {text!r}",
            path=self.path,
            line_number=number,
            line=text,
        )


class _OffsetFormatter:
    def format(self, entry: tuple[TopicPartition, int]) -> str:
        partition, offset = entry
        topic = partition.topic
        if not topic or any(char.isspace() for char in topic):
            raise ValueError(f"topic {topic!r} cannot be written to an offset checkpoint")
        return f"{topic} {partition.partition} {offset}"

    def parse(self, fields: list[str]) -> tuple[TopicPartition, int]:
        if len(fields) != 3:
            raise ValueError(f"expected 3 fields, found {len(fields)}")
        topic, partition, offset = fields
        return TopicPartition(topic, _parse_int(partition)), _parse_int(offset)


class OffsetCheckpointFile:
    """One offset per partition: ``recovery-point-offset-checkpoint``,
    ``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``,
    ``replication-offset-checkpoint``.

    A partition listed twice reads as its last line. Not thread-safe; one owner per file.
    """

    VERSION = 0

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self._file = CheckpointFile(path, self.VERSION, _OffsetFormatter(), create=create)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(offsets.items())

    def write_if_dir_exists(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write_if_dir_exists(offsets.items())


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it; compares equal to ``(epoch, offset)``."""

    epoch: int
    start_offset: int


class _EpochFormatter:
    def format(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def parse(self, fields: list[str]) -> EpochEntry:
        if len(fields) != 2:
            raise ValueError(f"expected 2 fields, found {len(fields)}")
        return EpochEntry(_parse_int(fields[0]), _parse_int(fields[1]))


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: ``(epoch, start_offset)`` pairs in file order.

    Not thread-safe; owned by the partition's epoch cache.
    """

    VERSION = 0

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self._file = CheckpointFile(path, self.VERSION, _EpochFormatter(), create=create)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> list[EpochEntry]:
        return self._file.read()

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(EpochEntry(*entry) for entry in entries)

    def write_if_dir_exists(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write_if_dir_exists(EpochEntry(*entry) for entry in entries)


class CleanShutdown(NamedTuple):
    """What a clean-shutdown marker says: ``clean`` or not, the broker epoch when it has one, and
    ``problem`` when a marker is present but unusable (it then counts as unclean)."""

    clean: bool
    epoch: int | None
    problem: str | None = None


MAX_CLEAN_SHUTDOWN_BYTES = 4096


class CleanShutdownFile:
    """``<logdir>/.kafka_cleanshutdown``: present means the directory was shut down cleanly.

    The loader deletes it before loading (a crash while loading must count as unclean) and the
    shutdown writes it after every log is flushed and closed. Not thread-safe; owned by the
    log directory.
    """

    VERSION = 0

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CLEAN_SHUTDOWN_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, broker_epoch: int = -1) -> None:
        content = {"version": self.VERSION, "brokerEpoch": broker_epoch}
        atomic_write(self.path, json.dumps(content, separators=(",", ":")).encode("utf-8"))

    def read_epoch(self) -> int | None:
        """The broker epoch in the file; None when the file is missing, empty (written by Kafka
        before KIP-966), unparsable or without an integer ``brokerEpoch``."""
        return self.read().epoch

    def read(self) -> CleanShutdown:
        """Whether the marker says clean (see the module docstring); never raises for its
        content. Missing: not clean, no problem. Only an ``OSError`` other than a missing file
        while reading a regular file propagates (the directory's disk failing)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return CleanShutdown(False, None)
        if not stat.S_ISREG(info.st_mode):
            return self._bad("is not a regular file")
        if info.st_size > MAX_CLEAN_SHUTDOWN_BYTES:
            return self._bad(f"has {info.st_size} bytes, more than {MAX_CLEAN_SHUTDOWN_BYTES}")
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_CLEAN_SHUTDOWN_BYTES + 1)
        except FileNotFoundError:
            return CleanShutdown(False, None)
        except PermissionError as err:
            return self._bad(f"cannot be read: {err.strerror}")
        if not data:
            return CleanShutdown(True, None)
        if len(data) > MAX_CLEAN_SHUTDOWN_BYTES:
            return self._bad(f"has more than {MAX_CLEAN_SHUTDOWN_BYTES} bytes")
        try:
            content = json.loads(data)
        except (ValueError, RecursionError) as err:
            return self._bad(f"is not JSON ({type(err).__name__})")
        if not isinstance(content, dict):
            return self._bad("is not a JSON object")
        epoch = content.get("brokerEpoch")
        if isinstance(epoch, int) and not isinstance(epoch, bool):
            return CleanShutdown(True, epoch)
        return CleanShutdown(True, None)

    def _bad(self, why: str) -> CleanShutdown:
        problem = f"{self.path} {why}: counted as an unclean shutdown"
        logger.warning("%s", problem)
        return CleanShutdown(False, None, problem)

    def delete(self) -> None:
        """Remove the marker and fsync the directory, so a crash right after cannot revive it.
        A directory under the marker's name is removed when empty (else ``OSError``)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        except IsADirectoryError:
            os.rmdir(self.path)
        fsync_dir(self.path.parent)
