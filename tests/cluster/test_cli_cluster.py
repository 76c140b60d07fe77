"""The cluster commands end to end, each a real ``strata`` process: ``cluster start`` starts a Ray
head of its own (its own ports and temp dir, beside the session's Ray cluster of this test
process) and returns with the cluster serving; topic, produce, consume, log-dirs, cleaner and
``cluster stop``, which closes every directory cleanly and stops that head. Teardown stops the head
whatever happened, and checks that none of its processes is left."""

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

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Strata:
    """Runs ``python -m cluster.cli`` against the test's own Ray head."""

    def __init__(self, temp_dir: str) -> None:
        self.temp_dir = temp_dir
        self.port = free_port()
        self.env = {**os.environ, "RAY_ADDRESS": ""}
        self.address: str | None = None

    def __call__(self, *args: str, stdin: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if self.address:
            env["RAY_ADDRESS"] = self.address
        result = subprocess.run([sys.executable, "-m", "cluster.cli", *args], cwd=ROOT, env=env,
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
    described = strata.json("log-dirs", "describe")
    assert described["version"] == 1 and len(described["brokers"]) == 1
    dirs = {d["logDir"]: d for d in described["brokers"][0]["logDirs"]}
    assert set(dirs) == {str(a), str(b)} and all(d["error"] is None for d in dirs.values())
    assert all(d["totalBytes"] >= d["usableBytes"] > 0 for d in dirs.values())
    parts = {p["partition"]: p for d in dirs.values() for p in d["partitions"]}
    assert set(parts) == {"t-0", "t-1"}
    assert parts["t-0"]["offsetLag"] == 0 and parts["t-0"]["isFuture"] is False
    assert parts["t-0"]["size"] > 400 * 5 and parts["t-0"]["dirtyRatio"] == 0.0   # not compacted
    status = strata.json("cleaner", "status")
    assert status["enabled"] and [w["state"] for w in status["workers"]] == ["idle"]

    stopped = strata.json("cluster", "stop")
    assert stopped["stopped"] and stopped["head_stopped"]
    assert strata.head_processes() == []
    # closed cleanly: the next start of these directories recovers nothing
    assert (a / ".kafka_cleanshutdown").exists() and (b / ".kafka_cleanshutdown").exists()
