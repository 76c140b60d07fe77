"""Every partition directory written by a real Kafka broker opens (indexes rebuilt where missing)
and reads back exactly the records Kafka wrote (EXPECTED.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage.log import Log
from storage.records import Record
from tests.conftest import FIXTURES

EXPECTED = json.loads((FIXTURES / "EXPECTED.json").read_text()) if FIXTURES.is_dir() else {}


def _partition_dirs() -> list[tuple[str, str]]:
    found = set()
    for source, entries in EXPECTED.items():
        for relative in entries:
            if relative.endswith(".log"):
                found.add((source, str(Path(relative).parent)))
    return sorted(found)


def _every_record(log: Log) -> tuple[list[Record], list[Record]]:
    """Every record of the log, control records (KRaft's LeaderChange) included as the parsers
    of EXPECTED.json count them, and the data records alone, which ``Log.read`` returns."""
    records, data_records, offset = [], [], log.log_start_offset
    while (fetch := log.read_raw(offset)) is not None:
        for batch in fetch.batches():
            if batch.last_offset >= offset:
                records += batch.records()
                data_records += [] if batch.is_control else batch.records()
            offset = max(offset, batch.next_offset)
    return records, data_records


def _expected_logs(source: str, partition: str) -> list[dict]:
    entries = EXPECTED[source]
    return [info["parsed"] for rel, info in sorted(entries.items())
            if rel.endswith(".log") and str(Path(rel).parent) == partition]


@pytest.mark.parametrize(("source", "partition"), _partition_dirs(),
                         ids=[f"{s}/{p}" for s, p in _partition_dirs()])
def test_real_kafka_partition_reads_back_every_record(tmp_path: Path, source: str,
                                                      partition: str) -> None:
    target = tmp_path / Path(partition).name
    shutil.copytree(FIXTURES / source / partition, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    expected = _expected_logs(source, partition)
    log = Log.open(target)   # no recovery point: recover and re-validate everything
    records, data_records = _every_record(log)
    assert [(r.offset, r.value) for r in log.read()] == [(r.offset, r.value) for r in data_records]
    assert log.load_result.truncated_bytes == 0
    assert len(records) == sum(e.get("kp_records", 0) for e in expected)
    firsts = [e["first_record_offset"] for e in expected if e.get("first_record_offset") is not None]
    lasts = [e["last_record_offset"] for e in expected if e.get("last_record_offset") is not None]
    if records:
        assert records[0].offset == min(firsts)
        assert records[-1].offset == max(lasts)
        assert all(a.offset < b.offset for a, b in zip(records, records[1:]))
    for segment in log.segments():
        assert segment.offset_index.path.exists() or segment is log.active_segment
    log.close()


def test_missing_indexes_are_rebuilt_for_unclean_kafka_dir(tmp_path: Path) -> None:
    source = FIXTURES / "LanXuage__dspider" / "kafka-data" / "__consumer_offsets-8"
    target = tmp_path / "__consumer_offsets-8"
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert not (target / "00000000000000000000.index").exists()
    log = Log.open(target)
    assert log.log_end_offset == 23102
    assert (target / "00000000000000000000.index").exists()
    middle = list(log.read(11_000, max_offset=11_003))
    assert [r.offset for r in middle] == [11_000, 11_001, 11_002]
    log.close()


def test_kafkalite_magic0_values_match_golden(tmp_path: Path) -> None:
    base = FIXTURES / "asayers__kafkalite" / "tests" / "test-data"
    for name in ("hamlet-none-0", "hamlet-gzip-0", "hamlet-snappy-0", "numbers-0"):
        target = tmp_path / name
        shutil.copytree(base / "fs-data" / name, target)
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        log = Log.open(target)
        golden = (base / "golden" / name).read_text().splitlines()
        records = list(log.read())
        assert len(records) == len(golden)
        for record, line in zip(records, golden):
            offset_text, _, value_text = line.partition(": ")
            assert record.offset == int(offset_text)
            assert record.value == json.loads(value_text).encode()
        log.close()
