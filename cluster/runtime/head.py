"""Finding or starting the Ray cluster a Strata cluster runs on.

* ``connect_ray``: join the Ray cluster at ``address``, or the one already running on this host,
  or start a head inside this process (``ray.init``: it lives as long as this process; the Python
  API's choice, stopped again by ``Cluster.stop``).
* ``start_head_process``: ``ray start --head`` with the venv's ``ray``: a head in processes of its
  own, which outlives the command (the CLI's choice). ``stop_head_process`` stops exactly the
  processes of one head (found by its session directory and GCS address), not ``ray stop``, which
  would end every Ray cluster of the host.

Either way the head declares one resource per log directory and one for the host
(``cluster.naming``), binds the dashboard to ``dashboard_host`` (127.0.0.1 unless asked), and
exports metrics for Prometheus on ``metrics_export_port`` when given. Token authentication stays
as Ray 2.60 sets it (on). Ray turns it on in a driver only when it finds the cluster by itself
(``address="auto"``); ``ensure_token_auth`` does the same for an explicit address, so a driver of
the same user connects either way.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.naming import HOST_RESOURCE_UNITS, dir_resource, host_resource

logger = logging.getLogger(__name__)

METRICS_REPORT_INTERVAL_MS = 10_000
# Ray starts its worker processes at niceness 15 (below everything else on the host); a node
# actor is a broker whose every request hops between threads, and at 15 each hop waits behind
# any busy process: a produce round trip took 20-100 ms beside a busy client instead of 1 ms.
WORKER_NICENESS = 0


def head_system_config(metrics_report_interval_ms: int = METRICS_REPORT_INTERVAL_MS
                       ) -> dict[str, Any]:
    """The ``_system_config`` of every Ray head the project starts: metrics every
    ``metrics_report_interval_ms``, actors at ``WORKER_NICENESS``."""
    return {"metrics_report_interval_ms": metrics_report_interval_ms,
            "worker_niceness": WORKER_NICENESS}
DEFAULT_TEMP_DIR = "/tmp/ray"


def head_resources(log_dirs: Sequence[str], host: str | None = None) -> dict[str, float]:
    resources: dict[str, float] = {dir_resource(d): 1 for d in log_dirs}
    resources[host_resource(host or socket.gethostname())] = HOST_RESOURCE_UNITS
    return resources


def ensure_token_auth() -> None:
    """Send the user's Ray token when there is one and ``RAY_AUTH_MODE`` says nothing (Ray does
    this itself only for a cluster it finds alone; an explicit address, given or in
    ``RAY_ADDRESS``, would fail with ``InvalidAuthToken``)."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:   # another Ray version: its own defaults apply
        return
    setup_logger = logging.getLogger(maybe_enable_token_auth_if_token_available.__module__)
    level = setup_logger.level
    setup_logger.setLevel(logging.ERROR)   # its "token authentication is enabled" banner
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        setup_logger.setLevel(level)


def init_ray(address: str) -> None:
    """``ray.init`` as a quiet driver of the cluster at ``address`` ("auto": the one on this
    host, or ``RAY_ADDRESS``)."""
    import ray

    target = (os.environ.get("RAY_ADDRESS") or address) if address == "auto" else address
    host, sep, port = target.rpartition(":")
    if sep and port.isdigit():   # Ray would retry a dead address for minutes
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as err:
            raise ConnectionError(f"no Ray cluster listens at {target}: {err}") from None
    ensure_token_auth()
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)


def check_joined_cluster(address: str | None) -> None:
    """In a process that already is a Ray driver: an explicit ``address`` of another Ray cluster
    raises ``ClusterNotRunningError`` instead of being ignored (a process joins one Ray cluster for
    good). Addresses are compared by port, as ``localhost``, ``127.0.0.1`` and the host's name all
    reach the same head; ``auto`` and ``ray://`` addresses are not checked."""
    import ray

    from cluster.errors import ClusterNotRunningError

    if not address or address == "auto" or "://" in address:
        return
    joined = ray.get_runtime_context().gcs_address
    if address.rpartition(":")[2] != joined.rpartition(":")[2]:
        raise ClusterNotRunningError(
            f"this process is already a driver of the Ray cluster at {joined} and cannot join "
            f"{address} as well; use one Ray cluster per process", address=address,
            joined=joined)


