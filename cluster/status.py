"""Frozen snapshots the coordinator answers with (STYLE.md P13): plain values that pickle through
Ray and become JSON with ``dataclasses.asdict``. Light on purpose: a client unpickling them
imports this module, not the coordinator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cleaner.manager import CleanerManagerStats


@dataclass(frozen=True)
class ClusterDescription:
    """What a client needs to talk to a running cluster (the coordinator's ``describe``)."""

    namespace: str
    log_dirs: tuple[str, ...]
    node_names: dict[str, str]                    # log dir -> node actor name
    node_hosts: dict[str, str]                    # log dir -> host key (see cluster.runtime.actors)
    workers: tuple[tuple[str, str], ...]          # (worker actor name, host)
    properties: dict[str, str]                    # the broker config
    head_started_by_strata: bool
    # the identity the directories carry (cluster.metadata.dir_identity): meta.properties'
    # cluster.id, node.id and directory.id of each directory, every directory the cluster knows as
    # (node id, directory id, path), and those missing from this start (path -> node id)
    cluster_id: str = ""
    node_ids: dict[str, int] = field(default_factory=dict)
    directory_ids: dict[str, str] = field(default_factory=dict)
    known_log_dirs: tuple[tuple[int, str, str], ...] = ()
    missing_log_dirs: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CleanSummary:
    """One finished (or failed) clean."""

    topic: str
    partition: int
    log_dir: str
    cleaner_id: int
    outcome: str                 # "cleaned", "aborted", "failed", "cleaner died", "offline"
    first_dirty_offset: int
    next_dirty_offset: int
    bytes_read: int
    bytes_written: int
    messages_read: int
    messages_written: int
    elapsed_secs: float
    error: str | None
    finished_ms: int


@dataclass(frozen=True)
class WorkerSlot:
    cleaner_id: int
    name: str
    host: str
    state: str                   # "idle", "cleaning", "recovering"
    topic: str | None
    partition: int | None


@dataclass(frozen=True)
class UncleanableInfo:
    topic: str
    partition: int
    log_dir: str
    failures: int
    error: str


@dataclass(frozen=True)
class CleanerStatus:
    enabled: bool
    manager: CleanerManagerStats
    workers: tuple[WorkerSlot, ...]
    uncleanable: tuple[UncleanableInfo, ...]
    offline_dirs: dict[str, str]
    unreachable_dirs: tuple[str, ...]
    compacted_partitions: int
    cleans_completed: int
    cleans_failed: int
    recent: tuple[CleanSummary, ...]
    loop_rounds: int
    loop_failures: int
    last_loop_failure: str | None
