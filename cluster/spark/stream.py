"""The ``strata`` streaming source: ``spark.readStream.format("strata")``.

    q = (spark.readStream.format("strata").option("topic", "orders")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 100000).load()
         .writeStream.format("parquet").option("checkpointLocation", ck).start())

Offsets are Kafka's source offsets, ``{"<topic>": {"<partition>": next offset to read}}``, kept by
Spark in the query's checkpoint (offset log and commit log); a restarted query plans from the end of
its last committed micro-batch, so no record is read twice and none is skipped.

- ``initialOffset`` (a new query only): the starting options resolved against the partitions'
  offsets now (``cluster.spark.offsets.resolve_start``; ``latest`` by default, as Kafka's).
- ``latestOffset(start, limit)``: the end of the next micro-batch, the last stable offset of every
  partition (read_committed) or its log end (read_uncommitted), capped by ``limit``: Spark's
  ``ReadMaxRows`` from ``maxOffsetsPerTrigger``/``maxRecordsPerTrigger`` (``getDefaultReadLimit``),
  split over the partitions; with ``Trigger.AvailableNow`` never past the offsets of
  ``prepareForTriggerAvailableNow``. A partition added to the topic (``Cluster.add_partitions``)
  joins at offset 0, as in Kafka's source.
- ``partitions(start, end)``: the topic partitions with offsets to read, grouped into Spark tasks
  as a batch read's (``cluster.spark.read_tasks``); a start the partition no longer holds is data
  loss (``failOnDataLoss``, ``cluster.spark.offsets``).
- ``read``: a Spark task reads the segment files, as the batch source does (``read_partition``),
  skipping aborted transactions; compacted partitions read across their offset gaps and across
  concurrent cleaner swaps (``storage.view.read_partition_batches``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from cluster.spark import offsets
from cluster.spark import options as opts
from cluster.spark.connection import connect
from cluster.spark.errors import SourceOptionError
from cluster.spark.read_tasks import ReadTask, read_tasks
from cluster.spark.reader import ReadPartition, read_task

Offsets = dict[int, int]


class StrataStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads of one topic. Planning (``initialOffset``, ``latestOffset``,
    ``partitions``) runs in Spark's planner Python process and asks the nodes; ``read`` runs in
    executor tasks and reads files. The only state kept between calls is the target of
    ``Trigger.AvailableNow``; everything else comes from the offsets Spark passes in."""

    def __init__(self, options: dict[str, str], schema: StructType,
                 parallelism: int | None = None) -> None:
        self.settings = opts.read_settings(options, opts.STREAM_READ)
        self.parallelism = parallelism
        self.options = options
        self.schema = schema
        self.topic = self.settings.topic
        self.max_offsets = opts.max_offsets_per_trigger(options)
        self._target: Offsets | None = None          # Trigger.AvailableNow
        self._cluster: Any = None

    # ---- offsets as Spark keeps them -----------------------------------------------------------
    def _encode(self, offsets_: Mapping[int, int]) -> dict:
        return {self.topic: {str(p): int(o) for p, o in sorted(offsets_.items())}}

    def _decode(self, offset: Mapping[str, Any]) -> Offsets:
        if set(offset) != {self.topic}:
            raise SourceOptionError(
                f"the query's checkpoint holds offsets of topic(s) {sorted(offset)}, but this "
                f"source reads topic {self.topic}: start the query with a new "
                f"checkpointLocation", option="topic")
        return {int(p): int(o) for p, o in offset[self.topic].items()}

    def _connect(self) -> Any:
        if self._cluster is None:
            conn = opts.connection(self.options)
            self._cluster = connect(conn.address, conn.namespace, kernels=False)
        return self._cluster

    def _bounds(self) -> dict[int, offsets.Bounds]:
        return offsets.partition_bounds(self._connect(), self.topic)

    def _latest(self) -> Offsets:
        return {p: b.latest(self.settings.isolation) for p, b in self._bounds().items()}

    # ---- DataSourceStreamReader ----------------------------------------------------------------
    def initialOffset(self) -> dict:
        bounds = self._bounds()
        settings = self.settings
        return self._encode(offsets.resolve_start(self._connect(), self.topic, settings.position,
                                                  bounds, settings.isolation,
                                                  settings.fail_on_data_loss))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_offsets is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._decode(start)
        ends = {}
        for partition, b in self._bounds().items():
            first = begin.get(partition, 0)            # a new partition starts at its offset 0
            end = b.latest(self.settings.isolation)
            if self._target is not None:
                end = min(end, self._target.get(partition, first))
            ends[partition] = max(end, first)
        for partition, first in begin.items():         # never forget a partition's position
            ends.setdefault(partition, first)
        if isinstance(limit, ReadMaxRows):
            ends = offsets.limit_ends({p: begin.get(p, 0) for p in ends}, ends, limit.max_rows)
        return self._encode(ends)

    def reportLatestOffset(self) -> dict | None:
        return self._encode(self._latest())

    def partitions(self, start: dict, end: dict) -> list[ReadTask]:
        return read_tasks(self.plan(start, end), self.parallelism)

    def plan(self, start: dict, end: dict) -> list[ReadPartition]:
        """``[start, end)`` of every partition with offsets to read in the micro-batch."""
        begin, stop = self._decode(start), self._decode(end)
        if begin == stop:
            return []
        cluster = self._connect()
        layout = cluster.topic_layout(self.topic)
        bounds = offsets.partition_bounds(cluster, self.topic)
        out = []
        for partition, last in sorted(stop.items()):
            first = begin.get(partition, 0)
            if first >= last:
                continue
            b = bounds.get(partition)
            if b is None or partition not in layout.paths:
                continue                               # partitions are never removed
            first = offsets.checked_start(self.topic, partition, first, b,
                                          self.settings.fail_on_data_loss)
            if first >= last:
                continue
            out.append(ReadPartition(self.topic, partition, layout.paths[partition],
                                     layout.config, first, last, self.settings.isolation,
                                     self.settings.fail_on_data_loss))
        return out

    def read(self, task: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(task, self.schema, self.settings, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, and a read holds no resource."""

    def stop(self) -> None:
        self._cluster = None

    def __getstate__(self) -> dict[str, Any]:
        """Sent to executor tasks without the planner's cluster client (Ray handles)."""
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state
