"""Keeping what recovery cuts (ours, beyond Kafka): when the loader truncates a segment, the bytes
it cuts (the damaged tail, and every later segment, valid or not) go to the partition's
``quarantine/`` folder instead of being deleted, so nothing that passed its CRC is ever lost to a
recovery. Names are ``storage.files.quarantine_file``'s: ``<ms>-<original name>.<position>``.

The loader never reads the folder; ``strata recover --list-quarantine`` lists it and
``--export-quarantine`` copies it out. Files are only added here (never rewritten); an operator
deletes them.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from storage import files
from storage.durable import fsync_dir


@dataclass(frozen=True, slots=True)
class QuarantinedFile:
    """Bytes kept in quarantine: ``path`` of the kept file, ``original`` the name of the file
    they came from, ``position`` where they started in it, ``bytes`` how many, ``reason`` why
    they were cut ("" when listed from disk, which does not record it)."""

    path: str
    original: str
    position: int
    bytes: int
    reason: str = ""


def _target(directory: Path, stamp_ms: int, original: str, position: int) -> Path:
    folder = directory / files.QUARANTINE_DIR
    if not folder.is_dir():
        folder.mkdir()
        fsync_dir(directory)
    target = files.quarantine_file(directory, stamp_ms, original, position)
    n = stamp_ms
    while target.exists():     # two cuts of one file in one millisecond
        n += 1
        target = files.quarantine_file(directory, n, original, position)
    return target


def keep_tail(source: Path, position: int, stamp_ms: int, reason: str, *,
              name: str | None = None) -> QuarantinedFile:
    """Copy ``source[position:]`` to a new quarantine file (fsynced, with its folder) before the
    caller truncates ``source`` at ``position``. ``name`` is the original name to record when
    ``source`` is a temporary name of it (``keep_while``)."""
    original = name or source.name
    directory = source.parent if name is None else source.parent.parent
    target = _target(directory, stamp_ms, original, position)
    with open(source, "rb") as src, open(target, "xb") as dst:
        src.seek(position)
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        os.fsync(dst.fileno())
        size = dst.tell()
    fsync_dir(target.parent)
    return QuarantinedFile(str(target), original, position, size, reason)


def keep_file(source: Path, stamp_ms: int, reason: str) -> QuarantinedFile:
    """Move the whole file ``source`` into quarantine (a rename: no copy, and no window in which
    the bytes are in neither place)."""
    target = _target(source.parent, stamp_ms, source.name, 0)
    size = source.stat().st_size
    os.rename(source, target)
    fsync_dir(target.parent)
    fsync_dir(source.parent)
    return QuarantinedFile(str(target), source.name, 0, size, reason)


@contextmanager
def keep_while(source: Path) -> Iterator[Path]:
    """A second name (a hard link in the quarantine folder, which the loader never reads) for
    ``source`` while the block runs, so its bytes stay readable after the block deletes
    ``source``; removed afterwards. Where hard links fail, a copy."""
    folder = source.parent / files.QUARANTINE_DIR
    if not folder.is_dir():
        folder.mkdir()
        fsync_dir(source.parent)
    held = folder / f".held-{source.name}"
    if held.exists():
        held.unlink()          # left by a crash inside an earlier block
    try:
        os.link(source, held)
    except OSError:
        shutil.copyfile(source, held)
    try:
        yield held
    finally:
        held.unlink(missing_ok=True)


def list_quarantine(directory: Path) -> list[QuarantinedFile]:
    """The files in ``directory``'s quarantine folder, by name (oldest cut first); empty when
    there is none."""
    folder = directory / files.QUARANTINE_DIR
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    kept = []
    for name in names:
        parsed = files.parse_quarantine_name(name)
        if parsed is None:
            continue
        _, original, position = parsed
        kept.append(QuarantinedFile(str(folder / name), original, position,
                                    os.lstat(folder / name).st_size))
    return kept
