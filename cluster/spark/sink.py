"""The ``strata`` streaming sink: exactly once, one transaction per micro-batch.

    (df.writeStream.format("strata").option("topic", "orders")
       .option("checkpointLocation", ck).start())

The sink is one transactional id (``transactionalId``, by default derived from the query's
``checkpointLocation``, so a query restarted from its checkpoint is the same sink). Each task
attempt of micro-batch N joins the open transaction tagged N (the first one begins it: a
transaction tagged N-1 still open is aborted, one tagged N+1 fences the late task), registers its
partitions and appends transactional batches with a producer id of its own. The micro-batch's
commit (on the driver, after every task succeeded) ends the transaction in one durable decision
that commits the attempts named in the commit messages, aborts the others, and records N as the
sink's last committed batch. A batch id not above the last one recorded is a replay (Spark
re-runs a batch whose commit it did not record, e.g. after a crash): everything it appended is
aborted, so it adds nothing. The batch's abort aborts the transaction. A read_committed reader
sees each micro-batch whole or not at all.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from cluster.spark import options as opts
from cluster.spark.connection import connect
from cluster.spark.encoding import BatchEncoder, WritePlan
from cluster.spark.errors import SourceOptionError, WriteRejectedError
from cluster.spark.writer import plan_write
from cluster.transactions.coordinator import TxnInfo
from cluster.client.txn_client import TxnHandle, TxnProducer, new_producer_id

logger = logging.getLogger(__name__)

BATCH_ID_PROPERTY = "streaming.sql.batchId"   # Spark's MicroBatchExecution.BATCH_ID_KEY


@dataclass
class StreamCommitMessage(WriterCommitMessage):
    spark_partition: int
    attempt: int
    producer_id: int
    epoch: int            # of the transaction joined; -1 when the task wrote nothing
    rows: int
    appended_records: int


def sink_id(options: dict[str, str]) -> str:
    """``transactionalId``, else one derived from ``checkpointLocation``."""
    given = opts._get(options, "transactionalId")
    if given:
        return given
    checkpoint = opts._get(options, "checkpointLocation") or opts._get(options, "path")
    if not checkpoint:
        raise SourceOptionError(
            "the strata streaming sink needs a checkpointLocation (its micro-batch ids make the "
            "writes exactly once) or a transactionalId", option="checkpointLocation")
    digest = hashlib.sha256(checkpoint.rstrip("/").encode()).hexdigest()[:20]
    return f"strata-sink-{digest}"


class StrataStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink. Each task of micro-batch ``batchId`` joins the sink's open
    transaction for that batch (the sink's transactional id, from ``transactionalId`` or the
    checkpoint location) with a producer id of its own; ``commit`` ends it with one decision that
    names the members and records the batch id, so a batch id committed before commits nothing
    (a replay after a crash adds no record); ``abort`` aborts the batch's transaction."""

    def __init__(self, plan: WritePlan, transactional_id: str, timeout_ms: int | None) -> None:
        self.plan = plan
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        raw = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if raw is None:
            raise WriteRejectedError("the strata streaming sink runs in a streaming query only "
                                     f"(no {BATCH_ID_PROPERTY} in the task)", topic=self.plan.topic)
        batch_id = int(raw)
        spark_partition = context.partitionId()
        plan = self.plan
        cluster = connect(plan.address, plan.namespace)
        joined: list[TxnProducer] = []
        encoder = BatchEncoder(plan, spark_partition, producer_id=new_producer_id())

        def items() -> Iterator[tuple[str, int, bytes]]:
            batches = iter(encoder.batches(iterator))
            first = next(batches, None)
            if first is None:
                return                    # no rows: the task joins no transaction
            txn = cluster.begin_transaction(self.transactional_id, self.timeout_ms,
                                            tag=str(batch_id), join=True)
            joined.append(txn.new_producer(encoder.producer_id))
            yield from joined[0].registering(itertools.chain([first], batches),
                                             plan.register_lookahead)

        result = cluster.produce_batches(items(), batch_bytes=plan.batch_limit)
        epoch = joined[0].txn.epoch if joined else -1
        return StreamCommitMessage(spark_partition, context.attemptNumber(),
                                   encoder.producer_id, epoch, encoder.rows, result.records)

    def commit(self, messages: list[StreamCommitMessage | None], batchId: int) -> None:
        """Commit micro-batch ``batchId``: its transaction's decision names the attempts that
        succeeded and the batch id (a replayed batch id commits nothing)."""
        written = [m for m in messages if m is not None and m.epoch >= 0]
        if not written:
            return
        epochs = {m.epoch for m in written}
        if len(epochs) > 1:
            raise WriteRejectedError(
                f"the tasks of micro-batch {batchId} wrote in different transactions (epochs "
                f"{sorted(epochs)}): the transaction was aborted meanwhile "
                f"(transactionTimeoutMs?); the batch fails and is written again on restart",
                topic=self.plan.topic, batch_id=batchId)
        outcome = self._handle(epochs.pop(), batchId).commit(
            [m.producer_id for m in written], sink_batch=batchId)
        if outcome.replayed_batch:
            logger.info("micro-batch %d of sink %s was committed before: its replay is aborted",
                        batchId, self.transactional_id)

    def abort(self, messages: list[StreamCommitMessage | None], batchId: int) -> None:
        """Abort micro-batch ``batchId``'s transaction (if it is still the open one)."""
        cluster = connect(self.plan.address, self.plan.namespace)
        try:
            meta = cluster.describe_transaction(self.transactional_id)
        except Exception:  # noqa: BLE001 - no transaction: nothing was written
            return
        if meta.state.open and meta.tag == str(batchId):
            self._handle(meta.epoch, batchId).abort()

    def _handle(self, epoch: int, batch_id: int) -> TxnHandle:
        cluster = connect(self.plan.address, self.plan.namespace)
        return TxnHandle(cluster, TxnInfo(self.transactional_id, epoch, str(batch_id),
                                          self.timeout_ms or 0))


def stream_writer(options: dict[str, str], schema: StructType,
                  overwrite: bool) -> StrataStreamWriter:
    """The sink of ``writeStream.format("strata")``: output mode append only."""
    if overwrite:
        raise SourceOptionError("a topic is an append-only log: the strata sink takes output "
                                "mode append only", option="outputMode")
    plan = plan_write(options, schema, transactional=False)
    return StrataStreamWriter(plan, sink_id(options), opts.transaction_timeout_ms(options))
