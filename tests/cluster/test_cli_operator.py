"""An operator's first hour, through the real ``strata`` command on a cluster that ``strata cluster
start`` started (a Ray head of its own, shared by the module): directories A and B, each on a small
ext4 file system of its own (a loop-mounted image) of one size: a ballast can fill one, ``chattr
+i`` takes write permission even from an open file (tmpfs does not enforce that), and placement,
which spreads partitions by free bytes, gives each directory its share.

* ops/README §3.4 followed step by step on a directory taken offline by a full disk and by a lost
  write permission: ``cluster status`` names it, its reason and the pid of its node (the pid in
  its ``.lock``); the other directory keeps serving; after the repair ``strata log-dirs restart``
  brings it back without a restart of the cluster, nothing acknowledged is lost.
* ``consume`` of an offline directory or of a corrupt batch: one line naming the error, exit 1.
* an interrupted ``produce --file`` says per partition what it stored, and the same command run
  again stores the rest, nothing twice (an idempotent producer resuming).
* ``consume --from-offset`` past the log end and ``cleaner trigger`` of a topic that is not
  compacted are refused in one line.
* the README's ``Cluster.connect`` example attaches to the cluster the CLI started.
* a cleanly stopped cluster leaves directories ``recover --dry-run`` calls healthy.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.cluster.conftest import ctrl_c_reaches_it
from tests.cluster.test_cli_cluster import ROOT, Strata
from tests.cluster.test_cli_cluster_mistakes import one_line
from tests.conftest import Immutable

NAMESPACE = "strata-operator"
FS_SIZE = "32M"


class Served:
    """The module's cluster: the runner, directory A (on the file system ``mount``), B."""

    def __init__(self, strata: Strata, mount: Path, a: Path, b: Path) -> None:
        self.strata, self.mount, self.a, self.b = strata, mount, a, b

    def __call__(self, *args: str, stdin: str | None = None,
                 code: int | None = 0) -> subprocess.CompletedProcess[str]:
        result = self.strata(*args, f"--namespace={NAMESPACE}", stdin=stdin, check=False)
        if code is not None:
            assert result.returncode == code, (args, result.stdout[-2000:], result.stderr[-3000:])
        return result

    def json(self, *args: str, stdin: str | None = None, code: int = 0) -> dict:
        return json.loads(self(*args, "--json", stdin=stdin, code=code).stdout)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("operator")
    mounts: list[Path] = []
    for name in ("fsA", "fsB"):
        mount, image = root / name, root / f"{name}.img"
        mount.mkdir()
        subprocess.run(["truncate", "-s", FS_SIZE, str(image)], check=True)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True,
                              text=True)
        mounted = made.returncode == 0 and subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True)
        if not mounted or mounted.returncode != 0:
            _unmount(mounts)
            pytest.skip("cannot mount a loop file system here (not root?)")
        mounts.append(mount)
    temp_dir = tempfile.mkdtemp(prefix="strata-op-", dir="/tmp")   # short: Ray's socket paths
    strata = Strata(temp_dir)
    a, b = mounts[0] / "A", mounts[1] / "B"
    try:
        started = strata(*strata.start_args(a, b), f"--namespace={NAMESPACE}",
                         "--set=log.retention.check.interval.ms=300")
        strata.address = re.search(r"on Ray at (\S+):", started.stdout).group(1)
        yield Served(strata, mounts[0], a, b)
        strata("cluster", "stop", f"--namespace={NAMESPACE}", check=False)
    finally:
        strata.kill_head()
        subprocess.run(["rm", "-rf", temp_dir], check=False)
        _unmount(mounts)


def _unmount(mounts: list[Path]) -> None:
    for mount in mounts:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def lines(start: int, count: int) -> str:
    return "".join(f"k{i}\tv{i}\n" for i in range(start, start + count))


def dir_status(served: Served, log_dir: Path, code: int) -> dict:
    status = served.json("cluster", "status", code=code)
    return next(d for d in status["log_dirs"] if d["log_dir"] == str(log_dir))


def lock_pid(log_dir: Path) -> int:
    return int((log_dir / ".lock").read_text().strip())


def consumed(served: Served, topic: str, partition: int) -> list[str]:
    return served("consume", topic, f"--partition={partition}").stdout.splitlines()


