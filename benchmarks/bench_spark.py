"""Spark benchmarks: feed throughput from a Spark job into the cluster (records/s and MB/s of key +
value payload) and read throughput from segment files into a DataFrame, each beside the same
DataFrame written to / read from Parquet in the same run and the same Spark session. The feed is
measured twice: uncompressed (Kafka's default) and with snappy, the codec Spark's Parquet writer
uses by default (the same rows take 122 MB in the log uncompressed, 32 MB with snappy and 35 MB
as Parquet).

Setup: a Ray head of its own, a 3-directory cluster in a temp dir, a ``local[2]`` session as a
user's ``local_session`` makes it (the JVM's full JIT, not the tests' quick start); one small
write and read first so that every Spark Python worker has joined Ray and loaded its kernels
(those are per-process start costs, not throughput). Reads aggregate ``sum(length(value))`` so
every value reaches the JVM. The Python data source API has no column pruning: the default read
hands Spark all seven columns of Kafka's schema, where Parquet reads the one column the query
uses; the read with ``.schema("value BINARY")`` hands it that one column, as Parquet reads.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import MB, Figure

KEY_BYTES = 16
VALUE_BYTES = 100
PARTITIONS = 6


def run(quick: bool = False) -> list[Figure]:
    records = 200_000 if quick else 1_000_000
    repeats = 1 if quick else 2
    with spark_and_cluster("strata-bench-spark") as (spark, cluster, root, where):
        return _measure(spark, cluster, root, records, repeats, where)


@contextmanager
def spark_and_cluster(namespace: str) -> Iterator[tuple[Any, Any, Path, dict[str, str]]]:
    """A Ray head of its own, a 3-directory cluster in a temp dir and a ``local[2]`` session:
    (spark, cluster, temp dir, the ``address`` and ``namespace`` options of the cluster); all
    stopped and removed after. The options name the Ray address: a JVM kept from an earlier
    session of this process (another bench area) hands its Python workers that session's
    ``RAY_ADDRESS``."""
    import ray

    from cluster import Cluster
    from cluster.runtime.head import head_resources
    from cluster.spark.session import local_session, ray_address

    root = Path(tempfile.mkdtemp(prefix=f"{namespace}-"))
    dirs = [str(root / f"d{i}") for i in range(3)]
    ray.init(address="local", num_cpus=2, resources=head_resources(dirs),
             include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    cluster = Cluster.start(log_dirs=dirs, cleaners=1, namespace=namespace)
    spark = local_session(ray_address=ray_address(), app_name=namespace)
    try:
        yield spark, cluster, root, {"address": ray_address(), "namespace": namespace}
    finally:
        spark.stop()
        cluster.stop()
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def _frame(spark: Any, records: int) -> Any:
    return spark.range(0, records, numPartitions=2).selectExpr(
        f"substring(sha2(cast(id AS STRING), 256), 1, {KEY_BYTES}) AS key",
        f"repeat(substring(sha2(cast(id AS STRING), 256), 1, 10), {VALUE_BYTES // 10}) AS value")


def _measure(spark: Any, cluster: Any, root: Path, records: int, repeats: int,
             where: dict[str, str]) -> list[Figure]:
    payload = records * (KEY_BYTES + VALUE_BYTES)

    def write_strata(topic: str, df: Any, compression: str = "none") -> None:
        df.write.format("strata").option("topic", topic).options(**where) \
            .option("compression", compression).mode("append").save()

    def read_strata(topic: str, schema: str | None = None) -> int:
        reader = spark.read.format("strata").option("topic", topic).options(**where)
        if schema is not None:
            reader = reader.schema(schema)
        return reader.load().selectExpr("sum(length(value)) AS n").first().n

    def read_parquet(path: Path) -> int:
        return spark.read.parquet(str(path)).selectExpr("sum(length(value)) AS n").first().n

    cluster.create_topic("warm", PARTITIONS)
    write_strata("warm", _frame(spark, 10_000))
    read_strata("warm")
    _frame(spark, 10_000).write.mode("overwrite").parquet(str(root / "warm.parquet"))
    read_parquet(root / "warm.parquet")

    df = _frame(spark, records).cache()
    df.count()
    feed, feed_snappy, parquet_write, read, read_value, parquet_read = [], [], [], [], [], []
    sums: list[int] = []
    for i in range(repeats):
        topic = f"feed{i}"
        cluster.create_topic(topic, PARTITIONS)
        feed.append(_timed(lambda: write_strata(topic, df)))
        cluster.create_topic(f"{topic}-snappy", PARTITIONS)
        feed_snappy.append(_timed(lambda: write_strata(f"{topic}-snappy", df, "snappy")))
        path = root / f"feed{i}.parquet"
        parquet_write.append(_timed(lambda: df.write.mode("overwrite").parquet(str(path))))
        read.append(_timed(lambda: sums.append(read_strata(topic))))
        read_value.append(_timed(lambda: sums.append(read_strata(topic, "value BINARY"))))
        parquet_read.append(_timed(lambda: sums.append(read_parquet(path))))
    df.unpersist()
    # every value was stored once and read back (the end offsets also count commit markers)
    assert sums == [records * VALUE_BYTES] * len(sums), f"{sums} value bytes read"
    w, pw, r, pr = min(feed), min(parquet_write), min(read), min(parquet_read)
    rv, ws = min(read_value), min(feed_snappy)
    note = f"{records:,} records of {KEY_BYTES}+{VALUE_BYTES} B, local[2], {PARTITIONS} partitions"
    return [
        Figure("spark feed into the cluster: records/s", records / w, "records/s",
               baseline=records / pw, baseline_name="same DataFrame to Parquet", note=note),
        Figure("spark feed into the cluster: MB/s", payload / w / MB, "MB/s",
               baseline=payload / pw / MB, baseline_name="same DataFrame to Parquet"),
        Figure("spark feed, compression=snappy (Parquet's codec): records/s", records / ws,
               "records/s", baseline=records / pw, baseline_name="same DataFrame to Parquet",
               note="the log then holds 32 MB, the Parquet files 35 MB"),
        Figure("spark read from segment files: records/s", records / r, "records/s",
               baseline=records / pr, baseline_name="same rows from Parquet", note=note),
        Figure("spark read from segment files: MB/s", payload / r / MB, "MB/s",
               baseline=payload / pr / MB, baseline_name="same rows from Parquet"),
        Figure("spark read, .schema('value BINARY'): records/s", records / rv, "records/s",
               baseline=records / pr, baseline_name="same rows from Parquet",
               note="only the column the query reads, as Parquet prunes"),
    ]


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
