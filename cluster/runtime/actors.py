"""The one module that applies ``ray.remote`` (STYLE.md P10): the node, cleaner-worker and
coordinator actors, their concurrency groups, retry rules and placement.

Method tables say, for each method, its concurrency group and ``max_task_retries``:

* node: ``io`` (appends and reads) never waits behind ``clean`` (swaps, snapshots, checkpoint
  writes for the coordinator) or ``admin`` (create, delete, truncate: these may wait for the
  coordinator to pause a clean); stats and progress run in the default group;
* worker: ``clean`` (one at a time) and ``control`` (abort, reset, status: served while a clean
  runs);
* coordinator: ``pause`` (nodes blocking in abort_and_pause) apart from the default group.

Retries: a call that changes state is never retried (``max_task_retries=0``) — a call that crashes
the process would otherwise crash every restart (the poison-call trap), and an append retried after
a restart could be stored twice. Reads are retried across a restart.

Placement: a node actor takes one unit of its directory's resource when some Ray node declares it,
and is otherwise pinned to the Ray node of the caller (the directory is local to whoever starts the
cluster); workers follow the host of the directories (the host resource when declared, the Ray node
otherwise). Every actor is detached, named after its role and directory, restarted forever by Ray,
and takes no CPU (``num_cpus=0``), so a 2-core machine runs them all.

Shells: an actor class here is a light shell (``NodeShell``, ``WorkerShell``, ``CoordinatorShell``)
that builds its body (``cluster.runtime.actor_bodies``, ``worker_body``, ``coordinator_body``: the
plain class with the cluster's seams) in its ``__init__``, inside the actor process, and forwards
the methods of its table to it. Ray loads an actor's class in every process that looks the actor
up (``ray.get_actor``), so a client such as a ``strata`` command loads only this module, not the
directory code, the cleaner and numba (half a second). A method missing from its table cannot be called remotely; other attributes of the body are
reached through the shell (``__ray_call__`` functions see the shell as the actor).
"""

from __future__ import annotations

from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cluster.naming import (
    COORDINATOR_NAME,
    WORKER_HOST_UNITS,
    dir_resource,
    host_resource,
    node_actor_name,
)

NO_RETRY, RETRY = 0, 3

NODE_GROUPS = {"io": 4, "clean": 2, "admin": 2, "move": 4}
NODE_METHODS: dict[str, tuple[str | None, int]] = {
    "append_batch": ("io", NO_RETRY), "append_batches": ("io", NO_RETRY),
    "read_raw": ("io", RETRY), "flush": ("io", NO_RETRY), "offsets": ("io", RETRY),
    "swap_cleaned": ("clean", NO_RETRY), "update_cleaner_checkpoint": ("clean", NO_RETRY),
    "remove_cleaned_files": ("clean", NO_RETRY), "delete_old_segments": ("clean", NO_RETRY),
    "cleaning_snapshots": ("clean", RETRY), "snapshot": ("clean", RETRY),
    "read_cleaner_checkpoint": ("clean", RETRY),
    "create_partition": ("admin", NO_RETRY), "delete_partition": ("admin", NO_RETRY),
    "truncate_to": ("admin", NO_RETRY), "roll": ("admin", NO_RETRY),
    "alter_topic_config": ("admin", NO_RETRY), "delete_records": ("admin", NO_RETRY),
    "list_offset": ("io", RETRY), "last_sequence": ("io", RETRY),
    "describe_partitions": (None, RETRY),
    "write_txn_markers": ("io", NO_RETRY), "last_stable_offset": ("io", RETRY),
    "read_records": ("io", RETRY),
    "close": ("admin", NO_RETRY), "checkpoint": ("admin", NO_RETRY),
    "stats": (None, RETRY), "load_progress": (None, RETRY), "partitions": (None, RETRY),
    "topic_configs": (None, RETRY), "info": (None, RETRY), "ping": (None, RETRY),
    "create_partitions": ("admin", NO_RETRY), "delete_partitions": ("admin", NO_RETRY),
    "mark_topic_deleting": ("admin", NO_RETRY), "topic_deletions": (None, RETRY),
    "append_batches_or_moved": ("io", NO_RETRY), "append_records_or_moved": ("io", NO_RETRY),
    "move_in": ("move", NO_RETRY), "move_switch_out": ("move", NO_RETRY),
    "move_source": ("move", RETRY), "move_status": (None, RETRY),
    "append_buffer_or_moved": ("io", NO_RETRY),
    "identity": (None, RETRY), "write_identity": ("admin", NO_RETRY),
    "serve_kafka": (None, NO_RETRY), "kafka_endpoint": (None, RETRY),
    "kafka_state": (None, RETRY),
    "committed_offsets": (None, RETRY), "log_end_offsets": (None, RETRY),
}
WORKER_GROUPS = {"clean": 1, "control": 4}
WORKER_METHODS: dict[str, tuple[str | None, int]] = {
    "clean": ("clean", NO_RETRY), "abort": ("control", NO_RETRY),
    "reset": ("control", NO_RETRY), "status": ("control", RETRY), "ping": ("control", RETRY),
    "info": (None, RETRY),
}
COORDINATOR_GROUPS = {"pause": 16}
COORDINATOR_METHODS: dict[str, tuple[str | None, int]] = {
    "abort_and_pause": ("pause", NO_RETRY), "resume": ("pause", NO_RETRY),
    "pause_internal": ("pause", NO_RETRY), "resume_internal": ("pause", NO_RETRY),
    "pause_internal_many": ("pause", NO_RETRY), "resume_internal_many": ("pause", NO_RETRY),
    "pause_reasons": (None, RETRY), "refresh_routes": (None, RETRY),
    "partition_moved": (None, NO_RETRY),
    "pauses": (None, RETRY),
    "create_topic": (None, NO_RETRY), "delete_topic": (None, NO_RETRY),
    "alter_topic_config": (None, NO_RETRY), "add_partitions": (None, NO_RETRY),
    "list_topics": (None, RETRY), "routes": (None, RETRY), "describe": (None, RETRY),
    "topic_overrides": (None, RETRY),
    "trigger_clean": (None, NO_RETRY), "cleans_completed": (None, RETRY),
    "request_clean": (None, NO_RETRY), "clean_request_done": (None, RETRY),
    "status": (None, RETRY), "explain": (None, RETRY), "reset_uncleanable": (None, NO_RETRY),
    "stop": (None, NO_RETRY), "ping": (None, RETRY), "topic_progress": (None, RETRY),
    "begin_transaction": (None, NO_RETRY), "add_txn_partitions": (None, NO_RETRY),
    "end_transaction": (None, NO_RETRY), "describe_transaction": (None, RETRY),
    "list_transactions": (None, RETRY), "abort_expired_transactions": (None, NO_RETRY),
    "kafka_txn_coordinator_dir": (None, RETRY), "kafka_init_producer_id": (None, NO_RETRY),
    "kafka_add_txn_partitions": (None, NO_RETRY), "kafka_end_txn": (None, NO_RETRY),
    "kafka_verify_txn": (None, RETRY),
}


