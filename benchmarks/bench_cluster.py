"""Cluster benchmarks, on a Ray head started in this process:

* time from start to serving with 3 empty directories: the Ray head (``ray.init`` with the
  directory resources), then the actors (``Cluster.start`` on the running head, until every
  directory has loaded and answers); beside it, Ray's own floor measured in the same run, in a
  process of its own: the same ``ray.init``, then as many actors as the cluster has (``DIRS``
  nodes, one cleaner, the coordinator) that import nothing, created at once, until each answers;
* ``strata cluster start`` on 3 empty directories as a user runs it: a new Ray head in processes
  of its own (``ray start --head``, the dashboard on), the actors, the directories loaded, until
  the command returns (wall clock of the command; the seconds it reports in the note);
* the cost of one actor call (p50 of a sync ``ping`` round trip; p99 in the note);
* produce throughput through the actors: producer-encoded v2 batches (16-byte keys, 100-byte
  values) to 3 partitions, one per directory, packed into calls of ``CALL_BYTES`` and pipelined
  (``Cluster.produce_batches``), beside ``Log.append_batch`` of the same batches into 3 logs in
  this process (the baseline: the storage work alone, no Ray);
* creating and deleting a topic of 10,000 partitions (2,000 with ``--quick``), beside the same
  work by a ``LogDirServer`` in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import MB, Figure
from storage.config import LogConfig
from storage.kernels import warm_up
from storage.log import Log
from storage.records import build_batch_columns

ROOT = str(Path(__file__).resolve().parents[1])
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
        figures.append(_cli_start(root / "cli"))
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
                *_call_cost(cluster),
                *_produce(cluster, root, batches, rounds),
                *_topic_scale(cluster, root, 2_000 if rounds <= 2 else SCALE_PARTITIONS),
            ]
        finally:
            cluster.stop()
    finally:
        ray.shutdown()
    actors = DIRS + 2
    floor_head_s, floor_s = _ray_floor(dirs, actors)
    return [
        Figure("cluster start to serving, 3 empty dirs (actors, Ray up)", actors_s, "s",
               note=f"Ray head start (ray.init) before it: {head_s:.2f} s; Ray's floor: "
                    f"{actors} actors importing nothing, at once, answer after {floor_s:.2f} s"),
        Figure("cluster start to serving, 3 empty dirs (incl. Ray head)", head_s + actors_s, "s",
               note=f"Ray alone: {floor_head_s + floor_s:.2f} s (ray.init {floor_head_s:.2f} s, "
                    f"then the {actors} idle actors)"),
        *figures,
    ]


FLOOR_PROBE = """
import json, sys, time
import ray
from cluster.runtime.head import head_resources, head_system_config

class Idle:
    def ping(self):
        return True

began = time.perf_counter()
ray.init(address="local", resources=head_resources(json.loads(sys.argv[1])),
         include_dashboard=False, logging_level="WARNING", log_to_driver=False,
         _system_config=head_system_config())
head_s = time.perf_counter() - began
idle = ray.remote(num_cpus=0)(Idle)
began = time.perf_counter()
handles = [idle.remote() for _ in range(int(sys.argv[2]))]
ray.get([h.ping.remote() for h in handles], timeout=300)
print(json.dumps([head_s, time.perf_counter() - began]))
ray.shutdown()
"""


def _ray_floor(dirs: list[str], actors: int) -> tuple[float, float]:
    """(``ray.init`` seconds, seconds until ``actors`` idle actors created at once all answer),
    in a new process with a head of its own started as the cluster's is."""
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", FLOOR_PROBE, json.dumps(dirs), str(actors)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    head_s, actors_s = json.loads(out.stdout.strip().splitlines()[-1])
    return head_s, actors_s


def _cli_start(root: Path) -> Figure:
    """``strata cluster start`` of 3 new directories with a new head (free ports, a Ray temp
    dir of its own, the dashboard on), then ``strata cluster stop`` of that head."""
    from cluster.runtime.head import head_session_dir, stop_head_process

    temp_dir = tempfile.mkdtemp(prefix="strata-bench-head-", dir="/tmp")   # Ray's socket paths
    strata = [sys.executable, "-m", "ops.cli"]
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONPATH": ROOT}
    ports = [f"--port={_free_port()}", f"--dashboard-port={_free_port()}",
             f"--metrics-export-port={_free_port()}", f"--ray-temp-dir={temp_dir}",
             f"--ray-start-arg=--ray-client-server-port={_free_port()}",
             f"--ray-start-arg=--dashboard-agent-listen-port={_free_port()}"]
    began = time.perf_counter()
    started = subprocess.run(
        [*strata, "cluster", "start", *(f"--log-dir={root / f'd{i}'}" for i in range(DIRS)),
         "--namespace=bench", "--json", *ports], env=env, capture_output=True, text=True,
        timeout=600)
    wall_s = time.perf_counter() - began
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        document = json.loads(started.stdout)
        subprocess.run([*strata, "cluster", "stop", f"--address={document['address']}",
                        "--namespace=bench"], env=env, capture_output=True, timeout=300)
    finally:
        marker = Path(temp_dir) / "ray_current_cluster"
        if marker.exists():          # a head the stop left running (or a start that failed)
            stop_head_process(head_session_dir(temp_dir), marker.read_text().strip())
        shutil.rmtree(temp_dir, ignore_errors=True)
    return Figure("strata cluster start to serving, 3 empty dirs (CLI, new head)", wall_s, "s",
                  note=f"ray start --head with the dashboard, then the actors; the command "
                       f"reports {document['seconds']:.2f} s from the head's start")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
