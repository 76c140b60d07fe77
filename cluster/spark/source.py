"""The ``strata`` data source: write a DataFrame into a topic, read a topic back, stream from it.

    df.write.format("strata").option("topic", "orders").mode("append").save()
    spark.read.format("strata").option("topic", "orders").load()
    spark.readStream.format("strata").option("topic", "orders").load()   # cluster.spark.stream

Write: the planner (a Spark Python process on the driver side) checks the DataFrame against the
topic and begins the job's transaction (``WritePlan``); each task attempt encodes its rows into
transactional record batches with a producer id of its own (``BatchEncoder``), registers each
partition in the transaction and sends the batches to the node actors that own the partitions;
the job's commit commits the attempts that succeeded and aborts the others, its abort aborts all
(``StrataWriter``). A driver that dies leaves an open transaction, aborted by the cluster after
``transactionTimeoutMs``. Read: the planner asks the partitions' offsets once, at the start of the
query (log start, log end, last stable offset), resolves the starting and ending options
(``cluster.spark.offsets``) and groups the log partitions into Spark tasks
(``cluster.spark.read_tasks``); a task reads each of its partitions' segment files directly, up to
its end (``storage.view.read_partition_batches``: safe against concurrent cleaner swaps; with
``read_committed``, the default, the end is at most the last stable offset and the batches of
aborted transactions are skipped), and yields Arrow batches. Options: ``cluster.spark.options``;
every option given is checked against its table, so none is ignored.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegralType,
    StringType,
    StructType,
    TimestampType,
)

from cluster.spark import offsets
from cluster.spark import options as opts
from cluster.client.data_path import skip_held   # a retried idempotent task's batches
from cluster.spark.connection import connect, settle_heap, warm_up
from cluster.spark.errors import SourceOptionError, WriteRejectedError
from cluster.spark.read_tasks import ReadTask, read_tasks
from storage import files

# Loaded where they are used, not here: this module is imported by every planner process that
# unpickles the data source (a streaming query starts one per query, and waits for it), and
# these pull in numba and the storage engine, which only tasks need.
if TYPE_CHECKING:
    from cluster.client.client import Cluster
    from cluster.spark.encoding import WritePlan
    from storage.config import LogConfig

PRODUCER_NONCE_BITS = 38


class StrataDataSource(DataSource):
    """``format("strata")``: a topic of a running Strata cluster as a Spark table.

    Contract: every option is checked against ``cluster.spark.options.KNOWN_OPTIONS`` before any
    work (an unknown, unsupported or misplaced option raises ``SourceOptionError`` naming it).
    Reads (batch and stream) are ``read_committed`` by default and end at the last stable offset;
    a batch write is one transaction per job (all of its rows visible, or none); a streaming
    write is exactly once per micro-batch. The schema is ``READ_DDL`` (or the msgpack columns of
    ``valueSchema``); a schema given with ``.schema(...)`` picks columns of it, and only those
    are decoded (``check_read_schema``).
    """

    spark_parallelism: int | None = None
    """Spark's default parallelism when ``register`` ran (``for_session``): the number of tasks a
    read groups its topic partitions into (``cluster.spark.read_tasks``). None: one task per topic
    partition."""

    @classmethod
    def name(cls) -> str:
        return "strata"

    @classmethod
    def for_session(cls, parallelism: int | None) -> type[StrataDataSource]:
        """This data source as ``register`` hands it to a session whose default parallelism is
        ``parallelism``. The subclass is pickled by value (it is no module's attribute), so the
        Python processes that plan a read see the number."""
        return type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                           "__qualname__": f"{cls.__qualname__}.for_session",
                                           "spark_parallelism": parallelism})

    def schema(self) -> str:
        from cluster.spark.decoding import READ_DDL

        settle_heap()          # the planner process that asks has just imported this module
        if opts.value_format(self.options) == "msgpack":
            fixed = READ_DDL.replace(", value BINARY", "")
            head, tail = fixed.split(", headers ")
            return f"{head}, {opts.value_schema(self.options)}, headers {tail}"
        return READ_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        reader = StrataReader(dict(self.options), schema, self.spark_parallelism)
        check_read_schema(schema, reader.settings.value_format, reader.topic)
        return reader

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from cluster.spark.stream import StrataStreamReader

        reader = StrataStreamReader(dict(self.options), schema, self.spark_parallelism)
        check_read_schema(schema, reader.settings.value_format, reader.topic)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> StrataWriter:
        if overwrite:
            raise SourceOptionError("a topic is an append-only log: use .mode('append'), not "
                                    "overwrite", option="mode")
        return StrataWriter(plan_write(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from cluster.spark.sink import stream_writer

        return stream_writer(dict(self.options), schema, overwrite)


# ---- write -------------------------------------------------------------------------------------------
@dataclass
class StrataCommitMessage(WriterCommitMessage):
    spark_partition: int
    attempt: int
    producer_id: int
    rows: int
    batches: int
    bytes: int
    appended_records: int          # below ``rows`` when some batches were retries (duplicates)


def plan_write(options: dict[str, str], schema: StructType,
               transactional: bool | None = None) -> WritePlan:
    """Check the DataFrame against the topic; raises before any task runs. Then, for a
    transactional write (``transactional``, default the ``transactional`` option, true), begin
    the job's transaction."""
    from cluster.spark.encoding import DEFAULT_BATCH_BYTES, RESERVED_COLUMNS, WritePlan

    opts.check_options(options, opts.WRITE)
    name = opts.topic(options)
    conn = opts.connection(options)
    cluster = connect(conn.address, conn.namespace)
    layout = cluster.topic_layout(name)
    fields = {f.name: f.dataType for f in schema.fields}
    has_key = "key" in fields
    if layout.config.compact and not has_key:
        raise WriteRejectedError(
            f"topic {name} is compacted (cleanup.policy=compact): every record needs a key, but "
            f"the DataFrame has no key column (columns: {sorted(fields)}); add a BINARY or "
            f"STRING column named key", topic=name)
    for column in ("key", "value"):
        if column in fields and not isinstance(fields[column], (BinaryType, StringType)):
            raise WriteRejectedError(f"column {column} must be BINARY or STRING, not "
                                     f"{fields[column].simpleString()}", topic=name, column=column)
    if "partition" in fields and not isinstance(fields["partition"], IntegralType):
        raise WriteRejectedError(f"column partition must be an integer, not "
                                 f"{fields['partition'].simpleString()}", topic=name)
    if "timestamp" in fields and not isinstance(fields["timestamp"],
                                                (TimestampType, IntegralType)):
        raise WriteRejectedError(f"column timestamp must be TIMESTAMP or BIGINT milliseconds, "
                                 f"not {fields['timestamp'].simpleString()}", topic=name)
    if "headers" in fields and not _is_headers(fields["headers"]):
        raise WriteRejectedError("column headers must be ARRAY<STRUCT<key: STRING, value: "
                                 f"BINARY>>, not {fields['headers'].simpleString()}", topic=name)
    packed = tuple(f for f in fields if f not in RESERVED_COLUMNS)
    if "value" in fields and packed:
        raise WriteRejectedError(
            f"the DataFrame has a value column and other data columns {list(packed)}: write "
            f"either a value column, or no value column and the columns to pack into a msgpack "
            f"map", topic=name, columns=list(packed))
    if "value" not in fields and not packed:
        raise WriteRejectedError(f"the DataFrame has no value: add a value column (null = "
                                 f"tombstone) or data columns to pack (columns: {sorted(fields)})",
                                 topic=name)
    nonce = secrets.randbits(PRODUCER_NONCE_BITS)
    txn = None
    if opts.boolean(options, "transactional", True) if transactional is None else transactional:
        txn = cluster.begin_transaction(f"spark-write-{name}-{nonce:010x}",
                                        opts.transaction_timeout_ms(options)).info
    return WritePlan(
        topic=name, address=conn.address, namespace=conn.namespace,
        partitions=len(layout.partitions), compact=layout.config.compact,
        max_message_bytes=layout.config.max_message_bytes,
        segment_bytes=layout.config.segment_bytes,
        batch_bytes=opts.positive_int(options, "batchBytes", DEFAULT_BATCH_BYTES),
        producer_nonce=nonce, txn=txn,
        has_key=has_key, has_value="value" in fields, packed_columns=packed,
        has_partition="partition" in fields, has_timestamp="timestamp" in fields,
        has_headers="headers" in fields, compression=opts.compression(options),
        flush=opts.boolean(options, "flush", True))


def _is_headers(kind: object) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in kind.elementType.fields}
    return (set(inner) == {"key", "value"} and isinstance(inner["key"], StringType)
            and isinstance(inner["value"], (BinaryType, StringType)))


