"""Kafka's everyday topic verbs on a real local Ray cluster, through the client and through the CLI
(``ops.cli.main.main`` in this process, as test_commands_on_cluster.py; ``consume --follow`` and its
Ctrl-C also as a ``strata`` process of its own): ``topic alter`` (dynamic configs, partitions),
``topic describe``, ``topic delete-records``, ``topic offsets``, ``consume --follow
--max-messages --from-timestamp``, and log start / end offsets in the status, log-dirs and stats
tables. One cluster for the module (restarted once, by the last test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
import ray

from ops.cli import main as cli
from cluster.errors import InvalidPartitionsError
from node.errors import PolicyViolationError
from storage.errors import InvalidConfigError, OffsetOutOfRangeError
from storage.records import Record
from tests.cluster.conftest import FAST, ctrl_c_reaches_it, wait_for

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {**FAST, "log.retention.check.interval.ms": 300, "log.cleaner.threads": 1}
NAMESPACE = f"strata-verbs-{os.getpid()}"
NOW_MS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("verbs")
    return [str(root / f"d{i}") for i in range(3)]


@pytest.fixture(scope="module")
def cluster(ray_session: str, dirs: list[str]) -> Iterator[Any]:
    from cluster import Cluster

    holder = {"c": Cluster.start(log_dirs=dirs, cleaners=1, config=CONFIG, namespace=NAMESPACE,
                                 address=ray_session)}
    holder["start"] = lambda: Cluster.start(log_dirs=dirs, cleaners=1, config=CONFIG,
                                            namespace=NAMESPACE, address=ray_session)
    yield holder
    holder["c"].stop()


def run(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    assert cli.main([*args, f"--namespace={NAMESPACE}"]) == code, capsys.readouterr()
    assert ray.is_initialized()
    return capsys.readouterr().out


def refused(capsys: pytest.CaptureFixture[str], *args: str, code: int = 2) -> str:
    """The command's stderr, which must be one line without a traceback."""
    capsys.readouterr()
    assert cli.main([*args, f"--namespace={NAMESPACE}"]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def records(count: int, *, keys: int | None = None, start_ts: int = NOW_MS,
            step_ms: int = 1) -> list[Record]:
    return [Record(key=b"k%d" % (i % keys if keys else i), value=b"v%d" % i,
                   timestamp=start_ts + i * step_ms) for i in range(count)]


def files_bytes(log_dir: str, topic: str, partition: int) -> int:
    folder = Path(log_dir) / f"{topic}-{partition}"
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.endswith(".log"))


