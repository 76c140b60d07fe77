"""The one I/O-error policy of a log directory (STYLE.md P7; Kafka's LogDirFailureChannel and
``maybeHandleIOException``).

While a directory loads, an ``OSError`` propagates to whoever opened it. Once it is loaded, every
disk operation on it runs under ``DirHealth.guard``: the first ``OSError`` marks the directory
offline (once), runs its release callback (stop tasks, close files, drop the lock) and surfaces as
``LogDirOfflineError``; every later call fails fast with a ``LogDirOfflineError`` that states the
original error. The process never dies of it.

``DirLog`` puts the same guard on the ``storage.Log`` objects a ``LogDir`` hands out, so an append
made directly on a log also takes the directory offline instead of leaving it half-alive.
"""

from __future__ import annotations

import errno
import functools
import logging
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from storage.errors import LogDirOfflineError
from storage.log import Log

log = logging.getLogger(__name__)


class DirHealth:
    """Online/offline state of one directory, shared by the ``LogDir``, its logs and its tasks.

    Thread-safe. ``fail`` holds the state lock only to flip the flag, never while the release
    callback runs, so threads failing at the same time cannot deadlock on each other's log locks.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._cause: OSError | None = None
        self.on_offline: Callable[[], None] | None = None

    @property
    def online(self) -> bool:
        return self._reason is None

    @property
    def reason(self) -> str | None:
        return self._reason

    def check(self) -> None:
        """Raise ``LogDirOfflineError`` if the directory is offline."""
        if self._reason is not None:
            raise self.error()

    def error(self) -> LogDirOfflineError:
        return LogDirOfflineError(
            f"log directory {self.directory} is offline: {self._reason}",
            directory=str(self.directory), reason=self._reason,
            errno=self._cause.errno if self._cause is not None else None)

    def fail(self, err: OSError, action: str) -> LogDirOfflineError:
        """Mark the directory offline because ``action`` raised ``err`` (only the first failure
        counts) and return the error to raise ``from err``."""
        with self._lock:
            first = self._reason is None
            if first:
                self._reason = f"{action} failed: {describe(err)}"
                self._cause = err
        if first:
            log.error("log directory %s goes offline: %s", self.directory, self._reason,
                      exc_info=err)
            callback = self.on_offline
            if callback is not None:
                try:
                    callback()
                except Exception:  # noqa: BLE001 - releasing a failed directory is best effort
                    log.exception("releasing offline log directory %s", self.directory)
        return self.error()

    @contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Check the directory is online, run the body, and turn an ``OSError`` into offline.

        A call that raced the failure of another thread (its log closed under it, or a flush that
        found the log closed and returned) also ends in ``LogDirOfflineError``: no call reports
        success, or a secondary error, once the directory is offline.
        """
        self.check()
        try:
            yield
        except OSError as err:
            raise self.fail(err, action) from err
        except LogDirOfflineError:
            raise
        except Exception as err:
            if self._reason is not None:
                raise self.error() from err
            raise
        self.check()


def describe(err: OSError) -> str:
    """``[Errno 28 ENOSPC] No space left on device: '/x'`` (the symbolic errno helps grep)."""
    if err.errno is None:
        return str(err) or type(err).__name__
    name = errno.errorcode.get(err.errno, "?")
    text = f"[Errno {err.errno} {name}] {err.strerror}"
    if err.filename is not None:
        text += f": {err.filename!r}"
    return text


# Log methods that touch the disk, or that must fail fast once the directory is offline. ``append``
# and ``append_end_txn_marker`` go through ``append_batch``, ``read`` through ``read_raw`` and
# ``collect_aborted_transactions``; ``close``, ``rename_dir`` and
# ``delete`` are called by the LogDir itself under its own guard.
GUARDED_METHODS = (
    "append_batch", "roll", "flush", "read_raw", "offset_for_timestamp",
    "fetch_offset_by_timestamp", "truncate_to",
    "truncate_fully_and_start_at", "delete_old_segments", "maybe_increment_log_start_offset",
    "create_cleaned_segment", "replace_segments", "release_idle", "collect_aborted_transactions",
)


class DirLog(Log):
    """A ``storage.Log`` owned by a ``LogDir``: the disk methods run under the directory's
    ``DirHealth.guard``. Everything else is ``Log``'s. ``health`` is set right after
    ``DirLog.open``; until then the methods run unguarded (the loader's rule)."""

    health: DirHealth | None = None


def _guarded(name: str) -> Callable[..., Any]:
    method = getattr(Log, name)

    @functools.wraps(method)
    def call(self: DirLog, *args: Any, **kwargs: Any) -> Any:
        health = self.health
        if health is None:
            return method(self, *args, **kwargs)
        with health.guard(f"{name} of {self.name}"):
            return method(self, *args, **kwargs)
    return call


for _name in GUARDED_METHODS:
    setattr(DirLog, _name, _guarded(_name))
