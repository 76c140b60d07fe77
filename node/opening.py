"""Opening a node's ``LogDir`` in the foreground or on a background thread (``LogDirServer``'s
``load_in_background``), and waiting for it: ``OpeningDir`` owns the load thread, the load's
outcome (the directory or the error it raised) and the last progress report.

While the directory loads, ``wait`` blocks for up to ``wait_s`` and then raises
``DirectoryLoadingError``; after a failed load it raises what the load raised, every time.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable

from node.logdir import LogDir
from node.stats import LoadProgress, LogDirStats, disk_usage, file_system_id
from storage.errors import StorageError

log = logging.getLogger(__name__)

DEFAULT_LOAD_WAIT_S = 600.0


class DirectoryLoadingError(StorageError):
    """A call reached a node whose directory is still loading and gave up waiting (``directory``,
    ``waited_s``). Unlike ``LogDirOfflineError`` nothing failed: try again later, or watch
    ``load_progress``."""


class OpeningDir:
    """The ``LogDir`` at ``path`` as it opens. ``start`` runs ``open_dir`` (on a thread named
    ``load-<dir>`` when ``background``; in the caller otherwise, re-raising its error)."""

    def __init__(self, path: Path, wait_s: float) -> None:
        self.path = path
        self.last_progress: LoadProgress | None = None
        self._wait_s = wait_s
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._opened: LogDir | None = None
        self._thread: threading.Thread | None = None

    def start(self, open_dir: Callable[[], LogDir], background: bool) -> None:
        def load() -> None:
            try:
                self._opened = open_dir()
            except BaseException as err:
                self._error = err
                if not background:
                    raise
                log.exception("loading log directory %s failed", self.path)
            finally:
                self._done.set()

        if background:
            self._thread = threading.Thread(target=load, name=f"load-{self.path.name}",
                                            daemon=True)
            self._thread.start()
        else:
            load()

    def report(self, progress: LoadProgress) -> None:
        self.last_progress = progress

    def wait(self) -> LogDir:
        """The directory once loaded (see the module docstring for the errors)."""
        if not self._done.wait(self._wait_s):
            raise DirectoryLoadingError(
                f"log directory {self.path} is still loading after {self._wait_s} s",
                directory=str(self.path), waited_s=self._wait_s)
        if self._error is not None:
            raise self._error
        assert self._opened is not None
        return self._opened

    @property
    def opened(self) -> LogDir | None:
        """The directory if it has loaded, without waiting."""
        return self._opened

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def failed(self) -> bool:
        """The load ended with an error."""
        return self._done.is_set() and self._error is not None

    def failed_stats(self) -> LogDirStats:
        """The stats of a directory whose load failed: offline, the error as the reason."""
        assert self._error is not None
        directory = str(self.path)
        total, used, free = disk_usage(directory)
        return LogDirStats(directory=directory, online=False,
                           offline_reason=f"loading failed: {type(self._error).__name__}: "
                                          f"{self._error}",
                           closed=False, partitions_count=0, log_bytes=0,
                           disk_total_bytes=total, disk_used_bytes=used, disk_free_bytes=free,
                           load_time_ms=0.0, had_clean_shutdown=False, logs_to_delete=0,
                           invalid_dirs=(), task_failures=0, last_task_failure=None,
                           partitions=(), file_system=file_system_id(directory),
                           pid=os.getpid())

    def close(self, broker_epoch: int) -> None:
        """Wait for the load to end, close the directory if it opened, join the load thread."""
        self._done.wait()
        if self._opened is not None:
            self._opened.close(broker_epoch)
        if self._thread is not None:
            self._thread.join()


__all__ = ["DEFAULT_LOAD_WAIT_S", "DirectoryLoadingError", "OpeningDir"]
