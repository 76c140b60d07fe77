"""Every drill at a small size on the session's Ray head: each must pass with zero loss and zero
duplicates (or be skipped with a reason where the machine cannot mount a tmpfs or chattr), and
write a report that follows the schema. A drill fed a record that was never stored must fail.

With ``--address`` (``strata drill`` run as a process of its own, as an operator runs it) a drill
joins a running Ray cluster (this module's ``ray_head``) and drills the Strata cluster of
``--namespace``, one started there with ``strata cluster start --address``: it adds two topics of
its own and deletes them afterwards unless ``--keep-topics``; a disk drill starts a small cluster
of its own on that Ray cluster and removes it again. ``restart-all`` brings the cluster it drilled
back as it was."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from cluster.runtime.head import HeadProcess
from ops.drills import DRILLS, DrillOptions, run_drill
from ops.drills.report import schema_problems, write_report
from tests.ops.conftest import leftovers
from tests.strata_cli import run_strata, unique_namespace

SMALL = ("--warmup-records=200", "--after-records=60", "--timeout=90")


# the coordinators' drills run once, in test_drills_coordinators.py, with their own checks
OWN_MODULE = ("group-coordinator", "transaction-coordinator")


@pytest.mark.parametrize("name", [name for name in DRILLS if name not in OWN_MODULE])
def test_drill_reports_no_loss(name: str, drill_options: DrillOptions, tmp_path: Path) -> None:
    report = run_drill(name, DRILLS[name], drill_options)
    doc = json.loads(write_report(report, tmp_path / f"{name}.json").read_text())
    assert schema_problems(doc) == []
    if report.status == "skipped":
        assert name in ("disk-full", "disk-fail") and report.reason
        pytest.skip(report.reason)
    failed = [c.to_json() for c in report.checks if not c.ok]
    assert report.status == "passed", (report.reason, failed, doc["verification"])
    v = doc["verification"]
    assert v["lost"] == v["duplicated"] == v["misplaced"] == v["phantom"] == 0
    assert v["acknowledged"] >= drill_options.warmup_records
    assert doc["injections"] and doc["samples"]


def test_a_drill_reports_loss_when_an_acknowledged_record_is_missing(
        drill_options: DrillOptions) -> None:
    def lossy(ctx) -> None:
        ctx.open_env()
        ctx.setup()
        ctx.start_producers()
        ctx.wait_acked(100)
        ctx.stop_producers()
        # a record the ledger says was acknowledged at the log end, never written
        topic = ctx.log_topic
        end = ctx.env.cluster.offsets(topic, 0)[1]
        ctx.ledger.acknowledge(topic, 0, end, [(b"ghost", b"never stored")])
        ctx.finish()

    report = run_drill("lossy", lossy, drill_options)
    assert report.status == "failed" and report.exit_code == 1
    assert report.verification["lost"] == 1
    assert report.verification["examples"]["lost"][0]["value"] == "never stored"


def test_the_drill_command_parses_names_and_writes_the_report_path(tmp_path: Path) -> None:
    from ops.drills import command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["drill", "all", "--report", str(tmp_path)])
    assert args.handler is command.run and args.name == "all"
    assert command._report_path(tmp_path, "kill-node", "s", single=False) == \
        tmp_path / "kill-node-s.json"
    assert command._report_path(None, "corrupt", "s", single=True) == \
        command.DEFAULT_REPORT_DIR / "corrupt-s.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["drill", "no-such-drill"])


# ---- --address: drilling a Strata cluster someone else started ---------------------------------
@dataclass(frozen=True)
class Joined:
    """A Strata cluster started with ``strata cluster start --address`` on the module's head."""

    address: str
    namespace: str
    log_dirs: tuple[str, ...]

    @property
    def on(self) -> tuple[str, str]:
        return f"--address={self.address}", f"--namespace={self.namespace}"

    def topics(self) -> dict[str, dict[str, Any]]:
        listed = json.loads(run_strata("topic", "list", *self.on, "--json").stdout)
        return {t["name"]: t for t in listed["topics"]}

    def drill(self, name: str, report: Path, *args: str) -> dict[str, Any]:
        """``strata drill NAME --address ... --json``; its report, checked against the file."""
        result = run_strata("drill", name, *self.on, f"--report={report}", "--json", *SMALL,
                            *args, code=None)
        # stdout is the report, one line of JSON, and nothing else: what Ray's driver prints
        # ("(raylet) Task ... will be retried") goes to stderr (ops.cli.ray_messages_to_stderr)
        ours = result.stdout.splitlines()
        assert len(ours) == 1, (result.returncode, result.stdout[-2000:], result.stderr[-4000:])
        doc = json.loads(ours[0])
        exit_code = 0 if doc["status"] in ("passed", "skipped") else 1
        assert result.returncode == exit_code, (doc["status"], doc["reason"],
                                                result.stderr[-3000:])
        assert json.loads(report.read_text()) == doc
        assert schema_problems(doc) == []
        return doc


