"""Restarting the node actor of one log directory (``Cluster.restart_node``, ``strata log-dirs
restart``): how an operator brings back a directory that went offline (a full disk, a lost
permission) once the fault is repaired, while the other directories keep serving.

Kafka has no such verb: a failed log directory stays offline until its broker restarts, and a
broker serves every directory. Here each directory has a process of its own, so restarting that
one process is the broker restart for that directory alone. The steps:

1. ask the node to close its directory (clean shutdown of an online directory: flush, both
   checkpoints, ``.kafka_cleanshutdown``, so the reload recovers nothing; an offline directory
   only lets its files go); a node that does not answer is not waited for;
2. end its process (``RayHandle.kill_and_restart``); Ray starts it again, and the new process
   takes ``.lock`` and loads the directory: after an offline, without the clean-shutdown marker,
   so every log is recovered from its checkpointed recovery point, as after a crash;
3. wait until a process with another pid answers and its load is done, and, in a cluster that
   serves Kafka, until its broker listens again or says why it cannot (a port taken, a TLS key
   store it cannot read).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from cluster.errors import ActorUnavailableError, NodeRestartError
from cluster.handles import RayHandle

POLL_S = 0.2
CLOSE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class NodeRestart:
    """What a restart did: the pids before and after, whether the directory serves again
    (``online``; when not, ``offline_reason`` says why: the fault is still there), the
    partitions its load skipped (``not_loaded``: "name: error: reason", e.g. a partition whose
    files are still unwritable; the directory serves the others), whether it had been closed
    cleanly before (then the load recovered nothing), what the load recovered, and how long the
    whole restart took. In a cluster serving Kafka, ``kafka_broker`` is the broker's advertised
    "host:port" once it listens again, ``kafka_error`` why it does not. ``serving`` is online
    with every partition loaded and, in such a cluster, the broker listening."""

    log_dir: str
    old_pid: int | None
    new_pid: int
    online: bool
    offline_reason: str | None
    closed_cleanly: bool
    recovered_segments: int
    truncated_bytes: int
    partitions: int
    not_loaded: tuple[str, ...]
    elapsed_s: float
    kafka_broker: str | None = None
    kafka_error: str | None = None

    @property
    def serving(self) -> bool:
        return self.online and not self.not_loaded and self.kafka_error is None


def restart_node(node: RayHandle, log_dir: str, timeout_s: float = 300.0) -> NodeRestart:
    """Restart the node actor of ``log_dir`` (steps in the module docstring); returns once the
    new process has loaded the directory. ``NodeRestartError`` when that takes longer than
    ``timeout_s``."""
    began = time.monotonic()
    deadline = began + timeout_s
    old_pid = _pid(node)
    closed_cleanly = False
    if old_pid is not None:
        try:
            closed_cleanly = bool(node.call("close", timeout=CLOSE_TIMEOUT_S))
        except Exception:  # noqa: BLE001 - an offline or stuck directory is restarted anyway
            closed_cleanly = False
    node.kill_and_restart()
    new_pid = _wait(lambda: (p := _pid(node)) is not None and p != old_pid and p, deadline,
                    log_dir, "its process did not restart")
    _wait(lambda: _loaded(node), deadline, log_dir, "its directory did not finish loading")
    stats = node.call("stats", timeout=60)
    loads = _load_results(node)
    broker, broker_error = _broker(node, deadline) if stats.online else (None, None)
    return NodeRestart(
        log_dir=log_dir, old_pid=old_pid, new_pid=int(new_pid), online=bool(stats.online),
        offline_reason=stats.offline_reason, closed_cleanly=closed_cleanly,
        recovered_segments=sum(int(r.get("recovered_segments", 0)) for r in loads),
        truncated_bytes=sum(int(r.get("truncated_bytes", 0)) for r in loads),
        partitions=stats.partitions_count,
        not_loaded=tuple(f"{p.name}: {p.error}: {p.reason}" for p in stats.problems),
        elapsed_s=time.monotonic() - began, kafka_broker=broker, kafka_error=broker_error)


def _broker(node: RayHandle, deadline: float) -> tuple[str | None, str | None]:
    """The restarted broker's "host:port" once it listens, or why it does not (None, None in a
    cluster without Kafka listeners). It starts by itself once the directory has loaded."""
    while True:
        configured, endpoint, failure = node.call("kafka_state", timeout=30)
        if not configured:
            return None, None
        if endpoint is not None:
            return f"{endpoint[1]}:{endpoint[2]}", None
        if failure is not None:
            return None, failure
        if time.monotonic() >= deadline:
            return None, "its Kafka broker did not start before the restart's timeout"
        time.sleep(POLL_S)


def _pid(node: RayHandle) -> int | None:
    try:
        return int(node.call("info", timeout=30)["pid"])
    except ActorUnavailableError:
        return None


def _loaded(node: RayHandle) -> bool:
    try:
        progress = node.call("load_progress", timeout=30)
    except ActorUnavailableError:
        return False
    return progress is not None and bool(progress.done)


def _load_results(node: RayHandle) -> list[dict[str, Any]]:
    try:
        return list(node.call("__ray_call__", _loaded_logs, timeout=60))
    except Exception:  # noqa: BLE001 - the counts are extra information
        return []


def _loaded_logs(actor: Any) -> list[dict[str, Any]]:
    """Runs inside the node actor (``__ray_call__``): what each log's load recovered."""
    directory = actor.log_dir
    if not directory.online:
        return []
    return [{"recovered_segments": lg.load_result.recovered_segments,
             "truncated_bytes": lg.load_result.truncated_bytes}
            for lg in directory.logs().values()]


def _wait(condition: Callable[[], Any], deadline: float, log_dir: str, what: str) -> Any:
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise NodeRestartError(f"the node of log directory {log_dir} did not come back: "
                                   f"{what}", log_dir=log_dir)
        time.sleep(POLL_S)


__all__ = ["NodeRestart", "restart_node"]
