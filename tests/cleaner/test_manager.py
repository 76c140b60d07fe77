"""CleanerManager: Kafka's LogCleanerManagerTest scenarios plus retries, explain and abort waits,
on real cleaner-offset-checkpoint files and a fake clock."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cleaner.cleanable import cleanable_offsets, max_compaction_delay
from cleaner.config import CleanerConfig
from cleaner.explain import CleaningStatus
from cleaner.manager import (
    ABORTED,
    IN_PROGRESS,
    CleanerManager,
    CleanerStateError,
    CleaningAbortTimeoutError,
    paused,
)
from storage.checkpoint import OffsetCheckpointFile
from storage.clock import FakeClock
from storage.errors import LogCleaningAbortedError
from storage.files import CLEANER_OFFSET_CHECKPOINT, TopicPartition
from tests.cleaner.fakes import (
    BATCH_BYTES,
    FakeLog,
    batches_log,
    compacted_config,
    make_log,
)

TP0, TP1, TP2 = (TopicPartition("wishing-well", p) for p in range(3))
HOUR = 60 * 60 * 1000


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "logs", tmp_path / "logs2"
    first.mkdir()
    second.mkdir()
    return first, second


@pytest.fixture
def log_dir(dirs: tuple[Path, Path]) -> Path:
    return dirs[0]


@pytest.fixture
def manager(dirs: tuple[Path, Path], clock: FakeClock) -> CleanerManager:
    return CleanerManager(dirs, CleanerConfig(uncleanable_retries=0), clock=clock)


def filthy_logs(log_dir: Path, partitions: list[TopicPartition], start: int = 20,
                increment: int = 5) -> dict[TopicPartition, FakeLog]:
    """Kafka's setupIncreasinglyFilthyLogs: 20, 25, 30... one-record batches, 5 per segment."""
    return {tp: batches_log(log_dir, tp, start + i * increment) for i, tp in enumerate(partitions)}


def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def checkpoint_file(log_dir: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read()


# ---- selection ---------------------------------------------------------------------------------

def test_grab_filthiest_returns_the_log_with_the_highest_dirty_ratio(
        manager: CleanerManager, log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0, TP1, TP2])  # cleanable ranges [20,20], [20,25], [20,30]
    for tp in logs:
        manager.update_checkpoints(log_dir, update=(tp, 20))
    filthiest = manager.grab_filthiest_compacted_log(logs)
    assert filthiest is not None
    assert filthiest.topic_partition == TP2 and filthiest.log is logs[TP2]
    assert filthiest.first_dirty_offset == 20
    assert filthiest.first_uncleanable_offset == 30
    # segments [16-20] (holding offset 20), [21-25], [26-29] are cleanable; [0..20] are clean
    assert filthiest.cleanable_bytes == 14 * BATCH_BYTES
    assert filthiest.clean_bytes == 21 * BATCH_BYTES
    assert filthiest.cleanable_ratio == pytest.approx(0.4)
    assert manager.cleaning_state(TP2) == IN_PROGRESS
    assert manager.max_dirty_percent == 40


def test_grab_filthiest_skips_uncleanable_partitions(manager: CleanerManager,
                                                    log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0, TP1, TP2])
    for tp in logs:
        manager.update_checkpoints(log_dir, update=(tp, 20))
    manager.mark_partition_uncleanable(log_dir, TP2)
    assert manager.grab_filthiest_compacted_log(logs).topic_partition == TP1
    manager.set_cleaning_state(TP1, None)
    manager.mark_partition_uncleanable(log_dir, TP1)
    assert manager.grab_filthiest_compacted_log(logs) is None  # TP0 has nothing to clean


def test_grab_filthiest_skips_partitions_in_progress(manager: CleanerManager,
                                                    log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0, TP1, TP2])
    for tp in logs:
        manager.update_checkpoints(log_dir, update=(tp, 20))
    manager.set_cleaning_state(TP2, IN_PROGRESS)
    assert manager.grab_filthiest_compacted_log(logs).topic_partition == TP1
    manager.set_cleaning_state(TP1, None)
    manager.mark_partition_uncleanable(log_dir, TP1)
    assert manager.grab_filthiest_compacted_log(logs) is None


