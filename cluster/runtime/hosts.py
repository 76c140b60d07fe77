"""Which host a Ray node is, as the cluster's placement sees it: the ``strata_host:`` resource
the Ray node declares (``cluster.naming.host_resource``), else its Ray node id.

A module of its own so that an actor's body asks where it runs without importing the actor
classes (``cluster.runtime.actors``), which build the bodies.
"""

from __future__ import annotations

from collections.abc import Sequence

import ray

from cluster.naming import HOST_RESOURCE_PREFIX, dir_resource


def current_host() -> tuple[str, bool]:
    """(host key, declared): the ``strata_host:`` resource of this Ray node when it declares
    one, else the Ray node id."""
    return _host_of(ray.get_runtime_context().get_node_id())


def host_of_dir(log_dir: str) -> tuple[str, bool]:
    """``current_host`` as the node actor of ``log_dir`` will see it, known before it starts:
    the Ray node declaring the directory's resource, else this process's node (see
    ``cluster.runtime.actors.start_node``)."""
    resource = dir_resource(log_dir)
    for node in ray.nodes():
        if node.get("Alive", True) and resource in node.get("Resources", {}):
            return _host_of(node["NodeID"])
    return current_host()


def on_this_node(log_dirs: Sequence[str]) -> set[str]:
    """Those of ``log_dirs`` whose node actor runs on this process's Ray node, so that their files
    are this process's files: no live Ray node declares the directory's resource (the actor is
    pinned to the caller's node, ``cluster.runtime.actors.start_node``), or only this one does.
    None through Ray Client (``ray://``): the caller's node is then the cluster's, not this
    machine."""
    if ray.util.client.ray.is_connected():
        return set()
    here = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive", True)]
    found = set()
    for log_dir in log_dirs:
        resource = dir_resource(log_dir)
        if all(n["NodeID"] == here for n in nodes if resource in n.get("Resources", {})):
            found.add(log_dir)
    return found


def _host_of(node_id: str) -> tuple[str, bool]:
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            for key in node.get("Resources", {}):
                if key.startswith(HOST_RESOURCE_PREFIX):
                    return key[len(HOST_RESOURCE_PREFIX):], True
    return node_id, False
