"""Moving a partition between log directories on a real local Ray cluster (KIP-113): under
concurrent appends and reads, with the pause at the switch measured, and with the coordinator,
the target node or the source node killed (kill -9 of the actor's process) during the move."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from cluster import Cluster
from cluster.naming import COORDINATOR_NAME, node_actor_name
from node.errors import MoveRefusedError
from storage.errors import LogDirOfflineError
from storage.records import Record
from tests.cluster.conftest import wait_for
from tests.conftest import Immutable

T0 = 1_700_000_000_000


def values(start: int, count: int, size: int = 0) -> list[Record]:
    return [Record(key=b"k%d" % (i % 50), value=b"v%09d" % i + b"." * size, timestamp=T0 + i)
            for i in range(start, start + count)]


def pid_of(namespace: str, name: str) -> int:
    handle = ray.get_actor(name, namespace=namespace)
    return ray.get(handle.__ray_call__.remote(lambda self: os.getpid()))


def other_dir(c: Cluster, topic: str, partition: int) -> str:
    here = c.partition_dir(topic, partition)
    return next(d for d in c.description.log_dirs if os.path.abspath(d) != here)


def live_copies(c: Cluster, topic: str, partition: int, *, resumable_in: str | None = None
                ) -> list[str]:
    """The directories whose node serves the partition, and no -future directory anywhere
    (but in ``resumable_in``, where a copy interrupted by a kill of its target stays to resume;
    it is never served)."""
    held = [d for d in c.description.log_dirs
            if (topic, partition) in [tuple(x) for x in c.node(d).call("partitions", timeout=60)]]
    futures = [n for d in c.description.log_dirs for n in os.listdir(d) if n.endswith("-future")
               and os.path.abspath(d) != resumable_in]
    assert not futures, futures
    return held


class Producer(threading.Thread):
    """Produces numbered records (flushed) through its own client; records every acknowledged
    value and the latency of each call."""

    def __init__(self, namespace: str, topic: str, start: int = 0, size: int = 0) -> None:
        super().__init__(daemon=True)
        self.client = Cluster.connect(namespace=namespace)
        self.topic, self.next, self.size = topic, start, size
        self.acked: list[bytes] = []
        self.latencies: list[tuple[float, float]] = []   # (start time, seconds)
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        while not self.stop.is_set():
            batch = values(self.next, 20, self.size)
            self.next += 20                 # a failed batch is never sent again: values stay unique
            began = time.perf_counter()
            try:
                self.client.produce(self.topic, 0, batch, flush=True)
            except BaseException as err:  # noqa: BLE001 - an actor killed: in doubt, go on
                self.errors.append(err)
                time.sleep(0.1)
                continue
            self.latencies.append((began, time.perf_counter() - began))
            self.acked.extend(r.value for r in batch)


def test_moves_under_concurrent_appends_and_reads_lose_and_duplicate_nothing(
        start_cluster) -> None:
    c = start_cluster(dirs=2)
    c.create_topic("t", partitions=1, config={"segment.bytes": 256 * 1024})
    c.produce("t", 0, values(0, 20_000, 100), flush=True)
    producer = Producer(c.namespace, "t", start=20_000)
    reads: list[int] = []
    read_errors: list[BaseException] = []
    reading = threading.Event()

    def read() -> None:
        reader = Cluster.connect(namespace=c.namespace)
        try:
            while not reading.is_set():
                reads.append(sum(1 for _ in reader.consume("t", 0, from_offset=0)))
        except BaseException as err:  # noqa: BLE001
            read_errors.append(err)

    reader = threading.Thread(target=read, daemon=True)
    producer.start(), reader.start()
    wait_for(lambda: len(producer.acked) > 200, what="the producer running")
    held, switches, windows = [], [], []
    for _ in range(4):
        began = time.perf_counter()
        result = c.move_partition("t", 0, other_dir(c, "t", 0))
        windows.append((began, time.perf_counter()))
        assert result.log_end_offset >= 20_000 and result.held_ms >= 0
        held.append(result.held_ms)
        switches.append(result.switch_ms)
        assert c.partition_dir("t", 0) == os.path.abspath(result.target_dir)
        assert c.move_status() == []
    producer.stop.set(), reading.set()
    producer.join(60), reader.join(60)
    assert not producer.errors and not read_errors, (producer.errors, read_errors)
    got = [r.value for r in c.consume("t", 0, from_offset=0)]
    expected = [r.value for r in values(0, 20_000, 100)] + producer.acked
    assert got[: len(expected)] == expected                  # every ack, once, in order
    assert len(got) == len(expected)
    assert reads and max(reads) <= len(got)
    assert live_copies(c, "t", 0) == [c.partition_dir("t", 0)]
    during = [lat for t, lat in producer.latencies
              if any(a <= t <= b for a, b in windows)]
    p99 = float(np.percentile(np.array(during) * 1000, 99)) if during else 0.0
    every = np.array([lat for _, lat in producer.latencies]) * 1000
    print(f"\nswitch: appends held {max(held):.1f} ms at most (p50 {np.median(held):.1f}), "
          f"switch to serving {[round(s) for s in switches]} ms; "
          f"produce latency during moves p99 {p99:.1f} ms over {len(during)} calls; every "
          f"produce p50 {np.median(every):.1f} p99 {np.percentile(every, 99):.1f} ms over "
          f"{len(every)}; moves took {[round((b - a) * 1000) for a, b in windows]} ms")
    assert max(held) < 2000


@pytest.mark.parametrize("victim", ["coordinator", "target", "source"])
def test_a_kill_during_a_move_leaves_one_live_copy_with_every_acknowledged_record(
        start_cluster, victim: str) -> None:
    c = start_cluster(dirs=2)
    c.create_topic("t", partitions=1, config={"segment.bytes": 1 << 20})
    c.produce("t", 0, values(0, 60_000, 300), flush=True)   # ~20 MB: the copy takes a while
    source, target = c.partition_dir("t", 0), other_dir(c, "t", 0)
    producer = Producer(c.namespace, "t", start=60_000)
    producer.start()
    outcome: list[Any] = []

    def move() -> None:
        try:
            outcome.append(c.move_partition("t", 0, target))
        except BaseException as err:  # noqa: BLE001 - the kill may fail the move
            outcome.append(err)

    mover = threading.Thread(target=move, daemon=True)
    mover.start()
    wait_for(lambda: c.move_status() or outcome, what="the move under way")
    name = {"coordinator": COORDINATOR_NAME, "target": node_actor_name(target),
            "source": node_actor_name(source)}[victim]
    os.kill(pid_of(c.namespace, name), signal.SIGKILL)
    mover.join(300)
    assert outcome, "the move call never returned"
    time.sleep(0.5)
    producer.stop.set()
    producer.join(120)
    acked_before = len(producer.acked)
    fresh = wait_for(lambda: Cluster.connect(namespace=c.namespace), what="the cluster back")
    wait_for(lambda: all(fresh.node(d).call("ping", timeout=30) for d in c.description.log_dirs),
             timeout=120, what="every node back")
    copies = wait_for(lambda: live_copies(
        fresh, "t", 0, resumable_in=os.path.abspath(target) if victim == "target" else None),
        timeout=120, what="a live copy")
    assert len(copies) == 1
    got = [r.value for r in fresh.consume("t", 0, from_offset=0)]
    acked = [r.value for r in values(0, 60_000, 300)] + producer.acked
    assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"
    assert len(got) == len(set(got))                          # none twice
    assert acked_before > 0 and len(producer.errors) < 50, producer.errors[-3:]
    if victim == "target" and os.path.abspath(copies[0]) != os.path.abspath(target):
        kept = [n for n in os.listdir(target) if n.endswith("-future")]
        assert len(kept) == 1          # the interrupted copy, kept across the restart
        size = sum(f.stat().st_size for f in Path(copies[0], "t-0").glob("*.log"))
        resumed = fresh.move_partition("t", 0, target)      # carries on from it
        assert resumed.bytes_copied <= size
        assert live_copies(fresh, "t", 0) == [target]
        assert [r.value for r in fresh.consume("t", 0, from_offset=0)] == got
    print(f"\n{victim} killed: move {type(outcome[0]).__name__}; live in {copies[0]} "
          f"(was {source})")


def test_moves_are_refused_with_one_clear_reason(tmpfs, start_cluster,
                                                 immutable: Immutable) -> None:
    small = tmpfs("1m")
    c = start_cluster(paths=[small.parent / "big", small])
    c.create_topic("t", partitions=2)
    big = os.path.abspath(c.description.log_dirs[0])
    for p in range(2):
        if c.partition_dir("t", p) != big:
            c.move_partition("t", p, big)
    c.produce("t", 0, values(0, 20_000, 100), flush=True)   # 2 MB: more than the tmpfs
    with pytest.raises(MoveRefusedError) as err:
        c.move_partition("t", 0, "/no/such/dir")
    assert err.value.reason == "unknown-dir"
    with pytest.raises(MoveRefusedError) as err:
        c.move_partition("t", 0, big)
    assert err.value.reason == "same-dir"
    with pytest.raises(MoveRefusedError) as err:
        c.move_partition("t", 0, str(small))
    assert err.value.reason == "no-room" and "bytes free" in str(err.value)
    assert c.partition_dir("t", 0) == big
    assert not [n for n in os.listdir(small) if n.endswith("-future")]
    # an offline target
    c.produce("t", 1, values(0, 10, 0), flush=True)
    c.move_partition("t", 1, str(small))
    immutable(small / "t-1" / "00000000000000000000.log")
    with pytest.raises(LogDirOfflineError):
        c.produce("t", 1, values(10, 10, 0))
    c.create_topic("u", partitions=1)
    if c.partition_dir("u", 0) != big:
        pytest.fail("placement chose the offline directory")
    c.produce("u", 0, values(0, 10, 0), flush=True)
    with pytest.raises(LogDirOfflineError):
        c.move_partition("u", 0, str(small))
    assert [r.value for r in c.consume("u", 0)] == [r.value for r in values(0, 10, 0)]


def test_records_the_node_encodes_follow_a_partition_that_moved(start_cluster) -> None:
    """``Cluster.produce_records`` (a small ``strata produce``) through a client whose route is
    stale: the old node refuses the batches it encoded (the partition moved away), and they are
    sent again, already encoded, where the partition lives now; every record once, in order."""
    c = start_cluster(dirs=2)
    c.create_topic("r", partitions=2)
    stale = Cluster.connect(namespace=c.namespace)
    stale.produce_records([("r", 0, values(0, 10)), ("r", 1, values(100, 5))])
    old = c.partition_dir("r", 0)
    c.move_partition("r", 0, other_dir(c, "r", 0))
    assert stale.partition_dir("r", 0) == old                   # its route is stale
    result = stale.produce_records([("r", 0, values(10, 10)), ("r", 1, values(105, 5))])
    assert result.records == 15
    assert result.calls > len({old, stale.partition_dir("r", 1)})   # a call more: the resend
    assert [r.value for r in c.consume("r", 0)] == [r.value for r in values(0, 20)]
    assert [r.value for r in c.consume("r", 1)] == [r.value for r in values(100, 10)]
    assert live_copies(c, "r", 0) == [c.partition_dir("r", 0)] != [old]
