"""What a start decides from the identity its directories carry (``cluster.metadata.dir_identity``):
node ids given in order and kept, a missing directory, another cluster's directory, a copy, and a
partition held twice. Plain values, no Ray; the scenario on a real cluster is in
``test_cluster_identity``."""

from __future__ import annotations

import itertools
import pickle

import pytest

from cluster.metadata.dir_identity import (IdentityPlan, duplicate_partition_error,
                                           duplicate_partitions, plan_identity)
from cluster.errors import DuplicatePartitionError, ForeignLogDirError, MissingLogDirError
from node.cluster_dirs import DirIdentity
from node.meta_properties import MetaProperties, random_uuid


def fresh(*dirs: str) -> list[DirIdentity]:
    return [DirIdentity(d, None, None) for d in dirs]


def written(plan: IdentityPlan, dirs: list[str], before: list[DirIdentity] = ()) -> list[DirIdentity]:
    """The identities of ``dirs`` after ``plan`` was written into the directories it covers."""
    old = {f.log_dir: f for f in before}
    out = []
    for d in dirs:
        if d in plan.node_ids:
            meta = plan.writes.get(d) or old[d].meta
            out.append(DirIdentity(d, meta, plan.known))
        else:
            out.append(old[d])
    return out


def test_first_start_gives_node_ids_in_the_order_the_directories_are_given() -> None:
    plan = plan_identity(fresh("/c", "/a", "/b"))
    assert plan.node_ids == {"/c": 0, "/a": 1, "/b": 2}
    assert len({m.cluster_id for m in plan.writes.values()}) == 1
    assert len({m.directory_id for m in plan.writes.values()}) == 3
    assert all(m.version == 1 and len(m.cluster_id or "") == 22 for m in plan.writes.values())
    assert [(k.node_id, k.path) for k in plan.known] == [(0, "/c"), (1, "/a"), (2, "/b")]
    assert plan.missing == {}


def test_node_ids_are_kept_across_restarts_whatever_the_order_given() -> None:
    first = plan_identity(fresh("/a", "/b", "/c"))
    state = written(first, ["/a", "/b", "/c"])
    again = plan_identity(list(reversed(state)))
    assert again.node_ids == {"/a": 0, "/b": 1, "/c": 2}
    assert again.writes == {} and again.cluster_id == first.cluster_id


def test_a_directory_added_later_gets_the_next_node_id() -> None:
    first = plan_identity(fresh("/a", "/b"))
    state = written(first, ["/a", "/b"]) + fresh("/new")
    plan = plan_identity(state)
    assert plan.node_ids == {"/a": 0, "/b": 1, "/new": 2}
    assert plan.writes["/new"].cluster_id == first.cluster_id
    assert [k.path for k in plan.known] == ["/a", "/b", "/new"]


def test_a_start_without_a_known_directory_is_refused_naming_it() -> None:
    state = written(plan_identity(fresh("/a", "/b", "/c")), ["/a", "/b", "/c"])
    with pytest.raises(MissingLogDirError) as caught:
        plan_identity([state[0], state[2]])
    assert caught.value.fields["missing"] == {"/b": 1}
    assert "/b (node.id 1)" in str(caught.value)
    assert "--allow-missing-log-dirs" in str(caught.value)


def test_an_empty_directory_in_place_of_a_known_one_is_refused_as_missing() -> None:
    """An unmounted disk: the path is given, but the directory the cluster wrote is not there."""
    state = written(plan_identity(fresh("/a", "/b")), ["/a", "/b"])
    with pytest.raises(MissingLogDirError, match="holds no meta.properties"):
        plan_identity([state[0], DirIdentity("/b", None, None)])


def test_going_on_without_a_directory_keeps_it_known_and_never_reuses_its_node_id() -> None:
    state = written(plan_identity(fresh("/a", "/b", "/c")), ["/a", "/b", "/c"])
    plan = plan_identity([state[0], state[2], *fresh("/d")], allow_missing=True)
    assert plan.missing == {"/b": 1}
    assert plan.node_ids == {"/a": 0, "/c": 2, "/d": 3}
    assert [k.path for k in plan.known] == ["/a", "/b", "/c", "/d"]
    after = written(plan, ["/a", "/c", "/d"], state + fresh("/d"))
    with pytest.raises(MissingLogDirError):       # the next start asks for /b again
        plan_identity(after)
    assert plan_identity([*after, state[1]]).missing == {}


def test_a_directory_of_another_cluster_is_refused_naming_both_clusters() -> None:
    ours = written(plan_identity(fresh("/a", "/b")), ["/a", "/b"])
    theirs = written(plan_identity(fresh("/x")), ["/x"])
    with pytest.raises(ForeignLogDirError) as caught:
        plan_identity([*ours, *theirs], allow_missing=True)
    assert "/x" in str(caught.value) and "/a, /b" in str(caught.value)
    assert sorted(map(sorted, caught.value.fields["clusters"].values())) == [["/a", "/b"], ["/x"]]


def test_a_copied_directory_is_refused() -> None:
    a, = written(plan_identity(fresh("/a")), ["/a"])
    with pytest.raises(ForeignLogDirError, match="same directory.id"):
        plan_identity([a, DirIdentity("/copy", a.meta, a.known)])


def test_a_version_0_file_is_completed_keeping_its_ids() -> None:
    zk = DirIdentity("/a", MetaProperties(0, "3d1XOGWUQq-2TaCwWvBALA", 7), None)
    plan = plan_identity([zk, *fresh("/b")])
    assert plan.cluster_id == "3d1XOGWUQq-2TaCwWvBALA"
    assert plan.node_ids == {"/a": 7, "/b": 8}
    assert plan.writes["/a"].version == 1 and plan.writes["/a"].directory_id


def test_new_uuids_never_collide_with_a_known_directory_id() -> None:
    ids = itertools.chain(["clusterAAAAAAAAAAAAAAA"], itertools.repeat("AAAAAAAAAAAAAAAAAAAAAQ", 1),
                          (random_uuid() for _ in itertools.count()))
    plan = plan_identity(fresh("/a", "/b"), new_uuid=lambda: next(ids))
    assert len({m.directory_id for m in plan.writes.values()}) == 2


def test_duplicate_partitions_names_every_directory_holding_one() -> None:
    held = {"/a": [("t", 0), ("t", 1)], "/b": [("t", 1)], "/c": [("u", 0), ("t", 1)]}
    assert duplicate_partitions(held) == {("t", 1): ["/a", "/b", "/c"]}
    err = duplicate_partition_error(duplicate_partitions(held))
    assert "duplicate log directories for t-1 are found in both /a and /b and /c" in str(err)
    assert err.fields["dirs"] == ["/a", "/b", "/c"]
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is DuplicatePartitionError and again.fields == err.fields