# ---- alter: dynamic configs ----------------------------------------------------------------------
def test_alter_retention_ms_deletes_segments_of_the_live_log(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("ret", 1, {"segment.bytes": 1024})
    c.produce("ret", 0, records(300, start_ts=NOW_MS - 3_600_000))    # an hour old
    time.sleep(1.0)                          # three retention checks under the 7-day default
    assert c.offsets("ret", 0)[0] == 0
    altered = json.loads(run(capsys, "topic", "alter", "ret", "--config=retention.ms=60000",
                             "--json"))
    assert altered["config"] == {"segment.bytes": "1024", "retention.ms": "60000"}
    wait_for(lambda: c.offsets("ret", 0)[0] > 0, timeout=30, what="retention by the new setting")
    assert c.describe_topic("ret")[0].config["retention.ms"] == "60000"


def test_alter_min_cleanable_dirty_ratio_lets_the_cleaner_clean(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("kv", 1, {"cleanup.policy": "compact", "segment.bytes": 1024,
                             "min.cleanable.dirty.ratio": "1.0"})
    c.produce("kv", 0, records(400, keys=5))
    time.sleep(1.0)                          # ten cleaner backoffs: a ratio > 1.0 never comes
    assert c.explain("kv", 0).min_cleanable_ratio == 1.0
    assert c.cleaner_status().cleans_completed == 0 and len(list(c.consume("kv", 0))) == 400
    c.alter_topic_config("kv", {"min.cleanable.dirty.ratio": "0.1"})
    wait_for(lambda: len(list(c.consume("kv", 0))) < 100, timeout=60, what="a clean")
    assert c.explain("kv", 0).min_cleanable_ratio == 0.1


def test_alter_refuses_a_bad_key_or_value_naming_it_and_changes_nothing(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("strict", 2, {"retention.ms": 5000})
    with pytest.raises(InvalidConfigError) as err:
        c.alter_topic_config("strict", {"retention.ms": "100", "no.such.key": "1"})
    assert err.value.key == "no.such.key"
    assert "min.cleanable.dirty.ratio" in refused(
        capsys, "topic", "alter", "strict", "--config=min.cleanable.dirty.ratio=7")
    assert "segment.ms" in refused(capsys, "topic", "alter", "strict",
                                   "--delete-config=segment.ms")      # not overridden
    assert "the topic key is retention.ms" in refused(capsys, "topic", "alter", "strict",
                                     "--config=log.retention.ms=1")   # a broker key
    refused(capsys, "topic", "alter", "nosuch", "--config=retention.ms=1")
    refused(capsys, "topic", "alter", "strict")                       # nothing to alter
    assert {p.config["retention.ms"] for p in c.describe_topic("strict")} == {"5000"}
    c.alter_topic_config("strict", {"segment.ms": 60000}, delete=["retention.ms"])
    assert [p.config for p in c.describe_topic("strict")] == [{"segment.ms": "60000"}] * 2


# ---- describe ------------------------------------------------------------------------------------
def test_describe_figures_equal_the_truth(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("desc", 3, {"segment.bytes": 2048})
    for p, n in enumerate((10, 200, 0)):
        c.produce("desc", p, records(n))
    c.delete_records("desc", 1, 50)
    described = c.describe_topic("desc")
    assert [p.partition for p in described] == [0, 1, 2]
    for p in described:
        assert p.log_dir == c.partition_dir("desc", p.partition)
        assert (p.log_start_offset, p.log_end_offset) == c.offsets("desc", p.partition)
        assert p.last_stable_offset == p.log_end_offset
        assert p.size_bytes == files_bytes(p.log_dir, "desc", p.partition)
        assert p.config == {"segment.bytes": "2048"}
    assert [(p.log_start_offset, p.log_end_offset) for p in described] == [
        (0, 10), (50, 200), (0, 0)]
    document = json.loads(run(capsys, "topic", "describe", "desc", "--json"))
    [topic] = document["topics"]
    assert topic["config"] == {"segment.bytes": "2048"}
    assert [(q["partition"], q["log_dir"], q["log_start_offset"], q["log_end_offset"],
             q["last_stable_offset"], q["size_bytes"]) for q in topic["partitions"]] == [
        (p.partition, p.log_dir, p.log_start_offset, p.log_end_offset, p.last_stable_offset,
         p.size_bytes) for p in described]
    text = run(capsys, "topic", "describe")
    assert "Topic: desc\tPartitionCount: 3\tConfigs: segment.bytes=2048" in text
    assert "last stable" in text
    refused(capsys, "topic", "describe", "nosuch")


# ---- add partitions ------------------------------------------------------------------------------
def test_add_partitions_places_and_routes_the_new_ones(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("grow", 2, {"retention.bytes": 1 << 20})
    altered = json.loads(run(capsys, "topic", "alter", "grow", "--partitions=6", "--json"))
    assert altered["partitions"] == 6
    routes = {p.partition: p.log_dir for p in c.describe_topic("grow")}
    assert sorted(routes) == list(range(6))
    assert sorted(Counter(routes.values()).values()) == [2, 2, 2]     # 6 over 3 dirs
    for p, log_dir in routes.items():
        assert (Path(log_dir) / f"grow-{p}").is_dir()
    assert {p.config["retention.bytes"] for p in c.describe_topic("grow")} == {str(1 << 20)}
    c.produce("grow", 5, records(7))
    assert [r.value for r in c.consume("grow", 5)] == [b"v%d" % i for i in range(7)]
    with pytest.raises(InvalidPartitionsError):
        c.add_partitions("grow", 6)
    assert "6" in refused(capsys, "topic", "alter", "grow", "--partitions=3")
    refused(capsys, "topic", "alter", "grow", "--partitions=6", "--config=retention.bytes=5")
    assert {p.config["retention.bytes"] for p in c.describe_topic("grow")} == {str(1 << 20)}
    assert c.add_partitions("grow", 7).partitions[6] in c.description.log_dirs
    lines = run(capsys, "consume", "grow", "--partition=6").splitlines()
    assert lines == []


# ---- delete records ------------------------------------------------------------------------------
def test_delete_records_raises_the_log_start_and_reads_below_fail(cluster, capsys,
                                                                   tmp_path) -> None:
    c = cluster["c"]
    c.create_topic("del", 2, {"segment.bytes": 1024})
    for p in range(2):
        c.produce("del", p, records(300))
    assert c.delete_records("del", 0, before_offset=200) == 200
    node = c.node(c.partition_dir("del", 0))
    with pytest.raises(OffsetOutOfRangeError):
        node.call("read_raw", "del", 0, 199, timeout=60)
    assert next(iter(c.consume("del", 0, from_offset=0))).offset == 200
    with pytest.raises(OffsetOutOfRangeError):
        c.delete_records("del", 0, before_offset=301)
    wait_for(lambda: c.describe_topic("del")[0].segments < c.describe_topic("del")[1].segments,
             timeout=30, what="segments below the log start go by retention")
    first = c.describe_topic("del")[0]
    assert first.log_start_offset == 200 and first.size_bytes == files_bytes(
        first.log_dir, "del", 0)

    out = run(capsys, "topic", "delete-records", "del", "--partition=1", "--before-offset=30")
    assert "partition: del-1\tlow_watermark: 30" in out
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "del", "partition": 0, "offset": -1},
        {"topic": "del", "partition": 1, "offset": 500}]}))
    document = json.loads(run(capsys, "topic", "delete-records", f"--offset-json-file={spec}",
                              "--json", code=1))
    first, second = document["partitions"]
    assert first["low_watermark"] == 300                   # -1: the high watermark
    assert "OffsetOutOfRangeError" in second["error"] and c.offsets("del", 1) == (30, 300)
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "del", "partition": 1, "offset": 5},
        {"topic": "del", "partition": 1, "offset": 6}]}))
    assert "duplicate" in refused(capsys, "topic", "delete-records",
                                  f"--offset-json-file={spec}")
    c.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    c.produce("compacted", 0, records(3))
    with pytest.raises(PolicyViolationError):
        c.delete_records("compacted", 0, 1)


