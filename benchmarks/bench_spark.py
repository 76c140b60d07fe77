"""Spark benchmarks: feed throughput from a Spark job into the cluster (records/s and MB/s of key +
value payload) and read throughput from segment files into a DataFrame, each beside the same
DataFrame written to / read from Parquet in the same run and the same Spark session.

Setup: a Ray head of its own, a 3-directory cluster in a temp dir, a ``local[2]`` session; one
small write and read first so that every Spark Python worker has joined Ray and loaded its kernels
(those are per-process start costs, not throughput). Reads aggregate ``sum(length(value))`` so
every value reaches the JVM.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MB, Figure

KEY_BYTES = 16
VALUE_BYTES = 100
PARTITIONS = 6


def run(quick: bool = False) -> list[Figure]:
    import ray

    from cluster import Cluster
    from cluster.head import head_resources
    from cluster.spark.session import local_session, ray_address

    records = 200_000 if quick else 1_000_000
    repeats = 1 if quick else 2
    root = Path(tempfile.mkdtemp(prefix="strata-bench-spark-"))
    dirs = [str(root / f"d{i}") for i in range(3)]
    ray.init(address="local", num_cpus=2, resources=head_resources(dirs),
             include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    cluster = Cluster.start(log_dirs=dirs, cleaners=1, namespace="strata-bench-spark")
    spark = local_session(ray_address=ray_address(), app_name="strata-bench")
    try:
        return _measure(spark, cluster, root, records, repeats)
    finally:
        spark.stop()
        cluster.stop()
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def _frame(spark: Any, records: int) -> Any:
    return spark.range(0, records, numPartitions=2).selectExpr(
        f"substring(sha2(cast(id AS STRING), 256), 1, {KEY_BYTES}) AS key",
        f"repeat(substring(sha2(cast(id AS STRING), 256), 1, 10), {VALUE_BYTES // 10}) AS value")


def _measure(spark: Any, cluster: Any, root: Path, records: int, repeats: int) -> list[Figure]:
    ns = cluster.namespace
    payload = records * (KEY_BYTES + VALUE_BYTES)

    def write_strata(topic: str, df: Any) -> None:
        df.write.format("strata").option("topic", topic).option("namespace", ns) \
            .mode("append").save()

    def read_strata(topic: str) -> int:
        return spark.read.format("strata").option("topic", topic).option("namespace", ns) \
            .load().selectExpr("sum(length(value)) AS n").first().n

    def read_parquet(path: Path) -> int:
        return spark.read.parquet(str(path)).selectExpr("sum(length(value)) AS n").first().n

    cluster.create_topic("warm", PARTITIONS)
    write_strata("warm", _frame(spark, 10_000))
    read_strata("warm")
    _frame(spark, 10_000).write.mode("overwrite").parquet(str(root / "warm.parquet"))
    read_parquet(root / "warm.parquet")

    df = _frame(spark, records).cache()
    df.count()
    feed, parquet_write, read, parquet_read = [], [], [], []
    sums: list[int] = []
    for i in range(repeats):
        topic = f"feed{i}"
        cluster.create_topic(topic, PARTITIONS)
        feed.append(_timed(lambda: write_strata(topic, df)))
        path = root / f"feed{i}.parquet"
        parquet_write.append(_timed(lambda: df.write.mode("overwrite").parquet(str(path))))
        read.append(_timed(lambda: sums.append(read_strata(topic))))
        parquet_read.append(_timed(lambda: sums.append(read_parquet(path))))
    df.unpersist()
    # every value was stored once and read back (the end offsets also count commit markers)
    assert sums == [records * VALUE_BYTES] * len(sums), f"{sums} value bytes read"
    w, pw, r, pr = min(feed), min(parquet_write), min(read), min(parquet_read)
    note = f"{records:,} records of {KEY_BYTES}+{VALUE_BYTES} B, local[2], {PARTITIONS} partitions"
    return [
        Figure("spark feed into the cluster: records/s", records / w, "records/s",
               baseline=records / pw, baseline_name="same DataFrame to Parquet", note=note),
        Figure("spark feed into the cluster: MB/s", payload / w / MB, "MB/s",
               baseline=payload / pw / MB, baseline_name="same DataFrame to Parquet"),
        Figure("spark read from segment files: records/s", records / r, "records/s",
               baseline=records / pr, baseline_name="same rows from Parquet", note=note),
        Figure("spark read from segment files: MB/s", payload / r / MB, "MB/s",
               baseline=payload / pr / MB, baseline_name="same rows from Parquet"),
    ]


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
