"""How Spark's Python processes reach the Strata cluster.

Spark runs data-source code in Python processes of its own: planner workers (schema, partitions,
the writer's setup and commit) and executor workers (reads and writes), none of them the driver
script. Each joins the Ray cluster as a driver of its own, once per process, and finds the actors
by name (``Cluster.connect``): RayDP does not support Spark 4 (reference/ray-spark.md §3).

The address comes from the source's ``address`` option: ``auto`` (the default) means the
``RAY_ADDRESS`` environment variable when set, else the Ray cluster running on this host.
``cluster.spark.session.local_session(ray_address=...)`` sets ``RAY_ADDRESS`` for the JVM, so every
Python worker it starts joins that cluster. A host:port that does not answer fails in seconds
(``ClusterNotRunningError``) instead of Ray's minutes of retries.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import sys
import threading

from cluster.client.client import Cluster
from cluster.errors import ClusterNotRunningError
from cluster.runtime.head import ensure_token_auth

PROBE_TIMEOUT_S = 5.0
_lock = threading.Lock()
_warmed = False
_frozen: tuple[bool, bool] | None = None     # (kernels warmed, Ray joined) at the last freeze


def resolve_address(address: str | None) -> str:
    """``auto`` (or nothing) -> ``RAY_ADDRESS`` when set, else ``auto``."""
    if not address or address == "auto":
        return os.environ.get("RAY_ADDRESS") or "auto"
    return address


def ensure_ray(address: str | None) -> None:
    """Make this process a Ray driver of the cluster at ``address`` (once per process)."""
    import ray

    with _lock:
        target = resolve_address(address)
        if ray.is_initialized():
            if address and address != "auto":
                _check_same_cluster(target, ray.get_runtime_context().gcs_address)
            return
        if target != "auto" and "://" not in target:
            _probe(target)
        ensure_token_auth()   # Ray sends no token of its own for an explicit address
        on_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(address=target, log_to_driver=False, logging_level=logging.ERROR)
        except ConnectionError as err:
            raise ClusterNotRunningError(
                f"no Ray cluster at {target}: {err}; start a Strata cluster first, or give its "
                f"address with .option('address', 'host:port')", address=target) from None
        _restore_sigterm(on_sigterm)


def _restore_sigterm(handler: object) -> None:
    """Give SIGTERM back the handling it had before ``ray.init``. Ray's core worker installs a
    failure-signal handler that prints a stack dump to the console on SIGTERM, and Spark ends
    its Python workers (an idle one, a stopped query's planner) with SIGTERM: each ending looked
    like a crash. The worker ends as Spark meant it to, silently."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, handler)


def connect(address: str | None, namespace: str, *, kernels: bool = True) -> Cluster:
    """The Strata cluster of ``namespace`` (``ClusterNotRunningError`` when there is none).
    ``kernels=False`` (a planner, which asks offsets and decodes nothing) loads no numba kernel:
    a streaming query's planner is a new Python process per query, whose start the query waits
    for."""
    ensure_ray(address)
    if kernels:
        warm_up()
    else:
        settle_heap()
    return Cluster.connect(address=None, namespace=namespace)


def _check_same_cluster(wanted: str, joined: str) -> None:
    """A process joins one Ray cluster for good: an ``address`` option naming another fails."""
    if "://" in wanted or wanted.rpartition(":")[2] == joined.rpartition(":")[2]:
        return
    _probe(wanted)
    raise ClusterNotRunningError(
        f"this Spark Python worker already joined the Ray cluster at {joined} and cannot join "
        f"{wanted} as well; use one Strata cluster per Spark application", address=wanted)


def _probe(address: str) -> None:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), PROBE_TIMEOUT_S):
            pass
    except ValueError:
        raise ClusterNotRunningError(f"Ray address {address!r} is not host:port",
                                     address=address) from None
    except OSError as err:
        raise ClusterNotRunningError(
            f"no Ray cluster answers at {address} ({err.strerror or err}); start a Strata "
            f"cluster first, or give its address with .option('address', 'host:port')",
            address=address) from None


def warm_up() -> None:
    """Load the numba kernels once per process, before the first timed batch; then settle the
    heap (``settle_heap``)."""
    global _warmed
    if not _warmed:
        from cluster.client.partitioner import warm_up as warm_partitioner
        from cluster.spark.kernels import warm_up as warm_gather
        from storage.kernels import warm_up as warm_storage

        warm_storage()
        warm_partitioner()
        warm_gather()
        _warmed = True
    settle_heap()


def settle_heap() -> None:
    """Move what this process has loaded for good (modules, numba's compiled kernels, Ray's
    driver state) out of the garbage collector's sight, once after each of those is loaded.

    A reused Spark Python worker runs ``gc.collect()`` after every task (``pyspark.daemon``); a
    full collection walks every tracked object, and with Ray, numba and pyarrow loaded that is
    about 0.1 s of CPU per task: more than decoding a task's rows. ``gc.freeze()`` (after one
    last collection, so no garbage is frozen) leaves those objects out of every later
    collection; what tasks allocate is collected as before."""
    global _frozen
    ray = sys.modules.get("ray")
    state = (_warmed, bool(ray is not None and ray.is_initialized()))
    if state == _frozen:
        return
    gc.collect()
    gc.freeze()
    _frozen = state