# ---- offsets by time -----------------------------------------------------------------------------
def test_offsets_earliest_latest_and_by_time(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("times", 2, {"segment.bytes": 1024})
    base = NOW_MS - 100_000
    c.produce("times", 0, records(100, start_ts=base, step_ms=10))
    c.produce("times", 1, records(10, start_ts=base, step_ms=1000))
    c.delete_records("times", 0, 5)
    assert c.offset_for_time("times", 0, base + 255) == 26
    assert c.offset_for_time("times", 1, base + 2500) == 3
    assert c.offset_for_time("times", 0, base) == 5           # never below the log start
    assert c.offset_for_time("times", 0, NOW_MS + 3_600_000) is None
    assert run(capsys, "topic", "offsets", "times", "--time=earliest").splitlines() == [
        "times:0:5", "times:1:0"]
    assert run(capsys, "topic", "offsets", "times", "--time=latest").splitlines() == [
        "times:0:100", "times:1:10"]
    assert run(capsys, "topic", "offsets", "times", f"--time={base + 2500}").splitlines() == [
        "times:0:", "times:1:3"]
    document = json.loads(run(capsys, "topic", "offsets", "times", "--partition=0",
                              f"--time={base + 255}", "--json"))
    assert document["partitions"] == [{"partition": 0, "offset": 26, "timestamp": base + 260}]
    lines = run(capsys, "consume", "times", "--partition=1", "--json",
                f"--from-timestamp={base + 7000}").splitlines()
    assert [json.loads(line)["offset"] for line in lines] == [7, 8, 9]
    refused(capsys, "topic", "offsets", "times", "--partition=9")


# ---- consume --follow ----------------------------------------------------------------------------
def test_consume_follow_returns_records_produced_after_it_started(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("live", 1)
    c.produce("live", 0, records(3))
    codes: list[int] = []
    follower = threading.Thread(target=lambda: codes.append(cli.main(
        ["consume", "live", "--partition=0", "--follow", "--max-messages=4", "--json",
         "--from-offset=3", "--poll-interval=0.05", f"--namespace={NAMESPACE}"])))
    follower.start()
    time.sleep(1.5)                             # it has reached the log end and is polling
    assert follower.is_alive()
    c.produce("live", 0, [Record(key=b"late", value=b"x%d" % i, timestamp=NOW_MS)
                          for i in range(6)])
    follower.join(60)
    assert not follower.is_alive() and codes == [0]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in lines] == [
        (3 + i, "late", f"x{i}") for i in range(4)]


def test_consume_follow_ends_quietly_on_ctrl_c(cluster, ray_session) -> None:
    c = cluster["c"]
    c.create_topic("sigint", 1)
    c.produce("sigint", 0, records(2))
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", "consume", "sigint", "--follow",
         f"--address={ray_session}", f"--namespace={NAMESPACE}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_reaches_it)
    try:
        assert proc.stdout is not None
        seen = [proc.stdout.readline(), proc.stdout.readline()]
        assert seen == ["k0\tv0\n", "k1\tv1\n"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert out == "" and "Traceback" not in err and "interrupted" not in err


# ---- tables --------------------------------------------------------------------------------------
def test_internal_topics_are_listed_marked_and_hidden_only_when_asked_as_kafka_does(
        cluster, capsys) -> None:
    """Issue 16: ``__strata_transactions`` (created by the first transaction) is the cluster's
    own. As Kafka: ``Cluster.list_topics`` leaves it out unless ``include_internal``
    (``ListTopicsOptions.listInternal``, false by default); ``topic list`` and ``topic describe``
    show it marked internal (kafka-topics lists internal topics) and ``--exclude-internal``
    leaves it out; ``stats`` marks its partition."""
    from cluster.naming import TRANSACTION_STATE_TOPIC as STATE

    c = cluster["c"]
    c.create_topic("plain", 1)
    c.begin_transaction("internal-probe").abort()
    assert "plain" in {t.name for t in c.list_topics()}
    assert STATE not in {t.name for t in c.list_topics()}
    every = {t.name: t.internal for t in c.list_topics(include_internal=True)}
    assert every[STATE] is True and every["plain"] is False

    listed = {t["name"]: t["internal"] for t in
              json.loads(run(capsys, "topic", "list", "--json"))["topics"]}
    assert listed[STATE] is True and listed["plain"] is False
    excluded = json.loads(run(capsys, "topic", "list", "--json", "--exclude-internal"))
    assert STATE not in {t["name"] for t in excluded["topics"]}
    table = run(capsys, "topic", "list").splitlines()
    assert table[0].split() == ["topic", "partition", "log", "dir", "internal", "overrides"]
    assert [line.split()[3] for line in table if line.startswith(STATE + " ")] == ["yes"] * 50
    assert not any(line.startswith("plain ") and " yes" in line for line in table)

    described = {t["name"]: t["internal"] for t in
                 json.loads(run(capsys, "topic", "describe", "--json"))["topics"]}
    assert described[STATE] is True and described["plain"] is False
    assert f"Topic: {STATE}\t" in run(capsys, "topic", "describe", STATE)
    assert "Internal: true" in run(capsys, "topic", "describe", STATE)
    kept = json.loads(run(capsys, "topic", "describe", "--json", "--exclude-internal"))
    assert STATE not in {t["name"] for t in kept["topics"]} and "plain" in {
        t["name"] for t in kept["topics"]}

    rows = [r for r in c.stats() if r["kind"] == "partition"]
    assert {r["topic"]: r["internal"] for r in rows}[STATE] is True
    assert not any(r["internal"] for r in rows if r["topic"] != STATE)


def test_status_log_dirs_and_stats_tables_show_log_start_and_end(cluster, capsys) -> None:
    c = cluster["c"]
    c.create_topic("tab", 1)
    c.produce("tab", 0, records(12345))
    c.delete_records("tab", 0, 6789)
    for command in (("cluster", "status"), ("log-dirs", "describe"), ("stats",)):
        text = run(capsys, *command)
        assert "log start" in text and "log end" in text, command
        [row] = [line for line in text.splitlines() if "tab-0" in line]
        assert "6789" in row and "12345" in row, (command, row)
    status = json.loads(run(capsys, "cluster", "status", "--json"))
    assert {"topic": "tab", "partition": 0, "log_start_offset": 6789,
            "log_end_offset": 12345} in [{k: p[k] for k in ("topic", "partition",
                                                             "log_start_offset",
                                                             "log_end_offset")}
                                         for p in status["partitions"]]
    document = json.loads(run(capsys, "log-dirs", "describe", "--json"))
    [entry] = [p for b in document["brokers"] for d in b["logDirs"] for p in d["partitions"]
               if p["partition"] == "tab-0"]
    assert (entry["logStartOffset"], entry["logEndOffset"]) == (6789, 12345)


# ---- restart (last: it replaces the module's cluster) --------------------------------------------
def test_altered_configs_survive_a_cluster_restart(cluster) -> None:
    c = cluster["c"]
    before = {(p.topic, p.partition): (p.config, p.log_start_offset, p.log_dir)
              for p in c.describe_topic()}
    c.stop()
    cluster["c"] = c = cluster["start"]()
    after = {(p.topic, p.partition): (p.config, p.log_start_offset, p.log_dir)
             for p in c.describe_topic()}
    assert after == before
    assert after[("kv", 0)][0]["min.cleanable.dirty.ratio"] == "0.1"
    assert after[("strict", 1)][0] == {"segment.ms": "60000"}
    # the restarted coordinator learns the partitions from the nodes' first poll
    explained = wait_for(lambda: c.explain("kv", 0), timeout=60,
                         what="the restarted coordinator knows kv-0")
    assert explained.min_cleanable_ratio == 0.1
    layout = c.topic_layout("ret")
    assert layout.config.retention_ms == 60000 and len(layout.partitions) == 1
    assert sorted(c.topic_layout("grow").partitions) == list(range(7))
