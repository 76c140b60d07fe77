"""The ``strata-stats`` data source: the cluster's statistics, collected when the query runs, as a
DataFrame, so a Spark job can aggregate them with SQL.

    spark.read.format("strata-stats").load().groupBy("role").sum("size_bytes")

One row per actor (``role`` coordinator, log_dir, cleaner) and per partition (role partition,
``actor`` = its node actor). Columns that do not apply to a role are null. Process columns (RSS,
USS, CPU over 0.2 s, threads) are measured inside each actor's process by psutil at that moment;
cleaner throughput and buffer utilization are those of the worker's last clean; ``uncleanable``
marks partitions the coordinator gave up on, ``internal`` the partitions of an internal topic
(``__strata_transactions``, as ``strata topic list`` marks it), ``online`` a log directory that
has not failed.
Options: ``address`` and ``namespace`` only; any other is refused naming it, through the table of
``cluster.spark.options`` (``KNOWN_OPTIONS``, operation ``STATS_READ``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cluster.client.client import Cluster
from cluster.spark import options as opts
from cluster.spark.connection import connect

STATS_COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("collected_at", "TIMESTAMP", pa.timestamp("us", tz="UTC")),
    ("role", "STRING", pa.string()),
    ("actor", "STRING", pa.string()),
    ("host", "STRING", pa.string()),
    ("directory", "STRING", pa.string()),
    ("topic", "STRING", pa.string()),
    ("partition", "INT", pa.int32()),
    ("internal", "BOOLEAN", pa.bool_()),
    ("online", "BOOLEAN", pa.bool_()),
    ("offline_reason", "STRING", pa.string()),
    ("uncleanable", "BOOLEAN", pa.bool_()),
    ("cleanup_policy", "STRING", pa.string()),
    ("partitions", "INT", pa.int32()),
    ("segments", "INT", pa.int32()),
    ("size_bytes", "BIGINT", pa.int64()),
    ("log_start_offset", "BIGINT", pa.int64()),
    ("log_end_offset", "BIGINT", pa.int64()),
    ("unflushed_messages", "BIGINT", pa.int64()),
    ("dirty_bytes", "BIGINT", pa.int64()),
    ("dirty_ratio", "DOUBLE", pa.float64()),
    ("disk_total_bytes", "BIGINT", pa.int64()),
    ("disk_free_bytes", "BIGINT", pa.int64()),
    ("cleaner_state", "STRING", pa.string()),
    ("cleans", "BIGINT", pa.int64()),
    ("last_clean_mb_per_sec", "DOUBLE", pa.float64()),
    ("last_clean_records_per_sec", "DOUBLE", pa.float64()),
    ("buffer_utilization", "DOUBLE", pa.float64()),
    ("pid", "INT", pa.int32()),
    ("rss_bytes", "BIGINT", pa.int64()),
    ("uss_bytes", "BIGINT", pa.int64()),
    ("cpu_percent", "DOUBLE", pa.float64()),
    ("cpu_seconds", "DOUBLE", pa.float64()),
    ("threads", "INT", pa.int32()),
)
STATS_DDL = ", ".join(f"{name} {ddl}" for name, ddl, _ in STATS_COLUMNS)
STATS_ARROW = pa.schema([(name, kind) for name, _, kind in STATS_COLUMNS])
CPU_INTERVAL_S = 0.2


def collect(cluster: Cluster, cpu_interval_s: float = CPU_INTERVAL_S) -> list[dict[str, Any]]:
    """Every row of ``strata-stats``, collected now."""
    now = dt.datetime.now(dt.timezone.utc)
    samples = {s.actor: s for s in cluster.sample_processes(cpu_interval_s)}
    status = cluster.cleaner_status()
    uncleanable = {(u.topic, u.partition) for u in status.uncleanable}
    last = {w.cleaner_id: w for w in cluster.worker_statuses()}
    names = cluster.description.node_names
    rows: list[dict[str, Any]] = [{
        "role": "coordinator", "actor": "strata-coordinator", "online": True,
        "uncleanable": bool(uncleanable), "cleans": status.cleans_completed,
        "dirty_ratio": status.manager.max_dirty_percent / 100.0,
        **_process(samples.get("strata-coordinator"))}]
    for row in cluster.stats():
        kind = row["kind"]
        if kind == "log_dir":
            actor = names.get(row["log_dir"])
            rows.append({
                "role": "log_dir", "actor": actor, "directory": row["log_dir"],
                "online": row.get("online"), "offline_reason": row.get("offline_reason"),
                "partitions": row.get("partitions"), "size_bytes": row.get("log_bytes"),
                "disk_total_bytes": row.get("disk_total_bytes"),
                "disk_free_bytes": row.get("disk_free_bytes"),
                **_process(samples.get(actor or ""))})
        elif kind == "partition":
            rows.append({
                "role": "partition", "actor": names.get(row["log_dir"]),
                "directory": row["log_dir"], "topic": row["topic"],
                "partition": row["partition"], "internal": row["internal"], "online": True,
                "uncleanable": (row["topic"], row["partition"]) in uncleanable,
                **{k: row[k] for k in ("cleanup_policy", "segments", "size_bytes",
                                       "log_start_offset", "log_end_offset",
                                       "unflushed_messages", "dirty_bytes", "dirty_ratio")}})
        elif kind == "cleaner":
            worker = last.get(row["cleaner_id"])
            result = worker.last_result if worker is not None else None
            elapsed = max(result.stats.elapsed_secs, 1e-3) if result is not None else None
            rows.append({
                "role": "cleaner", "actor": row["name"], "host": row["host"],
                "directory": row["log_dir"], "topic": row["topic"],
                "partition": row["partition"], "online": True, "cleaner_state": row["state"],
                "cleans": worker.cleans if worker is not None else None,
                "last_clean_mb_per_sec": (result.stats.bytes_read / elapsed / 1e6
                                          if result is not None else None),
                "last_clean_records_per_sec": (result.stats.messages_read / elapsed
                                               if result is not None else None),
                "buffer_utilization": (result.stats.buffer_utilization
                                       if result is not None else None),
                **_process(samples.get(row["name"]))})
    for row in rows:
        row["collected_at"] = now
        if row.get("host") is None and row["actor"] in samples:
            row["host"] = samples[row["actor"]].host
    return rows


def _process(sample: Any) -> dict[str, Any]:
    if sample is None:
        return {}
    return {"host": sample.host, "pid": sample.pid, "rss_bytes": sample.rss_bytes,
            "uss_bytes": sample.uss_bytes, "cpu_percent": sample.cpu_percent,
            "cpu_seconds": sample.cpu_seconds, "threads": sample.threads}


class StrataStatsDataSource(DataSource):
    """``format("strata-stats")``: one row per node actor, partition and cleaner of a running
    cluster, taken when the read runs (``STATS_DDL``); one Spark partition, read on an executor
    through the cluster client."""

    @classmethod
    def name(cls) -> str:
        return "strata-stats"

    def schema(self) -> str:
        return STATS_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        opts.check_options(self.options, opts.STATS_READ)
        return StatsReader(dict(self.options), schema)


class StatsReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.names = schema.names

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        conn = opts.connection(self.options)
        rows = collect(connect(conn.address, conn.namespace))
        batch = pa.RecordBatch.from_pylist(rows, schema=STATS_ARROW)
        yield batch if batch.schema.names == self.names else batch.select(self.names)