def test_the_runbook_brings_a_full_or_unwritable_directory_back_without_restarting_the_cluster(
        served: Served, immutable: Immutable) -> None:
    created = served.json("topic", "create", "orders", "--partitions=2")
    assert sorted(created["partitions"].values()) == sorted([str(served.a), str(served.b)])
    in_a, in_b = (next(int(p) for p, d in created["partitions"].items() if d == str(log_dir))
                  for log_dir in (served.a, served.b))
    for p in (in_a, in_b):
        served("produce", "orders", f"--partition={p}", "--flush", stdin=lines(0, 200))
    pids = {d["log_dir"]: d["pid"] for d in served.json("cluster", "status")["log_dirs"]}
    assert pids == {str(served.a): lock_pid(served.a), str(served.b): lock_pid(served.b)}

    # a full disk: A goes offline, B keeps serving
    ballast = served.mount / "ballast"
    free = shutil.disk_usage(served.mount).free
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - 256 * 1024))
    big = "".join(f"k{i}\t{'x' * 2000}\n" for i in range(1000))
    one_line(served("produce", "orders", f"--partition={in_a}", stdin=big, code=1), 1,
             "LogDirOfflineError", str(served.a), "stored before it stopped",
             f"orders-{in_a}: ")
    offline = dir_status(served, served.a, code=1)
    assert not offline["online"] and re.search("No space|ENOSPC|short write",
                                               offline["offline_reason"])
    assert offline["pid"] == lock_pid(served.a) == pids[str(served.a)]   # the node to restart
    served("produce", "orders", f"--partition={in_b}", stdin=lines(200, 10))
    one_line(served("consume", "orders", f"--partition={in_a}", code=1), 1,
             "LogDirOfflineError", str(served.a))
    checked = served.strata("recover", str(served.a), "--dry-run", "--json", check=False)
    assert checked.returncode in (0, 1), checked.stderr      # not refused as locked (2)
    assert json.loads(checked.stdout)["dryRun"] is True
    # the repair, then the node's restart: A loads again (recovery), the cluster never stopped
    ballast.unlink()
    restarted = served("log-dirs", "restart", str(served.a))
    assert f"restarted the node of {served.a}" in restarted.stdout and "online" in restarted.stdout
    back = dir_status(served, served.a, code=0)
    assert back["online"] and back["pid"] != pids[str(served.a)] == offline["pid"]
    assert back["pid"] == lock_pid(served.a)
    assert consumed(served, "orders", in_a)[:200] == lines(0, 200).splitlines()
    served("produce", "orders", f"--partition={in_a}", "--flush", stdin=lines(900, 5))
    assert consumed(served, "orders", in_a)[-5:] == lines(900, 5).splitlines()

    # a lost write permission: B goes offline; a restart before the repair says it still is
    active = max((served.b / f"orders-{in_b}").glob("*.log"))
    immutable(active)
    one_line(served("produce", "orders", f"--partition={in_b}", stdin=lines(210, 10), code=1), 1,
             "LogDirOfflineError", "EPERM")
    offline = dir_status(served, served.b, code=1)
    assert "EPERM" in offline["offline_reason"] and offline["pid"] == lock_pid(served.b)
    served("produce", "orders", f"--partition={in_a}", stdin=lines(905, 5))   # A serves
    still = served("log-dirs", "restart", str(served.b), code=1)
    one_line(still, 1, str(served.b), f"orders-{in_b}", "still offline")
    immutable.clear()
    served("log-dirs", "restart", str(served.b))
    assert dir_status(served, served.b, code=0)["online"]
    assert consumed(served, "orders", in_b) == lines(0, 210).splitlines()
    served("produce", "orders", f"--partition={in_b}", stdin=lines(210, 10))
    assert consumed(served, "orders", in_b) == lines(0, 220).splitlines()


def test_restart_of_a_directory_the_cluster_does_not_have_is_refused(served: Served) -> None:
    one_line(served("log-dirs", "restart", "/no/such/dir", code=2), 2, "/no/such/dir",
             "is not a log directory of this cluster")


def test_consume_of_a_corrupt_batch_says_so_in_one_line(served: Served) -> None:
    created = served.json("topic", "create", "damaged", "--partitions=1")
    log_dir = Path(created["partitions"]["0"])
    served("produce", "damaged", "--partition=0", "--flush", stdin=lines(0, 20))
    served("produce", "damaged", "--partition=0", "--flush", stdin=lines(20, 20))
    segment = log_dir / "damaged-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with open(segment, "r+b") as f:     # the second batch's records: its CRC no longer matches
        f.seek(size - 40)
        original = f.read(8)
        f.seek(size - 40)
        f.write(b"\xff" * 8)
    try:
        result = served("consume", "damaged", "--partition=0", code=1)
        one_line(result, 1, "CorruptRecordError", "damaged-0")
    finally:
        with open(segment, "r+b") as f:
            f.seek(size - 40)
            f.write(original)


