"""``strata recover`` no longer predicts the loader: it runs ``LogLoader`` as a dry run with the
topic's config from the directory's ``topic-configs.json``. The dry run takes the decisions a real
load takes (same actions, same positions and sizes) on every damaged directory of the recover
tests, and changes no file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from node import LogDir
from node.topic_configs import TopicConfigsFile
from storage import loader as L
from storage.config import LogConfig
from storage.loader import LogLoader
from storage.records import Record, build_batch
from tests.cluster.test_recover import CONFIG, build_logdir, damage, findings, hashes, recover


def _load(partition: Path, config: LogConfig, *, dry_run: bool) -> L.LoadResult:
    result = LogLoader(partition, config, recovery_point=0, log_start_offset=0,
                       had_clean_shutdown=False, dry_run=dry_run).load()
    for segment in result.segments:
        segment.close()
    return result


def _actions(result: L.LoadResult) -> list[tuple[str, str, int | None, int]]:
    """The actions by final file name (a swap's segment is named as the swap it came from)."""
    return [(a.kind, a.path.name, a.position, a.bytes) for a in result.actions]


def _damaged(tmp_path: Path) -> Path:
    logs = build_logdir(tmp_path / "logs")
    damage(logs)
    return logs


def _finished_swap(tmp_path: Path) -> Path:
    logs = build_logdir(tmp_path / "logs")
    t0 = logs / "t-0"
    (t0 / "00000000000000000000.log.swap").write_bytes(
        (t0 / "00000000000000000000.log").read_bytes()
        + (t0 / "00000000000000000008.log").read_bytes())
    return logs


def _invalid_swap(tmp_path: Path) -> Path:
    logs = build_logdir(tmp_path / "logs")
    (logs / "t-0" / "00000000000000000000.log.swap").write_bytes(b"\x00" * 90)
    return logs


def _orphan_index_and_a_batch_out_of_place(tmp_path: Path) -> Path:
    logs = build_logdir(tmp_path / "logs")
    (logs / "t-0" / "00000000000000000099.index").write_bytes(b"")
    with open(logs / "u-1" / "00000000000000000016.log", "ab") as f:
        f.write(build_batch([Record(b"k", b"back", 2_000)], base_offset=10))  # below 16..19
    return logs


def _kafka_without_indexes(tmp_path: Path, kafka_fixtures: Path) -> Path:
    logs = tmp_path / "kafka"
    shutil.copytree(kafka_fixtures / "mscaldas2012__kafka-connect-spooldir" / "kafka-data", logs)
    for path in [logs, *logs.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return logs


FIXTURES: dict[str, Callable[[Path], Path]] = {
    "torn-flipped-garbage-index-leftovers": _damaged,
    "finished-swap": _finished_swap,
    "invalid-swap": _invalid_swap,
    "orphan-index-and-a-batch-out-of-place": _orphan_index_and_a_batch_out_of_place,
}


def _compare_on(logs: Path) -> None:
    partitions = sorted(p for p in logs.iterdir() if p.is_dir())
    assert partitions
    before = hashes(logs)
    planned = {p.name: _actions(_load(p, CONFIG, dry_run=True)) for p in partitions}
    assert hashes(logs) == before, "the dry run changed a file"
    done = {p.name: _actions(_load(p, CONFIG, dry_run=False)) for p in partitions}
    assert planned == done
    assert any(a[0] != L.RECOVER_SEGMENT for actions in done.values() for a in actions)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_loader_dry_run_takes_the_actions_of_a_real_load_and_changes_nothing(
        tmp_path: Path, name: str) -> None:
    _compare_on(FIXTURES[name](tmp_path))


def test_the_loader_dry_run_matches_a_real_load_on_kafka_data_without_indexes(
        tmp_path: Path, kafka_fixtures: Path) -> None:
    _compare_on(_kafka_without_indexes(tmp_path, kafka_fixtures))


def test_the_dry_run_of_a_split_reports_the_split_a_real_load_makes(tmp_path: Path) -> None:
    """The one documented difference: a dry run does not write the split's parts, so it reports
    the split and not the recovery of the parts."""
    far = 2**31 + 10
    v0 = tmp_path / "v-0"
    v0.mkdir()
    first = build_batch([Record(b"a", b"0", 1_000)], base_offset=0)
    (v0 / "00000000000000000000.log").write_bytes(
        first + build_batch([Record(b"b", b"1", 1_001)], base_offset=far))
    (v0 / f"{far + 1:020d}.log").write_bytes(          # as in the recover test: a later segment
        build_batch([Record(b"c", b"2", 1_002)], base_offset=far + 1))
    before = hashes(tmp_path)
    planned = _actions(_load(v0, CONFIG, dry_run=True))
    assert hashes(tmp_path) == before
    done = _actions(_load(v0, CONFIG, dry_run=False))
    split = (L.SPLIT, "00000000000000000000.log", len(first), 0)
    assert split in planned and split in done
    # the dry run meets the unsplit segment again in pass 5 (and reports the split again)
    assert {a for a in done if a[0] != L.RECOVER_SEGMENT} == \
        {a for a in planned if a[0] != L.RECOVER_SEGMENT}


def test_recover_reports_every_action_of_the_loader_on_the_damaged_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each truncation, quarantine and deletion of the loader's dry run is a finding at the same
    file and position."""
    logs = _orphan_index_and_a_batch_out_of_place(tmp_path)
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert code == 1
    found = findings(report)
    assert ("orphan-index", "t-0/00000000000000000099.index", None, "delete") in found
    size = (logs / "u-1" / "00000000000000000016.log").stat().st_size
    misplaced = len(build_batch([Record(b"k", b"back", 2_000)], base_offset=10))
    assert ("corrupt-batch", "u-1/00000000000000000016.log", size - misplaced, "truncate") in found


def test_recover_keeps_a_gap_at_the_end_of_any_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gap before a log's last batch is normal in every log, compacted or not: the cleaner
    leaves gaps, and so does Kafka's truncation inside a batch (the log ends at the target, the
    next append starts there). Recover calls both partitions healthy and the loader keeps the
    batch after the gap in both (before, the one that is not compacted was cut)."""
    logs = tmp_path / "logs"
    overrides = {"kv": {"cleanup.policy": "compact"}}
    logdir = LogDir.open(logs, default_config=CONFIG, start_tasks=False, topic_configs=overrides)
    for topic in ("kv", "plain"):
        log = logdir.get_or_create_log(topic, 0)
        for i in range(3):
            log.append([Record(f"k{i}".encode(), b"v", 1_000 + i)])
    logdir.close()
    TopicConfigsFile(logs).write(overrides)
    for topic in ("kv", "plain"):
        with open(logs / f"{topic}-0" / "00000000000000000000.log", "ab") as f:
            f.write(build_batch([Record(b"k9", b"v", 2_000)], base_offset=9))
    before = hashes(logs)
    code, report, _ = recover(capsys, logs, "--dry-run")
    assert hashes(logs) == before
    by_partition = {p["partition"]: p for p in report["partitions"]}
    assert by_partition["kv-0"]["status"] == "healthy"
    assert by_partition["plain-0"]["status"] == "healthy"
    assert code == 0
    opened = LogDir.open(logs, default_config=CONFIG, start_tasks=False, topic_configs=overrides)
    try:
        assert [r.offset for r in opened.get_or_create_log("kv", 0).read()] == [0, 1, 2, 9]
        assert [r.offset for r in opened.get_or_create_log("plain", 0).read()] == [0, 1, 2, 9]
    finally:
        opened.close()
