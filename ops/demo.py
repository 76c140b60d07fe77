"""The main job (``./scripts/demo``): a local Strata cluster over three directories under
``./data/demo``, fed by Spark, compacted, checked with Spark SQL, and described by ``strata-stats``.

1. start a Ray head (with its dashboard) and the cluster: three log directories, two cleaners;
2. create ``accounts`` (compacted) and ``events`` (time-retained, 1 h);
3. a Spark job writes ~1 M keyed records over tens of thousands of keys (some tombstones) into
   ``accounts`` and the same events, as msgpack-packed columns, into ``events``;
4. every partition of ``accounts`` is rolled and cleaned;
5. Spark SQL checks that ``accounts`` now equals the latest value per key of the input;
6. a streaming query copies ``events`` into Parquet in micro-batches (``readStream``,
   ``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``), then resumes from its checkpoint after
   more events arrive: every event exactly once;
7. Kafka's own clients against the same cluster, each directory a broker: confluent-kafka
   creates ``orders`` and produces to it (idempotent, lz4), kafka-python consumes it back;
8. the per-actor statistics table from ``strata-stats``; the dashboard address;
9. everything shut down cleanly.

Run ``python -m ops.demo --help`` for the sizes.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops.tools.output import WIDE

ACCOUNTS = "accounts"
EVENTS = "events"
ORDERS = "orders"
PARTITIONS = 6
KAFKA_RECORDS = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=40_000)
    parser.add_argument("--data", default="data/demo", help="where the three directories go")
    args = parser.parse_args(argv)
    # on a terminal at least 120 columns; into a pipe or a file wide enough that no cell is cut
    console = Console(width=max(Console().width, 120) if Console().is_terminal else WIDE)
    started = time.monotonic()
    root = Path(args.data).resolve()
    shutil.rmtree(root, ignore_errors=True)
    dirs = [str(root / f"disk{i}") for i in range(3)]

    import ray

    from cluster import Cluster
    from cluster.runtime.head import head_resources, head_system_config

    with console.status("starting Ray and the Strata cluster"):
        context = ray.init(address="local", resources=head_resources(dirs),
                           include_dashboard=True, dashboard_host="127.0.0.1",
                           logging_level="ERROR", log_to_driver=False,
                           _system_config=head_system_config())
        cluster = Cluster.start(log_dirs=dirs, cleaners=2, namespace="strata-demo",
                                config={"log.cleaner.backoff.ms": 500,
                                        "listeners": "PLAINTEXT://127.0.0.1:0"})
    dashboard = f"http://{context.dashboard_url}" if context.dashboard_url else "(not running)"
    console.print(f"[bold]cluster[/] up: {len(dirs)} log directories under {root}, 2 cleaners; "
                  f"Ray dashboard at {dashboard}; Kafka bootstrap servers "
                  f"{cluster.bootstrap_servers}")
    spark = None
    try:
        cluster.create_topic(ACCOUNTS, PARTITIONS, {
            "cleanup.policy": "compact", "segment.bytes": 8 << 20,
            "min.cleanable.dirty.ratio": 0.2, "delete.retention.ms": 3_600_000})
        cluster.create_topic(EVENTS, PARTITIONS, {
            "cleanup.policy": "delete", "retention.ms": 3_600_000, "segment.bytes": 16 << 20})
        with console.status("starting Spark"):
            from cluster.spark.session import local_session, ray_address

            spark = local_session(ray_address=ray_address(), app_name="strata-demo")
        run_job(console, spark, cluster, args.records, args.keys)
    finally:
        with console.status("shutting down"):
            if spark is not None:
                spark.stop()
            cluster.stop()
            ray.shutdown()
    console.print(f"[bold green]done[/] in {time.monotonic() - started:.0f} s; the logs stay in "
                  f"{root} (valid Kafka segments: `strata dump-log {dirs[0]}/...`)")
    return 0


def run_job(console: Console, spark: Any, cluster: Any, records: int, keys: int) -> None:
    from pyspark.sql import functions as F

    ns = cluster.namespace
    start_ms = int(time.time() * 1000) - records      # recent: events keeps the last hour
    source = (spark.range(0, records, numPartitions=4)
              .withColumn("account", F.concat(F.lit("acct-"), (F.col("id") * 7919 % keys)
                                              .cast("string")))
              .withColumn("amount", (F.col("id") % 10_000) / 100.0)
              .withColumn("ts", F.timestamp_millis(F.lit(start_ms) + F.col("id")))
              .withColumnRenamed("id", "seq"))
    source.createOrReplaceTempView("source")
    accounts = spark.sql("""
        SELECT account AS key, seq,
               CASE WHEN seq % 40 = 0 THEN NULL
                    ELSE concat('{"balance": ', cast(amount AS STRING), ', "seq": ',
                                cast(seq AS STRING), ', "note": "', repeat('x', 40), '"}') END
               AS value
        FROM source""").repartition(4, "key").sortWithinPartitions("seq")

    with _progress(console) as progress:
        _write(progress, cluster, ACCOUNTS, records, lambda: (
            accounts.select("key", "value").write.format("strata").option("topic", ACCOUNTS)
            .option("namespace", ns).mode("append").save()))
        _write(progress, cluster, EVENTS, records, lambda: (
            source.selectExpr("account AS key", "ts AS timestamp", "seq", "account", "amount")
            .write.format("strata").option("topic", EVENTS).option("namespace", ns)
            .mode("append").save()))
        task = progress.add_task(f"compacting {ACCOUNTS}", total=PARTITIONS)
        for partition in range(PARTITIONS):
            cluster.trigger_clean(ACCOUNTS, partition, roll=True, wait=True, timeout_s=600)
            progress.advance(task)

    with console.status("checking the compacted topic with Spark SQL"):
        accounts.createOrReplaceTempView("input")
        (spark.read.format("strata").option("topic", ACCOUNTS).option("namespace", ns).load()
         .createOrReplaceTempView("compacted"))
        spark.sql("""
            SELECT key, value FROM (
                SELECT key, value, row_number() OVER (PARTITION BY key ORDER BY seq DESC) AS n
                FROM input) WHERE n = 1""").createOrReplaceTempView("oracle")
        spark.sql("SELECT cast(key AS STRING) AS key, cast(value AS STRING) AS value "
                  "FROM compacted").createOrReplaceTempView("kept")
        check = spark.sql("""
            SELECT (SELECT count(*) FROM kept) AS kept,
                   (SELECT count(DISTINCT key) FROM kept) AS kept_keys,
                   (SELECT count(*) FROM oracle) AS oracle_keys,
                   (SELECT count(*) FROM oracle WHERE value IS NULL) AS tombstones,
                   (SELECT count(*) FROM (SELECT * FROM oracle EXCEPT ALL SELECT * FROM kept))
                       AS missing,
                   (SELECT count(*) FROM (SELECT * FROM kept EXCEPT ALL SELECT * FROM oracle))
                       AS extra""").first()
        events = (spark.read.format("strata").option("topic", EVENTS).option("namespace", ns)
                  .option("valueFormat", "msgpack")
                  .option("valueSchema", "seq BIGINT, account STRING, amount DOUBLE").load())
        events_check = events.selectExpr("count(*) AS n", "count(DISTINCT seq) AS seqs",
                                         "round(sum(amount), 2) AS total").first()
        expected_total = spark.sql("SELECT round(sum(amount), 2) AS t FROM source").first().t
    ok = check.missing == 0 and check.extra == 0 and check.kept == check.kept_keys
    colour = "green" if ok else "red"
    console.print(
        f"[bold {colour}]{ACCOUNTS}[/]: {records:,} records compacted to {check.kept:,} "
        f"(one per key: {check.kept_keys:,} keys, {check.tombstones:,} of them tombstones); "
        f"latest-per-key oracle: {check.missing} missing, {check.extra} extra -> "
        f"{'EQUAL' if ok else 'DIFFERENT'}")
    events_ok = events_check.n == events_check.seqs == records and \
        events_check.total == expected_total
    console.print(
        f"[bold {'green' if events_ok else 'red'}]{EVENTS}[/]: {events_check.n:,} events read "
        f"back through msgpack columns, amounts sum to {events_check.total:,} "
        f"(input {expected_total:,})")
    stream_ok = _stream_check(console, spark, cluster, records)
    kafka_ok = _kafka_check(console, cluster)
    _stats_table(console, spark, ns)
    if not ok or not events_ok or not stream_ok or not kafka_ok:
        raise SystemExit("the check failed")


def _kafka_check(console: Console, cluster: Any) -> bool:
    """Kafka's clients against the cluster's brokers: confluent-kafka (librdkafka) creates
    ``orders`` through a broker and produces ``KAFKA_RECORDS`` keyed records to it (idempotent,
    lz4); kafka-python reads every partition back from the broker leading it."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition

    bootstrap = cluster.bootstrap_servers
    with console.status(f"Kafka clients: producing {ORDERS} with confluent-kafka"):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(ORDERS, 3)]).values():
            future.result(30)
        producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                "compression.type": "lz4", "linger.ms": 5})
        failed: list[Any] = []
        started = time.monotonic()
        for i in range(KAFKA_RECORDS):
            producer.produce(ORDERS, key=b"customer-%d" % (i % 100), value=b"order-%d" % i,
                             on_delivery=lambda err, _msg: failed.append(err) if err else None)
            producer.poll(0)
        left = producer.flush(60)
        produce_s = time.monotonic() - started
    with console.status(f"Kafka clients: consuming {ORDERS} with kafka-python"):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=10_000)
        try:
            consumer.assign([TopicPartition(ORDERS, p) for p in range(3)])
            consumer.seek_to_beginning()
            values = {message.value for message in consumer}
        finally:
            consumer.close()
    brokers = {cluster.partition_dir(ORDERS, p) for p in range(3)}
    ok = not failed and left == 0 and values == {b"order-%d" % i for i in range(KAFKA_RECORDS)}
    console.print(
        f"[bold {'green' if ok else 'red'}]kafka[/]: confluent-kafka produced {KAFKA_RECORDS:,} "
        f"records to {ORDERS} in {produce_s:.1f} s (idempotent, lz4) over {len(brokers)} "
        f"brokers; kafka-python read back {len(values):,} distinct ones")
    return ok


