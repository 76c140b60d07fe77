"""Bringing a Strata cluster up on a Ray cluster, and down again.

``deploy``: one node actor per directory (loading starts at once, in the background), the
cleaner workers — ``log.cleaner.threads`` of them on every host that holds a directory, placed
with the node actors' host, known beforehand from the Ray nodes' resources — and the coordinator,
which gets the whole description, directories' identity included. When every directory is on
this process's Ray node (``cluster.runtime.hosts.on_this_node``) their identity files are read
here, before any actor exists, and the coordinator starts with the others: all started at once,
so a start waits for the slowest actor's process, not for a node's and then the coordinator's.
Otherwise the node actors read them, and the coordinator follows. Actors that
already exist under their names are reused, so deploying a running cluster again only adds what is
missing. ``wait_loaded`` polls every node's load progress; ``serve_brokers`` starts the
directories' Kafka brokers (``listeners``: ``cluster.kafka.listeners``). ``shutdown`` stops the
coordinator's loop and the cleans in flight, closes every directory cleanly (the next start
recovers nothing) and ends the actors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from cluster.runtime import actors
from cluster.runtime.hosts import host_of_dir, on_this_node
from cluster.config import BrokerConfig
from cluster.runtime.coordinator_service import worker_specs
from cluster.errors import ActorUnavailableError, ListenerBindError
from cluster.metadata.dir_identity import (IdentityPlan, duplicate_partition_error,
                                           duplicate_partitions, plan_identity)
from cluster.handles import RayHandle, lookup
from cluster.kafka.listeners import directory_properties
from cluster.naming import COORDINATOR_NAME, abs_dir, node_actor_name
from cluster.status import ClusterDescription
from node.cluster_dirs import DirIdentity, KnownDir, read_identity
from node.meta_properties import CURRENT_VERSION, MetaProperties
from node.stats import LoadProgress
from storage.errors import StorageError

logger = logging.getLogger(__name__)


def deploy(log_dirs: Sequence[str], broker: BrokerConfig, namespace: str, *,
           head_started_by_strata: bool = False, timeout_s: float = 120.0,
           allow_missing_log_dirs: bool = False) -> ClusterDescription:
    """Start the actors of ``log_dirs`` (see the module docstring). Before the coordinator, the
    directories' identity is checked (``cluster.metadata.dir_identity``): a directory of another
    cluster, or a known directory missing without ``allow_missing_log_dirs``, raises
    ``ForeignLogDirError`` / ``MissingLogDirError``, and a malformed identity file its typed
    error — before any actor starts when every directory is on this Ray node, else ending the
    actors started."""
    dirs = [abs_dir(d) for d in log_dirs]
    if not dirs:
        raise ValueError("a cluster needs at least one log directory (log.dirs)")
    if len(set(dirs)) != len(dirs):
        raise ValueError(f"log directories given twice: {dirs}")
    hosts_of = {d: host_of_dir(d) for d in dirs}
    hosts = dict(hosts_of.values())
    specs = worker_specs(sorted(hosts), broker.cleaner.num_threads)
    listeners = {d: directory_properties(broker.properties, i) for i, d in enumerate(dirs)}
    description = None
    if on_this_node(dirs) == set(dirs):     # read here: the coordinator need not wait for a node
        description = _description(
            dirs, hosts_of, specs, broker, namespace, head_started_by_strata,
            _plan([read_identity(Path(d)) for d in dirs], allow_missing_log_dirs))
    # every actor at once: each one's start is mostly its process importing the code
    running = _exists(COORDINATOR_NAME, namespace)   # deploying a running cluster again
    nodes = {d: actors.start_node(d, namespace, broker.topic_defaults, broker.log_dir_properties,
                                  listeners[d])
             for d in dirs}
    workers = [actors.start_worker(name, cleaner_id, host, hosts[host], namespace,
                                   broker.cleaner_properties)
               for name, host, cleaner_id in specs]
    started = [*(node_actor_name(d) for d in dirs), *(name for name, _, _ in specs)]
    try:
        coordinator = None
        if description is not None:
            coordinator = actors.start_coordinator(description)
            started.append(COORDINATOR_NAME)
        infos = dict(zip(nodes, ray.get([n.info.remote() for n in nodes.values()],
                                        timeout=timeout_s)))
        for d, info in infos.items():
            if info["host"] != hosts_of[d][0]:
                raise RuntimeError(f"the node actor of {d} runs on host {info['host']}, not on "
                                   f"{hosts_of[d][0]} where its directory's resource is")
        if description is None:
            handles = {d: RayHandle(n, node_actor_name(d)) for d, n in nodes.items()}
            description = _description(
                dirs, hosts_of, specs, broker, namespace, head_started_by_strata,
                _plan([handles[d].call("identity", timeout=timeout_s) for d in dirs],
                      allow_missing_log_dirs))
    except BaseException:
        if not running:
            _end_actors(namespace, [node_actor_name(d) for d in dirs], started[len(dirs):],
                        timeout_s)
        raise
    if coordinator is None:
        coordinator = actors.start_coordinator(description)
    ray.get([w.ping.remote() for w in workers] + [coordinator.ping.remote()], timeout=timeout_s)
    return description


def _plan(found: Sequence[DirIdentity], allow_missing: bool) -> IdentityPlan:
    """``plan_identity`` of what the directories hold, warning of the directories missing."""
    plan = plan_identity(found, allow_missing=allow_missing)
    if plan.missing:
        logger.warning("starting without the log directories %s (allow_missing_log_dirs): no "
                       "partition is created until they are back", plan.missing)
    return plan


def _description(dirs: Sequence[str], hosts_of: dict[str, tuple[str, bool]],
                 specs: Sequence[tuple[str, str, int]], broker: BrokerConfig, namespace: str,
                 head_started_by_strata: bool, plan: IdentityPlan) -> ClusterDescription:
    """What the coordinator is built from: the actors' names and hosts, the config, and the
    directories' identity as ``plan`` decided it."""
    known = {k.directory_id: k for k in plan.known}
    directory_ids = {k.path: k.directory_id for k in known.values() if k.path in plan.node_ids}
    return ClusterDescription(
        namespace=namespace, log_dirs=tuple(dirs),
        node_names={d: node_actor_name(d) for d in dirs},
        node_hosts={d: hosts_of[d][0] for d in dirs},
        workers=tuple((name, host) for name, host, _ in specs),
        properties=dict(broker.properties), head_started_by_strata=head_started_by_strata,
        cluster_id=plan.cluster_id, node_ids=dict(plan.node_ids), directory_ids=directory_ids,
        known_log_dirs=tuple((k.node_id, k.directory_id, k.path) for k in plan.known),
        missing_log_dirs=dict(plan.missing))


