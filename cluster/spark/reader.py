"""The batch read of the ``strata`` data source: ``spark.read.format("strata")``, and the
read of one planned partition that the stream reader (``cluster.spark.stream``) shares.

The planner asks the partitions' offsets once, at the start of the query (log start, log end,
last stable offset), resolves the starting and ending options (``cluster.spark.offsets``) and
groups the log partitions into Spark tasks (``cluster.spark.read_tasks``); a task reads each of
its partitions' segment files directly, up to its end (``storage.view.read_partition_batches``:
safe against concurrent cleaner swaps; with ``read_committed``, the default, the end is at most
the last stable offset and the batches of aborted transactions are skipped), and yields Arrow
batches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cluster.spark import offsets
from cluster.spark import options as opts
from cluster.spark.connection import connect, warm_up
from cluster.spark.errors import SourceOptionError
from cluster.spark.read_tasks import ReadTask, read_tasks
from storage import files

# the storage engine and its numba kernels are loaded by the tasks that read, not here
if TYPE_CHECKING:
    from storage.config import LogConfig


class ReadPartition(InputPartition):
    """One Spark partition of a read: offsets ``[start, end)`` of one topic partition, read from
    its directory ``path`` with ``isolation`` (read_committed: ``end`` is at most the last stable
    offset at planning, and the batches of aborted transactions are skipped)."""

    def __init__(self, topic: str, partition: int, path: str, config: LogConfig, start: int,
                 end: int, isolation: str = opts.READ_UNCOMMITTED,
                 fail_on_data_loss: bool = True) -> None:
        super().__init__(partition)
        self.topic = topic
        self.partition = partition
        self.path = path
        self.config = config
        self.start = start
        self.end = end
        self.isolation = isolation
        self.fail_on_data_loss = fail_on_data_loss


class StrataReader(DataSourceReader):
    """A batch read: ``plan`` asks the nodes for every partition's offsets once and plans
    ``[start, end)`` from ``startingOffsets``/``startingTimestamp``/``startingOffsetsByTimestamp``
    and ``endingOffsets`` (``cluster.spark.offsets``); ``partitions`` groups those into at most
    ``parallelism`` Spark tasks (``cluster.spark.read_tasks``); ``read`` runs in a Spark task."""

    def __init__(self, options: dict[str, str], schema: StructType,
                 parallelism: int | None = None) -> None:
        self.settings = opts.read_settings(options, opts.BATCH_READ)
        self.options = options
        self.schema = schema
        self.topic = self.settings.topic
        self.ends = opts.ending_offsets(options, self.topic)
        self.parallelism = parallelism

    def partitions(self) -> list[ReadTask]:
        return read_tasks(self.plan(), self.parallelism)

    def plan(self) -> list[ReadPartition]:
        """``[start, end)`` of every partition of the topic, in partition order."""
        conn = opts.connection(self.options)
        cluster = connect(conn.address, conn.namespace, kernels=False)
        layout = cluster.topic_layout(self.topic)
        bounds = {p: b for p, b in offsets.partition_bounds(cluster, self.topic).items()
                  if p in layout.paths}
        settings = self.settings
        starts = offsets.resolve_start(cluster, self.topic, settings.position, bounds,
                                       settings.isolation, settings.fail_on_data_loss)
        ends = offsets.resolve_end(self.topic, self.ends, bounds, settings.isolation)
        out = []
        for partition in sorted(bounds):
            start, end = starts[partition], ends[partition]
            if start > end and partition in self.ends:
                raise SourceOptionError(
                    f"{self.topic}-{partition}: the read would start at offset {start}, after "
                    f"its endingOffsets {end}", option="endingOffsets", partition=partition)
            out.append(ReadPartition(self.topic, partition, layout.paths[partition],
                                     layout.config, start, end, settings.isolation,
                                     settings.fail_on_data_loss))
        return out

    def read(self, task: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(task, self.schema, self.settings, self.options)


def read_task(task: InputPartition, schema: StructType, settings: opts.ReadSettings,
              options: dict[str, str]) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of a Spark task of a read: its topic partitions one after another
    (Spark hands a read planned with no partition at all ``InputPartition(None)``)."""
    for part in getattr(task, "parts", ()):
        yield from read_partition(part, schema, settings.value_format, settings.rows_per_batch,
                                  relocator(options, part))


