"""Where a client sends each partition's calls: ``Routes`` caches partition -> log directory per
topic (asked of the coordinator on a miss), and follows a partition that moved or was re-created.

A node that no longer holds a partition answers ``PartitionMovedError`` (naming the directory it
went to, when it knows) or ``UnknownPartitionError``; ``Routes.call`` then forgets the route,
asks again (the error's target, else the coordinator, which asks every node) and retries, with a
short backoff, for ``MOVED_RETRY_S``. Nothing is appended to a stale copy: the node refuses.
``move_partition`` moves a partition between directories (Kafka's alterReplicaLogDirs) and
records its new route.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cluster.errors import ActorUnavailableError, UnknownTopicError
from cluster.handles import Handle
from cluster.naming import abs_dir
from node.errors import MoveRefusedError, PartitionMovedError, UnknownPartitionError
from storage import files
from storage.errors import StorageError

if TYPE_CHECKING:
    from node.mover import MoveResult, MoveStatus

MOVED_RETRY_S = 60.0    # how long a call follows a moving partition before giving up


class Routes:
    """The partition -> directory routes of one client, and calls that follow them.

    Contract: ``partition_dir`` answers from the cache, asking the coordinator only for a topic
    or partition it does not know; ``UnknownTopicError`` when the cluster has no such partition.
    ``call`` runs a method on the partition's node and retries on the partition's new node when
    the node says it moved, until ``MOVED_RETRY_S``; any other error is the caller's."""

    def __init__(self, coordinator: Handle, nodes: Mapping[str, Handle],
                 missing_dirs: Iterable[str] = ()) -> None:
        """``missing_dirs``: known directories the cluster was started without (named when a
        partition is not found: it may live there)."""
        self._coordinator = coordinator
        self._nodes = nodes
        self._missing = sorted(missing_dirs)
        self._routes: dict[str, dict[int, str]] = {}

    def fetch(self, topic: str) -> dict[int, str]:
        """The routes of ``topic`` as the coordinator has them now (cached)."""
        routes = self._coordinator.call("routes", topic, timeout=60)[topic]
        self._routes[topic] = routes
        return routes

    def remember(self, topic: str, routes: Mapping[int, str]) -> None:
        self._routes[topic] = dict(routes)

    def forget(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def partition_dir(self, topic: str, partition: int) -> str:
        """The log directory holding ``topic``-``partition``. A partition number that is not an
        int32 >= 0 raises ``InvalidTopicError`` (every per-partition call checks it here)."""
        partition = files.validate_partition(partition, topic)
        routes = self._routes.get(topic)
        if routes is None or partition not in routes:
            routes = self.fetch(topic)
        if partition not in routes:
            note = (f" (the log directories {', '.join(self._missing)} are missing from this "
                    "start: it may live there)" if self._missing else "")
            raise UnknownTopicError(f"the cluster has no partition {topic}-{partition}{note}",
                                    topic=topic, partition=partition)
        return routes[partition]

    def node_of(self, topic: str, partition: int) -> Handle:
        return self._nodes[self.partition_dir(topic, partition)]

    def call(self, topic: str, partition: int, method: str, *args: Any, timeout: float = 60,
             deadline_s: float = MOVED_RETRY_S) -> Any:
        """``method`` on the node of ``topic``-``partition``, following the partition when the
        node answers that it moved (``PartitionMovedError``) or does not hold it: the route is
        asked again and the call retried until ``deadline_s``."""
        give_up = time.monotonic() + deadline_s
        backoff = 0.005
        while True:
            try:
                return self.node_of(topic, partition).call(method, *args, timeout=timeout)
            except (PartitionMovedError, UnknownPartitionError) as err:
                if time.monotonic() > give_up:
                    raise
                self.reroute(topic, partition, err)
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.05)

    def reroute(self, topic: str, partition: int, err: StorageError) -> None:
        """Forget the route a node refused: to the directory it moved to when the node says,
        else as the coordinator finds it by asking every node."""
        target = getattr(err, "target_dir", None)
        if target is not None and abs_dir(target) in self._nodes:
            self._routes.setdefault(topic, {})[partition] = abs_dir(target)
            return
        try:
            routes = self._coordinator.call("refresh_routes", topic, timeout=60)[topic]
        except (UnknownTopicError, ActorUnavailableError):
            return   # no node lists it this moment (between a move's commit and its
            #          promotion), or the coordinator is restarting: ask again next try
        self._routes[topic] = routes

    def move_partition(self, topic: str, partition: int, target_dir: str, namespace: str, *,
                       timeout_s: float | None = None) -> MoveResult:
        """``Cluster.move_partition`` (its docstring states the contract)."""
        partition = files.validate_partition(partition, topic)
        target = abs_dir(target_dir)
        if target not in self._nodes:
            raise MoveRefusedError(
                f"{target_dir} is not a log directory of this cluster (namespace "
                f"{namespace}: {', '.join(sorted(self._nodes))})", topic=topic,
                partition=partition, target_dir=target_dir, reason="unknown-dir")
        routes = self._coordinator.call("routes", topic, timeout=60)[topic]   # not the cache
        if partition not in routes:
            raise UnknownTopicError(f"the cluster has no partition {topic}-{partition}",
                                    topic=topic, partition=partition)
        source = routes[partition]
        if source == target:
            raise MoveRefusedError(f"partition {topic}-{partition} is already in {target}",
                                   topic=topic, partition=partition, target_dir=target,
                                   reason="same-dir")
        result = self._nodes[target].call("move_in", topic, partition, source,
                                          timeout=timeout_s)
        self._routes.setdefault(topic, {})[partition] = target
        try:
            self._coordinator.call("partition_moved", topic, partition, target, timeout=60)
        except ActorUnavailableError:
            pass   # a restarted coordinator asks the nodes, which know where it is
        return result

    def move_status(self) -> list[MoveStatus]:
        """``Cluster.move_status``: the moves in progress of every node that answers."""
        pendings = [h.submit("move_status") for _, h in sorted(self._nodes.items())]
        found: list[MoveStatus] = []
        for pending in pendings:
            try:
                found.extend(pending.result(60))
            except (ActorUnavailableError, StorageError):
                continue
        return found