def settle_log_dirs(description: ClusterDescription, *, timeout_s: float = 120.0) -> None:
    """After every directory loaded: refuse a partition held by two directories (the cluster is
    shut down, ``DuplicatePartitionError`` names the partition and both directories), then write
    each directory's identity (``meta.properties`` and the ``cluster-log-dirs`` list) where it
    is not already what ``description`` says."""
    handles = {d: lookup(name, description.namespace) for d, name in
               description.node_names.items()}
    pendings = {d: h.submit("partitions") for d, h in handles.items()}
    held = {}
    for log_dir, pending in pendings.items():
        try:
            held[log_dir] = pending.result(timeout_s)
        except StorageError as err:   # a directory that did not load: its stats say why
            logger.info("cannot list the partitions of %s: %s", log_dir, err)
    duplicates = duplicate_partitions(held)
    if duplicates:
        shutdown(description.namespace, timeout_s=timeout_s)
        raise duplicate_partition_error(duplicates)
    known = tuple(KnownDir(n, i, p) for n, i, p in description.known_log_dirs)
    writes = {d: h.submit("write_identity",
                          MetaProperties(CURRENT_VERSION, description.cluster_id,
                                         description.node_ids[d], description.directory_ids[d]),
                          known)
              for d, h in handles.items() if d in held}
    for log_dir, pending in writes.items():
        try:
            pending.result(timeout_s)
        except StorageError as err:   # offline meanwhile: written at the next start
            logger.info("cannot write the identity of %s: %s", log_dir, err)


def serve_brokers(description: ClusterDescription, *,
                  timeout_s: float = 120.0) -> dict[str, tuple[str, int]]:
    """After ``settle_log_dirs``: start every directory's Kafka broker (a cluster whose config
    has ``listeners``; ``cluster.kafka.node_broker``); their advertised (host, port) by directory,
    empty without listeners. A listener that cannot be bound shuts the cluster down and raises
    its ``ListenerBindError``; a directory that did not load serves nothing (its stats say
    why)."""
    handles = {d: lookup(name, description.namespace) for d, name in
               description.node_names.items()}
    pendings = {d: h.submit("serve_kafka") for d, h in handles.items()}
    served: dict[str, tuple[str, int]] = {}
    for log_dir, pending in pendings.items():
        try:
            address = pending.result(timeout_s)
        except ListenerBindError:
            shutdown(description.namespace, timeout_s=timeout_s)
            raise
        except StorageError as err:
            logger.info("the Kafka broker of %s did not start: %s", log_dir, err)
            continue
        if address is not None:
            served[log_dir] = tuple(address)
    return served


