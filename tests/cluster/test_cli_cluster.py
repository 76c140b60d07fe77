"""The cluster commands end to end, each a real ``strata`` process: ``cluster start`` starts a Ray
head of its own (its own ports and temp dir, beside the session's Ray cluster of this test
process) and returns with the cluster serving; topic, produce, consume, log-dirs, cleaner and
``cluster stop``, which closes every directory cleanly and stops that head. Teardown stops the head
whatever happened, and checks that none of its processes is left.

``cluster start --address`` joins a Ray head that was running before (the ``ray_head`` fixture of
this module) instead of starting one, and ``cluster stop`` then leaves that head running."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import psutil
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from cluster.runtime.head import HeadProcess
from tests.cluster.test_cli import HEAVY
from tests.strata_cli import live_processes, run_strata, unique_namespace

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Strata:
    """Runs ``python -m ops.cli`` against the test's own Ray head."""

    def __init__(self, temp_dir: str) -> None:
        self.temp_dir = temp_dir
        self.port = free_port()
        self.env = {**os.environ, "RAY_ADDRESS": ""}
        self.address: str | None = None

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True,
                 env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(env_extra or {})}
        if self.address:
            env["RAY_ADDRESS"] = self.address
        result = subprocess.run([sys.executable, "-m", "ops.cli", *args], cwd=ROOT, env=env,
                                input=stdin, capture_output=True, text=True, timeout=300)
        if check:
            assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-4000:])
        return result

    def json(self, *args: str, stdin: str | None = None) -> dict:
        return json.loads(self(*args, "--json", stdin=stdin).stdout)

    def start_args(self, *dirs: Path) -> list[str]:
        ports = [free_port() for _ in range(3)]
        return ["cluster", "start", *(f"--log-dir={d}" for d in dirs), "--cleaners=1",
                "--no-dashboard", f"--port={self.port}", f"--metrics-export-port={ports[0]}",
                f"--ray-temp-dir={self.temp_dir}", "--set=log.cleaner.backoff.ms=200",
                f"--ray-start-arg=--ray-client-server-port={ports[1]}",
                f"--ray-start-arg=--dashboard-agent-listen-port={ports[2]}"]

    def head_processes(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE and any(
                        self.temp_dir in a or a.endswith(f":{self.port}")
                        for a in proc.info["cmdline"] or []):
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def kill_head(self) -> None:
        """What ``ray stop --force`` would do, for this head only (``ray stop`` would also stop
        the session's cluster)."""
        procs = self.head_processes()
        for proc in list(procs):
            try:
                procs.extend(proc.children(recursive=True))
            except psutil.Error:
                pass
        for proc in procs:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=10)


@pytest.fixture
def strata() -> Iterator[Strata]:
    temp_dir = tempfile.mkdtemp(prefix="strata-cli-", dir="/tmp")   # short: Ray's socket paths
    runner = Strata(temp_dir)
    try:
        yield runner
    finally:
        runner.kill_head()
        assert runner.head_processes() == [], "the CLI's Ray head left processes behind"
        subprocess.run(["rm", "-rf", temp_dir], check=False)


def test_the_cluster_commands_end_to_end(strata: Strata, tmp_path: Path) -> None:
    a, b = tmp_path / "A", tmp_path / "B"
    started = json.loads(strata(*strata.start_args(a, b), "--json").stdout)
    strata.address = started["address"]
    assert started["head_started"] and started["cleaners"] == 1
    assert [d["log_dir"] for d in started["log_dirs"]] == [str(a), str(b)]
    assert all(d["online"] for d in started["log_dirs"])

    created = strata.json("topic", "create", "t", "--partitions=2")
    assert sorted(created["partitions"].values()) == [str(a), str(b)]
    lines = "".join(f"k{i % 5}\tv{i}\n" for i in range(400))
    assert strata.json("produce", "t", "--partition=0", stdin=lines)["records"] == 400
    strata("produce", "t", "--partition=1", "--value-only", stdin="x\ny\n")

    consumed = strata("consume", "t", "--partition=0", "--from-offset=10", "--max=3").stdout
    assert consumed.splitlines() == ["k0\tv10", "k1\tv11", "k2\tv12"]
    records = [json.loads(line) for line in
               strata("consume", "t", "--partition=1", "--json").stdout.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [(0, None, "x"),
                                                                      (1, None, "y")]
    # issue 15: the common commands load no decoder, cleaner or directory code, whatever the
    # cluster answers (python -X importtime lists every module a process imports)
    for command in (["cluster", "status"], ["topic", "describe", "t"],
                    ["consume", "t", "--partition=0", "--max=3"], ["produce", "t"]):
        result = strata(*command, env_extra={"PYTHONPROFILEIMPORTTIME": "1"},
                        stdin="small\tinput\n" if command[0] == "produce" else None)
        loaded = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines()
                  if line.startswith("import time:")}
        assert loaded & set(HEAVY) == set(), (command, sorted(loaded & set(HEAVY)))
        assert "cluster.client.client" in loaded and "ray" in loaded
    # a large produce: chunks of 64 KiB hashed by the kernel and encoded here, then a small
    # tail hashed by the interpreted murmur2 and encoded by the nodes; every key lands where
    # Kafka's default partitioner puts it, in order
    strata("topic", "create", "keys", "--partitions=3")
    lines = "".join(f"key{i}\t{'v' * 40}{i}\n" for i in range(3000))
    produced = strata.json("produce", "keys", "--batch-bytes=65536", stdin=lines)
    assert produced["records"] == 3000 and produced["calls"] >= 3
    for p in range(3):
        got = [json.loads(line) for line in
               strata("consume", "keys", f"--partition={p}", "--json").stdout.splitlines()]
        expected = [f"key{i}" for i in range(3000)
                    if (kafka_python_murmur2(f"key{i}".encode()) & 0x7FFFFFFF) % 3 == p]
        assert [r["key"] for r in got] == expected, p
    described = strata.json("log-dirs", "describe")
    assert described["version"] == 1 and len(described["brokers"]) == 1
    dirs = {d["logDir"]: d for d in described["brokers"][0]["logDirs"]}
    assert set(dirs) == {str(a), str(b)} and all(d["error"] is None for d in dirs.values())
    assert all(d["totalBytes"] >= d["usableBytes"] > 0 for d in dirs.values())
    parts = {p["partition"]: p for d in dirs.values() for p in d["partitions"]}
    assert set(parts) == {"t-0", "t-1", "keys-0", "keys-1", "keys-2"}
    assert parts["t-0"]["offsetLag"] == 0 and parts["t-0"]["isFuture"] is False
    assert parts["t-0"]["size"] > 400 * 5 and parts["t-0"]["dirtyRatio"] == 0.0   # not compacted
    status = strata.json("cleaner", "status")
    assert status["enabled"] and [w["state"] for w in status["workers"]] == ["idle"]

    stopped = strata.json("cluster", "stop")
    assert stopped["stopped"] and stopped["head_stopped"]
    assert strata.head_processes() == []
    # closed cleanly: the next start of these directories recovers nothing
    assert (a / ".kafka_cleanshutdown").exists() and (b / ".kafka_cleanshutdown").exists()