def connect_ray(log_dirs: Sequence[str], *, address: str | None = None,
                dashboard_host: str = "127.0.0.1", include_dashboard: bool | None = False,
                metrics_export_port: int | None = None,
                metrics_report_interval_ms: int = METRICS_REPORT_INTERVAL_MS,
                init_kwargs: dict[str, Any] | None = None) -> bool:
    """Make this process a Ray driver; returns True when it started the head itself."""
    import ray

    if ray.is_initialized():
        check_joined_cluster(address)
        return False
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address is not None:
        init_ray(address)
        return False
    try:
        init_ray("auto")
        return False
    except ConnectionError:
        pass
    kwargs: dict[str, Any] = {
        "resources": head_resources(log_dirs), "include_dashboard": include_dashboard,
        "dashboard_host": dashboard_host,
        "_system_config": head_system_config(metrics_report_interval_ms),
        **quiet, **(init_kwargs or {})}
    if metrics_export_port is not None:
        kwargs["_metrics_export_port"] = metrics_export_port
    ray.init(**kwargs)
    return True


def ray_binary() -> str:
    return str(Path(sys.executable).parent / "ray")


@dataclass(frozen=True)
class HeadProcess:
    """A Ray head started by ``start_head_process``."""

    address: str                  # the GCS address, "ip:port"
    temp_dir: str | None
    session_dir: str              # <temp dir>/session_<time>_<pid>, named by every head process


def start_head_process(log_dirs: Sequence[str], *, dashboard_host: str = "127.0.0.1",
                       include_dashboard: bool = True, dashboard_port: int | None = None,
                       metrics_export_port: int | None = None, port: int | None = None,
                       temp_dir: str | None = None, num_cpus: int | None = None,
                       extra_args: Sequence[str] = ()) -> HeadProcess:
    """``ray start --head`` in processes of their own (they outlive this one), declaring the
    resources of ``log_dirs`` and this host. ``extra_args`` go to ``ray start`` as they are."""
    command = [ray_binary(), "start", "--head", "--disable-usage-stats",
               f"--resources={json.dumps(head_resources(log_dirs))}",
               f"--dashboard-host={dashboard_host}",
               f"--include-dashboard={'true' if include_dashboard else 'false'}",
               '--system-config=' + json.dumps(head_system_config())]
    for flag, value in (("--metrics-export-port", metrics_export_port), ("--port", port),
                        ("--dashboard-port", dashboard_port), ("--temp-dir", temp_dir),
                        ("--num-cpus", num_cpus)):
        if value is not None:
            command.append(f"{flag}={value}")
    command.extend(extra_args)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise RuntimeError(f"ray start failed ({result.returncode}): "
                           + "\n".join(lines[-15:]))
    address = (Path(temp_dir or DEFAULT_TEMP_DIR) / "ray_current_cluster").read_text().strip()
    return HeadProcess(address, temp_dir, head_session_dir(temp_dir))


def head_session_dir(temp_dir: str | None) -> str:
    """The session directory of the head started last with ``temp_dir``."""
    return os.path.realpath(Path(temp_dir or DEFAULT_TEMP_DIR) / "session_latest")


def head_processes(session_dir: str, gcs_address: str) -> list[Any]:
    """The processes of one Ray head on this host: those naming its session directory or its
    GCS address on their command line, and their descendants (workers, agents)."""
    import psutil

    me = os.getpid()
    roots = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            args = proc.info["cmdline"] or []
        except psutil.Error:
            continue
        if proc.pid != me and any(session_dir in a or a == gcs_address or
                                  a.endswith("=" + gcs_address) for a in args):
            roots.append(proc)
    found = {p.pid: p for p in roots}
    for proc in roots:
        try:
            found.update((c.pid, c) for c in proc.children(recursive=True) if c.pid != me)
        except psutil.Error:
            continue
    return list(found.values())


def stop_head_process(session_dir: str, gcs_address: str, *, grace_s: float = 3.0) -> int:
    """Stop one Ray head (SIGTERM, then SIGKILL after ``grace_s``: gcs_server and raylet
    outwait a SIGTERM for long, and by now the Strata actors have closed their directories);
    returns how many processes it had. Call it after ``ray.shutdown()`` in this process."""
    import psutil

    procs = head_processes(session_dir, gcs_address)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    deadline = time.monotonic() + grace_s
    alive = procs
    while alive:
        alive = [p for p in alive if _running(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    _forget_current_cluster(session_dir, gcs_address)
    return len(procs)


def _forget_current_cluster(session_dir: str, gcs_address: str) -> None:
    """Remove ``ray_current_cluster`` when it names the head just stopped (as ``ray stop`` does),
    so a later ``ray.init()`` starts a new cluster instead of trying to join a dead one."""
    marker = Path(session_dir).parent / "ray_current_cluster"
    try:
        if marker.read_text().strip() == gcs_address:
            marker.unlink()
    except OSError:
        pass


def _running(proc: Any) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE   # a zombie has exited: init reaps it
    except psutil.Error:
        return False


def current_head() -> tuple[str, str]:
    """(session directory, GCS address) of the Ray cluster this process is a driver of."""
    import ray

    node = ray._private.worker._global_node
    return node.get_session_dir_path(), ray.get_runtime_context().gcs_address