def _stream_check(console: Console, spark: Any, cluster: Any, records: int) -> bool:
    """A short Structured Streaming query: ``events`` copied into Parquet by micro-batches of at
    most a quarter of the topic (``maxOffsetsPerTrigger``), run to the end, then run again from
    its checkpoint after more events arrive: every event lands exactly once."""
    from storage.records import Record

    root = Path(cluster.description.log_dirs[0]).parent / "stream"
    shutil.rmtree(root, ignore_errors=True)
    out, checkpoint = str(root / "out"), str(root / "checkpoint")

    def run() -> list[int]:
        query = (spark.readStream.format("strata").option("topic", EVENTS)
                 .option("namespace", cluster.namespace).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", max(records // 4, 1)).load()
                 .writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    with console.status("streaming events into Parquet (readStream, availableNow)"):
        first = run()
        extra = 1000
        now = int(time.time() * 1000)
        for partition in range(PARTITIONS):
            cluster.produce(EVENTS, partition, [Record(key=b"late", value=b"late-%d" % i,
                                                       timestamp=now)
                                                for i in range(extra // PARTITIONS)])
        added = extra // PARTITIONS * PARTITIONS
        second = run()
        rows = spark.read.parquet(out).selectExpr("count(*) AS n",
                                                  "count(DISTINCT partition, offset) AS d").first()
    ok = sum(first) == records and sum(second) == added and rows.n == rows.d == records + added
    console.print(
        f"[bold {'green' if ok else 'red'}]stream[/]: {EVENTS} -> Parquet in {len(first)} "
        f"micro-batches ({', '.join(f'{n:,}' for n in first)} rows), then {sum(second):,} new "
        f"events after a restart from the checkpoint; {rows.n:,} rows, each offset once")
    return ok


def _write(progress: Progress, cluster: Any, topic: str, records: int,
           job: Callable[[], None]) -> None:
    """Run the Spark write while a bar follows the topic's log end offsets."""
    task = progress.add_task(f"feeding {topic} from Spark", total=records)
    layout = cluster.topic_layout(topic)
    done = threading.Event()

    def follow() -> None:
        while not done.wait(0.5):
            try:
                stored = sum(end for _, end in cluster.end_offsets(layout).values())
            except Exception:  # noqa: BLE001 - the bar is cosmetic; the job reports errors
                continue
            progress.update(task, completed=stored)

    watcher = threading.Thread(target=follow, name=f"progress-{topic}", daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        job()
    finally:
        done.set()
        watcher.join()
    elapsed = time.monotonic() - started
    stored = sum(end for _, end in cluster.end_offsets(layout).values())
    progress.update(task, completed=stored,
                    description=f"fed {topic}: {stored / elapsed:,.0f} records/s")


def _stats_table(console: Console, spark: Any, namespace: str) -> None:
    stats = spark.read.format("strata-stats").option("namespace", namespace).load()
    stats.createOrReplaceTempView("stats")
    rows = spark.sql("""
        SELECT role, actor, directory, topic, partition, size_bytes, log_end_offset, dirty_ratio,
               cleans, last_clean_mb_per_sec, buffer_utilization, rss_bytes, cpu_percent,
               uncleanable, online
        FROM stats WHERE role != 'partition'
        UNION ALL
        SELECT 'topic', NULL, NULL, topic, count(*), sum(size_bytes), sum(log_end_offset),
               max(dirty_ratio), NULL, NULL, NULL, NULL, NULL, max(uncleanable), min(online)
        FROM stats WHERE role = 'partition' GROUP BY topic
        ORDER BY role, actor, topic""").collect()
    table = Table(title="strata-stats (per actor; partitions summed per topic)")
    for name in ("role", "name", "MB", "records", "dirty", "cleans", "clean MB/s", "map use",
                 "RSS MB", "CPU %", "flags"):
        table.add_column(name, justify="left" if name in ("role", "name") else "right",
                         no_wrap=True)
    for r in rows:
        if r.role == "topic":
            name = f"{r.topic} ({r.partition} partitions)"
        elif r.role == "log_dir":
            name = Path(r.directory).name
        else:
            name = r.actor.removeprefix("strata-").split("@")[0]
        flags = ", ".join(f for f, on in (("uncleanable", r.uncleanable),
                                          ("OFFLINE", r.online is False)) if on)
        table.add_row(r.role, name, _num(r.size_bytes, 1e6, "{:,.1f}"),
                      _num(r.log_end_offset, 1, "{:,.0f}"), _num(r.dirty_ratio, 1, "{:.2f}"),
                      _num(r.cleans, 1, "{:,.0f}"), _num(r.last_clean_mb_per_sec, 1, "{:,.1f}"),
                      _num(r.buffer_utilization, 0.01, "{:.1f}%"), _num(r.rss_bytes, 2**20,
                                                                        "{:,.0f}"),
                      _num(r.cpu_percent, 1, "{:.0f}"), flags)
    console.print(table)


def _num(value: float | None, unit: float, fmt: str) -> str:
    return "" if value is None else fmt.format(value / unit)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console)


if __name__ == "__main__":
    raise SystemExit(main())