def test_a_log_that_fails_evaluation_does_not_stop_selection_of_the_others(
        dirs: tuple[Path, Path], log_dir: Path, clock: FakeClock) -> None:
    manager = CleanerManager(dirs, CleanerConfig(uncleanable_retries=1,
                                                 uncleanable_retry_backoff_ms=1000), clock=clock)
    logs = filthy_logs(log_dir, [TP0, TP1, TP2])
    for tp in logs:
        manager.update_checkpoints(log_dir, update=(tp, 20))
    logs[TP2].fail_with = RuntimeError("segment index unreadable")
    assert manager.grab_filthiest_compacted_log(logs).topic_partition == TP1
    assert manager.failure_count(TP2) == 1 and not manager.is_uncleanable(TP2)
    manager.done_cleaning(TP1, log_dir, 25)
    clock.advance(999)  # still backing off: not even evaluated
    assert manager.grab_filthiest_compacted_log(logs) is None
    assert manager.failure_count(TP2) == 1
    clock.advance(1)
    assert manager.grab_filthiest_compacted_log(logs) is None
    assert manager.is_uncleanable(TP2)
    assert "segment index unreadable" in manager.uncleanable_partitions(log_dir)[TP2].error
    logs[TP2].fail_with = None
    manager.reset_uncleanable(TP2)
    assert manager.grab_filthiest_compacted_log(logs).topic_partition == TP2


def test_dirty_offset_is_reset_to_log_start_when_above_the_log_end(
        manager: CleanerManager, log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0])
    manager.update_checkpoints(log_dir, update=(TP0, 200))
    assert manager.grab_filthiest_compacted_log(logs).first_dirty_offset == 0


def test_dirty_offset_is_reset_to_log_start_when_below_it(manager: CleanerManager,
                                                         log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0])
    logs[TP0].log_start_offset = 10
    manager.update_checkpoints(log_dir, update=(TP0, 0))
    assert manager.grab_filthiest_compacted_log(logs).first_dirty_offset == 10


def test_log_start_above_the_active_segment_base_is_not_cleaned_but_checkpointed(
        manager: CleanerManager, log_dir: Path) -> None:
    log = make_log(log_dir, TP0)
    log.append(9)
    log.log_start_offset = 2
    manager.update_checkpoints(log_dir, update=(TP0, 0))
    assert manager.grab_filthiest_compacted_log({TP0: log}) is None
    assert checkpoint_file(log_dir)[TP0] == 2


def test_dirty_offset_above_the_active_segment_base_is_not_cleaned(
        manager: CleanerManager, log_dir: Path) -> None:
    log = make_log(log_dir, TP0)
    log.append(9)
    manager.update_checkpoints(log_dir, update=(TP0, 3))
    assert manager.grab_filthiest_compacted_log({TP0: log}) is None


def test_checkpoint_is_rewritten_for_an_invalid_offset_even_without_cleaning(
        manager: CleanerManager, log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0])
    logs[TP0].log_start_offset = 20
    manager.update_checkpoints(log_dir, update=(TP0, 15))
    assert manager.grab_filthiest_compacted_log(logs) is None
    assert checkpoint_file(log_dir)[TP0] == 20


def test_checkpoint_is_rewritten_for_an_invalid_offset_of_a_log_not_chosen(
        manager: CleanerManager, log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0, TP1])
    logs[TP0].log_start_offset = 15
    manager.update_checkpoints(log_dir, update=(TP0, 10))
    manager.update_checkpoints(log_dir, update=(TP1, 5))
    assert manager.grab_filthiest_compacted_log(logs).topic_partition == TP1
    assert checkpoint_file(log_dir)[TP0] == 15


def test_empty_and_non_compacted_logs_are_never_chosen(manager: CleanerManager,
                                                      log_dir: Path) -> None:
    empty = make_log(log_dir, TP0)
    empty.roll()
    deleting = batches_log(log_dir, TP1, 30, config=compacted_config(policy="delete"))
    assert manager.grab_filthiest_compacted_log({TP0: empty, TP1: deleting}) is None


# ---- cleanable offsets -------------------------------------------------------------------------

