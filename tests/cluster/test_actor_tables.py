"""The actor shells forward only the methods of their tables (``cluster.runtime.actors``): a public
method of a body missing from its table could not be called remotely, and a table entry with no
method behind it would fail only when called. Every public method is in its table or named here as a
call the actor process makes on itself."""

from __future__ import annotations

import inspect

import pytest

from cluster.runtime.actor_bodies import NodeBody
from cluster.runtime.actors import COORDINATOR_METHODS, NODE_METHODS, WORKER_METHODS
from cluster.runtime.coordinator_body import CoordinatorBody
from cluster.runtime.worker_body import WorkerBody

# called inside the actor's own process only (its periodic tasks, its start-up; its broker
# routing the markers of __consumer_offsets through its group coordinator)
LOCAL_ONLY = {"NodeBody": {"cleanup_logs", "route_txn_markers"},
              "CoordinatorBody": {"load_metadata"},
              "WorkerBody": set()}


def _public_methods(body: type) -> set[str]:
    return {name for name, value in inspect.getmembers(body)
            if not name.startswith("_") and callable(value)
            and not isinstance(inspect.getattr_static(body, name), property)}


@pytest.mark.parametrize("body, table", [(NodeBody, NODE_METHODS), (WorkerBody, WORKER_METHODS),
                                         (CoordinatorBody, COORDINATOR_METHODS)],
                         ids=["node", "worker", "coordinator"])
def test_every_public_method_of_a_body_is_in_its_actor_table(body: type,
                                                             table: dict[str, object]) -> None:
    public = _public_methods(body)
    assert public - set(table) == LOCAL_ONLY[body.__name__]
    assert set(table) - public == set()
