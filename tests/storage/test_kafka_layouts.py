"""Layouts a real Kafka broker leaves on disk (tests/fixtures/kafka-built, written with Kafka's
rules by ``tests.storage.kafka_layouts``) load as Kafka loads them and read as Kafka's reader
reads them; and a batch running past the next segment's base that is no such layout is still cut."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage import files
from storage.config import LogConfig
from storage.loader import LogLoader, QUARANTINE_SEGMENT
from storage.log import Log
from storage.records import Record, build_batch
from tests.storage.kafka_layouts import (
    CLEANED_OVERLAP_ACTIVE, CLEANED_OVERLAP_KEPT, CLEANED_OVERLAP_PARTITION,
    write_cleaned_overlap)

BUILT = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-built"
COMPACT = LogConfig(cleanup_policy="compact")
KAFKA_READ_FROM_ZERO = [*CLEANED_OVERLAP_KEPT, *CLEANED_OVERLAP_ACTIVE]


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / CLEANED_OVERLAP_PARTITION
    shutil.copytree(BUILT / "cleaned-overlap" / CLEANED_OVERLAP_PARTITION, target)
    return target


def test_the_committed_layout_is_what_the_builder_writes(tmp_path: Path) -> None:
    built = write_cleaned_overlap(tmp_path)
    committed = BUILT / "cleaned-overlap" / CLEANED_OVERLAP_PARTITION
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in built.iterdir())
    for path in built.iterdir():
        assert (committed / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("clean_shutdown", [False, True], ids=["unclean", "clean"])
def test_a_cleaned_segment_overlapping_the_segments_it_replaced_reads_as_kafka_reads_it(
        tmp_path: Path, clean_shutdown: bool) -> None:
    directory = _copy(tmp_path)
    args = {"recovery_point": 490, "had_clean_shutdown": True} if clean_shutdown else {}
    log = Log.open(directory, COMPACT, **args)
    assert log.load_result.truncated_bytes == 0
    assert (log.log_start_offset, log.log_end_offset) == (0, 490)
    assert [r.offset for r in log.read(0)] == KAFKA_READ_FROM_ZERO
    assert log.segment_base_offsets() == [0, 474]
    # the segment the swap replaced is kept, whole, in quarantine
    [kept] = log.load_result.quarantined
    assert kept.original == files.offset_name(63) + files.LOG_SUFFIX
    assert Path(kept.path).read_bytes() == \
        (BUILT / "cleaned-overlap" / CLEANED_OVERLAP_PARTITION / kept.original).read_bytes()
    log.close()
    reopened = Log.open(directory, COMPACT, recovery_point=490, had_clean_shutdown=True)
    assert [r.offset for r in reopened.read(0)] == KAFKA_READ_FROM_ZERO
    assert reopened.load_result.quarantined == ()
    reopened.close()


def test_a_dry_run_of_the_overlap_layout_reports_the_superseded_segment_and_changes_nothing(
        tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    result = LogLoader(directory, COMPACT, recovery_point=0, log_start_offset=0,
                       had_clean_shutdown=False, dry_run=True).load()
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    assert result.log_end_offset == 490
    assert result.truncated_bytes == 0
    dropped = [a for a in result.actions if a.kind == QUARANTINE_SEGMENT]
    assert [Path(a.path).name for a in dropped] == [files.offset_name(63) + files.LOG_SUFFIX]


def _segment_file(directory: Path, base: int, batches: list[bytes]) -> None:
    files.log_file(directory, base).write_bytes(b"".join(batches))


def _batch(offset: int, count: int = 1) -> bytes:
    return build_batch([Record(key=b"k%d" % (offset + i), value=b"v") for i in range(count)],
                       base_offset=offset)


def test_a_batch_past_the_next_base_that_ends_beyond_the_segments_it_covers_is_cut(
        tmp_path: Path) -> None:
    # segment 0's last batch claims offsets 1000.. (a flipped base offset): it runs past segment
    # 10 and ends beyond segment 10's last offset, so it covers no segment: it is out of place
    directory = tmp_path / "t-0"
    directory.mkdir()
    _segment_file(directory, 0, [_batch(0, 5), _batch(5, 5), _batch(1000, 5)])
    _segment_file(directory, 10, [_batch(10, 5), _batch(15, 5)])
    log = Log.open(directory)
    assert [r.offset for r in log.read(0)] == list(range(10))
    assert log.load_result.truncated_bytes == len(_batch(1000, 5))
    assert log.log_end_offset == 10          # what followed the cut went to quarantine
    log.close()


def test_recovery_keeps_a_batch_after_the_gap_a_truncation_inside_a_batch_leaves(
        tmp_path: Path) -> None:
    # Kafka's truncateTo(12) inside the batch 10..14 removes that batch and sets the log end to
    # 12; the next append starts at 12: offsets 10 and 11 are a gap, in a log not compacted
    directory = tmp_path / "t-0"
    directory.mkdir()
    _segment_file(directory, 0, [_batch(0, 10), _batch(12, 3)])
    log = Log.open(directory)            # unclean: every batch re-validated
    assert log.load_result.truncated_bytes == 0
    assert [r.offset for r in log.read(0)] == [*range(10), 12, 13, 14]
    assert log.log_end_offset == 15
    log.close()
