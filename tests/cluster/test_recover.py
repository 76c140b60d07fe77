"""``strata recover``: a log directory written by a real ``LogDir``, damaged on disk the way crashes
and bad disks damage it, checked with ``--dry-run`` (nothing changes) and repaired (nothing is
deleted silently)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

import pytest

from ops.cli.main import main
from node import LogDir
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, scan_batches

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)    # 3 segments per partition


def build_logdir(path: Path) -> Path:
    """Two partitions of 20 one-record batches (offsets 0..19, segments at 0, 8 and 16), shut
    down cleanly by the node's own LogDir."""
    logdir = LogDir.open(path, default_config=CONFIG, start_tasks=False)
    for topic, partition in (("t", 0), ("u", 1)):
        log = logdir.get_or_create_log(topic, partition)
        for i in range(20):
            log.append([Record(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i)])
    logdir.close()
    return path


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def recover(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict, str]:
    code = main(["recover", *map(str, args), "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def findings(report: dict) -> set[tuple[str, str, int | None, str]]:
    found = {(f["kind"], f["file"], f["position"], f["action"]) for f in report["findings"]}
    for partition in report["partitions"]:
        found |= {(f["kind"], f["file"], f["position"], f["action"])
                  for f in partition["findings"]}
    return found


def damage(logs: Path) -> dict[str, int]:
    """A torn tail, a flipped byte in a closed segment, a garbage index, a cleaner's leftovers and
    a checkpoint whose count is wrong. Returns the positions where damage starts."""
    t0, u1 = logs / "t-0", logs / "u-1"
    tail = t0 / "00000000000000000016.log"
    torn_at = tail.stat().st_size
    with open(tail, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x00\x50" + b"cut off")      # a batch cut by a crash
    closed = u1 / "00000000000000000008.log"
    data = bytearray(closed.read_bytes())
    scan = scan_batches(bytes(data))
    flipped_batch = int(scan.positions[1])
    data[flipped_batch + 30] ^= 0xFF
    closed.write_bytes(bytes(data))
    (t0 / "00000000000000000008.index").write_bytes(random.Random(3).randbytes(24))
    (t0 / "00000000000000000000.log.cleaned").write_bytes(b"half-written cleaner output")
    (t0 / "00000000000000000000.log.swap").write_bytes(b"half-swapped cleaner output")
    (logs / "log-start-offset-checkpoint").write_text("0\n3\nt 0 0\n")
    return {"torn": torn_at, "flipped": flipped_batch}


def test_healthy_directory_has_nothing_to_do(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    before = hashes(logs)
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert (code, report["status"], findings(report)) == (0, "healthy", set())
    assert report["summary"]["segments"] == 6 and report["summary"]["partitions"] == 2
    code, report, _ = recover(capsys, logs)
    assert (code, report["status"]) == (0, "healthy")
    assert all(p["repair"] is None for p in report["partitions"])
    after = hashes(logs)
    assert json.loads((logs / "recovery-report.json").read_text())["status"] == "healthy"
    assert {k: v for k, v in after.items() if k not in (".lock", "recovery-report.json")} == \
        {k: v for k, v in before.items() if k != ".lock"}


def test_dry_run_reports_every_damage_with_file_and_position_and_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    where = damage(logs)
    before = hashes(logs)
    code, report, _ = recover(capsys, logs, "--dry-run", "--report", tmp_path / "report.json")
    assert hashes(logs) == before
    assert (code, report["status"], report["dryRun"]) == (1, "needs-repair", True)
    assert json.loads((tmp_path / "report.json").read_text()) == report
    found = findings(report)
    assert {
        ("temp-file", "t-0/00000000000000000000.log.cleaned", None, "delete"),
        ("temp-file", "t-0/00000000000000000000.log.swap", None, "delete"),
        ("corrupt-index", "t-0/00000000000000000008.index", 0, "rebuild"),
        ("torn-tail", "t-0/00000000000000000016.log", where["torn"], "truncate"),
        ("corrupt-batch", "u-1/00000000000000000008.log", where["flipped"], "truncate"),
        ("after-truncation", "u-1/00000000000000000016.log", 0, "quarantine"),
        ("corrupt-checkpoint", "log-start-offset-checkpoint", 2, "quarantine"),
        ("stale-snapshot", "u-1/00000000000000000016.snapshot", None, "quarantine"),
        ("stale-snapshot", "u-1/00000000000000000020.snapshot", None, "quarantine"),
    } == found
    corrupt = next(f for p in report["partitions"] for f in p["findings"]
                   if f["kind"] == "corrupt-batch")
    assert "fails its CRC" in corrupt["message"]
    assert (corrupt["records"], report["summary"]["truncatedRecords"]) == (7, 11)


def test_dry_run_prints_a_table_naming_files_and_positions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    where = damage(logs)
    code = main(["recover", str(logs), "--dry-run"])
    out = capsys.readouterr().out
    assert code == 1
    assert "u-1/00000000000000000008.log" in out and str(where["flipped"]) in out
    assert f"{logs}: needs-repair: 2 partitions, 6 segments" in out
    assert "would truncate" in out


def test_repair_keeps_every_valid_record_and_quarantines_what_it_drops(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    where = damage(logs)
    damaged_tail = (logs / "u-1" / "00000000000000000008.log").read_bytes()[where["flipped"]:]
    dropped_segment = (logs / "u-1" / "00000000000000000016.log").read_bytes()
    torn_tail = (logs / "t-0" / "00000000000000000016.log").read_bytes()[where["torn"]:]
    code, report, _ = recover(capsys, logs)
    assert (code, report["status"]) == (0, "repaired")
    assert all(p["repair"]["verified"] for p in report["partitions"])
    on_disk = json.loads((logs / "recovery-report.json").read_text())
    assert on_disk["status"] == "repaired"
    quarantined = {q["file"]: (logs / q["movedTo"]).read_bytes()
                   for p in on_disk["partitions"] for q in p["repair"]["quarantined"]
                   if q["file"].endswith(".log")}
    assert quarantined == {"u-1/00000000000000000008.log": damaged_tail,
                           "u-1/00000000000000000016.log": dropped_segment,
                           "t-0/00000000000000000016.log": torn_tail}
    assert not list((logs / "t-0").glob("*.cleaned")) and not list((logs / "t-0").glob("*.swap"))
    assert not (logs / "log-start-offset-checkpoint").exists()
    assert len(list(logs.glob("log-start-offset-checkpoint.corrupt.*"))) == 1
    assert sorted(p.name.split(".stale.")[0] for p in (logs / "u-1").glob("*.stale.*")) == \
        ["00000000000000000016.snapshot", "00000000000000000020.snapshot"]
    for name, last in (("t-0", 19), ("u-1", where["flipped"] // 72 + 7)):
        log = Log.open(logs / name, CONFIG)
        records = list(log.read())
        log.close()
        assert [r.offset for r in records] == list(range(last + 1))
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(last + 1)]
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert (code, report["status"]) == (0, "healthy")


def test_a_finished_swap_is_completed_over_the_segments_it_replaces(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    t0 = logs / "t-0"
    merged = (t0 / "00000000000000000000.log").read_bytes() + \
        (t0 / "00000000000000000008.log").read_bytes()
    (t0 / "00000000000000000000.log.swap").write_bytes(merged)     # crashed before step 2
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert code == 1
    assert ("swap", "t-0/00000000000000000000.log.swap", None, "complete-swap") in findings(report)
    assert ("swapped-original", "t-0/00000000000000000008.log", None, "delete") in \
        findings(report)
    code, report, _ = recover(capsys, logs)
    assert (code, report["status"]) == (0, "repaired")
    assert sorted(p.name for p in t0.glob("*.log")) == ["00000000000000000000.log",
                                                        "00000000000000000016.log"]
    log = Log.open(t0, CONFIG)
    assert [r.offset for r in log.read()] == list(range(20))
    log.close()


def test_an_overflowing_segment_is_split_not_truncated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage.records import build_batch

    far = 2**31 + 10                               # beyond base 0 + Int.MaxValue
    logs = build_logdir(tmp_path / "logs")
    v0 = logs / "v-0"
    v0.mkdir()
    first = build_batch([Record(b"a", b"0", 1_000)], base_offset=0)
    old_broker = first + build_batch([Record(b"b", b"1", 1_001)], base_offset=far)
    (v0 / "00000000000000000000.log").write_bytes(old_broker)
    # the old broker's cleaner wrote it: a later segment follows, as in every real log
    (v0 / f"{far + 1:020d}.log").write_bytes(
        build_batch([Record(b"c", b"2", 1_002)], base_offset=far + 1))
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert code == 1
    assert ("offset-overflow", "v-0/00000000000000000000.log", len(first), "split") in \
        findings(report)
    assert not any(f[0] in ("corrupt-batch", "torn-tail") for f in findings(report))
    assert main(["dump-log", "--verify", str(v0 / "00000000000000000000.log")]) == 1
    assert "recovery splits the segment there" in capsys.readouterr().out
    code, report, _ = recover(capsys, logs)
    assert (code, report["status"]) == (0, "repaired")
    log = Log.open(v0, CONFIG)
    assert [(r.offset, r.value) for r in log.read()] == [(0, b"0"), (far, b"1"), (far + 1, b"2")]
    assert log.segment_base_offsets() == [0, far, far + 1]
    log.close()


def test_recover_refuses_a_directory_a_running_node_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    node = LogDir.open(logs, default_config=CONFIG, start_tasks=False)
    try:
        for args in ((), ("--dry-run",)):
            code = main(["recover", str(logs), *args])
            err = capsys.readouterr().err
            assert code == 2
            assert "strata recover: error: log directory" in err and "stop the node" in err
    finally:
        node.close()
    assert main(["recover", str(logs), "--dry-run", "--json"]) == 0


def test_a_partition_directory_is_refused_with_a_hint(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    logs = build_logdir(tmp_path / "logs")
    assert main(["recover", str(logs / "t-0")]) == 2
    assert "pass the log directory" in capsys.readouterr().err


def test_kafka_directories_without_indexes_are_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kafka_fixtures: Path) -> None:
    logs = tmp_path / "kafka"
    shutil.copytree(kafka_fixtures / "mscaldas2012__kafka-connect-spooldir" / "kafka-data", logs)
    for path in [logs, *logs.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert code == 1
    assert {f[0] for f in findings(report)} <= {"missing-index", "missing-time-index"}
    assert report["summary"]["truncatedBytes"] == 0
    code, report, _ = recover(capsys, logs)
    assert (code, report["status"]) == (0, "repaired")
    assert recover(capsys, logs, "--dry-run")[0] == 0


def build_txn_logdir(path: Path) -> Path:
    """One partition with a committed and an aborted transaction (markers at 3 and 7, one
    segment), shut down cleanly by the node's own LogDir."""
    from storage.records import ControlType, build_batch

    logdir = LogDir.open(path, default_config=CONFIG, start_tasks=False)
    log = logdir.get_or_create_log("x", 0)
    now = int(time.time() * 1000)        # a record from long ago would roll the segment
    for pid in (1, 2):
        log.append_batch(build_batch([Record(b"k", b"v%d" % i, now) for i in range(3)],
                                     producer_id=pid, producer_epoch=0, base_sequence=0,
                                     is_transactional=True))
        log.append_end_txn_marker(ControlType.COMMIT if pid == 1 else ControlType.ABORT,
                                  producer_id=pid, producer_epoch=0)
    assert log.number_of_segments == 1
    logdir.close()
    return path


@pytest.mark.parametrize("how", ["deleted", "emptied", "names-a-commit"])
def test_dry_run_reports_a_txn_index_that_does_not_match_the_markers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    from storage.txn_index import AbortedTxn

    logs = build_txn_logdir(tmp_path / "logs")
    index = logs / "x-0" / "00000000000000000000.txnindex"
    assert index.stat().st_size == 34
    if how == "deleted":
        index.unlink()
    elif how == "emptied":
        index.write_bytes(b"")
    else:
        index.write_bytes(AbortedTxn(1, 0, 3, 4).encode())
    before = hashes(logs)
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert hashes(logs) == before
    assert (code, report["status"]) == (1, "needs-repair")
    (finding,) = [f for p in report["partitions"] for f in p["findings"]]
    assert (finding["kind"], finding["file"], finding["action"]) == \
        ("corrupt-txn-index", "x-0/00000000000000000000.txnindex", "rebuild")
    assert ("is a commit" in finding["message"]) == (how == "names-a-commit")
    code, report, _ = recover(capsys, logs)
    assert report["partitions"][0]["repair"]["verified"]
    assert index.read_bytes() == AbortedTxn(2, 4, 7, 8).encode()
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert (code, report["status"]) == (0, "healthy")


def test_dry_run_finds_an_empty_transactions_abort_healthy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An abort marker of a producer with no open transaction needs no .txnindex entry: the
    snapshot at its segment's base says the producer had none open."""
    from storage.records import ControlType

    logs = build_txn_logdir(tmp_path / "logs")
    logdir = LogDir.open(logs, default_config=CONFIG, start_tasks=False)
    log = logdir.get_or_create_log("x", 0)
    log.roll()
    log.append_end_txn_marker(ControlType.ABORT, producer_id=7, producer_epoch=0)
    logdir.close()
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert (code, report["status"], findings(report)) == (0, "healthy", set())