def ten_record_segments(log_dir: Path, segments: int, config=None, timestamp: int = 0) -> FakeLog:
    log = make_log(log_dir, TP0, config)
    for _ in range(segments - 1):
        log.append(10, timestamp)
        log.roll()
    log.append(10, timestamp)
    return log


def test_cleanable_offsets_stop_at_the_last_stable_offset(log_dir: Path, clock: FakeClock) -> None:
    log = ten_record_segments(log_dir, 8)
    log.stable_offset = 50
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert offsets.first_dirty_offset == 0
    assert offsets.first_uncleanable_dirty_offset == 50


def test_cleanable_offsets_stop_at_the_active_segment(log_dir: Path, clock: FakeClock) -> None:
    log = ten_record_segments(log_dir, 8)
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert offsets.first_uncleanable_dirty_offset == 70


def test_cleanable_offsets_stop_at_the_first_segment_within_the_compaction_lag(
        log_dir: Path, clock: FakeClock) -> None:
    log = make_log(log_dir, TP0, compacted_config(min_compaction_lag_ms=HOUR))
    t0 = clock.milliseconds()
    for _ in range(3):
        log.append(10, t0)
        log.roll()
    log.append(10, t0)
    active_at_t0 = log.segs[-1].base_offset
    clock.advance(HOUR + 1)
    t1 = clock.milliseconds()
    log.append(10, t1)  # the segment active at t0 now holds a record from t1
    for _ in range(4):
        log.roll()
        log.append(10, t1)
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert offsets.first_dirty_offset == 0
    assert offsets.first_uncleanable_dirty_offset == active_at_t0


def test_cleanable_offsets_reach_the_active_segment_once_the_lag_has_passed(
        log_dir: Path, clock: FakeClock) -> None:
    log = ten_record_segments(log_dir, 8, compacted_config(min_compaction_lag_ms=HOUR),
                              clock.milliseconds())
    clock.advance(HOUR + 1)
    assert cleanable_offsets(log, 0, clock.milliseconds()).first_uncleanable_dirty_offset == 70


def test_undecided_transactional_data_is_not_cleanable(log_dir: Path, clock: FakeClock) -> None:
    log = make_log(log_dir, TP0, compacted_config(min_compaction_lag_ms=HOUR))
    log.append(3, clock.milliseconds())
    log.roll()
    log.stable_offset = 0  # an open transaction starts at offset 0
    clock.advance(HOUR + 1)
    assert cleanable_offsets(log, 0, clock.milliseconds()).first_uncleanable_dirty_offset == 0
    log.append(1, clock.milliseconds())  # the abort marker
    log.roll()
    log.stable_offset = 4
    assert cleanable_offsets(log, 0, clock.milliseconds()).first_uncleanable_dirty_offset == 3
    clock.advance(HOUR + 1)
    assert cleanable_offsets(log, 0, clock.milliseconds()).first_uncleanable_dirty_offset == 4


def test_cleanable_offsets_force_a_checkpoint_update_only_when_reset(log_dir: Path,
                                                                     clock: FakeClock) -> None:
    log = batches_log(log_dir, TP0, 20)
    log.log_start_offset = 10
    assert not cleanable_offsets(log, 15, clock.milliseconds()).force_update_checkpoint
    log.log_start_offset = 20
    assert cleanable_offsets(log, 15, clock.milliseconds()).force_update_checkpoint
    assert cleanable_offsets(log, 25, clock.milliseconds()).force_update_checkpoint
    assert not cleanable_offsets(log, None, clock.milliseconds()).force_update_checkpoint


def test_max_compaction_delay_counts_only_positive_first_batch_timestamps(
        log_dir: Path, clock: FakeClock) -> None:
    log = ten_record_segments(log_dir, 4, compacted_config(max_compaction_lag_ms=HOUR))
    now = clock.milliseconds()
    assert max_compaction_delay(log, 0, now) == 0  # timestamps 0 are ignored
    log.segs[1].first_timestamp = now - 3 * HOUR
    log.segs[3].first_timestamp = now - 10 * HOUR  # the active segment does not count
    assert max_compaction_delay(log, 0, now) == 2 * HOUR
    assert max_compaction_delay(log, 20, now) == 0


