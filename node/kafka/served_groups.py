"""``ServedGroups``: the group coordinator of one served directory and the partitions of
``__consumer_offsets`` it has loaded (Kafka's ``GroupCoordinator.onElection``/``onResignation``,
which a broker calls when it becomes or stops being a partition's leader).

A directory leads the partitions of ``__consumer_offsets`` it holds. What it holds changes under
the server: the topic is created (FindCoordinator, here or through another broker of the
cluster), a partition moves in or out (KIP-113), the topic is deleted, the directory goes
offline. Rather than hooking each of those paths, every group request reconciles the one
partition it needs (``ensure``): a partition held here and not loaded, or loaded from a log that
is no longer the directory's (moved out and back), is loaded; one loaded and not held any more is
unloaded, so the coordinator answers NOT_COORDINATOR and the client asks FindCoordinator again.
``sync`` reconciles every partition (at server start, after the topic is created).

Loading replays the partition's records: blocking, so it is called from the server's pool, never
from the event loop.
"""

from __future__ import annotations

import logging
import threading

from node.errors import LogDirOfflineError
from node.groups.config import OFFSETS_TOPIC
from node.groups.coordinator import GroupCoordinator
from node.logdir import LogDir
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import StorageError
from storage.log import Log

log = logging.getLogger(__name__)


class ServedGroups:
    """``coordinator`` loaded with the ``__consumer_offsets`` partitions ``logdir`` holds.
    Thread-safe: the request threads call ``ensure`` concurrently; one reconciliation runs at a
    time, and a request whose partition is loaded from the directory's current log takes no
    lock."""

    def __init__(self, logdir: LogDir, coordinator: GroupCoordinator,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._logdir = logdir
        self.coordinator = coordinator
        self.clock = clock
        self._loaded: dict[int, Log] = {}
        self._lock = threading.Lock()
        self._closed = False

    def partition_for(self, group_id: str) -> int:
        """The partition of ``__consumer_offsets`` holding ``group_id``."""
        return self.coordinator.partition_for(group_id)

    def loaded(self) -> frozenset[int]:
        """The partitions loaded now."""
        return frozenset(self._loaded)

    def ensure(self, group_id: str) -> None:
        """Reconcile the partition of ``group_id`` with the directory (see the module
        docstring); blocking while it loads."""
        partition = self.partition_for(group_id)
        held = self._held(partition)
        if (held is not None and self._loaded.get(partition) is held
                and self.coordinator.is_loaded(partition)):
            return
        with self._lock:
            self._reconcile(partition, self._held(partition))

    def sync(self) -> None:
        """Reconcile every partition: load each one held and not loaded, unload each one loaded
        and not held (every one when the directory is offline)."""
        with self._lock:
            try:
                held = {p for t, p in self._logdir.logs() if t == OFFSETS_TOPIC}
            except LogDirOfflineError:
                held = set()
            for partition in sorted(held | set(self._loaded)):
                self._reconcile(partition, self._held(partition))

    def close(self) -> None:
        """Unload everything and stop the coordinator. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._loaded.clear()
        self.coordinator.close()

    def _held(self, partition: int) -> Log | None:
        try:
            return self._logdir.get_log(OFFSETS_TOPIC, partition)
        except LogDirOfflineError:
            return None

    def _reconcile(self, partition: int, held: Log | None) -> None:
        """Under the lock: bring ``partition`` in line with the directory's ``held`` log."""
        if self._closed:
            return
        current = self._loaded.get(partition)
        if current is held and (held is None or self.coordinator.is_loaded(partition)):
            return
        if current is not None:     # moved, deleted, offline, or dropped after a failed write
            del self._loaded[partition]
            self.coordinator.unload(partition)
            log.info("%s: unloaded the groups of %s-%d", self._logdir.path, OFFSETS_TOPIC,
                     partition)
        if held is None:
            return
        try:
            self.coordinator.load(partition, held)
        except (StorageError, OSError):
            log.warning("%s: cannot load the groups of %s-%d; its groups are not served here",
                        self._logdir.path, OFFSETS_TOPIC, partition, exc_info=True)
            self.coordinator.unload(partition)
            return
        self._loaded[partition] = held
        log.info("%s: loaded the groups of %s-%d", self._logdir.path, OFFSETS_TOPIC, partition)