class StrataWriter(DataSourceArrowWriter):
    """The batch writer. ``write`` runs in each task: it encodes the task's rows into record
    batches under a producer id of its own (a member of the job's transaction), appends them and
    returns what it wrote; nothing is visible to read_committed readers until ``commit``, which
    commits exactly the members named by the commit messages and aborts the rest. ``abort``
    aborts everything. With ``transactional=false``: idempotent batches, visible as appended."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StrataCommitMessage:
        from pyspark import TaskContext

        from cluster.spark.encoding import BatchEncoder
        from cluster.client.txn_client import TxnHandle

        context = TaskContext.get()
        spark_partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        plan = self.plan
        cluster = connect(plan.address, plan.namespace)
        if plan.txn is None:
            encoder = BatchEncoder(plan, spark_partition)
            items = encoder.batches(iterator)
            if attempt > 0:
                items = skip_held(items, cluster, encoder.producer_id)
        else:
            member = TxnHandle.attach(cluster, plan.txn).new_producer()
            encoder = BatchEncoder(plan, spark_partition, producer_id=member.producer_id)
            items = member.registering(encoder.batches(iterator), plan.register_lookahead)
        result = cluster.produce_batches(items, batch_bytes=plan.batch_limit)
        return StrataCommitMessage(spark_partition, attempt, encoder.producer_id, encoder.rows,
                                   encoder.batches_built, encoder.bytes_built, result.records)

    def commit(self, messages: list[StrataCommitMessage | None]) -> None:
        """The job succeeded: commit the attempts whose messages Spark hands over (one per
        Spark partition) and abort every other member (failed and speculative attempts), in one
        decision of the coordinator; their markers are flushed. ``ProducerFencedError`` when the
        transaction was aborted meanwhile (``transactionTimeoutMs`` passed): the job fails and
        none of its rows is visible. Without a transaction: flush the topic (``flush``)."""
        from cluster.client.txn_client import TxnHandle

        plan = self.plan
        cluster = connect(plan.address, plan.namespace)
        if plan.txn is not None:
            TxnHandle.attach(cluster, plan.txn).commit(
                [m.producer_id for m in messages if m is not None])
            return
        if not plan.flush:
            return
        for partition in range(plan.partitions):
            cluster.flush(plan.topic, partition)

    def abort(self, messages: list[StrataCommitMessage | None]) -> None:
        """The job failed or was cancelled: abort its transaction (every attempt's rows)."""
        from cluster.client.txn_client import TxnHandle

        plan = self.plan
        if plan.txn is not None:
            TxnHandle.attach(connect(plan.address, plan.namespace), plan.txn).abort()



# ---- read --------------------------------------------------------------------------------------------
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