def test_an_overdue_log_is_chosen_whatever_its_dirty_ratio(
        manager: CleanerManager, log_dir: Path, clock: FakeClock) -> None:
    config = compacted_config(ratio=1.0, max_compaction_lag_ms=HOUR)
    log = batches_log(log_dir, TP0, 20, config=config, timestamp=clock.milliseconds())
    assert manager.grab_filthiest_compacted_log({TP0: log}) is None
    clock.advance(HOUR + 5000)
    chosen = manager.grab_filthiest_compacted_log({TP0: log})
    assert chosen is not None and chosen.needs_compaction_now
    assert chosen.compaction_delay_ms == 5000
    assert manager.last_pre_clean_stats.delayed_partitions == 1
    assert manager.max_compaction_delay_secs == 5


# ---- state machine -----------------------------------------------------------------------------

def test_done_cleaning_transitions(manager: CleanerManager, log_dir: Path) -> None:
    with pytest.raises(CleanerStateError):
        manager.done_cleaning(TP0, log_dir, 1)
    manager.set_cleaning_state(TP0, paused(1))
    with pytest.raises(CleanerStateError):
        manager.done_cleaning(TP0, log_dir, 1)
    manager.set_cleaning_state(TP0, IN_PROGRESS)
    manager.done_cleaning(TP0, log_dir, 1)
    assert manager.cleaning_state(TP0) is None
    assert manager.all_cleaner_checkpoints()[TP0] == 1
    manager.set_cleaning_state(TP0, ABORTED)
    manager.done_cleaning(TP0, log_dir, 5)
    assert manager.cleaning_state(TP0) == paused(1)
    assert manager.all_cleaner_checkpoints()[TP0] == 1


def test_done_deleting_transitions(manager: CleanerManager) -> None:
    with pytest.raises(CleanerStateError):
        manager.done_deleting([TP0])
    manager.set_cleaning_state(TP0, paused(1))
    with pytest.raises(CleanerStateError):
        manager.done_deleting([TP0])
    manager.set_cleaning_state(TP0, IN_PROGRESS)
    manager.done_deleting([TP0])
    assert manager.cleaning_state(TP0) is None
    manager.set_cleaning_state(TP0, ABORTED)
    manager.done_deleting(TP0)
    assert manager.cleaning_state(TP0) == paused(1)
    assert manager.all_cleaner_checkpoints() == {}


def test_pauses_nest_across_retention_and_truncation(manager: CleanerManager,
                                                     log_dir: Path) -> None:
    log = batches_log(log_dir, TP0, 5, config=compacted_config(policy="delete"))
    logs = {TP0: log}
    retained = manager.pause_cleaning_for_non_compacted_partitions(logs)
    manager.abort_and_pause_cleaning(TP0)  # truncation after an unclean leader election
    assert manager.cleaning_state(TP0) == paused(2)
    manager.resume_cleaning([TP0])
    manager.resume_cleaning([l.topic_partition for l in retained])
    assert manager.cleaning_state(TP0) is None


def test_topic_deletion_during_retention_leaves_no_state(manager: CleanerManager,
                                                        log_dir: Path) -> None:
    log = batches_log(log_dir, TP0, 5, config=compacted_config(policy="delete"))
    retained = manager.pause_cleaning_for_non_compacted_partitions({TP0: log})
    manager.abort_cleaning(TP0)
    manager.resume_cleaning([l.topic_partition for l in retained])
    assert manager.cleaning_state(TP0) is None


def test_a_policy_switch_while_paused_waits_for_the_pause(manager: CleanerManager,
                                                        log_dir: Path) -> None:
    log = make_log(log_dir, TP0, compacted_config(policy="delete"))
    log.append(1)
    log.roll()
    log.append(1)
    logs = {TP0: log}
    retained = manager.pause_cleaning_for_non_compacted_partitions(logs)
    assert len(retained) == 1
    log.config = compacted_config(ratio=0.0)
    assert manager.grab_filthiest_compacted_log(logs) is None
    manager.resume_cleaning([TP0])
    chosen = manager.grab_filthiest_compacted_log(logs)
    assert chosen is not None
    log.config = compacted_config(policy="delete")
    assert manager.pause_cleaning_for_non_compacted_partitions(logs) == []
    manager.done_deleting([chosen.topic_partition])
    assert len(manager.pause_cleaning_for_non_compacted_partitions(logs)) == 1


