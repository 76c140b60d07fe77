"""How a ``strata`` read (batch or micro-batch) is cut into Spark tasks.

A Spark task of a Python data source costs about 30-60 ms of its own on top of the rows it reads
(Spark hands the task to a Python worker and sets up the Arrow stream back), so one task per topic
partition leaves most of a short read in that overhead when the topic has more partitions than
Spark has cores. The planner groups the topic partitions to read into at most ``parallelism``
tasks, Spark's default parallelism when the data source was registered (its cores), balanced by
their record counts: the largest first, each onto the task with the fewest records so far
(the LPT rule). A topic partition is never split, and never read by two tasks.

More tasks than ``parallelism`` are planned when the read is large (one per
``GROUP_RECORDS_AT_MOST`` records of the whole read, at most one per topic partition), so that a
task retried after a failure re-reads a bounded amount and Spark can still balance large reads.
A topic partition with nothing to read gets no task. Without a known parallelism (a reader built
outside ``register``, a Spark Connect session) each topic partition is a task of its own, as in
Kafka's source. The parallelism is the one when ``register`` ran: executors that join a cluster
later are not counted, except through the large-read rule above.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Protocol

from pyspark.sql.datasource import InputPartition

GROUP_RECORDS_AT_MOST = 2_000_000
"""A read of more records than ``parallelism`` times this gets more tasks than ``parallelism``."""


class Planned(Protocol):
    """A planned read of one topic partition: offsets ``[start, end)``."""

    partition: int
    start: int
    end: int


class ReadTask(InputPartition):
    """One Spark task of a read: the topic partitions ``parts`` it reads, one after another, in
    partition order."""

    def __init__(self, parts: Sequence[Planned]) -> None:
        super().__init__([p.partition for p in parts])
        self.parts = list(parts)


def read_tasks(parts: Sequence[Planned], parallelism: int | None) -> list[ReadTask]:
    """The Spark tasks of a read of ``parts`` (see the module's docstring)."""
    todo = [p for p in parts if p.end > p.start]
    if not parallelism or parallelism < 1:
        return [ReadTask([p]) for p in todo]
    total = sum(p.end - p.start for p in todo)
    count = min(len(todo), max(parallelism, -(-total // GROUP_RECORDS_AT_MOST)))
    bins: list[tuple[int, int]] = [(0, i) for i in range(count)]   # (records so far, task)
    members: list[list[Planned]] = [[] for _ in range(count)]
    for part in sorted(todo, key=lambda p: (p.start - p.end, p.partition)):
        records, task = heapq.heappop(bins)
        members[task].append(part)
        heapq.heappush(bins, (records + part.end - part.start, task))
    return [ReadTask(sorted(m, key=lambda p: p.partition)) for m in members]
