"""``strata recover`` on hostile and failing directories (issue 12), run as a user runs it: ``python
-m ops.cli.main recover`` in a process of its own (a FIFO must not hang it). Every case is one
clear line on stderr, no traceback, the documented exit code (ops.tools), and a dry run
changes nothing. Also: topic configs are honoured, the dry run decodes every batch it judges, and
the quarantine a recovery fills can be listed and exported.

Before this, recover truncated a legal 10 MiB batch, hung on the FIFO, printed tracebacks for the
other rows, and called a partition whose records do not decode "healthy".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from node import LogDir
from node.topic_configs import TopicConfigsFile
from storage.config import LogConfig
from storage.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_COUNT_OFFSET,
    Record,
    scan_batches,
)
from tests import strays
from tests.strays import SEGMENT, snapshot

ROOT = Path(__file__).resolve().parents[2]
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)     # 3 segments per partition
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def strata(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "ops.cli", *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr
    assert len(lines) == 1, stderr
    return lines[0]


def build(path: Path) -> Path:
    """Partitions good-0 and bad-0: 20 one-record batches each, 3 segments, shut down cleanly."""
    return strays.build_good_and_bad(path, CONFIG, 20)


STRAYS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo-named-like-a-segment": (strays.fifo_as_segment, "a FIFO named like a segment file"),
    "directory-named-like-a-segment": (strays.directory_as_segment,
                                       "a directory named like a segment"),
    "over-long-numeric-name": (strays.over_long_name, "has 25 digits"),
    "offset-beyond-int64": (strays.offset_beyond_int64, "does not fit int64"),
    "symlink-loop": (strays.symlink_loop, "Too many levels of symbolic links"),
}


@pytest.mark.parametrize("row", sorted(STRAYS))
def test_recover_reports_a_stray_entry_in_one_line_and_repairs_around_it(
        tmp_path: Path, row: str) -> None:
    logs = build(tmp_path / "logs")
    plant, why = STRAYS[row]
    plant(logs / "bad-0")
    before = snapshot(logs)
    dry = strata("recover", logs, "--dry-run", "--json", timeout=60)
    line = one_line(dry.stderr)
    assert dry.returncode == EXIT_PROBLEMS
    assert line.startswith("strata recover: bad-0/") and "unusable-entry" in line and why in line
    assert snapshot(logs) == before
    report = json.loads(dry.stdout)
    assert {p["partition"]: p["status"] for p in report["partitions"]} == \
        {"bad-0": "needs-repair", "good-0": "healthy"}

    fix = strata("recover", logs, "--json", timeout=60)
    assert fix.returncode == EXIT_PROBLEMS and one_line(fix.stderr) == line
    report = json.loads(fix.stdout)
    assert {p["partition"]: p["status"] for p in report["partitions"]} == \
        {"bad-0": "failed", "good-0": "healthy"}
    after = snapshot(logs)
    assert {k: v for k, v in after.items() if k.startswith(("bad-0", "good-0"))} == \
        {k: v for k, v in before.items() if k.startswith(("bad-0", "good-0"))}


def test_recover_refuses_a_topic_configs_fifo_in_one_line_without_blocking(tmp_path: Path) -> None:
    logs = build(tmp_path / "logs")
    os.mkfifo(logs / "topic-configs.json")
    result = strata("recover", logs, "--dry-run", timeout=60)
    assert result.returncode == EXIT_USAGE
    assert one_line(result.stderr) == (f"strata recover: error: {logs / 'topic-configs.json'}: "
                                       "not a regular file; the node would not start with it "
                                       "either")


def test_recover_refuses_a_lock_that_is_a_directory_in_one_line(tmp_path: Path) -> None:
    logs = build(tmp_path / "logs")
    (logs / ".lock").unlink()
    (logs / ".lock").mkdir()
    before = snapshot(logs)
    for args in (("--dry-run",), ()):
        result = strata("recover", logs, *args)
        assert result.returncode == EXIT_USAGE
        assert one_line(result.stderr) == (f"strata recover: error: {logs / '.lock'} is not a "
                                           "regular file: no node can lock this directory; move "
                                           "it aside by hand")
        assert snapshot(logs) == before


def test_an_unreadable_segment_is_checked_when_we_may_read_it_and_reported_when_not(
        tmp_path: Path) -> None:
    """chmod 000: root (as in this container) reads it anyway, so it is healthy; any other user
    gets one line and exit 1."""
    logs = build(tmp_path / "logs")
    os.chmod(logs / "bad-0" / SEGMENT, 0)
    denied = not os.access(logs / "bad-0" / SEGMENT, os.R_OK | os.W_OK)
    result = strata("recover", logs, "--dry-run")
    if denied:
        assert result.returncode == EXIT_PROBLEMS
        assert "not readable by this process" in one_line(result.stderr)
    else:
        assert (result.returncode, result.stderr) == (EXIT_OK, "")


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """``read_only_view(dir)``: a read-only bind mount of ``dir`` (unmounted at teardown)."""
    mounted: list[Path] = []

    def make(source: Path) -> Path:
        target = tmp_path / "ro"
        target.mkdir()
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        mounted.append(target)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=True)
        return target

    yield make
    for target in mounted:
        subprocess.run(["umount", str(target)], check=True)


def test_recover_on_a_read_only_file_system_checks_and_refuses_to_repair_in_one_line(
        tmp_path: Path, read_only_view: Callable[[Path], Path]) -> None:
    logs = build(tmp_path / "logs")
    with open(max((logs / "good-0").glob("*.log")), "ab") as f:
        f.write(b"\0" * 20)                                           # a torn tail
    view = read_only_view(logs)
    before = snapshot(logs)
    dry = strata("recover", view, "--dry-run")
    assert (dry.returncode, dry.stderr) == (EXIT_PROBLEMS, "")       # checked, nothing written
    fix = strata("recover", view)
    assert fix.returncode == EXIT_USAGE
    assert "Read-only file system" in one_line(fix.stderr)
    assert snapshot(logs) == before


def test_recover_uses_the_topic_configs_the_node_keeps(tmp_path: Path) -> None:
    """A 10 MiB batch is legal in a topic with max.message.bytes=16 MiB: recover used Kafka's
    default (1 MiB) and truncated it away."""
    logs = tmp_path / "logs"
    overrides = {"big": {"max.message.bytes": str(16 << 20)}}
    with LogDir.open(logs, start_tasks=False, topic_configs=overrides) as d:
        log = d.get_or_create_log("big", 0)
        log.append([Record(b"k", b"x" * (10 << 20), 1_000)])
        log.append([Record(b"k", b"small", 1_001)])
    TopicConfigsFile(logs).write(overrides)
    os.unlink(logs / ".kafka_cleanshutdown")
    before = snapshot(logs)
    dry = strata("recover", logs, "--dry-run", "--json")
    assert (dry.returncode, dry.stderr) == (EXIT_OK, "")
    assert json.loads(dry.stdout)["status"] == "healthy"
    fix = strata("recover", logs, "--json")
    assert (fix.returncode, json.loads(fix.stdout)["status"]) == (EXIT_OK, "healthy")
    assert {k: v for k, v in snapshot(logs).items() if k.startswith("big-0")} == \
        {k: v for k, v in before.items() if k.startswith("big-0")}


def test_the_dry_run_decodes_every_batch_it_judges(tmp_path: Path) -> None:
    """A batch whose CRC is right but whose records do not decode: recovery keeps it (it passes
    its CRC) and every reader fails on it, so it is not healthy; recover cannot fix it."""
    import crc32c

    logs = build(tmp_path / "logs")
    segment = sorted((logs / "bad-0").glob("*.log"))[1]
    data = bytearray(segment.read_bytes())
    at = int(scan_batches(bytes(data)).positions[2])
    size = int(scan_batches(bytes(data)).sizes[2])
    count = at + RECORDS_COUNT_OFFSET
    data[count:count + 4] = (1000).to_bytes(4, "big")
    crc = crc32c.crc32c(bytes(data[at + ATTRIBUTES_OFFSET:at + size]))
    data[at + CRC_OFFSET:at + CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    before = snapshot(logs)
    dry = strata("recover", logs, "--dry-run", "--json")
    assert dry.returncode == EXIT_PROBLEMS
    line = one_line(dry.stderr)
    assert line.startswith(f"strata recover: bad-0/{segment.name}: unreadable-batch: ")
    assert "records count 1000 cannot fit" in line
    finding = next(f for p in json.loads(dry.stdout)["partitions"] for f in p["findings"])
    assert (finding["kind"], finding["position"], finding["action"]) == \
        ("unreadable-batch", at, "manual")
    assert snapshot(logs) == before


def test_recover_lists_and_exports_what_recovery_quarantined(tmp_path: Path) -> None:
    """A flipped byte in the middle of segment 1 of 3: the repair keeps the cut tail and segments
    2 and 3 in bad-0/quarantine/; --list-quarantine lists them and --export-quarantine copies
    their exact bytes; nothing valid is deleted."""
    logs = build(tmp_path / "logs")
    bad = logs / "bad-0"
    first = bad / SEGMENT
    data = bytearray(first.read_bytes())
    flipped = int(scan_batches(bytes(data)).positions[4])
    data[flipped + 30] ^= 0xFF
    first.write_bytes(bytes(data))
    _, second, third = sorted(bad.glob("*.log"))
    expected = {SEGMENT: bytes(data[flipped:]), second.name: second.read_bytes(),
                third.name: third.read_bytes()}
    assert strata("recover", logs, "--list-quarantine", "--json").stdout.strip() == \
        json.dumps({"logDir": str(logs), "quarantined": []}, separators=(",", ":"))
    fix = strata("recover", logs, "--json")
    assert (fix.returncode, json.loads(fix.stdout)["status"]) == (EXIT_OK, "repaired")

    listed = strata("recover", logs, "--list-quarantine", "--json")
    assert (listed.returncode, listed.stderr) == (EXIT_OK, "")
    rows = json.loads(listed.stdout)["quarantined"]
    assert {(r["partition"], r["original"], r["position"], r["bytes"]) for r in rows} == {
        ("bad-0", SEGMENT, flipped, len(expected[SEGMENT])),
        ("bad-0", second.name, 0, len(expected[second.name])),
        ("bad-0", third.name, 0, len(expected[third.name]))}
    assert {r["original"]: (logs / r["file"]).read_bytes() for r in rows} == expected

    exported = strata("recover", logs, "--export-quarantine", tmp_path / "out")
    assert exported.returncode == EXIT_OK and "copied 3 files" in exported.stdout
    copies = {p.name: p.read_bytes() for p in (tmp_path / "out" / "bad-0").iterdir()}
    assert sorted(copies.values()) == sorted(expected.values())
    table = strata("recover", logs, "--list-quarantine")
    assert "3 quarantined files" in table.stdout and "bad-0/quarantine/" in table.stdout


@pytest.mark.parametrize("content, message", [
    (b'{"version": 1, "topics": {"bad": {"segment.bytes": "\xff"}}}', "not UTF-8 text"),
    (b'{"version": 1, "topics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "JSON nested too deeply"),
])
def test_recover_refuses_an_unreadable_topic_configs_file_in_one_line(
        tmp_path: Path, content: bytes, message: str) -> None:
    logs = build(tmp_path / "logs")
    (logs / "topic-configs.json").write_bytes(content)
    before = snapshot(logs)
    result = strata("recover", logs, "--dry-run")
    assert result.returncode == EXIT_USAGE
    line = one_line(result.stderr)
    assert line.startswith(f"strata recover: error: {logs / 'topic-configs.json'}: ")
    assert message in line and line.endswith("the node would not start with it either")
    assert snapshot(logs) == before


def test_recover_skips_the_partitions_of_a_topic_whose_overrides_are_bad(tmp_path: Path) -> None:
    """As the node does: the partition is reported (manual), neither checked with the defaults
    nor changed; the other topics are checked and repaired as usual."""
    logs = build(tmp_path / "logs")
    TopicConfigsFile(logs).write({"bad": {"cleanup.policy": "compact", "segment.bytes": "junk"}})
    os.unlink(logs / ".kafka_cleanshutdown")
    before = snapshot(logs)
    dry = strata("recover", logs, "--dry-run", "--json")
    assert dry.returncode == EXIT_PROBLEMS and "Traceback" not in dry.stderr
    report = {p["partition"]: p for p in json.loads(dry.stdout)["partitions"]}
    assert report["good-0"]["status"] == "healthy"
    [finding] = report["bad-0"]["findings"]
    assert (finding["kind"], finding["action"]) == ("invalid-topic-config", "manual")
    assert "segment.bytes" in finding["message"] and "topic bad" in finding["message"]
    fix = strata("recover", logs, "--json")
    assert fix.returncode == EXIT_PROBLEMS
    assert {p["partition"]: p["status"] for p in json.loads(fix.stdout)["partitions"]} == \
        {"bad-0": "failed", "good-0": "healthy"}
    assert {k: v for k, v in snapshot(logs).items() if k.startswith("bad-0")} == \
        {k: v for k, v in before.items() if k.startswith("bad-0")}