def read_partition(partition: ReadPartition, schema: StructType, value_format: str,
                   rows_per_batch: int,
                   relocate: Callable[[], str | None] | None = None) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one planned partition (a Spark task of a batch or streaming read),
    read from the segment files; columns in the order of ``schema``. ``relocate`` says where the
    partition lives now when it moved to another log directory during the read."""
    if partition.start >= partition.end:
        return
    start = _start_still_held(partition)
    if start >= partition.end:
        return
    from cluster.spark.decoding import FIXED_COLUMNS, MsgpackValues, arrow_batches
    from storage.view import read_partition_batches

    warm_up()
    values = None
    if value_format == "msgpack":
        from pyspark.sql.pandas.types import to_arrow_type

        values = MsgpackValues([(f.name, to_arrow_type(f.dataType, timezone="UTC"))
                                for f in schema.fields if f.name not in FIXED_COLUMNS])
    batches = read_partition_batches(partition.path, partition.config, start, partition.end,
                                     isolation=getattr(partition, "isolation",
                                                       opts.READ_UNCOMMITTED),
                                     relocate=relocate)
    yield from arrow_batches(batches, partition.topic, partition.partition, start,
                             partition.end, values=values, rows_per_batch=rows_per_batch,
                             columns=schema.names)


READ_TYPES = {"topic": "string", "partition": "int", "offset": "bigint",
              "timestamp": "timestamp", "key": "binary", "value": "binary",
              "headers": "array<struct<key:string,value:binary>>"}
"""The type of each column of ``READ_DDL``, as ``DataType.simpleString()`` writes it."""


def check_read_schema(schema: StructType, value_format: str, topic: str) -> None:
    """A schema given with ``.schema(...)`` may name any of the source's columns, in any order,
    each with its type: only those are decoded (``.schema("value BINARY")`` reads values alone).
    A column the source does not have, or one of another type, is refused naming it
    (``SourceOptionError``, option ``schema``). With ``valueFormat=msgpack`` every column that
    is not one of ``READ_DDL`` is a field of the values' maps."""
    seen: set[str] = set()
    for f in schema.fields:
        if f.name in seen:
            raise SourceOptionError(f"the schema of a read of topic {topic} names column "
                                    f"{f.name} twice", option="schema", column=f.name)
        seen.add(f.name)
        wanted = READ_TYPES.get(f.name)
        if wanted is None:
            if value_format == "msgpack":
                continue
            raise SourceOptionError(
                f"the schema of a read of topic {topic} names column {f.name}, which the strata "
                f"source does not have (columns: {', '.join(READ_TYPES)}; fields of msgpack "
                f"values need valueFormat=msgpack)", option="schema", column=f.name)
        if f.dataType.simpleString() != wanted:
            raise SourceOptionError(
                f"column {f.name} of a read of topic {topic} is {wanted.upper()}, not "
                f"{f.dataType.simpleString().upper()} as the schema given says",
                option="schema", column=f.name)


def relocator(options: dict[str, str], partition: ReadPartition) -> Callable[[], str | None]:
    """Where ``partition`` lives now: a partition moved to another log directory during the read
    is followed there (None while no directory serves it)."""
    def where() -> str | None:
        conn = opts.connection(options)
        return connect(conn.address, conn.namespace).topic_layout(
            partition.topic).paths.get(partition.partition)
    return where


def _start_still_held(partition: ReadPartition) -> int:
    """The planned start, checked again in the task: retention may have deleted the segments
    holding it since the plan (the first segment's base offset is then above it; compaction keeps
    the first segment's base). Data loss as at planning (``cluster.spark.offsets.checked_start``):
    an error naming the offsets, or, with ``failOnDataLoss=false``, a warning and the first
    offset still held."""
    try:
        names = os.listdir(partition.path)
    except FileNotFoundError:
        return partition.start                  # the partition is gone: nothing to read
    bases = [files.offset_from_file_name(name) for name in names
             if files.is_segment_file(name) and name.endswith(files.LOG_SUFFIX)]
    first = min(bases, default=partition.start)
    if first <= partition.start:
        return partition.start
    held = offsets.Bounds(log_start=first, log_end=max(first, partition.end),
                          last_stable=max(first, partition.end))
    return offsets.checked_start(partition.topic, partition.partition, partition.start, held,
                                 getattr(partition, "fail_on_data_loss", True))
