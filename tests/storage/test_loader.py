"""LogLoaderTest scenarios and the six crash points of a segment swap (LogCleanerTest's
testRecoveryAfterCrash), recreated by placing files on disk and reopening."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.loader import QUARANTINE_SWAP, LogLoader
from storage.log import Log
from storage.records import Record, build_batch
from storage.scheduler import FakeScheduler
from tests.storage.helpers import batch_of, offsets, rec, values


def open_log(path: Path, config: LogConfig, clock: FakeClock, *, recovery_point: int | None = 0,
             clean: bool = False, log_start_offset: int = 0) -> Log:
    return Log.open(path, config, recovery_point=recovery_point, had_clean_shutdown=clean,
                    clock=clock, scheduler=FakeScheduler(clock), log_start_offset=log_start_offset)


def filled_log(path: Path, clock: FakeClock, n: int = 100, **config: object) -> Log:
    cfg = LogConfig(**{"segment_bytes": len(batch_of(0)) * 10, "index_interval_bytes": 1,
                       "file_delete_delay_ms": 1000, **config})
    log = open_log(path, cfg, clock)
    for i in range(n):
        log.append([rec(i, ts=1000 + i)])
    return log


def test_log_recovers_to_correct_offset(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=10)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 10
    log.close()
    reopened = open_log(tmp_path / "t-0", log.config, clock, recovery_point=10)
    assert reopened.log_end_offset == 10
    assert reopened.recovery_point == 10


def test_index_rebuild_after_index_files_deleted(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=200)
    log.flush()
    log.close()
    for path in log.dir.iterdir():
        if path.suffix in (".index", ".timeindex"):
            path.unlink()
    reopened = open_log(log.dir, log.config, clock, recovery_point=200, clean=True)
    assert reopened.load_result.rebuilt_indexes == reopened.number_of_segments
    for i in range(200):
        assert offsets(reopened.read(i, max_offset=i + 1)) == [i]
        assert reopened.offset_for_timestamp(1000 + i) == (i, 1000 + i)


def test_corrupt_index_is_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    """The active segment's indexes are checked at open, the closed segments' at their first use
    (as Kafka's LazyIndex loads an index when first used); each corrupt pair is rebuilt from the
    .log before it answers, never served."""
    log = filled_log(tmp_path / "t-0", clock, n=200)
    log.flush()
    log.close()
    for path in log.dir.iterdir():
        if path.suffix == ".index":
            path.write_bytes(os.urandom(13))
        elif path.suffix == ".timeindex":
            path.write_bytes(os.urandom(7))
    reopened = open_log(log.dir, log.config, clock, recovery_point=200, clean=True)
    assert reopened.load_result.rebuilt_indexes == 1
    closed = reopened.segments()[:-1]
    assert len(closed) > 1
    assert not closed[0].indexes_rebuilt_at_first_use     # the open did not read them
    for i in range(200):
        assert offsets(reopened.read(i, max_offset=i + 1)) == [i]
        assert reopened.offset_for_timestamp(1000 + i) == (i, 1000 + i)
    assert all(segment.indexes_rebuilt_at_first_use for segment in closed)


def test_orphan_index_files_are_removed(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=5)
    log.close()
    bogus = [files.index_file(log.dir, 100), files.time_index_file(log.dir, 100)]
    for path in bogus:
        path.write_bytes(b"\0" * 24)
    reopened = open_log(log.dir, log.config, clock, recovery_point=5, clean=True)
    assert not any(p.exists() for p in bogus)
    assert reopened.log_end_offset == 5


def test_open_deletes_obsolete_temp_files(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=5)
    log.close()
    leftovers = [files.log_file(log.dir, 50, files.DELETED_SUFFIX),
                 files.index_file(log.dir, 50, files.DELETED_SUFFIX),
                 files.log_file(log.dir, 60, files.CLEANED_SUFFIX)]
    for path in leftovers:
        path.write_bytes(b"junk")
    open_log(log.dir, log.config, clock, recovery_point=5, clean=True)
    assert not any(p.exists() for p in leftovers)


def test_garbage_after_last_batch_is_truncated_after_unclean_shutdown(tmp_path: Path,
                                                                      clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=50)
    log.close()
    active = files.log_file(log.dir, log.segment_base_offsets()[-1])
    good_size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(os.urandom(777))
    index = files.index_file(log.dir, log.segment_base_offsets()[-1])
    with open(index, "ab") as f:
        f.write(os.urandom(16))
    reopened = open_log(log.dir, log.config, clock, recovery_point=0)
    assert reopened.load_result.truncated_bytes == 777
    assert active.stat().st_size == good_size
    assert values(reopened.read(0)) == list(range(50))


def test_clean_shutdown_skips_recovery(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=50)
    log.flush()
    log.close()
    reopened = open_log(log.dir, log.config, clock, recovery_point=50, clean=True)
    assert reopened.load_result.recovered_segments == 0
    assert reopened.recovery_point == 50


def test_recovery_starts_at_the_recovery_point_segment(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=100)
    log.flush()
    log.close()
    assert log.number_of_segments == 10
    reopened = open_log(log.dir, log.config, clock, recovery_point=85)
    assert reopened.load_result.recovered_segments == 2
    assert values(reopened.read(0)) == list(range(100))


def test_truncation_deletes_later_unflushed_segments(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=100)
    log.close()
    third = files.log_file(log.dir, 20)
    with open(third, "r+b") as f:
        f.seek(third.stat().st_size - 3)
        f.write(b"\xff\xff\xff")
    reopened = open_log(log.dir, log.config, clock, recovery_point=0)
    assert reopened.log_end_offset == 29
    assert values(reopened.read(0)) == list(range(29))
    assert reopened.segment_base_offsets() == [0, 10, 20]


def test_a_log_start_checkpoint_beyond_the_recovered_log_end_starts_the_log_there(
        tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's LogLoaderTest.testLogEndLessThanStartAfterReopen: delete-records raised the log
    start to 50, then a crash lost the tail after offset 10. Kafka deletes the segments and
    starts at 50, so records below 50, deleted, are never served again and no offset below 50 is
    handed out again. Here the segments go to quarantine instead of being deleted."""
    log = filled_log(tmp_path / "t-0", clock, n=10)
    log.close()
    before = files.log_file(log.dir, 0).read_bytes()
    reopened = open_log(log.dir, log.config, clock, recovery_point=10, clean=True,
                        log_start_offset=50)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (50, 50)
    assert values(reopened.read()) == []
    assert reopened.segment_base_offsets() == [50]
    [kept] = reopened.load_result.quarantined
    assert Path(kept.path).read_bytes() == before
    reopened.append([rec(50)])
    assert [r.offset for r in reopened.read()] == [50]
    reopened.close()
    again = open_log(log.dir, log.config, clock, recovery_point=51, clean=True,
                     log_start_offset=50)
    assert [r.offset for r in again.read()] == [50]
    again.close()


def test_segments_below_a_checkpointed_log_start_go_by_retention_not_at_load(
        tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=30, retention_ms=-1)
    log.close()
    reopened = open_log(log.dir, log.config, clock, recovery_point=30, clean=True,
                        log_start_offset=25)
    assert reopened.segment_base_offsets() == [0, 10, 20]
    assert reopened.log_start_offset == 25
    assert values(reopened.read()) == list(range(25, 30))
    assert reopened.delete_old_segments() == 2
    assert reopened.segment_base_offsets() == [20]


def test_empty_active_segment_survives_reopen(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=10)
    log.roll()
    log.flush()
    log.close()
    reopened = open_log(log.dir, log.config, clock, recovery_point=0)
    assert reopened.segment_base_offsets()[-1] == 10
    assert reopened.log_end_offset == 10
    reopened.append([rec(10)])
    assert values(reopened.read(0)) == list(range(11))


def test_open_without_recovery_point_recovers_everything(tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=30, retention_ms=-1)
    log.close()
    reopened = Log.open(log.dir, log.config)
    assert reopened.load_result.recovered_segments == reopened.number_of_segments
    assert values(reopened.read(0)) == list(range(30))


# ---- crash points of replace_segments -----------------------------------------------------------

def _prepare_clean(tmp_path: Path, clock: FakeClock) -> tuple[Path, LogConfig, list[int]]:
    """A compacted log of 5 segments x 10 records; two cleaned segments (groups [0,10) + [10,20)
    -> base 0, and [20,30) -> base 20) keep only even values, as a clean does: every odd record
    below 30 has the key of the record at 49, which supersedes them. Returns (dir, config,
    expected-after values)."""
    cfg = LogConfig(segment_bytes=len(batch_of(0)) * 10, index_interval_bytes=1,
                    file_delete_delay_ms=1000, cleanup_policy="compact")
    log = open_log(tmp_path / "t-0", cfg, clock)
    for i in range(50):
        odd_key = (i < 30 and i % 2) or i == 49
        log.append([Record(key=b"odd" if odd_key else b"%06d" % i, value=b"%06d" % i,
                           timestamp=1000 + i)])
    log.flush()
    for base, end in ((0, 20), (20, 30)):
        cleaned = log.create_cleaned_segment(base)
        for r in log.read(base, max_offset=end):
            if r.offset % 2 == 0:
                cleaned.append(r.offset, r.timestamp, r.offset,
                               [build_batch([r], base_offset=r.offset)])
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close()
    log.close()
    after = [i for i in range(30) if i % 2 == 0] + list(range(30, 50))
    return log.dir, log.config, after


def _rename(directory: Path, base: int, old: str, new: str) -> None:
    for make in (files.log_file, files.index_file, files.time_index_file):
        source = make(directory, base, old)
        if source.exists():
            os.replace(source, make(directory, base, new))


def _reopen_values(directory: Path, config: LogConfig, clock: FakeClock) -> list[int]:
    log = open_log(directory, config, clock, recovery_point=0)
    leftovers = [n for n in os.listdir(directory) if n.endswith(files.TEMP_SUFFIXES)]
    assert leftovers == []
    return values(log.read(0))


def test_crash_with_only_cleaned_files_keeps_original(tmp_path: Path, clock: FakeClock) -> None:
    directory, config, _ = _prepare_clean(tmp_path, clock)
    assert _reopen_values(directory, config, clock) == list(range(50))


def test_crash_with_some_swap_files_keeps_original(tmp_path: Path, clock: FakeClock) -> None:
    directory, config, _ = _prepare_clean(tmp_path, clock)
    _rename(directory, 20, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    assert _reopen_values(directory, config, clock) == list(range(50))


def test_crash_with_all_swap_files_and_originals_completes_swap(tmp_path: Path,
                                                                 clock: FakeClock) -> None:
    directory, config, after = _prepare_clean(tmp_path, clock)
    _rename(directory, 20, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    _rename(directory, 0, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    assert _reopen_values(directory, config, clock) == after


def test_crash_with_originals_already_deleted_completes_swap(tmp_path: Path,
                                                              clock: FakeClock) -> None:
    directory, config, after = _prepare_clean(tmp_path, clock)
    _rename(directory, 20, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    _rename(directory, 0, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    for base in (10, 20):
        _rename(directory, base, "", files.DELETED_SUFFIX)
    assert _reopen_values(directory, config, clock) == after


def test_crash_with_some_swaps_renamed_completes_swap(tmp_path: Path, clock: FakeClock) -> None:
    directory, config, after = _prepare_clean(tmp_path, clock)
    _rename(directory, 20, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    _rename(directory, 0, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    for base in (0, 10, 20):
        _rename(directory, base, "", files.DELETED_SUFFIX)
    _rename(directory, 0, files.SWAP_SUFFIX, "")
    assert _reopen_values(directory, config, clock) == after


def test_crash_with_only_async_delete_pending_keeps_cleaned(tmp_path: Path,
                                                            clock: FakeClock) -> None:
    directory, config, after = _prepare_clean(tmp_path, clock)
    for base in (0, 10, 20):
        _rename(directory, base, "", files.DELETED_SUFFIX)
    _rename(directory, 0, files.CLEANED_SUFFIX, "")
    _rename(directory, 20, files.CLEANED_SUFFIX, "")
    assert _reopen_values(directory, config, clock) == after


def test_loading_twice_after_a_crash_gives_the_same_log(tmp_path: Path, clock: FakeClock) -> None:
    directory, config, after = _prepare_clean(tmp_path, clock)
    _rename(directory, 20, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    _rename(directory, 0, files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    first = open_log(directory, config, clock, recovery_point=0)
    first.close()
    copy = tmp_path / "copy" / "t-0"
    shutil.copytree(directory, copy)
    assert _reopen_values(copy, config, clock) == after
    assert _reopen_values(directory, config, clock) == after


@pytest.mark.parametrize("clean", [True, False])
def test_reopen_preserves_offsets_and_timestamps(tmp_path: Path, clock: FakeClock,
                                                 clean: bool) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=60)
    log.flush()
    log.close()
    reopened = open_log(log.dir, log.config, clock, recovery_point=60, clean=clean)
    assert reopened.log_end_offset == 60
    assert [r.timestamp for r in reopened.read(0)] == [1000 + i for i in range(60)]
    reopened.append([rec(60)])
    assert reopened.log_end_offset == 61


# ---- stale swap files: a swap completes only when it replaces whole segments -------------------

def _stale_swap(directory: Path, base: int, first: int, count: int) -> bytes:
    """A valid ``<base>.log.swap`` holding the records ``first .. first + count - 1`` alone."""
    data = b"".join(build_batch([rec(i)], base_offset=i) for i in range(first, first + count))
    files.log_file(directory, base, files.SWAP_SUFFIX).write_bytes(data)
    return data


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_a_stale_swap_covering_part_of_a_segment_is_quarantined_and_the_segment_kept(
        tmp_path: Path, clock: FakeClock, policy: str) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=25, cleanup_policy=policy)
    log.close()
    assert log.segment_base_offsets() == [0, 10, 20]
    swap = _stale_swap(log.dir, 10, 10, 4)           # offsets 10..13 of the segment 10..19
    reopened = open_log(log.dir, log.config, clock, recovery_point=25, clean=True)
    assert values(reopened.read(0)) == list(range(25))
    [kept] = reopened.load_result.quarantined
    assert kept.original == files.offset_name(10) + files.LOG_SUFFIX + files.SWAP_SUFFIX
    assert Path(kept.path).read_bytes() == swap
    assert not files.log_file(log.dir, 10, files.SWAP_SUFFIX).exists()
    reopened.close()


def test_a_stale_swap_starting_inside_a_live_segment_is_quarantined(
        tmp_path: Path, clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=25, cleanup_policy="compact")
    log.close()
    _stale_swap(log.dir, 15, 15, 5)                   # inside the segment 10..19
    reopened = open_log(log.dir, log.config, clock, recovery_point=25, clean=True)
    assert values(reopened.read(0)) == list(range(25))
    assert reopened.segment_base_offsets() == [0, 10, 20]
    assert len(reopened.load_result.quarantined) == 1
    reopened.close()


def test_a_dry_run_reports_a_stale_swap_and_changes_nothing(tmp_path: Path,
                                                            clock: FakeClock) -> None:
    log = filled_log(tmp_path / "t-0", clock, n=25)
    log.close()
    _stale_swap(log.dir, 10, 10, 4)
    before = {p.name: p.read_bytes() for p in log.dir.iterdir()}
    result = LogLoader(log.dir, log.config, recovery_point=25, log_start_offset=0,
                       had_clean_shutdown=True, clock=clock, dry_run=True).load()
    assert {p.name: p.read_bytes() for p in log.dir.iterdir()} == before
    assert [a.kind for a in result.actions if a.kind == QUARANTINE_SWAP] == [QUARANTINE_SWAP]
    assert result.log_end_offset == 25