def test_illegal_transitions_are_refused(manager: CleanerManager) -> None:
    with pytest.raises(CleanerStateError, match="not paused"):
        manager.resume_cleaning(TP0)
    manager.set_cleaning_state(TP0, IN_PROGRESS)
    with pytest.raises(CleanerStateError):
        manager.resume_cleaning(TP0)
    manager.set_cleaning_state(TP0, ABORTED)
    with pytest.raises(CleanerStateError):
        manager.abort_and_pause_cleaning(TP0, timeout=0)
    manager.set_cleaning_state(TP1, paused(1))
    with pytest.raises(CleanerStateError):
        manager.resume_cleaning([TP1, TP2])
    assert manager.cleaning_state(TP1) == paused(1)  # nothing changed


def test_abort_and_pause_waits_for_the_running_clean(manager: CleanerManager,
                                                    log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0])
    assert manager.grab_filthiest_compacted_log(logs) is not None
    done = threading.Event()

    def abort() -> None:
        manager.abort_and_pause_cleaning(TP0)
        done.set()

    aborter = threading.Thread(target=abort)
    aborter.start()
    eventually(lambda: manager.cleaning_state(TP0) == ABORTED)
    assert not done.is_set()
    with pytest.raises(LogCleaningAbortedError):
        manager.check_cleaning_aborted(TP0)
    manager.done_cleaning(TP0, log_dir, 10)  # the cleaner gives up
    assert done.wait(5)
    aborter.join(5)
    assert manager.cleaning_state(TP0) == paused(1)
    assert TP0 not in manager.all_cleaner_checkpoints()


def test_abort_and_pause_timeout_leaves_the_pause_to_the_caller(manager: CleanerManager) -> None:
    manager.set_cleaning_state(TP0, IN_PROGRESS)
    with pytest.raises(CleaningAbortTimeoutError):
        manager.abort_and_pause_cleaning(TP0, timeout=0.01)
    assert manager.cleaning_state(TP0) == ABORTED
    manager.done_deleting(TP0)
    manager.wait_until_paused(TP0, timeout=0)
    manager.resume_cleaning(TP0)
    assert manager.cleaning_state(TP0) is None


def test_check_cleaning_aborted_passes_while_in_progress(manager: CleanerManager) -> None:
    manager.set_cleaning_state(TP0, IN_PROGRESS)
    manager.check_cleaning_aborted(TP0)


# ---- checkpoints -------------------------------------------------------------------------------

def test_update_checkpoints_adds_and_removes_a_partition(manager: CleanerManager,
                                                        log_dir: Path) -> None:
    assert manager.all_cleaner_checkpoints().get(TP0, 0) != 4
    manager.update_checkpoints(log_dir, update=(TP0, 4))
    assert manager.all_cleaner_checkpoints()[TP0] == 4
    assert checkpoint_file(log_dir) == {TP0: 4}
    manager.update_checkpoints(log_dir, partition_to_remove=TP0)
    assert TP0 not in manager.all_cleaner_checkpoints()


def test_update_checkpoints_can_keep_only_live_partitions(manager: CleanerManager,
                                                         log_dir: Path) -> None:
    manager.update_checkpoints(log_dir, update=(TP0, 4))
    manager.update_checkpoints(log_dir, update=(TP1, 5), live_partitions={TP1})
    assert checkpoint_file(log_dir) == {TP1: 5}


def test_handle_log_dir_failure_drops_that_dirs_checkpoint(
        manager: CleanerManager, dirs: tuple[Path, Path]) -> None:
    first, second = dirs
    manager.update_checkpoints(first, update=(TP0, 4))
    manager.update_checkpoints(second, update=(TP1, 4))
    manager.mark_partition_uncleanable(first, TP2)
    manager.handle_log_dir_failure(first)
    assert manager.all_cleaner_checkpoints() == {TP1: 4}
    assert manager.uncleanable_partitions(first) == {}
    manager.update_checkpoints(first, update=(TP0, 9))  # ignored, logged
    assert checkpoint_file(first) == {TP0: 4}


