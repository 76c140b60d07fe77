"""Atomic batch writes: ``df.write.format("strata")`` is one transaction per job, on a real local
Spark session and Ray cluster. read_committed is checked through ``Cluster.consume`` (the
Spark reader's isolation belongs to the streaming source)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cluster.transactions.txn_state import TxnState

TOPIC_ROWS = 30_000


@pytest.fixture
def strata(strata):
    """The module's cluster, with the ``spark-write-`` transactions of the tests before set
    aside (``_jobs``): each test finds its job the only new one."""
    strata.earlier_jobs = {t.transactional_id for t in _jobs(strata)}
    return strata


def committed(cluster, topic: str) -> list[bytes]:
    return [r.value for p in cluster.partitions(topic)
            for r in cluster.consume(topic, p, isolation="read_committed")]


def stored(cluster, topic: str) -> int:
    """Data records in the logs, committed or not (markers are no records)."""
    return sum(len(list(cluster.consume(topic, p))) for p in cluster.partitions(topic))


def all_stable(cluster, topic: str) -> bool:
    return all(cluster.last_stable_offset(topic, p) == cluster.offsets(topic, p)[1]
               for p in cluster.partitions(topic))


def _jobs(strata) -> list:
    """The ``spark-write-`` transactions of the cluster that the test's own writes began (every
    write has a transactional id of its own)."""
    earlier = getattr(strata, "earlier_jobs", set())
    return [t for t in strata.cluster.list_transactions()
            if t.transactional_id.startswith("spark-write-")
            and t.transactional_id not in earlier]


def _failing_udf(namespace: str, topic: str, partition_id: int, attempts: tuple[int, ...],
                 wait_for_value: str):
    """A Python UDF passing ``value`` through; in the given attempts of Spark partition
    ``partition_id`` it waits, at row 9000 (past the buffers between the UDF and the
    writer), until the topic holds ``wait_for_value``
    (read_uncommitted: stored, not committed), then raises."""
    seen: dict[tuple[int, int], int] = {}     # rows per task attempt (workers are reused)

    def passthrough(value: str) -> str:
        import time

        from pyspark import TaskContext

        from cluster.spark.connection import connect

        context = TaskContext.get()
        task = (context.partitionId(), context.attemptNumber())
        seen[task] = seen.get(task, 0) + 1
        if task[0] == partition_id and task[1] in attempts and seen[task] == 9000:
            cluster = connect("auto", namespace)
            deadline = time.monotonic() + 60
            while not any(r.value == wait_for_value.encode() for p in cluster.partitions(topic)
                          for r in cluster.consume(topic, p)):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{wait_for_value} was never stored")
                time.sleep(0.2)
            raise RuntimeError("injected failure after the writer stored rows")
        return value

    from pyspark.sql import functions as F

    return F.udf(passthrough, "string")


def _frame(spark, udf, n: int = TOPIC_ROWS, partitions: int = 3):
    return spark.range(0, n, numPartitions=partitions).selectExpr(
        "cast(id as string) as key", "cast(id as string) as value").withColumn(
        "value", udf("value"))


@pytest.fixture
def small_arrow_batches(strata):
    """Rows reach the writer 200 at a time, so a task's first rows are stored long before it
    ends (Spark's default is 10,000 rows per Arrow batch)."""
    strata.spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    yield
    strata.spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


@pytest.mark.usefixtures("small_arrow_batches")
def test_a_job_that_fails_half_way_is_invisible_to_read_committed(strata) -> None:
    """Task 2 fails in every attempt once the rows of task 0 are stored (by its own writer: task
    0 ran before or beside it): the job fails, its abort writes abort markers, nothing of it is
    ever read_committed."""
    c = strata.cluster
    c.create_topic("orders", partitions=3)
    failing = _frame(strata.spark, _failing_udf(strata.namespace, "orders", 2, (0, 1), "0"))
    with pytest.raises(Exception, match="injected failure"):
        strata.write(failing, "orders", batchBytes=16384)
    assert stored(c, "orders") > TOPIC_ROWS // 3          # others wrote before the failure
    assert committed(c, "orders") == []
    assert all_stable(c, "orders")
    [job] = _jobs(strata)
    assert job.state == TxnState.COMPLETE_ABORT


@pytest.mark.usefixtures("small_arrow_batches")
def test_a_successful_job_with_a_retried_task_is_visible_whole_and_once(strata) -> None:
    """The failed first attempt of task 1 stored rows (it waits for its own first row in the
    log); the job's commit aborts it and commits the successful attempts: every row once."""
    c = strata.cluster
    c.create_topic("orders", partitions=3)
    flaky = _frame(strata.spark, _failing_udf(strata.namespace, "orders", 1, (0,), "10000"))
    strata.write(flaky, "orders", batchBytes=16384)
    got = committed(c, "orders")
    assert sorted(got) == sorted(str(i).encode() for i in range(TOPIC_ROWS))
    assert stored(c, "orders") > TOPIC_ROWS                # the failed attempt's batch is there
    assert all_stable(c, "orders")
    [job] = _jobs(strata)
    assert job.state == TxnState.COMPLETE_COMMIT
    assert len(job.commit) == 3 and len(job.members) == 4  # 3 attempts committed, 1 aborted
    assert strata.read("orders").count() >= TOPIC_ROWS


def test_a_job_whose_driver_dies_is_aborted_by_the_timeout(strata) -> None:
    """The planner began the transaction and a task wrote; no commit or abort ever comes (the
    driver died). The coordinator aborts it after transactionTimeoutMs: the LSO returns to the
    log end and nothing is visible."""
    from pyspark.sql.types import StringType, StructField, StructType

    from cluster.spark.writer import StrataWriter, plan_write
    from tests.cluster.conftest import wait_for

    c = strata.cluster
    c.create_topic("orders", partitions=2)
    options = {"topic": "orders", "namespace": strata.namespace, "transactionTimeoutMs": "3000"}
    schema = StructType([StructField("key", StringType()), StructField("value", StringType())])
    writer = StrataWriter(plan_write(options, schema))
    keys = [str(i) for i in range(100)]
    writer.write(iter([pa.RecordBatch.from_pydict({"key": keys, "value": keys})]))
    assert stored(c, "orders") == 100 and not all_stable(c, "orders")
    wait_for(lambda: _jobs(strata)[0].state == TxnState.COMPLETE_ABORT, timeout=30,
             what="the timeout abort")
    assert all_stable(c, "orders") and committed(c, "orders") == []
    with pytest.raises(Exception, match="fenced"):
        writer.commit([])