class _Shell:
    """An actor's shell: ``_make_body(*args)`` builds the body in the actor process; the methods
    of the shell's table forward to it (see the module docstring)."""

    _make_body: Callable[..., Any]

    def __init__(self, *args: Any) -> None:
        self._body = type(self)._make_body(*args)

    def __getattr__(self, name: str) -> Any:
        if name == "_body":   # not built yet (or failed to build)
            raise AttributeError(name)
        return getattr(self._body, name)


def _forward(name: str) -> Callable[..., Any]:
    def forward(self: _Shell, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._body, name)(*args, **kwargs)
    forward.__name__ = forward.__qualname__ = name
    return forward


def _shell_class(name: str, make_body: Callable[..., Any],
                 methods: dict[str, tuple[str | None, int]]) -> type:
    """A ``_Shell`` subclass whose listed methods carry their options; module-level under
    ``name``, so Ray pickles it by reference (a driver imports this module, nothing more)."""
    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": name,
                                 "_make_body": staticmethod(make_body)}
    for method, (group, retries) in methods.items():
        options: dict[str, Any] = {"max_task_retries": retries}
        if group is not None:
            options["concurrency_group"] = group
        namespace[method] = ray.method(**options)(_forward(method))
    return type(name, (_Shell,), namespace)


def _node_body(*args: Any) -> Any:
    from cluster.runtime.actor_bodies import NodeBody
    return NodeBody(*args)


def _worker_body(*args: Any) -> Any:
    from cluster.runtime.worker_body import WorkerBody
    return WorkerBody(*args)


def _coordinator_body(*args: Any) -> Any:
    from cluster.runtime.coordinator_body import CoordinatorBody
    return CoordinatorBody(*args)


NodeShell = _shell_class("NodeShell", _node_body, NODE_METHODS)
WorkerShell = _shell_class("WorkerShell", _worker_body, WORKER_METHODS)
CoordinatorShell = _shell_class("CoordinatorShell", _coordinator_body, COORDINATOR_METHODS)
NodeActor = ray.remote(concurrency_groups=NODE_GROUPS)(NodeShell)
WorkerActor = ray.remote(concurrency_groups=WORKER_GROUPS)(WorkerShell)
CoordinatorActor = ray.remote(concurrency_groups=COORDINATOR_GROUPS)(CoordinatorShell)

_COMMON = {"lifetime": "detached", "max_restarts": -1, "num_cpus": 0}


def declared_resources() -> set[str]:
    return set(ray.cluster_resources())


def start_node(log_dir: str, namespace: str, topic_defaults: dict[str, str],
               log_dir_properties: dict[str, str],
               kafka_properties: dict[str, str] | None = None) -> Any:
    """The node actor of ``log_dir`` (an existing one of that name is reused);
    ``kafka_properties``: its Kafka listener's (``cluster.kafka.listeners``), none without."""
    resource = dir_resource(log_dir)
    if resource in declared_resources():
        placement: dict[str, Any] = {"resources": {resource: 1}}
    else:
        placement = {"scheduling_strategy": NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)}
    return NodeActor.options(name=node_actor_name(log_dir), namespace=namespace,
                             get_if_exists=True, max_concurrency=4, **_COMMON,
                             **placement).remote(log_dir, topic_defaults, log_dir_properties,
                                                 namespace, kafka_properties or {})


def start_worker(name: str, cleaner_id: int, host: str, declared: bool, namespace: str,
                 cleaner_properties: dict[str, str]) -> Any:
    if declared:
        placement: dict[str, Any] = {"resources": {host_resource(host): WORKER_HOST_UNITS}}
    else:
        placement = {"scheduling_strategy": NodeAffinitySchedulingStrategy(host, soft=False)}
    return WorkerActor.options(name=name, namespace=namespace, get_if_exists=True,
                               max_concurrency=5, **_COMMON, **placement).remote(
        cleaner_id, cleaner_properties, namespace, host)


def start_coordinator(description: Any) -> Any:
    """The coordinator actor of ``description`` (a ``cluster.status.ClusterDescription``)."""
    return CoordinatorActor.options(name=COORDINATOR_NAME, namespace=description.namespace,
                                    get_if_exists=True, max_concurrency=8,
                                    **_COMMON).remote(description)