def test_a_clean_in_an_offline_dir_is_stopped_and_finishes_quietly(
        manager: CleanerManager, log_dir: Path) -> None:
    logs = filthy_logs(log_dir, [TP0])
    manager.grab_filthiest_compacted_log(logs)
    manager.handle_log_dir_failure(log_dir)
    with pytest.raises(LogCleaningAbortedError, match="offline"):
        manager.check_cleaning_aborted(TP0)
    manager.done_cleaning(TP0, log_dir, 20)
    assert manager.cleaning_state(TP0) is None
    assert manager.grab_filthiest_compacted_log(logs) is None


def test_maybe_truncate_checkpoint_only_lowers_it(manager: CleanerManager, log_dir: Path) -> None:
    manager.update_checkpoints(log_dir, update=(TP0, 50))
    manager.maybe_truncate_checkpoint(log_dir, TP0, 1000)
    assert manager.all_cleaner_checkpoints()[TP0] == 50
    manager.maybe_truncate_checkpoint(log_dir, TP0, 1)
    assert manager.all_cleaner_checkpoints()[TP0] == 1
    manager.maybe_truncate_checkpoint(log_dir, TP1, 0)
    assert TP1 not in manager.all_cleaner_checkpoints()


def test_alter_checkpoint_dir_moves_the_entry(manager: CleanerManager,
                                              dirs: tuple[Path, Path]) -> None:
    first, second = dirs
    manager.update_checkpoints(first, update=(TP0, 50))
    manager.alter_checkpoint_dir(TP0, first, second)
    assert checkpoint_file(first) == {}
    assert checkpoint_file(second) == {TP0: 50}
    assert manager.all_cleaner_checkpoints()[TP0] == 50


def test_a_corrupt_checkpoint_is_skipped_and_logged(manager: CleanerManager,
                                                    dirs: tuple[Path, Path]) -> None:
    first, second = dirs
    manager.update_checkpoints(second, update=(TP1, 7))
    (first / CLEANER_OFFSET_CHECKPOINT).write_text("1\n0\n")
    assert manager.all_cleaner_checkpoints() == {TP1: 7}


def test_a_checkpoint_write_failure_is_reported_to_the_dir_failure_handler(
        dirs: tuple[Path, Path], clock: FakeClock) -> None:
    failures: list[Path] = []
    manager = CleanerManager(dirs, clock=clock, on_dir_failure=lambda d, e: failures.append(d))
    (dirs[0] / CLEANER_OFFSET_CHECKPOINT).mkdir()
    manager.update_checkpoints(dirs[0], update=(TP0, 1))
    assert failures == [dirs[0]]


