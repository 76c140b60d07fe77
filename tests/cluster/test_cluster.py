"""A Strata cluster on a real local Ray head: produce and consume across directories, compaction
by itself, and the faults: a node, a cleaner and the coordinator killed with kill -9."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import ray

from cluster.naming import COORDINATOR_NAME, node_actor_name
from storage.records import Record
from tests.cluster.conftest import wait_for

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 8192, "min.cleanable.dirty.ratio": 0.1}
T0 = 1_700_000_000_000


def records(start: int, count: int, keys: int) -> list[Record]:
    return [Record(key=b"k%d" % (i % keys), value=b"v%d" % i, timestamp=T0 + i)
            for i in range(start, start + count)]


def actor_pid(cluster, name: str) -> int:
    return ray.get(ray.get_actor(name, namespace=cluster.namespace).info.remote())["pid"]


def test_produce_to_three_directories_and_read_back(start_cluster) -> None:
    c = start_cluster(dirs=3)
    info = c.create_topic("orders", partitions=6)
    assert sorted(set(info.partitions.values())) == sorted(c.description.log_dirs)
    for p in range(6):
        c.produce("orders", p, records(p * 1000, 200, 1000), batch_bytes=1024)
    for p in range(6):
        got = list(c.consume("orders", p, from_offset=50))
        assert [r.offset for r in got] == list(range(50, 200))
        assert [r.value for r in got] == [b"v%d" % i for i in range(p * 1000 + 50, p * 1000 + 200)]
    rows = c.stats()
    dirs = {r["log_dir"] for r in rows if r["kind"] == "log_dir"}
    assert dirs == set(c.description.log_dirs)
    assert sum(r["log_end_offset"] for r in rows if r["kind"] == "partition") == 1200
    assert [t.name for t in c.list_topics()] == ["orders"]
    assert c.delete_topic("orders") == 6 and c.list_topics() == []


@pytest.mark.slow     # 3,000 records cleaned by two cleaners on their own schedule
def test_compaction_runs_by_itself_and_matches_the_latest_per_key_oracle(start_cluster) -> None:
    c = start_cluster(dirs=3, cleaners=2)
    c.create_topic("state", partitions=3, config=COMPACT)
    oracle: dict[int, dict[bytes, bytes]] = {}
    for p in range(3):
        batch = records(0, 3000, 50 + p)
        c.produce("state", p, batch, batch_bytes=2048)
        oracle[p] = {r.key: r.value for r in batch}
    for p in range(3):
        c.trigger_clean("state", p, roll=True)   # the tail too, so the oracle covers everything
    wait_for(lambda: all(c.offsets("state", p)[1] == 3000 and
                         len(list(c.consume("state", p))) == len(oracle[p]) for p in range(3)),
             what="every partition compacted to one record per key")
    for p in range(3):
        got = list(c.consume("state", p))
        assert {r.key: r.value for r in got} == oracle[p]
        offsets = [r.offset for r in got]
        assert offsets == sorted(offsets)
    status = c.cleaner_status()
    assert status.cleans_completed >= 3 and status.loop_failures == 0


def test_a_node_killed_during_appends_keeps_every_flushed_record(start_cluster) -> None:
    c = start_cluster(dirs=1)
    c.create_topic("t", partitions=1)
    log_dir = c.description.log_dirs[0]
    pid = actor_pid(c, node_actor_name(log_dir))
    acknowledged: list[int] = []
    killed = False
    for round_ in range(40):
        try:
            result = c.produce("t", 0, records(round_ * 100, 100, 10**6), flush=True)
            acknowledged.extend(range(result.first_offset, result.last_offset + 1))
        except Exception:  # noqa: BLE001 - the node is down: not acknowledged
            pass
        if round_ == 10:
            os.kill(pid, signal.SIGKILL)
            killed = True
    assert killed
    wait_for(lambda: actor_pid(c, node_actor_name(log_dir)) != pid, what="node restarted")
    stored = {r.offset: r.value for r in c.consume("t", 0)}
    assert acknowledged and set(acknowledged) <= set(stored)


def test_a_cleaner_killed_mid_clean_leaves_no_trace_and_the_clean_is_retried(
        start_cluster) -> None:
    c = start_cluster(dirs=1, cleaners=1,
                      config={"log.cleaner.io.max.bytes.per.second": 200_000})   # a slow clean
    c.create_topic("s", partitions=1, config=COMPACT)
    # paused while the log is written: otherwise the coordinator (polling every 100 ms) cleans it
    # piece by piece during the produce, and the last piece is over before the test looks
    c.pause_cleaning("s", 0)
    batch = records(0, 20_000, 100)
    c.produce("s", 0, batch, batch_bytes=4096)
    c.node(c.description.log_dirs[0]).call("roll", "s", 0)
    before = [(r.offset, r.value) for r in c.consume("s", 0)]
    assert c.cleaner_status().cleans_completed == 0
    assert c.resume_cleaning("s", 0)
    worker_name = c.description.workers[0][0]
    busy = wait_for(lambda: next((w for w in c.cleaner_status().workers
                                  if w.state == "cleaning"), None), what="a clean running")
    assert busy.name == worker_name
    os.kill(actor_pid(c, worker_name), signal.SIGKILL)
    wait_for(lambda: any(s.outcome == "cleaner died" for s in c.cleaner_status().recent),
             what="the death noticed")
    partition_dir = Path(c.description.log_dirs[0]) / "s-0"
    after_death = [(r.offset, r.value) for r in c.consume("s", 0)]
    latest = {r.key: r.value for r in batch}
    assert after_death == before or {v for _, v in after_death} >= set(latest.values())
    wait_for(lambda: any(s.outcome == "cleaned" for s in c.cleaner_status().recent),
             timeout=120, what="the retried clean")
    assert not [n for n in os.listdir(partition_dir) if n.endswith(".cleaned")]
    assert {r.key: r.value for r in c.consume("s", 0)} == latest


def test_a_killed_coordinator_resumes_cleaning_from_the_checkpoints(start_cluster) -> None:
    c = start_cluster(dirs=2, cleaners=1)
    c.create_topic("s", partitions=2, config=COMPACT)
    for p in range(2):
        c.produce("s", p, records(0, 2000, 20), batch_bytes=2048)
    wait_for(lambda: c.cleaner_status().cleans_completed >= 2, what="first cleans")
    checkpoints = {d: c.node(d).call("read_cleaner_checkpoint") for d in c.description.log_dirs}
    assert all(checkpoints.values())
    os.kill(actor_pid_of_coordinator(c), signal.SIGKILL)
    for p in range(2):
        c.produce("s", p, records(2000, 2000, 20), batch_bytes=2048)
    wait_for(lambda: c.cleaner_status().cleans_completed >= 2, timeout=120,
             what="cleaning after the restart")
    recent = c.cleaner_status().recent
    firsts = {(s.topic, s.partition): s.first_dirty_offset for s in recent
              if s.outcome == "cleaned"}
    assert all(offset > 0 for offset in firsts.values())   # from the checkpoint, not from 0


def actor_pid_of_coordinator(cluster) -> int:
    handle = ray.get_actor(COORDINATOR_NAME, namespace=cluster.namespace)
    return ray.get(handle.__ray_call__.remote(lambda self: os.getpid()))


def test_a_driver_process_refuses_an_address_of_another_ray_cluster(ray_session: str,
                                                                     tmp_path: Path) -> None:
    import pytest

    from cluster import Cluster
    from cluster.errors import ClusterNotRunningError

    other = "127.0.0.1:1"        # not the Ray cluster this test process drives
    with pytest.raises(ClusterNotRunningError, match="already a driver of the Ray cluster"):
        Cluster.connect(address=other, namespace="strata-nowhere")
    with pytest.raises(ClusterNotRunningError, match="already a driver of the Ray cluster"):
        Cluster.start(log_dirs=[str(tmp_path / "a")], address=other, namespace="strata-nowhere")
    assert not (tmp_path / "a").exists()                       # nothing was deployed
    # its own address is fine: the error is then about the namespace, not the Ray cluster
    with pytest.raises(ClusterNotRunningError, match="no Strata cluster in namespace"):
        Cluster.connect(address=ray_session, namespace="strata-nowhere")
