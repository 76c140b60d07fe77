"""Scale without surprises and no false success, through the real ``strata`` command on a cluster
that ``strata cluster start`` started (a Ray head of its own: one per test that crashes or stops
its cluster, one shared by the module's other tests):

* thousands of partitions (5,000: more than one ``BATCH`` of them per directory, so every
  directory gets several create and delete calls; the 10,000-partition figure is
  ``scripts/bench``'s) created and deleted in seconds, each with its progress on stderr;
* a topic delete cut short by a crash of the whole Ray head is finished by the next start;
* ``cluster stop`` says "closed cleanly" only when every directory closed cleanly;
* a pause, resume or trigger of a partition the cluster does not hold is refused by the API
  (``UnknownTopicError`` from ``Cluster.pause_cleaning`` & co.), not only by the CLI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from cluster.metadata.topics import BATCH
from tests.cluster.test_cli_cluster import ROOT, Strata, strata  # noqa: F401 - the fixture
from tests.cluster.test_cli_cluster_mistakes import one_line

NAMESPACE = "strata-scale"
CREATE_DELETE_LIMIT_S = 60.0   # was: minutes (5 partitions/s for the delete)
MANY = 2 * BATCH + BATCH // 2  # 5,000: > BATCH per directory of two, 3 calls for one directory


def _start(strata: Strata, *dirs: Path) -> subprocess.CompletedProcess[str]:
    started = strata(*strata.start_args(*dirs), f"--namespace={NAMESPACE}")
    strata.address = re.search(r"on Ray at (\S+):", started.stdout).group(1)
    return started


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Strata, list[Path]]]:
    """A cluster on directories A and B that ``strata cluster start`` started, for the tests that
    neither crash nor stop it; stopped at the end of the module (and its head checked gone, as
    the ``strata`` fixture checks)."""
    temp_dir = tempfile.mkdtemp(prefix="strata-cli-", dir="/tmp")   # short: Ray's socket paths
    runner = Strata(temp_dir)
    root = tmp_path_factory.mktemp("scale")
    logs = [root / "A", root / "B"]
    try:
        _start(runner, *logs)
        yield runner, logs
        runner("cluster", "stop", f"--namespace={NAMESPACE}")
    finally:
        runner.kill_head()
        assert runner.head_processes() == [], "the CLI's Ray head left processes behind"
        subprocess.run(["rm", "-rf", temp_dir], check=False)


def _live(log_dir: Path, topic: str) -> int:
    """Partition directories of ``topic`` in ``log_dir`` that are not renamed ``-delete``."""
    return sum(1 for e in os.scandir(log_dir)
               if e.name.startswith(f"{topic}-") and not e.name.endswith("-delete"))


def test_thousands_of_partitions_are_created_and_deleted_in_batches_in_seconds_with_progress(
        served: tuple[Strata, list[Path]]) -> None:
    strata, logs = served
    began = time.monotonic()
    created = strata("topic", "create", "big", f"--partitions={MANY}", f"--namespace={NAMESPACE}")
    create_s = time.monotonic() - began
    assert f"created topic big with {MANY} partitions" in created.stdout
    assert len(created.stdout.splitlines()) < 20, "a row per directory, not per partition"
    assert f"strata topic create: create partitions: {MANY} of {MANY} partitions" in created.stderr
    assert sum(_live(d, "big") for d in logs) == MANY
    began = time.monotonic()
    deleted = strata("topic", "delete", "big", f"--namespace={NAMESPACE}")
    delete_s = time.monotonic() - began
    assert f"deleted topic big ({MANY} partitions)" in deleted.stdout
    assert f"strata topic delete: delete partitions: {MANY} of {MANY} partitions" in deleted.stderr
    assert sum(_live(d, "big") for d in logs) == 0
    assert create_s < CREATE_DELETE_LIMIT_S and delete_s < CREATE_DELETE_LIMIT_S, \
        (create_s, delete_s)
    topics = json.loads(strata("topic", "list", f"--namespace={NAMESPACE}", "--json").stdout)
    assert "big" not in [t["name"] for t in topics["topics"]]


def test_a_topic_delete_cut_short_by_a_crash_is_finished_by_the_next_start(
        strata: Strata, tmp_path: Path) -> None:
    logs = tmp_path / "A"
    _start(strata, logs)
    strata("topic", "create", "half", f"--partitions={MANY}", f"--namespace={NAMESPACE}")
    strata("topic", "create", "kept", "--partitions=2", f"--namespace={NAMESPACE}")
    env = {**strata.env, "RAY_ADDRESS": strata.address}
    deleting = subprocess.Popen([sys.executable, "-m", "ops.cli", "topic", "delete", "half",
                                 f"--namespace={NAMESPACE}"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _live(logs, "half") == MANY and time.monotonic() < deadline:
            time.sleep(0.005)
        strata.kill_head()                      # the host loses power mid-delete
        left = _live(logs, "half")
        assert 0 < left < MANY, f"{left} partitions left: the crash missed the delete"
    finally:
        deleting.kill()
        deleting.communicate()
    strata.address = None
    restarted = _start(strata, logs)
    # stderr is no terminal here: the load says what it did instead of staying silent
    assert re.search(rf"loaded log directory {re.escape(str(logs))} \(\d+ partitions, \d+ "
                     r"segments\)", restarted.stderr), restarted.stderr
    topics = json.loads(strata("topic", "list", f"--namespace={NAMESPACE}", "--json").stdout)
    assert [t["name"] for t in topics["topics"]] == ["kept"]      # never routed again
    deadline = time.monotonic() + CREATE_DELETE_LIMIT_S           # the coordinator finishes it
    # finished: the last partition renamed, then the topic's entry dropped (a moment later)
    while (_live(logs, "half") or (logs / "topic-deletions.json").exists()) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live(logs, "half") == 0 and _live(logs, "kept") == 2
    assert not (logs / "topic-deletions.json").exists()
    strata("cluster", "stop", f"--namespace={NAMESPACE}")


def test_stop_says_closed_cleanly_only_when_every_directory_did(
        strata: Strata, tmp_path: Path, immutable: Callable[[Path], None]) -> None:
    logs = [tmp_path / "A", tmp_path / "B"]
    _start(strata, *logs)
    strata("topic", "create", "t", "--partitions=2", f"--namespace={NAMESPACE}")
    for p in range(2):
        strata("produce", "t", f"--partition={p}", f"--namespace={NAMESPACE}",
               stdin="k\ta\nk\tb\n")
    described = json.loads(strata("topic", "describe", "t", f"--namespace={NAMESPACE}",
                                  "--json").stdout)["topics"][0]
    where = {p["partition"]: p["log_dir"] for p in described["partitions"]}
    bad = where[0]
    assert where[1] != bad
    immutable(Path(bad) / "t-0" / "00000000000000000000.log")
    strata("produce", "t", "--partition=0", f"--namespace={NAMESPACE}", stdin="k\tc\n",
           check=False)    # the write fails: the directory goes offline
    stopped = strata("cluster", "stop", f"--namespace={NAMESPACE}", check=False)
    line = one_line(stopped, 1, bad, "did not close cleanly", "1 of 2 closed cleanly")
    assert "closed cleanly" not in stopped.stdout, stopped.stdout
    assert where[1] not in line


def test_pause_resume_and_trigger_of_a_missing_partition_are_refused_by_the_api(
        served: tuple[Strata, list[Path]]) -> None:
    strata, _ = served
    strata("topic", "create", "kv", "--partitions=1", "--config=cleanup.policy=compact",
           f"--namespace={NAMESPACE}")
    probe = f"""
from cluster import Cluster
from cluster.errors import UnknownTopicError
c = Cluster.connect({strata.address!r}, namespace={NAMESPACE!r})
for call in (lambda: c.pause_cleaning("kv", 9), lambda: c.resume_cleaning("kv", 9),
             lambda: c.trigger_clean("kv", 9), lambda: c.trigger_clean("kv", 9, wait=True),
             lambda: c.pause_cleaning("nosuch", 0)):
    try:
        call()
        print("accepted")
    except UnknownTopicError as err:
        print("refused", err.fields.get("topic"), err.fields.get("partition"))
print("pauses", c._coordinator.call("pauses", "kv", 9, timeout=60))
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**strata.env, "RAY_ADDRESS": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["refused kv 9"] * 4 + ["refused nosuch 0",
                                                              "pauses (0, 0)"], out.stdout
    one_line(strata("cleaner", "pause", "kv", "--partition=9", f"--namespace={NAMESPACE}",
                    check=False), 2, "no partition 9")