def test_consume_past_the_log_end_says_where_it_ends(served: Served) -> None:
    served("topic", "create", "short", "--partitions=1")
    served("produce", "short", "--partition=0", stdin=lines(0, 5))
    refused = served("consume", "short", "--from-offset", "99999999", code=2)
    one_line(refused, 2, "offset 99999999 is past the end", "short-0 ends at offset 5")
    assert refused.stdout == ""
    assert served("consume", "short", "--from-offset=5").stdout == ""     # at the end: nothing
    assert served("consume", "short", "--from-offset=4").stdout == "k4\tv4\n"


def test_cleaner_trigger_of_a_topic_that_is_not_compacted_is_refused(served: Served) -> None:
    served("topic", "create", "plain", "--partitions=1")
    for verb in ("trigger", "explain"):
        one_line(served("cleaner", verb, "plain", code=2), 2, "plain")
    one_line(served("cleaner", "trigger", "plain", code=2), 2, "not compacted",
             "nothing was triggered")


def test_an_interrupted_produce_says_what_it_stored_and_a_run_again_stores_the_rest_once(
        served: Served, tmp_path: Path) -> None:
    served("topic", "create", "big", "--partitions=2")
    total = 300_000
    big = tmp_path / "big.tsv"
    big.write_text(lines(0, total))
    command = ["produce", "big", "--file", str(big), "--batch-bytes=32768"]
    env = {**served.strata.env, "RAY_ADDRESS": served.strata.address}
    run = subprocess.Popen([sys.executable, "-m", "ops.cli", *command, f"--namespace={NAMESPACE}"],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, preexec_fn=ctrl_c_reaches_it)

    def stored_bytes() -> int:
        return sum(f.stat().st_size for d in (served.a, served.b) for f in d.glob("big-*/*.log"))
    deadline = time.monotonic() + 120
    while stored_bytes() < 256 * 1024:
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    said = one_line(subprocess.CompletedProcess(run.args, run.returncode, out, err), 130,
                    "interrupted", "run the same command again")
    stored = {int(p): (int(n), int(end)) for p, n, end in re.findall(
        r"big-(\d+): (\d+) records stored, log end offset (\d+)", said)}
    assert set(stored) == {0, 1} and all(n == end for n, end in stored.values()), said
    assert 0 < sum(n for n, _ in stored.values()) < total, said

    again = served(*command)
    assert f"produced {total - sum(n for n, _ in stored.values())} records" in again.stderr
    got = served("consume", "big").stdout.splitlines()
    assert sorted(got) == sorted(lines(0, total).splitlines())       # every record once


def test_the_readmes_connect_example_attaches_to_a_cluster_the_cli_started(
        served: Served) -> None:
    readme = (ROOT / "README.md").read_text()
    example = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S)
                   if "Cluster.connect(" in block)
    code = example.replace('namespace="strata"', f'namespace="{NAMESPACE}"')
    env = {**served.strata.env, "RAY_ADDRESS": served.strata.address}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == "[(0, b'/home')]"
    assert ("clicks", 2) in eval(result.stdout.splitlines()[1])   # noqa: S307 - our own output
    assert served("consume", "clicks", "--partition=0").stdout == "u1\t/home\n"   # still up


def test_a_cleanly_stopped_cluster_leaves_directories_recover_calls_healthy(
        served: Served) -> None:
    """Run last: it stops the module's cluster. Every partition has data in its active segment
    (appended as records the node encodes, and as batches a large produce encodes), and one has
    segments scheduled for deletion (``.deleted``, ``file.delete.delay.ms``) when
    the cluster stops: neither is damage."""
    created = served.json("topic", "create", "kept", "--partitions=2",
                          "--config=segment.bytes=2048")
    for p in range(2):
        served("produce", "kept", f"--partition={p}", stdin=lines(0, 300))
    served("topic", "create", "bulk", "--partitions=2")
    served("produce", "bulk", stdin="".join(f"key{i}\t{'v' * 60}\n" for i in range(6000)))
    served("topic", "delete-records", "kept", "--partition=0", "--before-offset=250")
    first = Path(created["partitions"]["0"]) / "kept-0"
    deadline = time.monotonic() + 30
    while not list(first.glob("*.deleted")):
        assert time.monotonic() < deadline, sorted(p.name for p in first.iterdir())
        time.sleep(0.2)
    stopped = served("cluster", "stop", "--keep-head")
    assert "closed cleanly" in stopped.stdout
    assert list(first.glob("*.deleted"))
    for log_dir in (served.a, served.b):
        result = served.strata("recover", str(log_dir), "--dry-run", "--json", check=False)
        report = json.loads(result.stdout)
        assert (result.returncode, report["status"]) == (0, "healthy"), [
            (p["partition"], f) for p in report["partitions"] for f in p["findings"]]
