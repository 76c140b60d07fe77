"""Finding or starting the Ray cluster a Strata cluster runs on.

* ``connect_ray``: join the Ray cluster at ``address``, or the one already running on this host,
  or start a head inside this process (``ray.init``: it lives as long as this process; the Python
  API's choice, stopped again by ``Cluster.stop``).
* ``start_head_process``: ``ray start --head`` with the venv's ``ray``: a head in processes of its
  own, which outlives the command (the CLI's choice); ``stop_head_process`` is ``ray stop``.

Either way the head declares one resource per log directory and one for the host
(``cluster.naming``), binds the dashboard to ``dashboard_host`` (127.0.0.1 unless asked), and
exports metrics for Prometheus on ``metrics_export_port`` when given. Token authentication stays
as Ray 2.60 sets it (on): drivers of the same user connect without doing anything.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.naming import HOST_RESOURCE_UNITS, dir_resource, host_resource

logger = logging.getLogger(__name__)

METRICS_REPORT_INTERVAL_MS = 10_000


def head_resources(log_dirs: Sequence[str], host: str | None = None) -> dict[str, float]:
    resources: dict[str, float] = {dir_resource(d): 1 for d in log_dirs}
    resources[host_resource(host or socket.gethostname())] = HOST_RESOURCE_UNITS
    return resources


def connect_ray(log_dirs: Sequence[str], *, address: str | None = None,
                dashboard_host: str = "127.0.0.1", include_dashboard: bool | None = False,
                metrics_export_port: int | None = None,
                metrics_report_interval_ms: int = METRICS_REPORT_INTERVAL_MS,
                init_kwargs: dict[str, Any] | None = None) -> bool:
    """Make this process a Ray driver; returns True when it started the head itself."""
    import ray

    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address is not None:
        ray.init(address=address, **quiet)
        return False
    try:
        ray.init(address="auto", **quiet)
        return False
    except ConnectionError:
        pass
    kwargs: dict[str, Any] = {
        "resources": head_resources(log_dirs), "include_dashboard": include_dashboard,
        "dashboard_host": dashboard_host,
        "_system_config": {"metrics_report_interval_ms": metrics_report_interval_ms},
        **quiet, **(init_kwargs or {})}
    if metrics_export_port is not None:
        kwargs["_metrics_export_port"] = metrics_export_port
    ray.init(**kwargs)
    return True


def ray_binary() -> str:
    return str(Path(sys.executable).parent / "ray")


def start_head_process(log_dirs: Sequence[str], *, dashboard_host: str = "127.0.0.1",
                       include_dashboard: bool = True, metrics_export_port: int | None = None,
                       num_cpus: int | None = None) -> None:
    """``ray start --head`` in processes of their own (they outlive this one)."""
    command = [ray_binary(), "start", "--head", "--disable-usage-stats",
               f"--resources={json.dumps(head_resources(log_dirs))}",
               f"--dashboard-host={dashboard_host}",
               f"--include-dashboard={'true' if include_dashboard else 'false'}",
               '--system-config=' + json.dumps(
                   {"metrics_report_interval_ms": METRICS_REPORT_INTERVAL_MS})]
    if metrics_export_port is not None:
        command.append(f"--metrics-export-port={metrics_export_port}")
    if num_cpus is not None:
        command.append(f"--num-cpus={num_cpus}")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ray start failed ({result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")


def stop_head_process(force: bool = False) -> None:
    command = [ray_binary(), "stop"] + (["--force"] if force else [])
    subprocess.run(command, capture_output=True, text=True)


def ray_running() -> bool:
    result = subprocess.run([ray_binary(), "status"], capture_output=True, text=True)
    return result.returncode == 0
