"""``strata log-dirs reassign | drain | rebalance``: the plans (pure, no cluster), the mistakes
refused before any Ray process starts (through the real command), and every verb on a cluster
of the session's Ray head (``ops.cli.main.main`` in this process), ``describe`` included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ops.cli import main as cli
from ops.cli.log_dir_moves import (PlannedMove, parse_reassignment, plan_drain,
                                            plan_rebalance)
from cluster.metadata.placement import DirRoom
from ops.tools import UsageError
from storage.records import Record
from tests.cluster.test_cli_mistakes import refused
from tests.strata_cli import run_strata

HOSTS = {"/d0": "h", "/d1": "h", "/d2": "h"}
ROUTES = {"orders": {0: "/d0", 1: "/d1"}}


def plan(document: object) -> list[PlannedMove]:
    return parse_reassignment(json.dumps(document), "plan.json", ROUTES, HOSTS)


def test_a_kafka_reassignment_document_becomes_moves() -> None:
    moves = plan({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [0], "log_dirs": ["/d2"]},
        {"topic": "orders", "partition": 1, "replicas": [0], "log_dirs": ["any"]}]})
    assert moves == [PlannedMove("orders", 0, "/d0", "/d2")]
    assert plan({"version": 1, "partitions": [
        {"topic": "orders", "partition": 1, "log_dirs": ["/d1/"]}]}) == []   # already there


@pytest.mark.parametrize("document, words", [
    ({"version": 2, "partitions": []}, ["version", "1"]),
    ({"version": 1, "partitions": []}, ["non-empty"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 7, "log_dirs": ["/d1"]}]},
     ["partitions[0]", "no partition orders-7"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0}]},
     ["partitions[0]", "orders-0", "log_dirs"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [0, 1],
                                    "log_dirs": ["/d1"]}]}, ["one entry each"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3],
                                    "log_dirs": ["/d1"]}]}, ["broker 0", "[3]"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "log_dirs": ["/d9"]}]},
     ["'/d9'", "not a log directory"]),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "log_dirs": ["/d1"]},
                                   {"topic": "orders", "partition": 0, "log_dirs": ["/d2"]}]},
     ["partitions[1]", "twice"]),
])
def test_a_reassignment_document_with_a_mistake_is_refused_naming_it(document: object,
                                                                      words: list[str]) -> None:
    with pytest.raises(UsageError) as err:
        plan(document)
    assert str(err.value).startswith("plan.json")
    for word in words:
        assert word in str(err.value)


def test_a_drain_spreads_the_partitions_over_the_other_directories_by_room() -> None:
    rooms = [DirRoom("/d0", 10 << 30, 3000, 3, total_bytes=100 << 30),
             DirRoom("/d1", 30 << 30, 0, 0, total_bytes=100 << 30),
             DirRoom("/d2", 30 << 30, 0, 0, total_bytes=100 << 30),
             DirRoom("/d3", 90 << 30, 0, 0, online=False, total_bytes=100 << 30)]
    moves = plan_drain("/d0", [("a", 0, 1000), ("a", 1, 1000), ("b", 0, 1000)], rooms)
    assert {m.source_dir for m in moves} == {"/d0"}
    assert sorted(m.target_dir for m in moves).count("/d3") == 0
    assert {m.target_dir for m in moves} == {"/d1", "/d2"}
    with pytest.raises(UsageError, match="no other online"):
        plan_drain("/d0", [("a", 0, 1)], rooms[:1])


def test_a_rebalance_narrows_the_gap_and_stops() -> None:
    sizes = {"/d0": [("a", i, 100) for i in range(8)] + [("b", 0, 500)],
             "/d1": [("a", 9, 100)], "/d2": []}
    moves = plan_rebalance(sizes)
    used = {d: sum(p[2] for p in ps) for d, ps in sizes.items()}
    for m in moves:
        used[m.source_dir] -= m.size_bytes
        used[m.target_dir] += m.size_bytes
    assert max(used.values()) - min(used.values()) <= 500
    assert moves[0] == PlannedMove("b", 0, "/d0", "/d2", 500)
    assert plan_rebalance({"/d0": [("a", 0, 100)], "/d1": [("a", 1, 100)]}) == []
    assert plan_rebalance({"/d0": [("a", 0, 1000)], "/d1": []}) == []   # would only swap sides


@pytest.mark.parametrize("content, words", [
    (None, ["cannot read", "plan.json"]),
    ("{not json", ["plan.json", "not JSON", "line 1"]),
    (b"\xff\xfe", ["cannot read", "plan.json"]),
])
def test_a_plan_file_that_cannot_be_read_gets_one_line(tmp_path: Path, content: object,
                                                      words: list[str]) -> None:
    path = tmp_path / "plan.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = run_strata("log-dirs", "reassign", f"--reassignment-json-file={path}",
                        "--namespace=strata-none", code=2)
    refused(result, *words)


def test_describe_lists_a_move_in_progress_as_kafka_lists_a_future_replica() -> None:
    from ops.cli.log_dirs import describe

    rows = [{"kind": "log_dir", "log_dir": d, "online": True} for d in ("/d0", "/d1")]
    rows.append({"kind": "partition", "log_dir": "/d0", "topic": "orders", "partition": 1,
                 "size_bytes": 20, "dirty_ratio": 0.0, "log_start_offset": 0,
                 "log_end_offset": 9})
    doc = describe(rows, {"/d0": "h", "/d1": "h"}, None, [dict(
        topic="orders", partition=1, source_dir="/d0", target_dir="/d1", future_dir="x",
        phase="copying", bytes_copied=10, bytes_total=20, source_log_end_offset=9,
        copied_log_end_offset=4, offset_lag=5, started_ms=0.0)])
    listed = {d["logDir"]: d["partitions"] for b in doc["brokers"] for d in b["logDirs"]}
    assert [(p["partition"], p["isFuture"], p["offsetLag"]) for p in listed["/d0"]] == \
        [("orders-1", False, 0)]
    assert [(p["partition"], p["isFuture"], p["offsetLag"], p["size"]) for p in listed["/d1"]] \
        == [("orders-1", True, 5, 10)]


# ---- on a cluster ---------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> tuple[str, str]:
    assert cli.main(list(args)) == code, capsys.readouterr()
    captured = capsys.readouterr()
    return captured.out, captured.err


def where(c, partition: int) -> str:
    """Where the cluster routes orders-``partition`` now (the test's client cached the route
    before the CLI moved it)."""
    c.partitions("orders")
    return c.partition_dir("orders", partition)


def test_log_dirs_verbs_move_partitions_on_a_cluster(start_cluster, capsys,
                                                     tmp_path: Path) -> None:
    c = start_cluster(dirs=3)
    ns = f"--namespace={c.namespace}"
    c.create_topic("orders", partitions=3, config={"segment.bytes": 65536})
    for p in range(3):
        c.produce("orders", p, [Record(key=b"k%d" % i, value=b"v" * 200, timestamp=i)
                                for i in range(500 * (p + 1))], flush=True)
    dirs = [os.path.abspath(d) for d in c.description.log_dirs]
    here = c.partition_dir("orders", 0)
    there = next(d for d in dirs if d != here)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [0], "log_dirs": [there]}]}))
    out, _ = run(capsys, "log-dirs", "reassign", f"--reassignment-json-file={plan_file}", ns)
    assert f"moved orders-0 from {here} to {there}" in out
    assert where(c, 0) == there

    # mistakes that need the cluster to be seen: one line each, nothing moved
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "log_dirs": ["/nowhere"]}]}))
    _, err = run(capsys, "log-dirs", "reassign", f"--reassignment-json-file={plan_file}", ns,
                 code=2)
    assert err.count("\n") == 1 and "'/nowhere' is not a log directory" in err
    _, err = run(capsys, "log-dirs", "drain", "/nowhere", ns, code=2)
    assert err.count("\n") == 1 and "/nowhere is not a log directory" in err

    described = json.loads(run(capsys, "log-dirs", "describe", "--json", ns)[0])
    listed = [p for b in described["brokers"] for d in b["logDirs"] for p in d["partitions"]]
    assert sorted(p["partition"] for p in listed) == ["orders-0", "orders-1", "orders-2"]
    assert all(p["isFuture"] is False and p["offsetLag"] == 0 for p in listed)

    # drain empties a directory; rebalance plans (dry run), then executes
    out, _ = run(capsys, "log-dirs", "drain", there, "--json", ns)
    assert {m["from"] for m in json.loads(out)["moves"]} == {there}
    assert there not in {where(c, p) for p in range(3)}
    plan_out, _ = run(capsys, "log-dirs", "rebalance", "--json", ns)
    planned = json.loads(plan_out)
    assert planned["dryRun"] is True and planned["moves"]
    assert there not in {where(c, p) for p in range(3)}   # nothing moved yet
    out, _ = run(capsys, "log-dirs", "rebalance", "--execute", "--json", ns)
    assert [m["partition"] for m in json.loads(out)["moves"]] == \
        [f"{m['topic']}-{m['partition']}" for m in planned["moves"]]
    assert [r.offset for r in c.consume("orders", 2)] == list(range(1500))
