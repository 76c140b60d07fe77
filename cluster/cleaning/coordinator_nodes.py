"""``NodeViews``: the coordinator's view of the node actors (one per log directory): the snapshots of
their compacted logs from the last poll, which directories are offline or were unreachable, which
still need the start-up round, and the calls the cleaning loop makes to them. Also
``NodeCheckpoint``, the ``cleaner.checkpoints.CheckpointFileLike`` of a directory a node owns.

A poll (``poll``) asks every node that had its start-up round for ``cleaning_snapshots`` at once
and then waits for each answer: an offline directory is reported (``on_offline``), a node that
does not answer is skipped this round, and an offline directory that answers is online again
(``on_online``). The start-up round (``start_up``) has each node remove the ``.cleaned`` files
dead cleaners left; a node that cannot do it now is asked again at the next round.

Thread-safe: ``_lock`` guards the tables and is never held across a call to a node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cleaner.checkpoints import CheckpointChange
from cluster.metrics.consumer_lag import CommittedOffset, ConsumerLag, consumer_lags
from cluster.errors import ActorUnavailableError
from cluster.handles import Handle
from cluster.naming import abs_dir
from storage.errors import CheckpointError, LogDirOfflineError
from storage.files import TopicPartition

if TYPE_CHECKING:   # an annotation only: the coordinator's process loads no numba
    from node.snapshot import LogSnapshot

logger = logging.getLogger("cluster.cleaning.coordinator")

LAG_TIMEOUT_S = 10.0


class NodeCheckpoint:
    """The ``cleaner.checkpoints.CheckpointFileLike`` of a directory owned by a node actor."""

    def __init__(self, handle: Handle, timeout: float) -> None:
        self._handle = handle
        self._timeout = timeout

    def read(self) -> dict[TopicPartition, int]:
        return self._translate("read_cleaner_checkpoint")

    def update(self, change: CheckpointChange) -> dict[TopicPartition, int]:
        return self._translate("update_cleaner_checkpoint", change)

    def _translate(self, method: str, *args: Any) -> Any:
        try:
            return self._handle.call(method, *args, timeout=self._timeout)
        except LogDirOfflineError as err:   # the manager's policy: OSError = directory failed
            raise OSError(f"{self._handle.name}: {err}") from err
        except ActorUnavailableError as err:   # transient: logged by the manager, not offline
            raise CheckpointError(f"{self._handle.name} unreachable: {err}") from err


class NodeViews:
    """The nodes of ``nodes`` (log directory -> handle), called with ``timeout`` seconds.
    ``on_offline(log_dir)`` and ``on_online(log_dir)`` run when a directory goes offline or
    comes back (outside the lock)."""

    def __init__(self, nodes: Mapping[str, Handle], timeout: float, *,
                 on_offline: Callable[[str], None], on_online: Callable[[str], None]) -> None:
        self.nodes = {abs_dir(d): h for d, h in nodes.items()}
        self._timeout = timeout
        self._on_offline = on_offline
        self._on_online = on_online
        self._lock = threading.Lock()
        self._snapshots: dict[TopicPartition, LogSnapshot] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._offline: dict[str, str] = {}
        self._unreachable: set[str] = set()
        self._needs_startup: set[str] = set(self.nodes)
        self._polls = 0

    def checkpoint(self, log_dir: str) -> NodeCheckpoint:
        return NodeCheckpoint(self.nodes[log_dir], self._timeout)

    # ---- the loop's calls --------------------------------------------------------------------
    def start_up(self) -> None:
        """Have every node still waiting for it remove its ``.cleaned`` files."""
        with self._lock:
            waiting = sorted(self._needs_startup)
        for log_dir in waiting:
            try:
                self.nodes[log_dir].call("remove_cleaned_files", timeout=self._timeout)
            except LogDirOfflineError as err:
                self.mark_offline(log_dir, str(err))
            except ActorUnavailableError as err:
                logger.info("node of %s not reachable yet: %s", log_dir, err)
                continue
            with self._lock:
                self._needs_startup.discard(log_dir)

    def remove_cleaned(self, log_dir: str, tp: TopicPartition) -> None:
        """Have the node remove the ``.cleaned`` files of a failed clean of ``tp`` (at its next
        start-up round if it cannot now)."""
        try:
            self.nodes[log_dir].call("remove_cleaned_files", tp.topic, tp.partition,
                                     timeout=self._timeout)
        except Exception as err:  # noqa: BLE001 - done again when the node is back
            logger.warning("cannot remove .cleaned files of %s now (%s); the node does it at the "
                           "next start-up round", tp, err)
            with self._lock:
                self._needs_startup.add(log_dir)

    def poll(self) -> None:
        """Refresh the snapshots of every node's compacted logs (see the module docstring)."""
        with self._lock:
            skip = set(self._needs_startup)
        asked = {d: h.submit("cleaning_snapshots") for d, h in self.nodes.items()
                 if d not in skip}
        snapshots: dict[TopicPartition, LogSnapshot] = {}
        unreachable = set(skip)
        for log_dir, pending in asked.items():
            try:
                found = pending.result(self._timeout)
            except LogDirOfflineError as err:
                self.mark_offline(log_dir, str(err))
                continue
            except Exception as err:  # noqa: BLE001 - a node restarting; try next round
                logger.info("node of %s unreachable this round: %s", log_dir, err)
                unreachable.add(log_dir)
                continue
            with self._lock:
                was_offline = self._offline.pop(log_dir, None) is not None
            if was_offline:
                self._on_online(log_dir)
                logger.info("log directory %s is online again", log_dir)
            for snapshot in found:
                snapshots[snapshot.topic_partition] = snapshot
        with self._lock:
            self._snapshots = snapshots
            self._unreachable = unreachable
            self._polls += 1
            for tp, snap in snapshots.items():
                self._dir_of[tp] = abs_dir(snap.dir.parent)

    def consumer_lags(self) -> list[ConsumerLag]:
        """Every group's lag on every partition (``cluster.metrics.consumer_lag``): the committed
        offsets of every node's group coordinator, then the log end offsets of those partitions from
        every node. A node offline, unreachable or not answering within ``LAG_TIMEOUT_S``
        contributes nothing this round."""
        timeout = min(self._timeout, LAG_TIMEOUT_S)
        online = {d: h for d, h in self.nodes.items() if d not in self.offline()}
        committed: list[CommittedOffset] = []
        for found in self._ask_all(online, "committed_offsets", timeout):
            committed.extend(found)
        if not committed:
            return []
        partitions = sorted({(c.topic, c.partition) for c in committed})
        ends: dict[tuple[str, int], int] = {}
        for found in self._ask_all(online, "log_end_offsets", timeout, partitions):
            ends.update(found)
        return consumer_lags(committed, ends)

    @staticmethod
    def _ask_all(nodes: Mapping[str, Handle], method: str, timeout: float,
                 *args: Any) -> list[Any]:
        """The answers of the nodes that answered ``method`` within ``timeout`` seconds."""
        asked = {d: h.submit(method, *args) for d, h in nodes.items()}
        answers = []
        for log_dir, pending in asked.items():
            try:
                answers.append(pending.result(timeout))
            except Exception as err:  # noqa: BLE001 - a metric is never worth a failed round
                logger.info("node of %s gave no %s this round: %s", log_dir, method, err)
        return answers

    def delete_old_segments(self, tps_by_dir: Mapping[str, list[TopicPartition]]) -> None:
        """Retention of compacted logs, one call per directory (one failing never stops the
        others)."""
        for log_dir, tps in tps_by_dir.items():
            try:
                self.nodes[log_dir].call("delete_old_segments",
                                         [(tp.topic, tp.partition) for tp in tps],
                                         timeout=self._timeout)
            except Exception as err:  # noqa: BLE001 - logged; retried at the next interval
                logger.warning("retention of compacted logs in %s failed: %s", log_dir, err)

    def snapshot(self, tp: TopicPartition) -> LogSnapshot | None:
        """A fresh snapshot of ``tp`` from its node; None when no poll has seen it yet."""
        with self._lock:
            log_dir = self._dir_of.get(tp)
        if log_dir is None:
            return None
        return self.nodes[log_dir].call("snapshot", tp.topic, tp.partition,
                                        timeout=self._timeout)

    # ---- directories -------------------------------------------------------------------------
    def mark_offline(self, log_dir: str, reason: str) -> None:
        log_dir = abs_dir(log_dir)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline[log_dir] = reason
        logger.error("log directory %s is offline: %s", log_dir, reason)
        self._on_offline(log_dir)

    # ---- views -------------------------------------------------------------------------------
    @property
    def polls(self) -> int:
        with self._lock:
            return self._polls

    def snapshots(self) -> dict[TopicPartition, LogSnapshot]:
        """The compacted logs of the last poll."""
        with self._lock:
            return dict(self._snapshots)

    def logs_for(self, host: str) -> dict[TopicPartition, LogSnapshot]:
        """The compacted logs of the last poll on ``host`` (every host: ``""``)."""
        with self._lock:
            return {tp: s for tp, s in self._snapshots.items()
                    if not host or self.nodes[abs_dir(s.dir.parent)].host in ("", host)}

    def offline(self) -> dict[str, str]:
        with self._lock:
            return dict(self._offline)

    def unreachable(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._unreachable))
