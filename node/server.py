"""``LogDirServer``: the body of a node actor (STYLE.md P10, Ray Serve's plain-class actors).

A thin adapter over ``LogDir``: every method takes and returns plain, picklable values (topic and
partition instead of ``Log`` objects, bytes, frozen dataclasses) and forwards to the directory.
It imports no ray; ``cluster/`` applies ``ray.remote`` to it and chooses concurrency groups.
Errors are the typed storage/node errors, which pickle through Ray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from node.logdir import LogDir
from node.stats import LoadProgress, LogDirStats, PartitionStats, partition_stats
from storage.log import DEFAULT_FETCH_BYTES, FetchData, LogAppendInfo


class LogDirServer:
    """Owns one ``LogDir`` for the life of the actor. Thread-safe as ``LogDir`` is.

    The constructor takes ``LogDir.open``'s keyword arguments and opens the directory (locking it);
    a restarted actor therefore recovers from whatever the directory holds.
    """

    def __init__(self, path: str | Path, **open_kwargs: Any) -> None:
        self._last_progress: LoadProgress | None = None
        user_callback = open_kwargs.pop("on_load_progress", None)

        def on_progress(progress: LoadProgress) -> None:
            self._last_progress = progress
            if user_callback is not None:
                user_callback(progress)

        self._dir = LogDir.open(path, on_load_progress=on_progress, **open_kwargs)

    # ---- partitions --------------------------------------------------------------------------
    def create_partition(self, topic: str, partition: int) -> PartitionStats:
        return partition_stats(self._dir.get_or_create_log(topic, partition), None)

    def delete_partition(self, topic: str, partition: int) -> bool:
        return self._dir.delete_log(topic, partition) is not None

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(tuple(key) for key in self._dir.logs())

    # ---- data --------------------------------------------------------------------------------
    def append_batch(self, topic: str, partition: int, data: bytes) -> LogAppendInfo:
        """Append producer-encoded v2 batches to an existing partition."""
        return self._dir.log(topic, partition).append_batch(data)

    def read_raw(self, topic: str, partition: int, offset: int,
                 max_bytes: int = DEFAULT_FETCH_BYTES) -> FetchData | None:
        return self._dir.log(topic, partition).read_raw(offset, max_bytes)

    def flush(self, topic: str, partition: int) -> int:
        """Flush one partition; returns its recovery point."""
        log = self._dir.log(topic, partition)
        log.flush()
        return log.recovery_point

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset)."""
        log = self._dir.log(topic, partition)
        return log.log_start_offset, log.log_end_offset

    # ---- directory ---------------------------------------------------------------------------
    def stats(self) -> LogDirStats:
        return self._dir.stats()

    def load_progress(self) -> LoadProgress | None:
        return self._last_progress

    def checkpoint(self) -> None:
        self._dir.checkpoint()

    def cleanup_logs(self) -> int:
        return self._dir.cleanup_logs()

    def close(self, broker_epoch: int = -1) -> None:
        self._dir.close(broker_epoch)

    @property
    def log_dir(self) -> LogDir:
        """The directory itself, for in-process callers (never sent through Ray)."""
        return self._dir
