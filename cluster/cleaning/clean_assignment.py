"""``CleanAssignment``: one clean the coordinator hands to a cleaner worker. A module of its own,
so the coordinator's process, which builds assignments but cleans nothing, does not import the
cleaner (and numba) with the worker."""

from __future__ import annotations

from dataclasses import dataclass

from storage.config import LogConfig
from storage.files import TopicPartition


@dataclass(frozen=True)
class CleanAssignment:
    """One clean the coordinator hands to a worker."""

    assignment_id: int
    topic_partition: TopicPartition
    log_dir: str
    partition_dir: str
    config: LogConfig
    first_dirty_offset: int
    first_uncleanable_offset: int
