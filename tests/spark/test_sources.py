"""The ``strata`` and ``strata-stats`` data sources against a real local Ray cluster and a real
SparkSession: round trips, the compaction oracle in Spark SQL, statistics, exactly-once writes
under a task retry, and bad input."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from cluster.client.partitioner import partitions_for_keys
from tests.spark.conftest import wait_for

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 64 * 1024,
           "min.cleanable.dirty.ratio": 0.01}
# recent: the 7-day retention (first check 30 s after a node starts) would delete older records
T0 = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(minutes=1)


def test_write_then_read_back_equals_the_input(strata) -> None:
    spark = strata.spark
    # records of 2024 outlive retention.ms only with none: the commit marker (stamped now) rolls
    # the segment (segment.ms counts from the first batch's timestamp), and retention would
    # then delete the closed segment, as Kafka does
    strata.cluster.create_topic("orders", partitions=3, config={"retention.ms": -1})
    rows = []
    for i in range(3000):
        rows.append((f"k{i % 700}" if i % 11 else None,
                     None if i % 13 == 0 else f"value-{i}".encode(),
                     (i % 3) if i % 5 == 0 else None,
                     T0 + dt.timedelta(milliseconds=i),
                     [("h", b"x%d" % i)] if i % 7 == 0 else []))
    df = spark.createDataFrame(rows, "key STRING, value BINARY, partition INT, timestamp "
                               "TIMESTAMP, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    strata.write(df.repartition(2), "orders", batchBytes=4096)

    got = strata.read("orders").collect()
    assert len(got) == len(rows)
    expected = sorted(((k, v, ts, tuple(h)) for k, v, _, ts, h in rows), key=repr)
    actual = sorted(((None if r.key is None else r.key.decode(), r.value,
                     r.timestamp.replace(tzinfo=dt.timezone.utc),
                     tuple((h.key, h.value) for h in r.headers)) for r in got), key=repr)
    assert actual == expected
    by_value = {r.value: r for r in got if r.value is not None}
    for key, value, partition, _, _ in rows:
        if value is None:
            continue
        row = by_value[value]
        if partition is not None:
            assert row.partition == partition
        elif key is not None:
            assert row.partition == int(partitions_for_keys([key.encode()], 3)[0])
    offsets = sorted((r.partition, r.offset) for r in got)
    for p in range(3):
        mine = [o for q, o in offsets if q == p]
        assert mine == list(range(len(mine)))


def test_other_columns_are_packed_into_msgpack_and_decoded_back(strata) -> None:
    spark = strata.spark
    strata.cluster.create_topic("prices", partitions=2)
    df = spark.range(500).selectExpr("cast(id as string) as key", "id * 1.5 as price",
                                     "cast(id as int) as qty", "concat('n', id) as name")
    strata.write(df, "prices")
    read = strata.read("prices", valueFormat="msgpack",
                       valueSchema="price DOUBLE, qty INT, name STRING")
    assert read.columns == ["topic", "partition", "offset", "timestamp", "key", "price", "qty",
                            "name", "headers"]
    got = sorted((r.key.decode(), r.price, r.qty, r.name) for r in read.collect())
    assert got == sorted((str(i), i * 1.5, i, f"n{i}") for i in range(500))


def test_starting_offsets_skip_what_came_before(strata) -> None:
    strata.cluster.create_topic("t", partitions=2)
    strata.write(strata.spark.range(100).selectExpr("cast(id as string) as key",
                                                    "cast(id as string) as value"), "t")
    offsets = [[r.offset for r in strata.cluster.consume("t", p)] for p in range(2)]
    with pytest.raises(Exception, match="startingOffsets can't be latest for a batch read"):
        strata.read("t", startingOffsets="latest").count()
    with pytest.raises(Exception, match="endingOffsets for t-1 can't be earliest"):
        strata.read("t", endingOffsets='{"1": -2}').count()
    with pytest.raises(Exception, match=r"must name every partition of topic t .*missing: \[1\]"):
        strata.read("t", startingOffsets='{"t": {"0": 5}}').count()
    some = strata.read("t", startingOffsets='{"t": {"0": %d, "1": -2}}' % offsets[0][-3])
    assert some.count() == 3 + len(offsets[1])     # (a commit marker follows the records)


def test_compacted_read_equals_the_latest_per_key_oracle(strata) -> None:
    spark = strata.spark
    c = strata.cluster
    c.create_topic("state", partitions=3, config=COMPACT)
    source = (spark.range(20_000)
              .selectExpr("id as seq", "concat('k', cast(id % 500 as string)) as key",
                          "case when id % 17 = 0 then null else concat('v', cast(id as string)) "
                          "end as value")
              .repartition(2, "key").sortWithinPartitions("seq"))
    strata.write(source.select("key", "value"), "state", batchBytes=8192)
    for p in range(3):
        c.trigger_clean("state", p, roll=True, wait=True)
    sizes = {r["partition"]: r["size_bytes"] for r in c.stats()
             if r["kind"] == "partition" and r["topic"] == "state"}
    assert sum(sizes.values()) < 20_000 * 10          # the dirty 20k records are gone

    source.createOrReplaceTempView("source")
    strata.read("state").createOrReplaceTempView("compacted")
    oracle = spark.sql("""
        SELECT key, value FROM (
            SELECT key, value, row_number() OVER (PARTITION BY key ORDER BY seq DESC) AS n
            FROM source) WHERE n = 1""")
    compacted = spark.sql("SELECT cast(key AS STRING) AS key, cast(value AS STRING) AS value "
                          "FROM compacted")
    assert compacted.count() == compacted.select("key").distinct().count() == 500
    assert oracle.exceptAll(compacted).count() == 0
    assert compacted.exceptAll(oracle).count() == 0


def test_stats_have_a_row_for_every_actor_and_partition(strata) -> None:
    c = strata.cluster
    c.create_topic("s", partitions=4, config=COMPACT)
    strata.write(strata.spark.range(1000).selectExpr("cast(id % 10 as string) as key",
                                                     "cast(id as string) as value"), "s")
    assert sum(len(list(c.consume("s", p, isolation="read_committed")))
               for p in range(4)) == 1000
    c.trigger_clean("s", 0, roll=True, wait=True)
    stats = strata.stats()
    stats.createOrReplaceTempView("stats")
    roles = {r.role: r.n for r in strata.spark.sql(
        "SELECT role, count(*) AS n FROM stats GROUP BY role").collect()}
    # the job's transaction made the internal topic __strata_transactions (50 partitions)
    assert roles == {"coordinator": 1, "log_dir": 3, "cleaner": 1, "partition": 54}
    actors = stats.where("role != 'partition'").collect()
    assert all(r.pid and r.rss_bytes > 0 and r.cpu_seconds > 0 for r in actors)
    assert {r.directory for r in actors if r.role == "log_dir"} == set(c.description.log_dirs)
    partitions = stats.where("role = 'partition' and topic = 's'").collect()
    assert sum(r.log_end_offset for r in partitions) == sum(c.offsets("s", p)[1]
                                                            for p in range(4))
    assert all(r.cleanup_policy == "compact" and r.uncleanable is False for r in partitions)
    assert all(r.internal is False for r in partitions)
    internal = stats.where("role = 'partition' and internal").collect()
    assert sorted((r.topic, r.partition) for r in internal) == \
        [("__strata_transactions", p) for p in range(50)]
    cleaner = stats.where("role = 'cleaner'").first()
    assert cleaner.cleans >= 1 and cleaner.last_clean_mb_per_sec > 0
    assert 0 < cleaner.buffer_utilization <= 1


def _fail_once_after_sending(namespace: str, topic: str):
    """An RDD partition function: on the first attempt of Spark partition 0 it passes rows on
    until the writer downstream has stored some of them, then raises."""

    def run(rows):
        import time

        from pyspark import TaskContext

        from cluster.spark.connection import connect

        context = TaskContext.get()
        failing = context.partitionId() == 0 and context.attemptNumber() == 0
        for i, row in enumerate(rows):
            yield row
            if failing and i == 7000:
                cluster = connect("auto", namespace)
                layout = cluster.topic_layout(topic)
                deadline = time.monotonic() + 60
                while sum(e for _, e in cluster.end_offsets(layout).values()) == 0:
                    if time.monotonic() > deadline:
                        raise AssertionError("the writer stored nothing")
                    time.sleep(0.05)
                raise RuntimeError("injected failure after some batches were stored")
    return run


def test_a_retried_task_leaves_every_record_exactly_once(strata) -> None:
    spark = strata.spark
    strata.cluster.create_topic("once", partitions=3)
    n = 40_000
    df = spark.range(0, n, numPartitions=2).selectExpr(
        "cast(id % 1000 as string) as key", "cast(id as string) as value")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        flaky = df.rdd.mapPartitions(_fail_once_after_sending(strata.namespace, "once")) \
            .toDF(df.schema)
        strata.write(flaky, "once", batchBytes=4096)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = strata.read("once").select(F.col("value").cast("string").alias("v"))
    assert got.count() == n
    assert got.distinct().count() == n


def _fail_once_after_batches(namespace: str, topic: str, batches: int):
    """An RDD partition function: on the first attempt of Spark partition 0 it passes rows on
    until more than ``batches`` batches of about 200 records are stored in every partition of
    ``topic`` (the test's only writer is that task), then raises."""

    def run(rows):
        import time

        from pyspark import TaskContext

        from cluster.spark.connection import connect

        context = TaskContext.get()
        failing = context.partitionId() == 0 and context.attemptNumber() == 0
        cluster = connect("auto", namespace) if failing else None
        for i, row in enumerate(rows):
            yield row
            if failing and i % 2000 == 1999:
                counts = [len(list(cluster.consume(topic, p))) for p in range(3)]
                if min(counts) > batches * 200:
                    time.sleep(0.2)
                    raise RuntimeError("injected failure after many batches were stored")
    return run


def test_a_retried_idempotent_task_leaves_every_record_exactly_once(strata) -> None:
    """``transactional=false``: the retried task re-sends the first attempt's batches with the
    same sequences; more than the five a producer's state remembers are already stored in each
    partition, so the retry skips what the log holds instead of being refused as out of
    order (Kafka's rule for a batch older than the five cached)."""
    spark = strata.spark
    strata.cluster.create_topic("once_idem", partitions=3)
    n = 40_000
    df = spark.range(0, n, numPartitions=1).selectExpr(   # its one producer alone stores
        "cast(id % 1000 as string) as key", "cast(id as string) as value")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        flaky = df.rdd.mapPartitions(_fail_once_after_batches(strata.namespace, "once_idem", 8)) \
            .toDF(df.schema)
        strata.write(flaky, "once_idem", batchBytes=2048, transactional="false")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = strata.read("once_idem").select(F.col("value").cast("string").alias("v"))
    assert got.count() == n
    assert got.distinct().count() == n


# ---- bad input ------------------------------------------------------------------------------------
def _count(strata, topic: str) -> int:
    """Records in the topic's logs (transaction markers are no records)."""
    return sum(len(list(strata.cluster.consume(topic, p))) for p in range(3))


def test_a_compacted_topic_refuses_a_dataframe_without_key(strata) -> None:
    strata.cluster.create_topic("c", partitions=3, config=COMPACT)
    strata.write(strata.spark.range(100).selectExpr("cast(id as string) as key",
                                                    "cast(id as string) as value"), "c")
    with pytest.raises(Exception, match="compacted.*no key column"):
        strata.write(strata.spark.range(10).selectExpr("cast(id as string) as value"), "c")
    with pytest.raises(Exception, match="null key"):
        strata.write(strata.spark.range(10).selectExpr(
            "case when id = 5 then null else cast(id as string) end as key",
            "cast(id as string) as value").coalesce(1), "c")
    assert _count(strata, "c") == 100 and strata.read("c").count() == 100


def test_an_unknown_topic_fails_naming_it(strata) -> None:
    df = strata.spark.range(3).selectExpr("cast(id as string) as key",
                                          "cast(id as string) as value")
    with pytest.raises(Exception, match="has no topic nosuch"):
        strata.write(df, "nosuch")
    with pytest.raises(Exception, match="has no topic nosuch"):
        strata.read("nosuch").collect()


def test_a_value_over_max_message_bytes_fails_and_keeps_what_was_stored(strata) -> None:
    strata.cluster.create_topic("small", partitions=3, config={"max.message.bytes": 10_000})
    strata.write(strata.spark.range(100).selectExpr("cast(id as string) as key",
                                                    "cast(id as string) as value"), "small")
    big = strata.spark.range(10).selectExpr(
        "cast(id as string) as key",
        "case when id = 7 then repeat('x', 20000) else 'small' end as value").coalesce(1)
    with pytest.raises(Exception, match="over max.message.bytes=10000 of topic small"):
        strata.write(big, "small")
    assert strata.read("small").where("cast(value as string) != 'small'").count() == 100


def test_a_topic_with_small_segments_takes_a_write_in_batches_that_fit_a_segment(strata) -> None:
    """Kafka allows segment.bytes down to a few KiB; a batch larger than a segment is refused by
    the log, so the writer must cut batches at the topic's segment.bytes as well."""
    strata.cluster.create_topic("tiny", partitions=2, config={"segment.bytes": 32 * 1024})
    rows = strata.spark.range(20_000).selectExpr("cast(id as string) as key",
                                                 "repeat('v', 50) as value")
    strata.write(rows, "tiny")
    assert strata.read("tiny").count() == 20_000
    assert sum(len(list(strata.cluster.consume("tiny", p, isolation="read_committed")))
               for p in range(2)) == 20_000


def test_a_row_larger_than_segment_bytes_is_refused_naming_segment_bytes(strata) -> None:
    strata.cluster.create_topic("tiny2", partitions=1, config={"segment.bytes": 16 * 1024})
    big = strata.spark.range(3).selectExpr(
        "cast(id as string) as key",
        "case when id = 1 then repeat('x', 20000) else 'small' end as value").coalesce(1)
    with pytest.raises(Exception, match="over segment.bytes=16384 of topic tiny2"):
        strata.write(big, "tiny2")


def test_an_unreachable_cluster_fails_saying_so(strata) -> None:
    df = strata.spark.range(3).selectExpr("cast(id as string) as key",
                                          "cast(id as string) as value")
    with pytest.raises(Exception, match="no Ray cluster answers at 127.0.0.1:1"):
        strata.write(df, "orders", address="127.0.0.1:1")
    with pytest.raises(Exception, match="no Strata cluster in namespace nobody"):
        df.write.format("strata").option("topic", "t").option("namespace", "nobody") \
            .mode("append").save()
    with pytest.raises(Exception, match="no Strata cluster in namespace nobody"):
        strata.spark.read.format("strata-stats").option("namespace", "nobody").load().collect()


def test_a_schema_given_picks_columns_and_refuses_one_the_source_lacks(strata) -> None:
    strata.cluster.create_topic("cols", partitions=2)
    strata.write(strata.spark.range(300).selectExpr("cast(id as string) as key",
                                                    "cast(id as string) as value"), "cols")

    def read(schema: str) -> Any:
        return strata.spark.read.format("strata").option("topic", "cols") \
            .option("namespace", strata.namespace).schema(schema).load()

    picked = read("value BINARY, offset BIGINT")
    assert picked.columns == ["value", "offset"]
    full = strata.read("cols")
    assert sorted(map(tuple, picked.collect())) == \
        sorted(map(tuple, full.select("value", "offset").collect()))
    with pytest.raises(Exception, match="names column price, which the strata source does not "
                                        "have"):
        read("value BINARY, price DOUBLE").collect()
    with pytest.raises(Exception, match="column offset of a read of topic cols is BIGINT, not "
                                        "INT"):
        read("offset INT").collect()


def test_the_stats_source_refuses_an_unknown_option_naming_it(strata) -> None:
    def stats(option: str) -> Any:
        return strata.spark.read.format("strata-stats").option("namespace", strata.namespace) \
            .option(option, "x").load()

    with pytest.raises(Exception, match="unknown option 'namespce' of the strata-stats source "
                                        r"\(did you mean namespace\?\)"):
        stats("namespce").collect()
    with pytest.raises(Exception, match="option topic does not apply to a stats read"):
        stats("topic").collect()


def test_arrow_columns_survive_a_round_trip_through_the_encoder_and_decoder() -> None:
    from cluster.spark.decoding import arrow_batches
    from cluster.spark.encoding import BatchEncoder, WritePlan
    from storage.records import RecordBatch

    plan = WritePlan(topic="t", address="auto", namespace="n", partitions=2, compact=False,
                     max_message_bytes=1 << 20, segment_bytes=1 << 30, batch_bytes=300, producer_nonce=5, has_key=True,
                     has_value=True, packed_columns=(), has_partition=False, has_timestamp=False,
                     has_headers=False)
    keys = pa.array([b"a", None, b"ccc", b"d"] * 50)
    values = pa.array([b"1", b"22", None, b"4444"] * 50)
    encoder = BatchEncoder(plan, spark_partition=3, now_ms=1_700_000_000_000)
    sent = list(encoder.batches([pa.RecordBatch.from_arrays([keys, values], ["key", "value"])]))
    assert all(len(data) <= 300 for _, _, data in sent)
    for partition in (0, 1):
        batches = [RecordBatch(d) for _, p, d in sent if p == partition]
        sequences = [b.base_sequence for b in batches]
        counts = [b.records_count for b in batches]
        assert sequences == [sum(counts[:i]) for i in range(len(counts))]
        assert {b.producer_id for b in batches} == {(5 << 24) | 3}
    decoded = [b for _, p, d in sent for b in arrow_batches([RecordBatch(d)], "t", p, 0, 10**9)]
    got = sorted(zip(sum((b.column("key").to_pylist() for b in decoded), []),
                     sum((b.column("value").to_pylist() for b in decoded), [])),
                 key=repr)
    assert got == sorted(zip(keys.to_pylist(), values.to_pylist()), key=repr)


def test_a_read_groups_partitions_into_as_many_tasks_as_spark_has_cores(strata) -> None:
    spark = strata.spark
    cores = spark.sparkContext.defaultParallelism
    strata.cluster.create_topic("wide", partitions=3 * cores + 1)
    strata.write(spark.range(2000).selectExpr("cast(id as string) as key",
                                              "cast(id as string) as value"), "wide")
    df = strata.read("wide")
    assert df.rdd.getNumPartitions() == cores
    rows = df.select(F.spark_partition_id().alias("task"), "partition", "offset",
                     "value").collect()
    assert sorted(int(r.value) for r in rows) == list(range(2000))
    tasks_of = {}
    for r in rows:
        tasks_of.setdefault(r.partition, set()).add(r.task)
    assert set(tasks_of) == set(range(3 * cores + 1))
    assert all(len(tasks) == 1 for tasks in tasks_of.values())     # a partition is never split
    # a read that ends before most partitions have records plans no task for them
    ends = {str(p): 0 for p in range(3 * cores + 1)}
    ends["1"] = 3
    narrow = strata.read("wide", endingOffsets=json.dumps({"wide": ends}))
    assert narrow.rdd.getNumPartitions() == 1
    assert sorted((r.partition, r.offset) for r in narrow.collect()) == [(1, 0), (1, 1), (1, 2)]
