"""``DrillEnv``: the cluster a drill runs against, and what a drill does to its actors.

Either a running Strata cluster (``DrillEnv.connect``: the Ray address and namespace of a cluster
someone else started; the drill only adds and removes its own topics), or one the drill starts for
itself (``DrillEnv.start``: its own namespace and directories, on the Ray cluster at ``address``,
on the Ray cluster this process already joined, or on a new local Ray head that the drill stops
again). ``close`` undoes what the drill started, and nothing else.

Node handles are looked up by name and looked up again after an actor was replaced (a restart of
the whole cluster kills actors for good and starts new ones under the same names).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ops.drills import inject
from ops.drills.ledger import LogRecord

logger = logging.getLogger(__name__)

FAST = {"log.cleaner.backoff.ms": 100, "log.cleaner.dedupe.buffer.size": 4 << 20,
        "log.cleaner.uncleanable.retry.backoff.ms": 200,
        "log.flush.offset.checkpoint.interval.ms": 500}
_ids = itertools.count()


class DrillTimeout(AssertionError):
    """A condition a drill waits for did not come true in time (the drill fails with it)."""


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition",
             interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something true; errors count as not yet (an actor
    restarting) until the timeout, when the last one is raised as the cause."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = condition()
            last = None
        except Exception as err:  # noqa: BLE001 - asked again until the deadline
            value, last = None, err
        if value:
            return value
        if time.monotonic() > deadline:
            raise DrillTimeout(f"{what}: not reached within {timeout:.0f} s"
                               + (f" (last error: {type(last).__name__}: {last})" if last else ""))
        time.sleep(interval)


class DrillEnv:
    def __init__(self, cluster: Any, *, started: bool, owns_ray: bool, address: str | None,
                 config: dict[str, Any] | None = None) -> None:
        self.cluster = cluster
        self.started = started
        self.owns_ray = owns_ray
        self.address = address
        self.config = dict(config or {})
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.topics: list[str] = []

    # ---- getting a cluster -------------------------------------------------------------------
    @classmethod
    def start(cls, log_dirs: Sequence[str | Path], *, address: str | None = None,
              cleaners: int = 1, config: dict[str, Any] | None = None,
              namespace: str | None = None) -> DrillEnv:
        import ray

        from cluster import Cluster
        from cluster.runtime.head import head_resources, head_system_config, init_ray

        dirs = [os.path.abspath(d) for d in log_dirs]
        owns = False
        if not ray.is_initialized():
            if address is not None:
                # as the cluster commands join it: with the user's Ray token (an explicit
                # address gets none from Ray itself) and a quick error for a dead address
                init_ray(address)
            else:
                # a head of our own (never someone else's cluster found by "auto")
                ray.init(num_cpus=2, include_dashboard=False, resources=head_resources(dirs),
                         logging_level=logging.WARNING, log_to_driver=False,
                         _system_config=head_system_config())
                owns = True
        settings = {**FAST, **(config or {})}
        ns = namespace or f"strata-drill-{os.getpid()}-{next(_ids)}-{uuid.uuid4().hex[:6]}"
        try:
            cluster = Cluster.start(log_dirs=dirs, cleaners=cleaners, config=settings,
                                    namespace=ns, address=address)
        except BaseException:
            if owns:
                ray.shutdown()
            raise
        return cls(cluster, started=True, owns_ray=owns, address=address, config=settings)

    @classmethod
    def connect(cls, address: str, namespace: str) -> DrillEnv:
        from cluster import Cluster

        cluster = Cluster.connect(address, namespace=namespace)
        return cls(cluster, started=False, owns_ray=False, address=address,
                   config=dict(cluster.description.properties))

    def close(self, keep_topics: bool = False) -> None:
        """Stop what the drill started (its cluster, its Ray head), or delete its topics from a
        cluster it only joined."""
        try:
            if self.started:
                self.cluster.stop()
            elif not keep_topics:
                for topic in self.topics:
                    try:
                        self.cluster.delete_topic(topic)
                    except Exception:  # noqa: BLE001 - best effort on the way out
                        logger.warning("cannot delete drill topic %s", topic, exc_info=True)
                self.cluster.close()
        finally:
            if self.owns_ray:
                import ray
                ray.shutdown()

    def replace_cluster(self, cluster: Any) -> None:
        """Use ``cluster`` from now on (the same one started again: ``restart-all``)."""
        self.cluster = cluster
        with self._lock:
            self._handles.clear()

    # ---- names and handles -------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self.cluster.namespace

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return tuple(self.cluster.description.log_dirs)

    def describe(self) -> dict[str, Any]:
        d = self.cluster.description
        return {"namespace": d.namespace, "log_dirs": list(d.log_dirs),
                "cleaners": len(d.workers), "started_by_drill": self.started,
                "address": self.address}

    def node(self, log_dir: str) -> Any:
        from cluster.handles import lookup
        from cluster.naming import node_actor_name

        with self._lock:
            handle = self._handles.get(log_dir)
        if handle is None:
            handle = lookup(node_actor_name(log_dir), self.namespace)
            with self._lock:
                self._handles[log_dir] = handle
        return handle

    def forget(self, log_dir: str) -> None:
        with self._lock:
            self._handles.pop(log_dir, None)

    def dir_of(self, topic: str, partition: int) -> str:
        return self.cluster.partition_dir(topic, partition)

    def node_for(self, topic: str, partition: int) -> Any:
        return self.node(self.dir_of(topic, partition))

    def forget_partition(self, topic: str, partition: int) -> None:
        from cluster.errors import ActorUnavailableError

        try:
            self.forget(self.dir_of(topic, partition))
        except ActorUnavailableError:
            pass   # no route to be had now (the coordinator restarting): the next send asks

    def follow_partition(self, topic: str, partition: int, error: Exception) -> None:
        """A node said the partition is not there (it moved): ask where it is now."""
        self.cluster.refresh_route(topic, partition, error)

    def in_actor(self, handle: Any, fn: Callable[..., Any], *args: Any,
                 timeout: float | None = 60.0) -> Any:
        """Run ``fn(actor, *args)`` inside the actor's process (``ops.drills.inject``)."""
        from cluster.handles import RayPending

        return RayPending(handle.actor.__ray_call__.remote(fn, *args), handle.name).result(timeout)

    def node_pid(self, log_dir: str) -> int:
        return int(self.node(log_dir).call("info", timeout=60)["pid"])

    def coordinator(self) -> Any:
        from cluster.handles import lookup
        from cluster.naming import COORDINATOR_NAME

        return lookup(COORDINATOR_NAME, self.namespace)

    def worker(self, name: str) -> Any:
        from cluster.handles import lookup

        return lookup(name, self.namespace)

    def worker_names(self) -> list[str]:
        return [name for name, _ in self.cluster.description.workers]

    # ---- faults from outside -----------------------------------------------------------------
    def kill_node(self, log_dir: str) -> int:
        """kill -9 the node actor's process (Ray restarts it); returns the killed pid."""
        victim = self.node_pid(log_dir)
        os.kill(victim, signal.SIGKILL)
        return victim

    def wait_node_back(self, log_dir: str, old_pid: int, timeout: float = 120.0) -> int:
        """Wait until a new process serves ``log_dir`` and finished loading; returns its pid."""
        new = wait_for(lambda: (p := self.node_pid(log_dir)) != old_pid and p,
                       timeout, f"node of {log_dir} restarted")

        def loaded() -> bool:
            progress = self.node(log_dir).call("load_progress", timeout=30)
            return progress is not None and progress.done
        wait_for(loaded, timeout, f"node of {log_dir} loaded")
        return int(new)

    def stats_of(self, log_dir: str) -> Any:
        return self.node(log_dir).call("stats", timeout=30)

    # ---- topics and reading back ---------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, config: dict[str, Any]) -> Any:
        info = self.cluster.create_topic(name, partitions=partitions, config=config)
        self.topics.append(name)
        return info

    def read(self, topic: str, partition: int) -> list[LogRecord]:
        """Every record of the partition, through its node (retried while it restarts)."""
        def attempt() -> list[LogRecord]:
            return [LogRecord(r.offset, r.key, r.value)
                    for r in self.cluster.consume(topic, partition)]
        return wait_for(lambda: (attempt(),), 120, f"reading {topic}-{partition}")[0]

    def partition_files(self, topic: str, partition: int) -> list[str]:
        from storage import files

        path = Path(self.dir_of(topic, partition)) / files.partition_dir_name(topic, partition)
        return sorted(os.listdir(path)) if path.is_dir() else []

    def temp_files(self) -> list[str]:
        """``.cleaned`` and ``.swap`` files in any partition of the drill's topics."""
        from storage import files

        found = []
        for log_dir in self.log_dirs:
            for entry in Path(log_dir).iterdir():
                if not entry.is_dir() or not any(entry.name.startswith(t + "-")
                                                 for t in self.topics):
                    continue
                found += [str(entry / n) for n in os.listdir(entry)
                          if n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX))]
        return sorted(found)

    def load_results(self, log_dir: str) -> dict[str, dict[str, int]]:
        return self.in_actor(self.node(log_dir), inject.load_results)
