"""Structured Streaming benchmarks: the end-to-end latency of a record (produced through the
``Cluster`` client -> seen by a streaming query's ``foreachBatch`` with the default trigger) beside
the same query over Spark's ``rate`` source, and the throughput of a streaming copy topic -> topic
(``readStream`` -> ``writeStream.format("strata")``, ``Trigger.AvailableNow``) beside the batch
copy of the same rows in the same run.

Latency: records are produced one at a time, each after the previous one was seen; a record's
value is the ``time.time_ns()`` of its produce call, and its latency is the time ``foreachBatch``
(in this driver process) sees it minus that. For ``rate`` the latency is the time the row is seen
minus its ``timestamp`` column (when the source made it). Both queries run the default trigger
(the next micro-batch as soon as the last one ended, or as soon as new data is there).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_spark import _frame, spark_and_cluster
from benchmarks.common import Figure
from storage.records import Record

WAIT_S = 60.0


def run(quick: bool = False) -> list[Figure]:
    samples = 10 if quick else 50
    records = 50_000 if quick else 500_000
    with spark_and_cluster("strata-bench-stream") as (spark, cluster, root, where):
        strata = _latencies_strata(spark, cluster, root, samples, where)
        rate = _latencies_rate(spark, root, samples)
        stream_s, batch_s = _copies(spark, cluster, root, records, where)
    note = f"{samples} records one at a time, default trigger, local[2]"
    return [
        Figure("spark stream latency produce -> foreachBatch: p50", _ms(strata, 50), "ms",
               baseline=_ms(rate, 50), baseline_name="rate source, same query",
               note=note + "; lower is better"),
        Figure("spark stream latency produce -> foreachBatch: p99", _ms(strata, 99), "ms",
               baseline=_ms(rate, 99), baseline_name="rate source, same query"),
        Figure("spark streaming copy topic -> topic: records/s", records / stream_s,
               "records/s", baseline=records / batch_s, baseline_name="batch copy, same rows",
               note=f"{records:,} records of 16+100 B, 6 partitions, Trigger.AvailableNow"),
    ]


def _ms(latencies: list[float], q: int) -> float:
    return float(np.percentile(np.array(latencies), q)) * 1000


class _Seen:
    """What ``foreachBatch`` saw: ``key -> time seen``, with a condition to wait on."""

    def __init__(self) -> None:
        self.times: dict[int, float] = {}
        self.cond = threading.Condition()

    def add(self, keys: list[int]) -> None:
        now = time.time_ns()
        with self.cond:
            for key in keys:
                self.times.setdefault(key, now)
            self.cond.notify_all()

    def wait(self, key: int) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.times, WAIT_S):
                raise TimeoutError(f"record {key} was not seen within {WAIT_S} s")
            return self.times[key]


def _latencies_strata(spark: Any, cluster: Any, root: Path, samples: int,
                      where: dict[str, str]) -> list[float]:
    cluster.create_topic("latency", 1)
    seen = _Seen()

    def on_batch(df: Any, _batch_id: int) -> None:
        seen.add([int(r.value) for r in df.selectExpr("cast(value AS STRING) AS value")
                  .collect()])

    query = (spark.readStream.format("strata").option("topic", "latency")
             .options(**where).option("startingOffsets", "earliest")
             .load().writeStream.foreachBatch(on_batch)
             .option("checkpointLocation", str(root / "ck-latency")).start())
    try:
        out = []
        for i in range(samples + 1):                         # the first one: warm-up
            sent = time.time_ns()
            cluster.produce("latency", 0, [Record(value=str(sent).encode(),
                                                  timestamp=sent // 1_000_000)])
            out.append((seen.wait(sent) - sent) / 1e9)
        return out[1:]
    finally:
        query.stop()


def _latencies_rate(spark: Any, root: Path, samples: int) -> list[float]:
    seen = _Seen()

    def on_batch(df: Any, _batch_id: int) -> None:
        seen.add([int(r.made) for r in df.selectExpr(
            "cast(unix_micros(timestamp) * 1000 AS BIGINT) AS made").collect()])

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.foreachBatch(on_batch)
             .option("checkpointLocation", str(root / "ck-rate")).start())
    try:
        deadline = time.monotonic() + WAIT_S
        while len(seen.times) < samples + 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        with seen.cond:
            rows = sorted(seen.times.items())[4:4 + samples]     # the first ones: warm-up
        if len(rows) < samples:
            raise TimeoutError(f"the rate source gave {len(rows)} rows in {WAIT_S} s")
        return [(at - made) / 1e9 for made, at in rows]
    finally:
        query.stop()


def _copies(spark: Any, cluster: Any, root: Path, records: int,
            where: dict[str, str]) -> tuple[float, float]:
    """(seconds of the streaming copy, seconds of the batch copy) of ``records`` rows."""
    for topic in ("source", "stream-copy", "batch-copy", "warm", "warm-copy"):
        cluster.create_topic(topic, 6)

    def write(df: Any, topic: str) -> None:
        df.write.format("strata").option("topic", topic).options(**where).mode("append").save()

    def read(topic: str) -> Any:
        return spark.read.format("strata").option("topic", topic).options(**where).load()

    def stream_copy(source: str, target: str, checkpoint: Path) -> None:
        query = (spark.readStream.format("strata").option("topic", source)
                 .options(**where).option("startingOffsets", "earliest").load()
                 .select("key", "value").writeStream.format("strata").option("topic", target)
                 .options(**where).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(600)
        if query.exception() is not None:
            raise RuntimeError(f"the streaming copy failed: {query.exception()}")

    write(_frame(spark, 10_000), "warm")
    stream_copy("warm", "warm-copy", root / "ck-warm")            # start costs, not throughput
    write(read("warm").select("key", "value"), "warm-copy")
    write(_frame(spark, records), "source")
    start = time.perf_counter()
    stream_copy("source", "stream-copy", root / "ck-copy")
    stream_s = time.perf_counter() - start
    start = time.perf_counter()
    write(read("source").select("key", "value"), "batch-copy")
    batch_s = time.perf_counter() - start
    for topic in ("stream-copy", "batch-copy"):
        copied = read(topic).count()
        assert copied == records, f"{topic}: {copied} records copied of {records}"
    return stream_s, batch_s
