"""The cluster knows its directories: what a start checks of the identity the directories carry
(``node.meta_properties``, ``node.cluster_dirs``) and of the partitions they hold, and what it
writes back. Plain functions of plain values, so they are tested without Ray.

``plan_identity`` (before the coordinator starts; each node has only read its files):

1. The ``cluster.id`` of every formatted directory must be one: directories of two clusters are
   refused (``ForeignLogDirError``), as is a ``directory.id`` carried by two directories (a copy).
2. The cluster's directories are the union of the ``cluster-log-dirs`` lists the directories
   hold (and the formatted directories themselves). A known directory that is not given is
   *missing*: the start is refused (``MissingLogDirError``, naming each by path and node id)
   unless ``allow_missing``; a missing directory stays known, so the next start asks for it
   again.
3. A directory without ``meta.properties`` is new: it gets the cluster's id (a new Kafka Uuid when
   no directory has one: the first start of a cluster, or of a cluster written before
   directories carried their identity), the next free ``node.id`` (one above the highest the
   cluster ever gave, so ids are never reused; in the order the directories are given) and a
   new ``directory.id``. A version 0 file, or one without ``directory.id``, is completed.
4. Every given directory then holds the whole list (``known``).

``duplicate_partitions`` (after every directory loaded, and at every refresh of the routing
table): a partition held by two directories, which Kafka refuses to start with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cluster.errors import DuplicatePartitionError, ForeignLogDirError, MissingLogDirError
from node.cluster_dirs import DirIdentity, KnownDir
from node.meta_properties import CURRENT_VERSION, MetaProperties, random_uuid


@dataclass(frozen=True)
class IdentityPlan:
    """What a start found and decided. ``writes`` holds the ``meta.properties`` to write (new or
    completed directories), ``known`` the full list every given directory gets, ``missing`` the
    known directories not given (path -> node id; empty unless ``allow_missing``)."""

    cluster_id: str
    node_ids: dict[str, int]
    writes: dict[str, MetaProperties]
    known: tuple[KnownDir, ...]
    missing: dict[str, int]


def plan_identity(found: Sequence[DirIdentity], *, allow_missing: bool = False,
                  new_uuid: Callable[[], str] = random_uuid) -> IdentityPlan:
    """The plan for the directories of ``found`` (in the order given); see the module
    docstring for the rules and the errors."""
    formatted = [f for f in found if f.meta is not None]
    cluster_id = _one_cluster_id(formatted) or new_uuid()
    _refuse_copies(formatted)
    known: dict[str, KnownDir] = {}
    for f in formatted:
        for k in f.known or ():
            known.setdefault(k.directory_id, k)
    writes: dict[str, MetaProperties] = {}
    node_ids: dict[str, int] = {}
    present: set[str] = set()
    taken = {k.node_id for k in known.values()}
    for f in formatted:
        assert f.meta is not None
        meta = f.meta
        listed = known.get(meta.directory_id) if meta.directory_id else None
        node_id = meta.node_id if meta.node_id is not None else (
            listed.node_id if listed is not None else None)
        if node_id is None:
            continue      # a version 0 file without broker.id: numbered with the new ones
        if node_id in node_ids.values():
            other = next(d for d, n in node_ids.items() if n == node_id)
            raise ForeignLogDirError(
                f"log directories {other} and {f.log_dir} carry the same node.id {node_id}; "
                "the directories of one cluster have distinct node ids",
                dirs=[other, f.log_dir], node_id=node_id)
        directory_id = meta.directory_id or _fresh(new_uuid, known)
        complete = MetaProperties(CURRENT_VERSION, cluster_id, node_id, directory_id)
        if complete != meta:
            writes[f.log_dir] = complete
        taken.add(node_id)
        node_ids[f.log_dir] = node_id
        present.add(directory_id)
        known[directory_id] = KnownDir(node_id, directory_id, f.log_dir)
    missing = {k.path: k.node_id for k in known.values() if k.directory_id not in present}
    if missing and not allow_missing:
        raise MissingLogDirError(_missing_text(missing, [f.log_dir for f in found]),
                                 missing=dict(sorted(missing.items())))
    next_id = max(taken, default=-1) + 1
    for f in found:
        if f.log_dir in node_ids:
            continue
        directory_id = _fresh(new_uuid, known)
        meta = MetaProperties(CURRENT_VERSION, cluster_id, next_id, directory_id)
        writes[f.log_dir] = meta
        node_ids[f.log_dir] = next_id
        known[directory_id] = KnownDir(next_id, directory_id, f.log_dir)
        next_id += 1
    return IdentityPlan(cluster_id, node_ids, writes,
                        tuple(sorted(known.values(), key=lambda k: k.node_id)), missing)


def duplicate_partitions(held: Mapping[str, Iterable[tuple[str, int]]]
                         ) -> dict[tuple[str, int], list[str]]:
    """Every partition that more than one directory of ``held`` (directory -> partitions)
    holds, with those directories in order."""
    where: dict[tuple[str, int], list[str]] = defaultdict(list)
    for log_dir, partitions in held.items():
        for topic, partition in partitions:
            where[(topic, partition)].append(log_dir)
    return {tp: sorted(dirs) for tp, dirs in sorted(where.items()) if len(dirs) > 1}


def duplicate_partition_error(duplicates: Mapping[tuple[str, int], list[str]]
                              ) -> DuplicatePartitionError:
    """The refusal of a start that found ``duplicates`` (not empty), naming each partition and
    its directories, in Kafka's words."""
    (topic, partition), dirs = next(iter(duplicates.items()))
    more = len(duplicates) - 1
    return DuplicatePartitionError(
        f"duplicate log directories for {topic}-{partition} are found in both "
        f"{' and '.join(dirs)}"
        + (f" (and {more} more partitions: "
           + ", ".join(f"{t}-{p} in {' and '.join(d)}" for (t, p), d in
                       list(duplicates.items())[1:6]) + ")" if more else "")
        + ". It is likely because a directory failed while a partition was moved between "
        "them, or was absent at a start. Remove one of the two copies (the one in the directory "
        "known to have failed recently) and start again",
        topic=topic, partition=partition, dirs=list(dirs),
        duplicates={f"{t}-{p}": list(d) for (t, p), d in duplicates.items()})