def _end_actors(namespace: str, node_names: Sequence[str], other_names: Sequence[str],
                timeout_s: float) -> None:
    """Undo a refused start: close the node actors' directories (cleanly, once loaded: the next
    start recovers nothing) and end every actor started (``other_names``: the workers, and the
    coordinator when it started with them)."""
    closing = []
    for name in node_names:
        try:
            closing.append(lookup(name, namespace).submit("close"))
        except ActorUnavailableError:
            continue
    for pending in closing:
        try:
            pending.result(timeout_s)
        except Exception:  # noqa: BLE001 - the start is refused already; end the actor anyway
            logger.info("closing a refused start's directory failed", exc_info=True)
    for name in [*node_names, *other_names]:
        _kill(name, namespace)


def _exists(name: str, namespace: str) -> bool:
    try:
        ray.get_actor(name, namespace=namespace)
        return True
    except ValueError:
        return False


def wait_loaded(description: ClusterDescription, *, timeout_s: float = 600.0,
                on_progress: Callable[[dict[str, LoadProgress | None]], None] | None = None,
                poll_s: float = 0.1) -> dict[str, LoadProgress | None]:
    """Wait until every directory finished loading; ``on_progress`` sees every poll. A directory
    whose load failed counts as finished (its stats say why)."""
    handles = {d: lookup(name, description.namespace) for d, name in
               description.node_names.items()}
    deadline = time.monotonic() + timeout_s
    while True:
        progress = {d: h.call("load_progress", timeout=timeout_s) for d, h in handles.items()}
        if on_progress is not None:
            on_progress(progress)
        stats = None
        if all(p is not None and p.done for p in progress.values()):
            return progress
        failed = {d for d, p in progress.items() if p is None or not p.done}
        stats = {d: handles[d].call("stats", timeout=timeout_s) for d in failed}
        if all(not s.online for s in stats.values()):
            return progress
        if time.monotonic() > deadline:
            raise TimeoutError(f"log directories still loading after {timeout_s} s: "
                               f"{sorted(failed)}")
        time.sleep(poll_s)


def shutdown(namespace: str, *, timeout_s: float = 120.0) -> ClusterDescription | None:
    """Stop the cluster of ``namespace``; returns its description (None if none was running)."""
    return shutdown_report(namespace, timeout_s=timeout_s)[0]


def shutdown_report(namespace: str, *, timeout_s: float = 120.0
                    ) -> tuple[ClusterDescription | None, dict[str, str]]:
    """``shutdown``, also returning the directories that did not close cleanly, each with why
    (its node actor is gone, its close failed, or it closed without the clean-shutdown marker:
    offline, or a partition skipped at load); empty when every directory closed cleanly."""
    try:
        coordinator = lookup(COORDINATOR_NAME, namespace)
        description: ClusterDescription = coordinator.call("describe", timeout=timeout_s)
    except ActorUnavailableError:
        return None, {}
    try:
        coordinator.call("stop", timeout=timeout_s)
    except Exception:  # noqa: BLE001 - the nodes must still close cleanly
        logger.warning("coordinator did not stop cleanly", exc_info=True)
    unclean: dict[str, str] = {}
    nodes: dict[str, RayHandle] = {}
    for log_dir, name in description.node_names.items():
        try:
            nodes[log_dir] = lookup(name, namespace)
        except ActorUnavailableError:
            unclean[log_dir] = "its node actor is gone"
    closing = {d: n.submit("close") for d, n in nodes.items()}
    for log_dir, pending in closing.items():
        try:
            if pending.result(timeout_s) is False:
                unclean[log_dir] = "closed without a clean shutdown (offline, or not loaded whole)"
        except Exception as err:  # noqa: BLE001 - an offline directory closes without a marker
            logger.warning("closing %s failed", log_dir, exc_info=True)
            unclean[log_dir] = f"its close failed: {err}"
    for name in [*description.node_names.values(), *(w for w, _ in description.workers),
                 COORDINATOR_NAME]:
        _kill(name, namespace)
    return description, unclean


def _kill(name: str, namespace: str) -> None:
    try:
        ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
    except ValueError:
        pass


def actor_handle(name: str, namespace: str) -> Any:
    return ray.get_actor(name, namespace=namespace)
