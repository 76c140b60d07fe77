"""``<logdir>/.lock``: one owner per log directory (Kafka's FileLock on ``.lock``).

The lock is ``filelock.FileLock``, an ``flock`` on the file, taken without waiting. The kernel drops
an ``flock`` when its holder dies, so a directory whose owner was killed (kill -9, OOM, a crashed
Ray actor) is taken over at once by the next owner. After acquiring it the owner writes its pid into
the file, so a refused contender can name the holder::

    .lock  =>  "<pid>\\n"      (empty once its owner closed the directory, or in the instant
                            before the write)

A holder that dies (the kernel drops its ``flock``) or a directory that went offline (its owner
lets the lock go, as Kafka does, but the process lives on and its restart brings the directory
back) leaves its pid in the file: only a pid whose ``flock`` is held is a live owner.

Two lock objects on one path inside one process behave badly (``flock`` is per open file
description, so the second one self-deadlocks or, with ``timeout=0``, fails without a reason), so a
process-wide registry of canonical paths refuses a second owner in the same process before
``flock`` is tried. The file is never deleted: unlinking a locked file lets two contenders lock two
different inodes (filelock's own rule; Kafka deletes it, and has that race). ``SoftFileLock`` is
never used on this path: mixing the two breaks both.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import ClassVar

from filelock import FileLock, Timeout

from node.errors import InvalidLogDirError, LogDirLockedError
from storage.files import LOCK_FILE


class DirLock:
    """The held ``.lock`` of one directory. Create with ``DirLock.acquire``; ``release`` is
    idempotent and may run on any thread."""

    _held: ClassVar[dict[str, DirLock]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, directory: Path, canonical: str, lock: FileLock) -> None:
        self.directory = directory
        self._canonical = canonical
        self._lock: FileLock | None = lock

    @classmethod
    def acquire(cls, directory: Path) -> DirLock:
        """Lock ``directory`` or raise ``LogDirLockedError`` at once (naming the holder's pid).
        A ``.lock`` that cannot be opened as a file (a directory, no permission) raises
        ``InvalidLogDirError`` naming it."""
        canonical = os.path.realpath(directory)
        path = Path(canonical) / LOCK_FILE
        with cls._registry_lock:
            if canonical in cls._held:
                raise LogDirLockedError(
                    f"log directory {directory} is already in use by another LogDir of this "
                    f"process (pid {os.getpid()})",
                    directory=str(directory), pid=os.getpid(), same_process=True)
            lock = FileLock(path, timeout=0, thread_local=False, fallback_to_soft=False)
            try:
                lock.acquire(blocking=False)
            except Timeout:
                pid = read_holder_pid(Path(canonical))
                holder = f"process {pid}" if pid is not None else "another process"
                raise LogDirLockedError(
                    f"log directory {directory} is locked by {holder}: {path} is held; stop "
                    "that owner or use another directory",
                    directory=str(directory), pid=pid, same_process=False) from None
            except OSError as err:
                raise InvalidLogDirError(
                    f"log directory {directory} cannot be locked: {path}: {err.strerror}",
                    directory=str(directory), path=str(path)) from None
            held = cls(directory, canonical, lock)
            cls._held[canonical] = held
        try:
            _write_pid(path, str(os.getpid()))
        except BaseException:
            held.release()
            raise
        return held

    @property
    def is_held(self) -> bool:
        return self._lock is not None

    def release(self, keep_pid: bool = False) -> None:
        """Clear the pid (unless ``keep_pid``: a directory gone offline keeps naming its
        process) and drop the ``flock``. Errors of the pid write are ignored: this runs on the way
        out, also when the directory has just failed."""
        with self._registry_lock:
            lock, self._lock = self._lock, None
            if lock is None:
                return
            try:
                if not keep_pid:
                    _write_pid(Path(self._canonical) / LOCK_FILE, "")
            except OSError:
                pass
            try:
                lock.release(force=True)
            finally:
                if self._held.get(self._canonical) is self:
                    del self._held[self._canonical]


def read_holder_pid(directory: Path) -> int | None:
    """The pid written in ``directory/.lock``, or None when there is none (or it is unreadable)."""
    try:
        text = (directory / LOCK_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _write_pid(path: Path, text: str) -> None:
    # a second descriptor on the file: closing it does not drop the flock (flock, unlike fcntl
    # record locks, belongs to the open file description that took it)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        if text:
            os.write(fd, f"{text}\n".encode())
    finally:
        os.close(fd)