@pytest.fixture(scope="module")
def joined(ray_head: HeadProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Joined]:
    """Two directories and a topic of the user's own ("orders"), started as an operator would on
    a Ray cluster that was already running; stopped at the end of the module (the head goes after
    it, and with it anything a failed test left)."""
    root = tmp_path_factory.mktemp("joined")
    cluster = Joined(ray_head.address, unique_namespace("strata-drilled"),
                     (str(root / "a"), str(root / "b")))
    try:
        run_strata("cluster", "start", *cluster.on, *(f"--log-dir={d}" for d in cluster.log_dirs),
                   "--cleaners=1", "--json")
        run_strata("topic", "create", "orders", "--partitions=2", *cluster.on)
        yield cluster
    finally:
        run_strata("cluster", "stop", *cluster.on, code=None)


def passed(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's checks by name, once it says the drill passed with nothing lost."""
    failed = [c for c in doc["checks"] if not c["ok"]]
    assert doc["status"] == "passed", (doc["reason"], failed, doc["verification"])
    v = doc["verification"]
    assert v["lost"] == v["duplicated"] == v["misplaced"] == v["phantom"] == 0
    return {c["name"]: c for c in doc["checks"]}


def drill_topics(doc: dict[str, Any]) -> set[str]:
    """The drill's two topics, ``drill-<name>-<tag>-log`` and ``-kv``, named by its ledger."""
    (kv,) = doc["ledger"]["compacted_topics"]
    assert kv.startswith(f"drill-{doc['drill']}-") and kv.endswith("-kv")
    return {kv, kv[:-len("kv")] + "log"}


def test_a_drill_with_address_drills_that_strata_cluster_and_deletes_its_topics(
        joined: Joined, tmp_path: Path) -> None:
    before = joined.topics()
    doc = joined.drill("kill-node", tmp_path / "kill-node.json")
    checks = passed(doc)
    assert doc["cluster"] == {"namespace": joined.namespace, "log_dirs": list(joined.log_dirs),
                              "cleaners": 1, "started_by_drill": False,
                              "address": joined.address}
    (killed,) = doc["injections"]
    assert killed["target"] in joined.log_dirs       # a node actor of the joined cluster
    assert checks["Ray restarted the node actor"]["ok"]
    assert checks["the new process holds the directory's .lock"]["ok"]
    assert checks["producers are served again by the restarted node"]["ok"]
    assert doc["verification"]["acknowledged"] >= 200
    assert doc["verification"]["partitions"] == 2 * len(joined.log_dirs)
    after = joined.topics()
    assert after == before and "orders" in after     # its own topics gone, the user's kept
    assert not drill_topics(doc) & set(after)


def test_a_drill_with_address_and_keep_topics_leaves_its_topics_on_the_cluster(
        joined: Joined, tmp_path: Path) -> None:
    before = joined.topics()
    doc = joined.drill("kill-node", tmp_path / "kill-node.json", "--keep-topics")
    passed(doc)
    assert doc["settings"]["keep_topics"] is True
    after = joined.topics()
    kept = drill_topics(doc)
    assert set(after) == set(before) | kept
    for name in kept:
        assert sorted(after[name]["partitions"].values()) == sorted(joined.log_dirs)
    assert [after[name]["config"]["cleanup.policy"] for name in sorted(kept)] == \
        ["compact", "delete"]                         # -kv, -log


def test_a_disk_drill_with_address_runs_a_cluster_of_its_own_on_that_ray_cluster(
        joined: Joined, tmp_path: Path) -> None:
    before = joined.topics()
    # disk-fail (chattr +i, as root) rather than disk-full (a tmpfs mount): it runs in more places
    doc = joined.drill("disk-fail", tmp_path / "disk-fail.json", f"--workdir={tmp_path}")
    checks = passed(doc)
    own = doc["cluster"]
    assert own["started_by_drill"] is True and own["address"] == joined.address
    assert own["namespace"] != joined.namespace
    assert all(d.startswith(f"{tmp_path}/disk-fail-") for d in own["log_dirs"])
    assert checks["the directory went offline with the I/O error as the reason"]["ok"]
    assert checks["the directory is online again after the repair"]["ok"]
    assert joined.topics() == before                 # the joined cluster was not touched
    gone = run_strata("cluster", "status", f"--address={joined.address}",
                      f"--namespace={own['namespace']}", code=2)
    assert f"no Strata cluster in namespace {own['namespace']}" in gone.stderr
    assert leftovers(tmp_path) == []


def test_restart_all_with_address_brings_the_cluster_back_as_it_was(
        drill_options: DrillOptions, ray_session: str, tmp_path: Path) -> None:
    from cluster import Cluster

    # head_started_by_strata: as `strata cluster start` records a head it started itself, for
    # `strata cluster stop` to stop (nothing acts on it here: this test stops no head)
    cluster = Cluster.start(log_dirs=[str(tmp_path / "a"), str(tmp_path / "b")], cleaners=1,
                            config={"log.cleaner.backoff.ms": 100}, address=ray_session,
                            namespace=unique_namespace("strata-restarted"),
                            head_started_by_strata=True)
    try:
        options = dataclasses.replace(drill_options, address=ray_session,
                                      namespace=cluster.namespace, warmup_records=200,
                                      after_records=60)
        report = run_drill("restart-all", DRILLS["restart-all"], options)
        checks = passed(report.to_json())
        assert checks["the cluster came back as it was (directories, actors, settings, head "
                      "owner)"]["ok"]
        assert report.cluster["started_by_drill"] is False
        assert Cluster.connect(ray_session, cluster.namespace).description == cluster.description
    finally:
        cluster.stop()