def _one_cluster_id(formatted: Sequence[DirIdentity]) -> str | None:
    clusters: dict[str, list[str]] = defaultdict(list)
    for f in formatted:
        assert f.meta is not None
        if f.meta.cluster_id is not None:
            clusters[f.meta.cluster_id].append(f.log_dir)
    if len(clusters) > 1:
        text = "; ".join(f"cluster.id {cid}: {', '.join(dirs)}"
                         for cid, dirs in sorted(clusters.items(), key=lambda c: -len(c[1])))
        raise ForeignLogDirError(
            f"the log directories belong to different clusters ({text}); give the directories "
            "of one cluster", clusters={c: list(d) for c, d in clusters.items()})
    return next(iter(clusters), None)


def _refuse_copies(formatted: Sequence[DirIdentity]) -> None:
    seen: dict[str, str] = {}
    for f in formatted:
        assert f.meta is not None
        directory_id = f.meta.directory_id
        if directory_id is None:
            continue
        if directory_id in seen:
            raise ForeignLogDirError(
                f"log directories {seen[directory_id]} and {f.log_dir} carry the same "
                f"directory.id {directory_id} (one is a copy of the other); give one of them",
                dirs=[seen[directory_id], f.log_dir], directory_id=directory_id)
        seen[directory_id] = f.log_dir


def _fresh(new_uuid: Callable[[], str], known: Mapping[str, KnownDir]) -> str:
    while True:
        candidate = new_uuid()
        if candidate not in known:
            return candidate


def _missing_text(missing: Mapping[str, int], given: Sequence[str]) -> str:
    parts = []
    for path, node_id in sorted(missing.items(), key=lambda m: m[1]):
        note = (" (given, but it holds no meta.properties: not the directory the cluster "
                "wrote there; an unmounted disk?)" if path in given else "")
        parts.append(f"{path} (node.id {node_id}){note}")
    return (f"the cluster's log directories {', '.join(parts)} are missing from this start; "
            "its partitions there would be unreachable, and created again elsewhere. Give "
            "every directory, or go on without them explicitly (--allow-missing-log-dirs, "
            "Cluster.start(allow_missing_log_dirs=True))")
