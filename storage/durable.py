"""Crash-safe file writes: temp file + fsync + atomic rename + directory fsync (Kafka's CheckpointFile
and Utils.atomicMoveWithFallback). Every durable small file in a log directory goes through here."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or create inside it survives a power loss."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    ``sync=False`` skips both fsyncs, for files that are checked on read and rebuilt when damaged
    (producer snapshots): the rename is still atomic, only its durability is not forced.

    The temp file ``<name>.tmp`` is always created anew (``O_CREAT | O_EXCL | O_NOFOLLOW``) after
    unlinking whatever is there (``unlink`` does not follow symlinks): a symlink or file planted at
    that name is removed, never written through. One planted again between the unlink and the
    create makes the write fail with ``FileExistsError`` rather than follow it."""
    tmp = path.with_name(path.name + ".tmp")
    fd = _create_fresh(tmp)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def _create_fresh(tmp: Path) -> int:
    """A new empty file at ``tmp`` opened for writing, replacing any stale file or symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    for attempt in range(2):
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        try:
            return os.open(tmp, flags, 0o644)
        except FileExistsError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def atomic_rename(source: Path, target: Path) -> None:
    """Rename and make the rename durable."""
    os.replace(source, target)
    fsync_dir(target.parent)


def fsync_file_if_exists(path: str | os.PathLike[str]) -> None:
    """fsync the file at ``path``; a file that does not exist (never written, or removed
    meanwhile) has nothing to sync."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
