"""The monitoring with the real thing: Debian's Prometheus server (installed by
``scripts/setup-prometheus``) scrapes a live cluster that ``strata cluster start`` started, with the
scrape job of ``ops/prometheus.yml`` (its service-discovery file swapped for the one target the
test knows: the head's metrics port on loopback), and every PromQL expression of every panel of
``ops/grafana-dashboard.json`` is evaluated through Prometheus's HTTP query API: it parses, it
returns series, and its sums equal what the test knows (directories, partitions, records, bytes
on disk, a consumer group's lag). One series per fact: each directory's offline gauge comes from one process only."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.cluster.test_cli_cluster import ROOT, Strata, free_port

NAMESPACE = "strata-prom"
DASHBOARD = ROOT / "ops" / "grafana-dashboard.json"
SCRAPE_CONFIG = ROOT / "ops" / "prometheus.yml"
WAIT_S = 150.0     # Ray reports metrics every 10 s, the nodes publish their gauges every 5 s
ONE_SHOT_AGE_S = 25.0   # > Ray's gauge TTL of two report intervals (20 s)


def _panel_exprs() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p.get("targets", [])]


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr``; AssertionError naming it unless Prometheus parsed and
        evaluated it."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as err:   # 400: the expression does not parse
            raise AssertionError(f"{expr}: {err.read().decode(errors='replace')}") from None
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def values(self, expr: str) -> dict[str, float]:
        """``{label set: value}`` of ``expr``."""
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1])
                for r in self.query(expr)}


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    subprocess.run([str(ROOT / "scripts" / "setup-prometheus")], check=True)
    found = shutil.which("prometheus")
    assert found, "scripts/setup-prometheus did not install prometheus"
    return found


def test_ops_prometheus_yml_is_valid_for_promtool(prometheus_binary: str) -> None:
    checked = subprocess.run(["promtool", "check", "config", str(SCRAPE_CONFIG)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    jobs = yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
    assert len(jobs) == 1 and "static_configs" not in jobs[0], "one job, one target per endpoint"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Strata, list[Path], int]]:
    temp_dir = tempfile.mkdtemp(prefix="strata-prom-", dir="/tmp")   # short: Ray's socket paths
    logs = [tmp_path / "A", tmp_path / "B"]
    strata = Strata(temp_dir)
    try:
        started = strata(*strata.start_args(*logs), f"--namespace={NAMESPACE}",
                         "--set=listeners=PLAINTEXT://127.0.0.1:0",
                         "--set=offsets.topic.num.partitions=1")
        strata.address = re.search(r"on Ray at (\S+):", started.stdout).group(1)
        port = int(re.search(r"Prometheus metrics: http://127\.0\.0\.1:(\d+)/metrics",
                             started.stdout).group(1))
        yield strata, logs, port
        strata("cluster", "stop", f"--namespace={NAMESPACE}")
    finally:
        strata.kill_head()
        subprocess.run(["rm", "-rf", temp_dir], check=False)


@pytest.fixture
def prometheus(prometheus_binary: str, served: tuple[Strata, list[Path], int],
               tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus server on loopback with ops/prometheus.yml's job, scraping every second."""
    _, _, metrics_port = served
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"]["scrape_interval"] = "1s"
    job = config["scrape_configs"][0]
    del job["file_sd_configs"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    server = subprocess.Popen([prometheus_binary, f"--config.file={path}",
                               f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{port}"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        client = Prometheus(port)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.query("up")
                break
            except (OSError, AssertionError):
                assert server.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "prometheus.log").read_text()[-3000:]
                time.sleep(0.2)
        yield client
    finally:
        server.terminate()
        server.wait(30)
        log.close()


def _on_disk(logs: list[Path]) -> tuple[int, int]:
    """(partition directories, bytes of their .log files) of the directories."""
    parts = [p for d in logs for p in d.iterdir() if p.is_dir() and re.fullmatch(r".+-\d+", p.name)]
    return len(parts), sum(f.stat().st_size for p in parts for f in p.glob("*.log"))


def _wait(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        problem = check()
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {WAIT_S} s: {problem}")
        time.sleep(1.0)


def test_every_dashboard_panel_evaluates_in_prometheus_and_adds_up(
        served: tuple[Strata, list[Path], int], prometheus: Prometheus) -> None:
    strata, logs, _ = served
    ns = f"--namespace={NAMESPACE}"
    strata("topic", "create", "events", "--partitions=2", ns)
    strata("topic", "create", "kv", "--partitions=2", "--config=cleanup.policy=compact",
           "--config=min.cleanable.dirty.ratio=0.01", "--config=segment.bytes=4096", ns)
    for p in range(2):      # no clean before the byte sums are checked against the files
        strata("cleaner", "pause", "kv", f"--partition={p}", ns)
    records = 0
    for topic in ("events", "kv"):
        for p in range(2):
            lines = "".join(f"k{i % 7}\tvalue-{topic}-{p}-{i}\n" for i in range(300))
            strata("produce", topic, f"--partition={p}", ns, stdin=lines)
            records += 300
    partitions, log_bytes = _on_disk(logs)
    assert partitions == 4
    dirs = {str(d) for d in logs}

    def sums_before_cleaning() -> str | None:
        found = {
            "directories": prometheus.values("count(ray_strata_log_dir_free_bytes)"),
            "offline": prometheus.values("sum(ray_strata_log_dir_offline)"),
            "partitions": prometheus.values("count(ray_strata_log_size_bytes)"),
            "bytes": prometheus.values("sum(ray_strata_log_size_bytes)"),
            "appended bytes": prometheus.values("sum(ray_strata_appended_bytes_total)"),
            "records": prometheus.values("sum(ray_strata_appended_records_total)")}
        want = {"directories": 2, "offline": 0, "partitions": 4, "bytes": log_bytes,
                "appended bytes": log_bytes, "records": records}
        wrong = {k: (list(v.values()), want[k]) for k, v in found.items()
                 if list(v.values()) != [float(want[k])]}
        if wrong:
            wrong["per series"] = prometheus.values("ray_strata_appended_records_total")
        return str(wrong) if wrong else None
    _wait(sums_before_cleaning, "the sums differ from the truth")

    # one series per fact: each directory's offline gauge is exported by one process only
    per_dir = prometheus.values("count by (directory) (ray_strata_log_dir_offline)")
    assert {json.loads(k)["directory"]: v for k, v in per_dir.items()} == \
        {d: 1.0 for d in dirs}

    # a group that committed offset 100 of events-0's 300 records lags by 200
    strata("groups", "reset-offsets", "lagging", "--topic=events:0", "--to-offset=100",
           "--execute", ns)

    def lag_of_the_group() -> str | None:
        lag = prometheus.values("ray_strata_consumer_group_lag")
        want = {json.dumps({"group": "lagging", "topic": "events", "partition": "0"},
                           sort_keys=True): 200.0}
        found = {json.dumps({k: json.loads(key)[k] for k in ("group", "topic", "partition")},
                            sort_keys=True): v for key, v in lag.items()}
        return None if found == want else str(found)
    _wait(lag_of_the_group, "the group's lag is not 200")

    for p in range(2):
        strata("cleaner", "resume", "kv", f"--partition={p}", ns)
    strata("cleaner", "trigger", "kv", "--partition=0", "--roll", "--wait", ns)
    cleaned_at = time.monotonic()       # the cleaner's one-shot gauges were set by now

    def every_panel_returns_series() -> str | None:
        empty = [f"{title}: {expr}" for title, expr in _panel_exprs()
                 if not prometheus.query(expr)]
        return "; ".join(empty) or None
    _wait(every_panel_returns_series, "panels without series")

    by_dir = prometheus.values(
        "sum by (directory) (rate(ray_strata_appended_bytes_total[1m]))")
    assert {json.loads(k)["directory"] for k in by_dir} == dirs
    assert set(json.loads(k)["topic"] for k in prometheus.values(
        "sum by (topic) (rate(ray_strata_appended_records_total[1m]))")) == {"events", "kv"}
    assert sum(prometheus.values("sum(ray_strata_uncleanable_partitions)").values()) == 0
    cleans = prometheus.values("sum(ray_strata_cleaner_cleans_total)")
    assert list(cleans.values()) and list(cleans.values())[0] >= 1
    assert sorted((r["metric"]["topic"], r["metric"]["partition"])
                  for r in prometheus.query("ray_strata_uncleaned_ratio")) == \
        [("__consumer_offsets", "0"), ("events", "0"), ("events", "1"), ("kv", "0"),
         ("kv", "1")]
    # one-shot gauges stay (Ray drops a gauge not set again within 2 report intervals, 20 s):
    # asked 25 s after the clean at the earliest (the checks above count towards the 25 s)
    time.sleep(max(0.0, cleaned_at + ONE_SHOT_AGE_S - time.monotonic()))
    assert len(prometheus.query("ray_strata_cleaner_mb_per_sec")) == 1
    assert len(prometheus.query("ray_strata_recovery_remaining_segments")) == 2
