"""The batch write of the ``strata`` data source: ``df.write.format("strata")``.

The planner (a Spark Python process on the driver side) checks the DataFrame against the topic
and begins the job's transaction (``plan_write``: a ``WritePlan``); each task attempt encodes its
rows into transactional record batches with a producer id of its own (``BatchEncoder``),
registers each partition in the transaction and sends the batches to the node actors that own the
partitions; the job's commit commits the attempts that succeeded and aborts the others, its abort
aborts all (``StrataWriter``). A driver that dies leaves an open transaction, aborted by the
cluster after ``transactionTimeoutMs``. The streaming sink (``cluster.spark.sink``) plans its
writes with ``plan_write`` too.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegralType,
    StringType,
    StructType,
    TimestampType,
)

from cluster.spark import options as opts
from cluster.client.data_path import skip_held   # a retried idempotent task's batches
from cluster.spark.connection import connect
from cluster.spark.errors import WriteRejectedError

# the encoders pull in numba and the storage engine, which only tasks need
if TYPE_CHECKING:
    from cluster.spark.encoding import WritePlan

PRODUCER_NONCE_BITS = 38


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