def test_cluster_start_with_address_joins_that_ray_head_and_stop_leaves_it_running(
        ray_head: HeadProcess, tmp_path: Path) -> None:
    a, b = tmp_path / "A", tmp_path / "B"
    namespace = unique_namespace("strata-joined")
    on = (f"--address={ray_head.address}", f"--namespace={namespace}")
    started = json.loads(run_strata("cluster", "start", *on, f"--log-dir={a}", f"--log-dir={b}",
                                    "--cleaners=1", "--json").stdout)
    assert started["address"] == ray_head.address and started["namespace"] == namespace
    assert started["head_started"] is False
    assert started["dashboard"] is None and started["metrics_export_port"] is None
    assert [d["log_dir"] for d in started["log_dirs"]] == [str(a), str(b)]
    assert all(d["online"] for d in started["log_dirs"]) and started["cleaners"] == 1

    status = json.loads(run_strata("cluster", "status", *on, "--json").stdout)
    assert status["namespace"] == namespace and status["head_started"] is False
    assert {d["log_dir"]: d["online"] for d in status["log_dirs"]} == {str(a): True, str(b): True}
    assert [w["state"] for w in status["cleaner"]["workers"]] == ["idle"]

    created = json.loads(run_strata("topic", "create", "t", "--partitions=2", *on,
                                    "--json").stdout)
    assert sorted(created["partitions"].values()) == [str(a), str(b)]
    sent = [(f"k{i}", f"v{i}") for i in range(40)]
    produced = json.loads(run_strata("produce", "t", *on, "--json",
                                     stdin="".join(f"{k}\t{v}\n" for k, v in sent)).stdout)
    assert produced["records"] == 40
    assert sorted(produced["partitions"]) == ["0", "1"]         # the keys spread over both dirs
    records = [json.loads(line) for line in
               run_strata("consume", "t", *on, "--json").stdout.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == sorted(sent)
    for p, count in produced["partitions"].items():
        mine = [r for r in records if r["partition"] == int(p)]
        got = [(r["key"], r["value"]) for r in mine]
        assert [r["offset"] for r in mine] == list(range(count))
        assert got == [kv for kv in sent if kv in got]          # in the order sent

    stopped = json.loads(run_strata("cluster", "stop", *on, "--json").stdout)
    assert stopped["stopped"] and stopped["log_dirs"] == [str(a), str(b)]
    assert stopped["head_stopped"] is False and stopped["head_processes"] == 0
    assert (a / ".kafka_cleanshutdown").exists() and (b / ".kafka_cleanshutdown").exists()
    # the head it joined runs on: it still answers, with no Strata cluster in that namespace
    assert live_processes(ray_head)
    after = run_strata("cluster", "status", *on, code=2)
    assert f"no Strata cluster in namespace {namespace}" in after.stderr


def test_a_spark_worker_joins_a_ray_head_given_by_its_address(ray_head: HeadProcess) -> None:
    # Ray sends no token of its own for an explicit address: a Spark Python worker given
    # .option("address", ...) must join with the user's token, as the CLI does
    probe = ("from cluster.spark.connection import ensure_ray; import ray; "
             f"ensure_ray({ray_head.address!r}); "
             "print(ray.get_runtime_context().gcs_address)")
    env = {**os.environ, "RAY_ADDRESS": ""}
    joined = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, timeout=120,
                            capture_output=True, text=True)
    assert joined.returncode == 0, joined.stderr[-2000:]
    assert joined.stdout.split()[-1] == ray_head.address
