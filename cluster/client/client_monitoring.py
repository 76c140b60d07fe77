"""What the client's monitoring calls gather from every actor at once: ``stats_rows`` (the rows of
``Cluster.stats``: directories, partitions, cleaners), ``worker_statuses`` and ``sample_processes``
(each actor's process measured inside it, ``ProcessSample``). A node or actor that does not
answer is reported as unreachable (stats) or left out (the others), never an error.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from cluster.errors import ActorUnavailableError, UnknownTopicError
from cluster.handles import Handle, lookup
from cluster.naming import COORDINATOR_NAME, is_internal

if TYPE_CHECKING:
    from cluster.status import CleanerStatus, ClusterDescription


@dataclass(frozen=True)
class ProcessSample:
    """One actor's process at the moment of ``Cluster.sample_processes``."""

    role: str                               # "coordinator", "log_dir", "cleaner"
    actor: str
    log_dir: str | None
    host: str
    pid: int
    rss_bytes: int
    uss_bytes: int
    cpu_percent: float
    cpu_seconds: float
    threads: int


def stats_rows(nodes: Mapping[str, Handle], status: CleanerStatus,
               partition_dir: Callable[[str, int], str]) -> list[dict[str, Any]]:
    """``Cluster.stats`` (its docstring states the contract) from the node actors, the
    coordinator's cleaner ``status`` and the client's routes (``partition_dir``)."""
    pendings = {d: h.submit("stats") for d, h in nodes.items()}
    rows: list[dict[str, Any]] = []
    for log_dir, pending in pendings.items():
        try:
            s = pending.result(60)
        except ActorUnavailableError as err:
            rows.append({"kind": "log_dir", "log_dir": log_dir, "online": False,
                         "offline_reason": f"node unreachable: {err}", "partitions": 0})
            continue
        d = dataclasses.asdict(s)
        partitions = d.pop("partitions")
        d.pop("invalid_dirs")
        rows.append({"kind": "log_dir", "log_dir": log_dir, **d,
                     "partitions": len(partitions)})
        rows.extend({"kind": "partition", "log_dir": log_dir, **p,
                     "internal": is_internal(p["topic"])} for p in partitions)
    last_dir = {s.cleaner_id: s.log_dir for s in status.recent}
    for w in status.workers:
        log_dir = None
        if w.topic is not None:
            try:
                log_dir = partition_dir(w.topic, w.partition or 0)
            except UnknownTopicError:
                log_dir = None
        cleans = [s for s in status.recent if s.cleaner_id == w.cleaner_id]
        rows.append({"kind": "cleaner", "log_dir": log_dir or last_dir.get(w.cleaner_id),
                     "cleaning": w.topic is not None, **dataclasses.asdict(w),
                     "recent_cleans": len(cleans),
                     "recent_bytes_read": sum(s.bytes_read for s in cleans),
                     "recent_bytes_written": sum(s.bytes_written for s in cleans)})
    return rows


def worker_statuses(description: ClusterDescription) -> list[Any]:
    """``cluster.cleaning.worker.WorkerStatus`` of every cleaner worker that answers."""
    pendings = [lookup(name, description.namespace).submit("status")
                for name, _ in description.workers]
    out = []
    for pending in pendings:
        try:
            out.append(pending.result(60))
        except ActorUnavailableError:
            continue
    return out


def sample_processes(description: ClusterDescription, interval_s: float) -> list[ProcessSample]:
    """``Cluster.sample_processes`` (its docstring states the contract)."""
    actors = [("coordinator", COORDINATOR_NAME, None)]
    actors += [("log_dir", name, d) for d, name in description.node_names.items()]
    actors += [("cleaner", name, None) for name, _ in description.workers]
    pendings = []
    for role, name, log_dir in actors:
        try:
            handle = lookup(name, description.namespace)
        except ActorUnavailableError:
            continue
        pendings.append((role, name, log_dir,
                         handle.submit("__ray_call__", _sample_process, interval_s)))
    out = []
    for role, name, log_dir, pending in pendings:
        try:
            sample = pending.result(60 + interval_s)
        except ActorUnavailableError:
            continue
        out.append(ProcessSample(role=role, actor=name, log_dir=log_dir, **sample))
    return out


def _sample_process(_actor: object, interval_s: float) -> dict[str, Any]:
    """Runs inside an actor (``__ray_call__``): its own process, measured with psutil."""
    import os
    import socket

    import psutil

    process = psutil.Process(os.getpid())
    before = process.cpu_times()
    time.sleep(interval_s)
    after = process.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    try:
        uss = process.memory_full_info().uss
    except (psutil.AccessDenied, OSError):
        uss = 0
    return {"host": socket.gethostname(), "pid": process.pid,
            "rss_bytes": process.memory_info().rss, "uss_bytes": uss,
            "cpu_percent": 100.0 * used / interval_s if interval_s > 0 else 0.0,
            "cpu_seconds": after.user + after.system, "threads": process.num_threads()}
