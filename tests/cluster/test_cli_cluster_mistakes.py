"""Mistakes made against a running cluster, through the real ``strata`` command: one line on
stderr naming what is wrong, no traceback, the right exit code, nothing changed where refused.
One cluster (started by ``strata cluster start``, a Ray head of its own) serves the module."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from tests.cluster.test_cli_cluster import Strata

NAMESPACE = "strata-mistakes"


def one_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert result.returncode == code, (result.stdout[-2000:], result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Strata, Path, str]]:
    temp_dir = tempfile.mkdtemp(prefix="strata-mis-", dir="/tmp")   # short: Ray's socket paths
    logs = tmp_path_factory.mktemp("logs") / "A"
    strata = Strata(temp_dir)
    try:
        started = strata(*strata.start_args(logs), f"--namespace={NAMESPACE}")
        strata.address = re.search(r"on Ray at (\S+):", started.stdout).group(1)
        yield strata, logs, started.stdout
        strata("cluster", "stop", f"--namespace={NAMESPACE}")
    finally:
        strata.kill_head()
        subprocess.run(["rm", "-rf", temp_dir], check=False)


def test_start_says_a_new_directory_is_new_and_metrics_listen_where_printed(
        served: tuple[Strata, Path, str]) -> None:
    strata, logs, out = served
    row = next(line for line in out.splitlines() if line.startswith(str(logs)))
    assert row.split()[-1] == "new" and "yes" not in row.split()
    # Ray cannot bind its metrics port to loopback: the output says where it really listens
    printed = re.search(r"Prometheus metrics: http://[\d.]+:(\d+)/metrics \(Ray listens on "
                        r"every interface, ([\d.]+):(\d+)", out)
    assert printed is not None, out
    port = int(printed.group(1))
    assert int(printed.group(3)) == port
    listening = {c.laddr.ip for c in psutil.net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
    assert listening == {printed.group(2)}


def test_a_second_start_on_a_served_directory_is_refused_at_once_naming_the_cluster(
        served: tuple[Strata, Path, str], tmp_path: Path) -> None:
    strata, logs, _ = served
    other = Strata(tempfile.mkdtemp(prefix="strata-mis2-", dir="/tmp"))
    began = time.monotonic()
    try:
        line = one_line(other(*other.start_args(logs), check=False), 2, str(logs),
                        "already serves", f"namespace {NAMESPACE}")
        assert other.head_processes() == []
    finally:
        other.kill_head()
        subprocess.run(["rm", "-rf", other.temp_dir], check=False)
    joined = strata("cluster", "start", f"--address={strata.address}", "--namespace=second",
                    f"--log-dir={logs}", "--json", check=False)
    one_line(joined, 2, "already serves", f"namespace {NAMESPACE}")
    assert time.monotonic() - began < 60, "refused at once, not after a load timeout"
    one_line(strata("cluster", "status", "--namespace=second", check=False), 2,
             "no Strata cluster in namespace second")
    # new directories, but the namespace of the running cluster: refused, nothing deployed
    fresh = tmp_path / "B"
    again = strata("cluster", "start", f"--address={strata.address}",
                   f"--namespace={NAMESPACE}", f"--log-dir={fresh}", "--cleaners=3",
                   check=False)
    one_line(again, 2, f"already runs in namespace {NAMESPACE}", str(logs), "1 cleaners")
    status = json.loads(strata("cluster", "status", f"--namespace={NAMESPACE}", "--json").stdout)
    assert [d["log_dir"] for d in status["log_dirs"]] == [str(logs)]
    assert len(status["cleaner"]["workers"]) == 1 and not (fresh / ".lock").exists()
    assert line.startswith("strata cluster: error:")


def test_cleaner_commands_refuse_what_does_not_exist_and_say_what_pauses_hold(
        served: tuple[Strata, Path, str]) -> None:
    strata, _, _ = served
    ns = f"--namespace={NAMESPACE}"
    strata("topic", "create", "kv", "--config=cleanup.policy=compact", ns)
    strata("produce", "kv", "--partition=0", ns, stdin="k\tv\n")
    one_line(strata("cleaner", "trigger", "kv", "--partition=9", ns, check=False), 2,
             "kv has no partition 9")
    one_line(strata("cleaner", "pause", "nosuch", ns, check=False), 2, "no topic 'nosuch'")
    one_line(strata("cleaner", "explain", "kv", "--partition=3", ns, check=False), 2,
             "kv has no partition 3")

    nothing = strata("cleaner", "trigger", "kv", ns)
    assert nothing.stdout.startswith("nothing to clean in kv-0: ") and "triggered" not in \
        nothing.stdout

    strata("cleaner", "pause", "kv", ns)
    assert "2 by an operator" in strata("cleaner", "pause", "kv", ns).stdout
    began = time.monotonic()
    one_line(strata("cleaner", "trigger", "kv", "--wait", "--timeout=100", ns, check=False), 1,
             "kv-0 is paused", "nothing was triggered")
    assert time.monotonic() - began < 30, "refused at once, not after --timeout"
    explained = strata("cleaner", "explain", "kv", ns).stdout
    assert "2 by an operator" in explained and "truncation" not in explained
    assert "paused: paused:" not in explained
    released = strata("cleaner", "resume", "kv", ns).stdout
    assert "still paused (1 more pauses held" in released and "resumed" not in released
    assert strata("cleaner", "resume", "kv", ns).stdout.strip() == "cleaning of kv-0 resumed"
    one_line(strata("cleaner", "resume", "kv", ns, check=False), 1,
             "kv-0 was not paused by an operator")
    status = strata("cleaner", "explain", "kv", ns).stdout.splitlines()[0]
    word = status.split(": ")[1]
    assert f"{word}: {word}:" not in status
    assert json.loads(strata("cleaner", "explain", "kv", ns, "--json").stdout)["status"] != \
        "paused"


def test_a_start_whose_directory_does_not_load_fails_and_leaves_nothing_running(
        tmp_path: Path) -> None:
    """A directory that passes the checks before Ray but fails to load (here: its topic
    overrides file is not JSON) made `cluster start` exit 0 with `online False` and no reason."""
    logs = tmp_path / "bad"
    logs.mkdir()
    (logs / "topic-configs.json").write_text("{not json")
    strata = Strata(tempfile.mkdtemp(prefix="strata-mis3-", dir="/tmp"))
    try:
        failed = strata(*strata.start_args(logs), "--json", check=False)
        one_line(failed, 1, str(logs / "topic-configs.json"), "not JSON",
                 "nothing was left running")
        assert failed.stdout == ""
        assert strata.head_processes() == []
        assert not (logs / ".lock").read_text().strip()      # nobody holds it
    finally:
        strata.kill_head()
        subprocess.run(["rm", "-rf", strata.temp_dir], check=False)


def test_a_start_without_a_known_directory_is_refused_unless_told_to_go_on(
        tmp_path: Path) -> None:
    """Two directories of one cluster, as a first start leaves them; `cluster start` given only
    one of them refuses naming the other, and starts with --allow-missing-log-dirs."""
    from cluster.metadata.dir_identity import plan_identity
    from node.cluster_dirs import DirIdentity, write_cluster_dirs
    from node.meta_properties import write_meta_properties

    a, b = tmp_path / "A", tmp_path / "B"
    plan = plan_identity([DirIdentity(str(a), None, None), DirIdentity(str(b), None, None)])
    for d in (a, b):
        d.mkdir()
        write_meta_properties(d, plan.writes[str(d)])
        write_cluster_dirs(d, plan.known)
    strata = Strata(tempfile.mkdtemp(prefix="strata-mis4-", dir="/tmp"))
    try:
        refused = strata(*strata.start_args(a), "--json", check=False)
        one_line(refused, 1, f"{b} (node.id 1)", "missing", "--allow-missing-log-dirs",
                 "nothing was left running")
        assert strata.head_processes() == []
        started = strata(*strata.start_args(a), "--allow-missing-log-dirs", "--json")
        strata.address = json.loads(started.stdout)["address"]
        strata("cluster", "stop")
    finally:
        strata.kill_head()
        subprocess.run(["rm", "-rf", strata.temp_dir], check=False)