def test_an_unknown_log_dir_is_refused(manager: CleanerManager, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        manager.update_checkpoints(tmp_path / "elsewhere", update=(TP0, 1))


# ---- deletable logs ----------------------------------------------------------------------------

@pytest.mark.parametrize("policy, expected", [("delete", 0), ("compact", 1),
                                              ("compact,delete", 1)])
def test_deletable_logs_are_the_compacted_ones(manager: CleanerManager, log_dir: Path,
                                               policy: str, expected: int) -> None:
    log = batches_log(log_dir, TP0, 5, config=compacted_config(policy=policy))
    deletable = manager.deletable_logs({TP0: log})
    assert len(deletable) == expected
    if expected:
        assert manager.cleaning_state(TP0) == IN_PROGRESS
        manager.done_deleting([l.topic_partition for l in deletable])
        assert manager.cleaning_state(TP0) is None


def test_deletable_logs_skip_uncleanable_partitions(manager: CleanerManager,
                                                   log_dir: Path) -> None:
    log = batches_log(log_dir, TP0, 5)
    manager.mark_partition_uncleanable(log_dir, TP0)
    assert manager.deletable_logs({TP0: log}) == []


# ---- failures, retries, uncleanable partitions -------------------------------------------------

def test_failures_are_retried_with_backoff_then_marked_uncleanable(
        dirs: tuple[Path, Path], log_dir: Path, clock: FakeClock) -> None:
    manager = CleanerManager(dirs, CleanerConfig(uncleanable_retries=2,
                                                 uncleanable_retry_backoff_ms=60_000), clock=clock)
    logs = filthy_logs(log_dir, [TP0])
    for attempt in range(3):
        chosen = manager.grab_filthiest_compacted_log(logs)
        assert chosen is not None, attempt
        manager.done_cleaning(TP0, log_dir, chosen.first_dirty_offset)  # no progress
        marked = manager.record_cleaning_failure(TP0, log_dir, OSError("disk hiccup"))
        assert marked == (attempt == 2)
        assert manager.grab_filthiest_compacted_log(logs) is None
        clock.advance(60_000)
    assert manager.uncleanable_partitions_count(log_dir) == 1
    assert manager.uncleanable_bytes(log_dir, logs) == 20 * BATCH_BYTES
    assert manager.grab_filthiest_compacted_log(logs) is None
    assert manager.reset_uncleanable(TP0) == [TP0]
    assert manager.failure_count(TP0) == 0
    assert manager.grab_filthiest_compacted_log(logs) is not None


def test_a_clean_that_makes_progress_resets_the_failure_count(
        dirs: tuple[Path, Path], log_dir: Path, clock: FakeClock) -> None:
    manager = CleanerManager(dirs, CleanerConfig(uncleanable_retry_backoff_ms=0), clock=clock)
    logs = filthy_logs(log_dir, [TP0])
    manager.record_cleaning_failure(TP0, log_dir, "boom")
    chosen = manager.grab_filthiest_compacted_log(logs)
    manager.done_cleaning(TP0, log_dir, 20)
    assert chosen.first_dirty_offset == 0
    assert manager.failure_count(TP0) == 0


def test_zero_retries_is_kafkas_behaviour(manager: CleanerManager, log_dir: Path) -> None:
    assert manager.record_cleaning_failure(TP0, log_dir, ValueError("bad"))
    assert manager.uncleanable_partitions(log_dir)[TP0].error == "ValueError: bad"


def test_reset_uncleanable_without_a_partition_re_enables_all(manager: CleanerManager,
                                                             dirs: tuple[Path, Path]) -> None:
    manager.mark_partition_uncleanable(dirs[0], TP0)
    manager.mark_partition_uncleanable(dirs[1], TP1)
    assert sorted(manager.reset_uncleanable(), key=str) == [TP0, TP1]
    assert not manager.is_uncleanable(TP0) and not manager.is_uncleanable(TP1)


def test_maintain_uncleanable_partitions_forgets_deleted_partitions(
        manager: CleanerManager, log_dir: Path) -> None:
    manager.mark_partition_uncleanable(log_dir, TP0)
    manager.mark_partition_uncleanable(log_dir, TP1)
    manager.maintain_uncleanable_partitions({TP1})
    assert set(manager.uncleanable_partitions(log_dir)) == {TP1}


# ---- explain and metrics -----------------------------------------------------------------------

def test_explain_gives_the_deciding_reason(dirs: tuple[Path, Path], log_dir: Path,
                                           clock: FakeClock) -> None:
    manager = CleanerManager(dirs, CleanerConfig(uncleanable_retries=1), clock=clock)
    logs = filthy_logs(log_dir, [TP0, TP1, TP2])
    for tp in logs:
        manager.update_checkpoints(log_dir, update=(tp, 20))

    why = manager.explain(logs[TP2], logs=logs)
    assert why.status is CleaningStatus.ELIGIBLE and why.would_be_chosen
    assert "0.400" in why.reason and "0.05" in why.reason
    assert manager.explain(logs[TP1], logs=logs).would_be_chosen is False
    why = manager.explain(logs[TP0])
    assert why.status is CleaningStatus.ACTIVE_SEGMENT_ONLY
    assert "active segment base 20" in why.reason

    manager.update_checkpoints(log_dir, update=(TP1, 24))
    logs[TP1].config = compacted_config(ratio=0.5)
    why = manager.explain(logs[TP1])
    assert why.status is CleaningStatus.BELOW_RATIO
    assert "0.138 (400 of 2900 bytes)" in why.reason and "0.5" in why.reason

    manager.grab_filthiest_compacted_log(logs)
    assert manager.explain(logs[TP2]).status is CleaningStatus.IN_PROGRESS
    manager.abort_and_pause_cleaning(TP1)
    manager.abort_and_pause_cleaning(TP1)
    why = manager.explain(logs[TP1])
    assert why.status is CleaningStatus.PAUSED and "2 pause" in why.reason
    manager.set_cleaning_state(TP1, ABORTED)
    assert manager.explain(logs[TP1]).status is CleaningStatus.ABORTED
    manager.set_cleaning_state(TP1, None)

    manager.record_cleaning_failure(TP1, log_dir, RuntimeError("crc mismatch"))
    why = manager.explain(logs[TP1])
    assert why.status is CleaningStatus.RETRY_BACKOFF
    assert why.held_until_ms == clock.milliseconds() + 60_000 and "crc mismatch" in why.reason
    manager.record_cleaning_failure(TP1, log_dir, RuntimeError("crc mismatch"))
    why = manager.explain(logs[TP1])
    assert why.status is CleaningStatus.UNCLEANABLE and "crc mismatch" in why.error

    deleting = make_log(log_dir, TopicPartition("d", 0), compacted_config(policy="delete"))
    assert manager.explain(deleting).status is CleaningStatus.NOT_COMPACTED
    empty = make_log(log_dir, TopicPartition("e", 0))
    empty.roll()
    assert manager.explain(empty).status is CleaningStatus.EMPTY


def test_explain_names_the_compaction_lag_and_when_it_ends(manager: CleanerManager,
                                                          log_dir: Path,
                                                          clock: FakeClock) -> None:
    log = batches_log(log_dir, TP0, 20, config=compacted_config(min_compaction_lag_ms=HOUR),
                      timestamp=clock.milliseconds())
    why = manager.explain(log)
    assert why.status is CleaningStatus.HELD_BY_COMPACTION_LAG
    assert why.held_until_ms == clock.milliseconds() + HOUR
    assert "min.compaction.lag.ms=3600000" in why.reason
    clock.advance(HOUR + 1)
    assert manager.explain(log).status is CleaningStatus.ELIGIBLE


def test_explain_names_the_last_stable_offset(manager: CleanerManager, log_dir: Path) -> None:
    log = batches_log(log_dir, TP0, 20)
    log.stable_offset = 0
    assert manager.explain(log).status is CleaningStatus.HELD_BY_LAST_STABLE_OFFSET


def test_explain_reports_offline_dirs_and_a_disabled_cleaner(dirs: tuple[Path, Path],
                                                            log_dir: Path,
                                                            clock: FakeClock) -> None:
    log = batches_log(log_dir, TP0, 20)
    disabled = CleanerManager(dirs, CleanerConfig(enable_cleaner=False), clock=clock)
    assert disabled.explain(log).status is CleaningStatus.CLEANER_DISABLED
    manager = CleanerManager(dirs, clock=clock)
    manager.handle_log_dir_failure(log_dir)
    assert manager.explain(log).status is CleaningStatus.OFFLINE


def test_explain_answers_for_a_log_that_cannot_be_evaluated(manager: CleanerManager,
                                                           log_dir: Path) -> None:
    log = batches_log(log_dir, TP0, 20)
    log.fail_with = RuntimeError("gone")
    why = manager.explain(log)
    assert why.status is CleaningStatus.UNKNOWN and "gone" in why.reason


def test_metrics_are_plain_values(manager: CleanerManager, log_dir: Path,
                                  clock: FakeClock) -> None:
    logs = filthy_logs(log_dir, [TP0, TP1])
    manager.grab_filthiest_compacted_log(logs)
    clock.advance(1234)
    manager.mark_partition_uncleanable(log_dir, TP1)
    stats = manager.statistics()
    assert stats.time_since_last_run_ms == 1234 == manager.time_since_last_run_ms
    assert stats.max_dirty_percent == 100
    assert stats.in_progress == 1
    assert stats.uncleanable_partitions_count[str(log_dir)] == 1


def test_the_cleaner_package_imports_neither_ray_nor_pyspark() -> None:
    code = ("import sys, cleaner, cleaner.manager, cleaner.offset_map, cleaner.explain\n"
            "bad = [m for m in ('ray', 'pyspark') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                   check=True)
