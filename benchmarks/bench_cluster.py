"""Cluster benchmarks, on a Ray head started in this process:

* time from start to serving with 3 empty directories: the Ray head (``ray.init`` with the
  directory resources), then the actors (``Cluster.start`` on the running head, until every
  directory has loaded and answers);
* the cost of one actor call (p50 of a sync ``ping`` round trip; p99 in the note);
* produce throughput through the actors: producer-encoded v2 batches (16-byte keys, 100-byte
  values) to 3 partitions, one per directory, packed into calls of ``CALL_BYTES`` and pipelined
  (``Cluster.produce_batches``), beside ``Log.append_batch`` of the same batches into 3 logs in
  this process (the baseline: the storage work alone, no Ray);
* creating and deleting a topic of 10,000 partitions (2,000 with ``--quick``), beside the same
  work by a ``LogDirServer`` in this process.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import MB, Figure
from storage.config import LogConfig
from storage.kernels import warm_up
from storage.log import Log
from storage.records import build_batch_columns

DIRS = 3
RECORDS_PER_BATCH = 2000               # ~260 KB per batch: a Kafka producer's batch.size range
VALUE_BYTES = 100
CALL_BYTES = 1 << 20                   # one actor call carries ~1 MiB (4 batches)
TARGET_RECORDS_PER_S = 500_000
PINGS = 300
SCALE_PARTITIONS = 10_000
SCALE_TARGET_PER_S = 1_000             # 10,000 partitions in 10 s ("seconds, not minutes")


def run(quick: bool = False) -> list[Figure]:
    warm_up()
    root = Path(tempfile.mkdtemp(prefix="strata-bench-cluster-"))
    batches = _batches(16 if quick else 48)
    try:
        figures = _cluster_figures(root, batches, rounds=2 if quick else 4)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


def _batches(count: int) -> list[bytes]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        keys = [bytes(k) for k in rng.integers(0, 256, (RECORDS_PER_BATCH, 16), dtype=np.uint8)]
        out.append(build_batch_columns(keys, [b"v" * VALUE_BYTES] * RECORDS_PER_BATCH,
                                       np.full(RECORDS_PER_BATCH, 1_700_000_000_000,
                                               dtype=np.int64)))
    return out


def _cluster_figures(root: Path, batches: list[bytes], rounds: int) -> list[Figure]:
    import ray

    from cluster import Cluster
    from cluster.runtime.head import head_resources, head_system_config
    from cluster.naming import abs_dir

    dirs = [abs_dir(root / f"d{i}") for i in range(DIRS)]
    began = time.perf_counter()
    ray.init(address="local", resources=head_resources(dirs), include_dashboard=False,
             logging_level="WARNING", log_to_driver=False, _system_config=head_system_config())   # a new head, never a running one
    head_s = time.perf_counter() - began
    try:
        began = time.perf_counter()
        cluster = Cluster.start(log_dirs=dirs, cleaners=1, namespace="bench")
        cluster.list_topics()                       # serving: the coordinator answers
        actors_s = time.perf_counter() - began
        try:
            figures = [
                Figure("cluster start to serving, 3 empty dirs (actors, Ray up)", actors_s, "s",
                       note=f"Ray head start (ray.init) before it: {head_s:.2f} s"),
                Figure("cluster start to serving, 3 empty dirs (incl. Ray head)",
                       head_s + actors_s, "s"),
                *_call_cost(cluster),
                *_produce(cluster, root, batches, rounds),
                *_topic_scale(cluster, root, 2_000 if rounds <= 2 else SCALE_PARTITIONS),
            ]
        finally:
            cluster.stop()
    finally:
        ray.shutdown()
    return figures


def _call_cost(cluster) -> list[Figure]:
    node = cluster.node(cluster.description.log_dirs[0])
    for _ in range(20):
        node.call("ping")
    samples = []
    for _ in range(PINGS):
        start = time.perf_counter()
        node.call("ping")
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return [Figure("actor call round trip, p50", statistics.median(samples), "ms",
                   note=f"p99 {samples[int(len(samples) * 0.99)]:.2f} ms, sync ping")]


def _produce(cluster, root: Path, batches: list[bytes], rounds: int) -> list[Figure]:
    info = cluster.create_topic("bench", partitions=DIRS)
    assert len(set(info.partitions.values())) == DIRS
    records = len(batches) * RECORDS_PER_BATCH
    size = sum(len(b) for b in batches)
    items = [("bench", i % DIRS, b) for i, b in enumerate(batches)]
    cluster.produce_batches(items[:DIRS * 2], batch_bytes=CALL_BYTES)      # warm every path
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        result = cluster.produce_batches(items, batch_bytes=CALL_BYTES)
        best = min(best, time.perf_counter() - start)
        assert result.records == records
    baseline = _in_process(root / "baseline", batches, rounds)
    return [
        Figure(f"produce through actors, {DIRS} dirs, records/s", records / best, "records/s",
               target=TARGET_RECORDS_PER_S, baseline=records / baseline,
               baseline_name="Log.append_batch in process",
               note=f"{len(batches)} batches of {RECORDS_PER_BATCH} x {VALUE_BYTES} B values, "
                    f"~{CALL_BYTES // 1024} KiB calls"),
        Figure(f"produce through actors, {DIRS} dirs, MB/s", size / best / MB, "MB/s",
               baseline=size / baseline / MB, baseline_name="Log.append_batch in process"),
    ]


def _topic_scale(cluster, root: Path, partitions: int) -> list[Figure]:
    """Create then delete a topic of ``partitions`` partitions through the coordinator (one
    batched call per directory and 2,000 partitions), beside the same creates and deletes by a
    ``LogDirServer`` in this process (the directory work alone, no Ray)."""
    from node.server import LogDirServer

    began = time.perf_counter()
    cluster.create_topic("scale", partitions=partitions)
    create_s = time.perf_counter() - began
    began = time.perf_counter()
    deleted = cluster.delete_topic("scale")
    delete_s = time.perf_counter() - began
    assert deleted == partitions
    server = LogDirServer(root / "scale-baseline", start_tasks=False)
    try:
        began = time.perf_counter()
        server.create_partitions("scale", range(partitions), {})
        local_create_s = time.perf_counter() - began
        began = time.perf_counter()
        server.delete_partitions("scale", range(partitions))
        local_delete_s = time.perf_counter() - began
    finally:
        server.close()
    return [
        Figure(f"topic create, {partitions:,} partitions over {DIRS} dirs", partitions / create_s,
               "partitions/s", target=SCALE_TARGET_PER_S, baseline=partitions / local_create_s,
               baseline_name="LogDirServer.create_partitions in process, 1 dir",
               note=f"{create_s:.1f} s"),
        Figure(f"topic delete, {partitions:,} partitions over {DIRS} dirs", partitions / delete_s,
               "partitions/s", target=SCALE_TARGET_PER_S, baseline=partitions / local_delete_s,
               baseline_name="LogDirServer.delete_partitions in process, 1 dir",
               note=f"{delete_s:.1f} s"),
    ]


def _in_process(directory: Path, batches: list[bytes], rounds: int) -> float:
    best = float("inf")
    for round_ in range(rounds):
        logs = [Log.open(directory / f"r{round_}" / f"bench-{p}", LogConfig(), recovery_point=0,
                         had_clean_shutdown=True) for p in range(DIRS)]
        try:
            start = time.perf_counter()
            for i, batch in enumerate(batches):
                logs[i % DIRS].append_batch(batch)
            best = min(best, time.perf_counter() - start)
        finally:
            for log in logs:
                log.close()
    return best
