"""Kafka protocol benchmarks with librdkafka (confluent-kafka), the client most Kafka
applications outside the JVM use, against log directories served over the protocol:

* produce: an idempotent producer (acks=all, lz4, ``batch.size`` ~1 KB of 100 B records, so
  about ten records a batch, as a latency-minded producer sends them) into a topic of one
  partition per directory; records/s beside ``Log.append_batch`` of the very batches the
  producer sent (read back from the logs) into fresh logs in this process. The client's own
  CPU time is in the note: librdkafka's idempotent producer counts the *records* in flight of a
  partition against its window of five *requests* (``rd_kafka_toppar_producer_serve``), so at
  five records a batch or more a partition has one request in flight, and its broker thread
  polls without sleeping while the next full batch waits for that answer;
* fetch: a consumer reading the topic from the beginning, timed from its first records to its
  last, as Kafka's consumer perf test leaves its start out of its fetch time (the start is in
  the note); MB/s of values beside ``Log.read_raw`` of the same segments in this process, its
  next offset found by the numba scan of the batch headers;
* end-to-end latency at low load: one record every ``LATENCY_GAP_S``, from ``produce`` to the
  consumer's ``poll`` returning it; p50 and p99.

The client shares the machine's cores with the brokers.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from benchmarks.common import MB, Figure
from storage.config import LogConfig
from storage.kernels import warm_up
from storage.log import Log
from storage.log_read import FetchData
from storage.record_reader import scan_batches

TOPIC = "bench"
DIRS = 3
VALUE_BYTES = 100
LATENCY_GAP_S = 0.005
PRODUCE_TARGET_RATIO = 0.5
FETCH_TARGET_RATIO = 0.5
LATENCY_P99_TARGET_MS = 20.0
RAW_READ_RUNS = 3


def run(quick: bool = False) -> list[Figure]:
    warm_up()
    records = 50_000 if quick else 300_000
    samples = 300 if quick else 2000
    root = Path(tempfile.mkdtemp(prefix="strata-bench-kafka-"))
    try:
        with _brokers(root) as bootstrap:
            produce_s, client_cpu_s = _produce(bootstrap, records)
            fetched = _fetch(bootstrap, records)
            latency = _latency_figure(bootstrap, samples)
        logs = [Log.open(path, LogConfig(), recovery_point=0, had_clean_shutdown=True)
                for path in sorted(root.glob(f"d*/{TOPIC}-*"))]
        figures = [_produce_figure(root, logs, records, produce_s, client_cpu_s),
                   _fetch_figure(logs, fetched), latency]
        for log in logs:
            log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


@contextmanager
def _brokers(root: Path) -> Iterator[str]:
    """A cluster of ``DIRS`` directories, each a Kafka broker on an ephemeral port, on a Ray
    head started here, with a topic of one partition per directory: its bootstrap servers.
    Stopped (cleanly) on exit."""
    import ray

    from cluster import Cluster
    from cluster.runtime.head import head_resources, head_system_config
    from cluster.naming import abs_dir

    dirs = [abs_dir(root / f"d{i}") for i in range(DIRS)]
    ray.init(address="local", resources=head_resources(dirs), include_dashboard=False,
             logging_level="WARNING", log_to_driver=False, _system_config=head_system_config())
    try:
        cluster = Cluster.start(log_dirs=dirs, cleaners=1, namespace="bench-kafka",
                                config={"listeners": "PLAINTEXT://127.0.0.1:0"})
        try:
            info = cluster.create_topic(TOPIC, partitions=DIRS)
            assert sorted(info.partitions.values()) == sorted(dirs)
            yield cluster.bootstrap_servers
        finally:
            cluster.stop()
    finally:
        ray.shutdown()


def _producer(bootstrap: str, **config: object):
    import confluent_kafka as ck

    settings = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                "compression.type": "lz4", "batch.size": 1024, "linger.ms": 5,
                "queue.buffering.max.messages": 1_000_000}
    settings.update(config)
    return ck.Producer(settings)


def _produce(bootstrap: str, records: int) -> tuple[float, float]:
    """Seconds to produce ``records`` records and have every delivery acknowledged, and the
    CPU seconds the client's process spent meanwhile."""
    producer = _producer(bootstrap)
    # values as incompressible as real payloads: the fetch figure then counts the bytes moved
    values = [os.urandom(VALUE_BYTES) for _ in range(1024)]
    value = values[0]
    failed: list[object] = []

    def report(err, _msg) -> None:
        if err is not None:
            failed.append(err)

    producer.produce(TOPIC, value=value, on_delivery=report)   # metadata, producer id
    producer.flush(30)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(records - 1):
        while True:
            try:
                producer.produce(TOPIC, value=values[i % 1024], on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert not failed, failed[:3]
    return seconds, cpu


def _produce_figure(root: Path, logs: list[Log], records: int, produce_s: float,
                    client_cpu_s: float) -> Figure:
    """The producer's records/s beside the in-process append of the same batches."""
    append_s, count = 0.0, 0
    for i, log in enumerate(logs):     # each partition's batches into a log of its own
        batches = [bytes(batch.buffer) for fetch in _stored([log]) for batch in fetch.batches()]
        fresh = Log.open(root / f"baseline-{i}", LogConfig(), recovery_point=0,
                         had_clean_shutdown=True)
        start = time.perf_counter()
        for data in batches:
            fresh.append_batch(data)
        append_s += time.perf_counter() - start
        fresh.close()
        count += len(batches)
    per_batch = records / max(1, count)
    return Figure(f"produce with librdkafka (acks=all, idempotent, lz4), {len(logs)} dirs",
                  records / produce_s, "records/s", baseline=records / append_s,
                  baseline_name="Log.append_batch of the same batches in process",
                  note=f"target ratio {PRODUCE_TARGET_RATIO}; {count:,} batches of "
                       f"~{per_batch:.0f} x {VALUE_BYTES} B records; the client's CPU "
                       f"{client_cpu_s:.1f} s in {produce_s:.1f} s")


def _fetch(bootstrap: str, records: int) -> tuple[float, int, float, float]:
    """A consumer reading the topic's ``records`` from the beginning, as Kafka's consumer perf
    test times it (its fetch time apart from its start): seconds from the first ``consume``
    that returned records to the last, the bytes of the values received in that span, and the
    seconds from the start to the first records (connections, metadata, the first fetch), and
    the CPU seconds of the client's process in all."""
    import confluent_kafka as ck

    # fetch.queue.backoff.ms: librdkafka stops fetching a partition for this long (1 s by
    # default) whenever its local queue holds queued.min.messages; the default made a read of
    # 300,000 records wait a whole second with no request in flight
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                            "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                            "max.partition.fetch.bytes": 1 << 20,
                            "fetch.queue.backoff.ms": 10})
    consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(DIRS)])
    got, received = 0, 0
    cpu = time.process_time()
    start = time.perf_counter()
    first = None
    deadline = start + 120
    while got < records and time.perf_counter() < deadline:
        messages = consumer.consume(10_000, 1.0)
        for msg in messages:
            assert msg.error() is None, msg.error()
        got += len(messages)
        if messages and first is None:
            first = time.perf_counter()
        elif messages:
            received += len(messages) * VALUE_BYTES      # every value is VALUE_BYTES long
    end, cpu = time.perf_counter(), time.process_time() - cpu
    consumer.close()
    assert got == records and first is not None, f"consumed {got} of {records}"
    return end - first, received, first - start, cpu


