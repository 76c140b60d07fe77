"""Frozen snapshots of a log directory (STYLE.md P13): plain values only, so they pickle through Ray
and become Spark rows with ``dataclasses.asdict``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import psutil

from storage.files import TopicPartition
from storage.quarantine import QuarantinedFile

if TYPE_CHECKING:
    from storage.log import Log

_LAST = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One partition log at the moment of the snapshot.

    ``dirty_bytes`` are the bytes of the segments from the one holding the first dirty offset (the
    ``cleaner-offset-checkpoint`` entry, or the log start offset when there is none) to the end,
    active segment included; ``dirty_ratio`` is their share of ``size_bytes``. Both are 0 for a log
    whose ``cleanup.policy`` does not include compact. ``last_stable_offset`` is below
    ``log_end_offset`` while a transaction is open (its first offset).
    """

    topic: str
    partition: int
    size_bytes: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    unflushed_messages: int
    dirty_bytes: int
    dirty_ratio: float
    cleanup_policy: str
    last_flush_ms: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition as ``strata topic describe`` shows it (Kafka's kafka-topics --describe plus
    our columns): where it lives, its offsets and size at the moment of the snapshot, and the
    topic's config overrides. ``last_stable_offset`` is ``Log.last_stable_offset`` (the log end
    while no transaction is open)."""

    topic: str
    partition: int
    log_dir: str
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    size_bytes: int
    segments: int
    config: dict[str, str]


@dataclass(frozen=True, slots=True)
class InvalidDir:
    """A subdirectory that was neither loaded nor deleted, and why."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionProblem:
    """A partition directory that loading skipped: not loaded, and not written to afterwards (no
    log is created in its place, no checkpoint keeps it). ``error`` is the typed error's class
    name: ``InvalidSegmentFileError`` when the scan refused an entry (nothing in it was opened),
    another ``StorageError`` when the loader refused its content (what the loader did before,
    removing temporary files say, stays done). ``path`` is the entry at fault and ``reason`` the
    error's message."""

    name: str
    error: str
    path: str
    reason: str
    action: str = "skipped"


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """How far loading has come. Logs and segments count the partition directories (not the
    ``-delete`` ones) found when loading started; a log counts as remaining until it is loaded."""

    directory: str
    total_logs: int
    remaining_logs: int
    total_segments: int
    remaining_segments: int
    elapsed_ms: float
    done: bool
    problems: tuple[PartitionProblem, ...] = ()   # partitions skipped so far


@dataclass(frozen=True, slots=True)
class LogDirStats:
    """One log directory. ``disk_*`` describe the file system holding it (``psutil.disk_usage``;
    zeros when it cannot be read); ``log_bytes`` is the sum of the partitions' sizes.

    When the directory is offline ``partitions`` is empty and ``offline_reason`` says what failed;
    ``pid`` is the process serving it (online or offline: restarting it brings the directory back).
    ``problems`` lists the partitions loading skipped and ``quarantined`` the files recovery moved
    to a partition's ``quarantine/`` folder when this directory was opened.
    """

    directory: str
    online: bool
    offline_reason: str | None
    closed: bool
    partitions_count: int
    log_bytes: int
    disk_total_bytes: int
    disk_used_bytes: int
    disk_free_bytes: int
    load_time_ms: float
    had_clean_shutdown: bool
    logs_to_delete: int
    invalid_dirs: tuple[InvalidDir, ...]
    task_failures: int
    last_task_failure: str | None
    partitions: tuple[PartitionStats, ...]
    problems: tuple[PartitionProblem, ...] = ()
    quarantined: tuple[QuarantinedFile, ...] = ()
    file_system: str = ""          # host and device of the file system; see ``file_system_id``
    pid: int = 0                   # the process serving the directory (``.lock`` names it)


def partition_stats(log: Log, cleaner_offset: int | None) -> PartitionStats:
    """Snapshot one log; ``cleaner_offset`` is its ``cleaner-offset-checkpoint`` entry, if any."""
    segments = log.segments()
    size = sum(s.size for s in segments)
    start, end = log.log_start_offset, log.log_end_offset
    dirty = 0
    if log.config.compact and segments:
        first_dirty = cleaner_offset if cleaner_offset is not None else start
        if first_dirty < start or first_dirty > end:
            first_dirty = start   # Kafka resets a checkpoint outside the log to the start
        dirty = sum(s.size for s in log.segments_in_range(first_dirty, _LAST))
    tp = log.topic_partition
    return PartitionStats(
        topic=tp.topic, partition=tp.partition, size_bytes=size, segments=len(segments),
        log_start_offset=start, log_end_offset=end, recovery_point=log.recovery_point,
        unflushed_messages=log.unflushed_messages, dirty_bytes=dirty,
        dirty_ratio=dirty / size if size else 0.0, cleanup_policy=log.config.cleanup_policy,
        last_flush_ms=log.last_flush_ms, last_stable_offset=log.last_stable_offset)


def all_partition_stats(logs: Mapping[TopicPartition, Log],
                        cleaner_offsets: Mapping[TopicPartition, int]
                        ) -> tuple[PartitionStats, ...]:
    return tuple(partition_stats(logs[tp], cleaner_offsets.get(tp))
                 for tp in sorted(logs, key=lambda t: (t.topic, t.partition)))


def file_system_id(path: str) -> str:
    """``host:device`` of the file system holding ``path`` (directories with the same id share
    one disk's room); empty when it cannot be read."""
    try:
        device = os.stat(path).st_dev
    except OSError:
        return ""
    return f"{socket.gethostname()}:{device}"


def disk_usage(path: str) -> tuple[int, int, int]:
    """(total, used, free) bytes of the file system holding ``path``; zeros when unreadable."""
    try:
        usage = psutil.disk_usage(path)
    except OSError:
        return 0, 0, 0
    return usage.total, usage.used, usage.free


def describe_partition(log: Log, log_dir: str, overrides: Mapping[str, str]
                       ) -> PartitionDescription:
    """Snapshot one log for ``PartitionDescription`` (``overrides``: its topic's overrides)."""
    segments = log.segments()
    tp = log.topic_partition
    return PartitionDescription(
        topic=tp.topic, partition=tp.partition, log_dir=log_dir,
        log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
        last_stable_offset=log.last_stable_offset, size_bytes=sum(s.size for s in segments),
        segments=len(segments), config=dict(overrides))
