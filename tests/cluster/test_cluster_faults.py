"""Faults on a real local Ray cluster: a directory taken offline while the cluster runs (and the
coordinator restarting meanwhile), truncation and deletion racing a clean through the node actor,
and the metrics of all this on Ray's Prometheus endpoint."""

from __future__ import annotations

import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest
import ray

from cluster import Cluster
from cluster.naming import COORDINATOR_NAME
from tests.conftest import Immutable
from storage.errors import LogDirOfflineError
from storage.records import Record
from tests.cluster.conftest import wait_for
from tests.conftest import RAY_METRICS_PORT

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 8192, "min.cleanable.dirty.ratio": 0.1}
T0 = 1_700_000_000_000
SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def records(start: int, count: int, keys: int, size: int = 0) -> list[Record]:
    return [Record(key=b"k%d" % (i % keys), value=b"v%d" % i + b"." * size, timestamp=T0 + i)
            for i in range(start, start + count)]


def scrape() -> list[tuple[str, dict[str, str], float]]:
    """Every sample on the session's Prometheus endpoint: (name, labels, value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{RAY_METRICS_PORT}/metrics",
                                timeout=10) as response:
        text = response.read().decode()
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            labels = dict(LABEL.findall(match.group(2) or ""))
            samples.append((match.group(1), labels, float(match.group(3))))
    return samples


def metric(name: str, **labels: str) -> list[float]:
    """Values of ``ray_<name>`` (or ``ray_<name>_total``) whose labels include ``labels``."""
    names = {f"ray_{name}", f"ray_{name}_total"}
    return [v for n, tags, v in scrape()
            if n in names and all(tags.get(k) == want for k, want in labels.items())]


def coordinator_pid(cluster: Cluster) -> int:
    handle = ray.get_actor(COORDINATOR_NAME, namespace=cluster.namespace)
    return ray.get(handle.__ray_call__.remote(lambda self: os.getpid()))


def test_an_offline_directory_is_reported_everywhere_and_the_others_keep_serving(
        start_cluster, immutable: Immutable) -> None:
    c = start_cluster(dirs=2)
    c.create_topic("t", partitions=2)
    bad, good = c.partition_dir("t", 0), c.partition_dir("t", 1)
    assert bad != good
    for p in range(2):
        c.produce("t", p, records(0, 100, 10), flush=True)
    immutable(Path(bad) / "t-0" / "00000000000000000000.log")

    with pytest.raises(LogDirOfflineError) as failure:
        c.produce("t", 0, records(100, 10, 10))
    assert bad in str(failure.value) and "EPERM" in str(failure.value)
    with pytest.raises(LogDirOfflineError, match=re.escape(bad)):   # fails fast from now on
        list(c.consume("t", 0))

    c.produce("t", 1, records(100, 100, 10), flush=True)             # the other directory serves
    assert [r.offset for r in c.consume("t", 1)] == list(range(200))

    dirs = {r["log_dir"]: r for r in c.stats() if r["kind"] == "log_dir"}
    assert dirs[bad]["online"] is False and "EPERM" in dirs[bad]["offline_reason"]
    assert dirs[good]["online"] is True and dirs[good]["partitions"] == 1
    wait_for(lambda: bad in c.cleaner_status().offline_dirs, what="the coordinator sees it")
    wait_for(lambda: 1.0 in metric("strata_log_dir_offline", directory=bad), timeout=60,
             what="the offline gauge on the Prometheus endpoint")
    wait_for(lambda: 0.0 in metric("strata_log_dir_offline", directory=good), timeout=60,
             what="the online gauge of the other directory")

    # a restarted coordinator still routes the offline directory's partitions there
    os.kill(coordinator_pid(c), signal.SIGKILL)
    fresh = wait_for(lambda: Cluster.connect(namespace=c.namespace), timeout=60,
                     what="the coordinator back")
    assert fresh.partition_dir("t", 0) == bad
    with pytest.raises(LogDirOfflineError, match=re.escape(bad)):
        fresh.produce("t", 0, records(110, 10, 10))
    fresh.produce("t", 1, records(200, 10, 10))
    wait_for(lambda: bad in fresh.cleaner_status().offline_dirs, what="offline after restart")


def test_truncation_and_deletion_abort_a_running_clean_instead_of_racing_it(
        start_cluster) -> None:
    c = start_cluster(dirs=1, cleaners=1,
                      config={"log.cleaner.io.max.bytes.per.second": 300_000})   # slow cleans
    c.create_topic("s", partitions=2, config=COMPACT)
    log_dir = c.description.log_dirs[0]
    node = c.node(log_dir)
    target, other = 0, 1
    for p in range(2):                       # cleaned one at a time, in the test's order
        c.pause_cleaning("s", p)
        c.produce("s", p, records(0, 12_000, 100, size=20), batch_bytes=8192)
        node.call("roll", "s", p)

    def cleaning(partition: int) -> bool:
        return any(w.state == "cleaning" and w.partition == partition
                   for w in c.cleaner_status().workers)

    def outcomes(partition: int) -> list[str]:
        return [s.outcome for s in c.cleaner_status().recent if s.partition == partition]

    assert c.resume_cleaning("s", target)
    wait_for(lambda: cleaning(target), what="a clean of the target running")
    assert node.call("truncate_to", "s", target, 5000)        # returns once the clean stopped
    assert c.offsets("s", target) == (0, 5000)      # the log ends at the target (Kafka's)
    assert outcomes(target) == ["aborted"]
    kept = list(c.consume("s", target))
    cut = len(kept)                    # whole batches go: from the one holding 5000
    assert 4000 < cut <= 5000
    assert [r.offset for r in kept] == list(range(cut))          # untouched by the aborted clean
    assert all(r.value.startswith(b"v%d." % r.offset) for r in kept)
    c.pause_cleaning("s", target)

    c.resume_cleaning("s", other)
    wait_for(lambda: cleaning(other), what="a clean of the other partition running")
    assert node.call("delete_partition", "s", other)         # returns once the clean stopped
    assert outcomes(other) == ["aborted"], c.cleaner_status().recent
    assert not (Path(log_dir) / f"s-{other}").exists()

    # the pauses are released: the truncated log is cleaned from what is left of it
    c.resume_cleaning("s", target)
    node.call("roll", "s", target)
    c.trigger_clean("s", target, wait=True, timeout_s=120)
    latest = {r.key: r.value for r in records(0, cut, 100, size=20)}
    assert {r.key: r.value for r in c.consume("s", target)} == latest
    status = c.cleaner_status()
    assert status.loop_failures == 0 and status.cleans_failed == 0
    assert not [n for n in os.listdir(Path(log_dir) / f"s-{target}") if n.endswith(".cleaned")]


def test_metrics_reach_rays_prometheus_endpoint(start_cluster) -> None:
    c = start_cluster(dirs=1, cleaners=1)
    c.create_topic("m", partitions=1, config=COMPACT)
    c.produce("m", 0, records(0, 3000, 30), batch_bytes=2048)
    c.trigger_clean("m", 0, roll=True, wait=True, timeout_s=120)
    log_dir = c.description.log_dirs[0]
    tags = {"directory": log_dir, "topic": "m", "partition": "0"}

    def visible() -> bool:
        return (sum(metric("strata_appended_bytes", **tags)) > 3000 * 10
                and sum(metric("strata_appended_records", **tags)) == 3000
                and len(metric("strata_uncleaned_ratio", **tags)) > 0
                and 3000.0 in metric("strata_log_end_offset", **tags)
                and 0.0 in metric("strata_log_start_offset", **tags)
                and len(metric("strata_log_size_bytes", **tags)) > 0
                and 0.0 in metric("strata_log_dir_offline", directory=log_dir)
                and any(v > 0 for v in metric("strata_cleaner_mb_per_sec"))
                and any(v > 0 for v in metric("strata_cleaner_records_per_sec")))
    wait_for(visible, timeout=90, interval=1.0, what="every metric on the Prometheus endpoint")