def _fetch_figure(logs: list[Log], fetched: tuple[float, int, float, float]) -> Figure:
    """The consumer's MB/s of values after its first records, beside ``read_raw`` of the same
    segments (best of ``RAW_READ_RUNS``: one read of a few MB takes tens of ms on a shared
    machine), per byte of values either way (the log stores a few percent more: headers)."""
    fetch_s, received, first_s, client_cpu_s = fetched
    raw_s, size = float("inf"), 0
    for _ in range(RAW_READ_RUNS):
        start = time.perf_counter()
        size = sum(len(fetch.data) for fetch in _stored(logs))
        raw_s = min(raw_s, time.perf_counter() - start)
    values = sum(log.log_end_offset - log.log_start_offset for log in logs) * VALUE_BYTES
    return Figure(f"fetch from the beginning with librdkafka, {len(logs)} dirs",
                  received / fetch_s / MB, "MB/s",
                  baseline=values / raw_s / MB, baseline_name="Log.read_raw of the same segments",
                  note=f"target ratio {FETCH_TARGET_RATIO}; values of the records after the "
                       f"first ones, which came {first_s * 1000:.0f} ms after the start; the "
                       f"client's CPU {client_cpu_s:.2f} s in {first_s + fetch_s:.2f} s; "
                       f"read_raw of {size / MB:.1f} MB (lz4), best of {RAW_READ_RUNS}")


def _stored(logs: list[Log]) -> Iterator[FetchData]:
    """Every log's batches from its start, as ``read_raw`` returns them (1 MiB at a time); the
    next offset from the batch headers' scan, as a fetching client finds it."""
    for log in logs:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            fetch = log.read_raw(offset, 1 << 20)
            if fetch is None:
                break
            yield fetch
            offset = int(scan_batches(fetch.data).last_offsets[-1]) + 1


def _latency_figure(bootstrap: str, samples: int) -> Figure:
    """p50 of produce -> poll at one record every ``LATENCY_GAP_S`` (p99 in the note)."""
    import confluent_kafka as ck

    producer = _producer(bootstrap, **{"linger.ms": 0, "compression.type": "none"})
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                            "enable.auto.commit": False, "fetch.wait.max.ms": 500})
    producer.produce(TOPIC, value=b"warm")
    producer.flush(30)
    end = _log_end(consumer)
    consumer.assign([ck.TopicPartition(TOPIC, 0, end)])
    latencies = []
    for i in range(samples):
        sent = time.perf_counter()
        producer.produce(TOPIC, value=str(i).encode(), partition=0)
        producer.poll(0)
        while True:
            msg = consumer.poll(5.0)
            assert msg is not None, "no record within 5 s"
            assert msg.error() is None, msg.error()
            if msg.value() == str(i).encode():
                break
        latencies.append((time.perf_counter() - sent) * 1000)
        time.sleep(LATENCY_GAP_S)
    producer.flush(30)
    consumer.close()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    return Figure("end-to-end latency produce -> poll, p50", statistics.median(latencies), "ms",
                  note=f"p99 {p99:.1f} ms (target p99 under {LATENCY_P99_TARGET_MS:.0f} ms); "
                       f"acks=all, one record every {LATENCY_GAP_S * 1000:.0f} ms")


def _log_end(consumer) -> int:
    import confluent_kafka as ck

    _low, high = consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
    return high
