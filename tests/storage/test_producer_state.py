"""Idempotent appends: per-producer sequence state drops retried batches, refuses gaps and fenced
epochs, survives a clean close (snapshot) and a kill (snapshot + replay), and forgets producers idle
for ``producer.id.expiration.ms``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptRecordError
from storage.log import Log
from storage.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    decode_snapshot,
)
from storage.records import Record, build_batch
from tests.conftest import FIXTURES


NOW = 1_700_000_000_000
DAY = 24 * 60 * 60 * 1000


def batch(pid: int, epoch: int, seq: int, n: int = 3, timestamp: int = NOW) -> bytes:
    return build_batch([Record(key=b"k%d" % (seq + i), value=b"v", timestamp=timestamp)
                        for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(path: Path, **kwargs: object) -> Log:
    kwargs.setdefault("clock", FakeClock(NOW))
    return Log.open(path, LogConfig(segment_bytes=4096), **kwargs)


def test_retried_batch_is_dropped_and_original_offsets_returned(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    first = log.append_batch(batch(7, 0, 0))
    log.append_batch(batch(7, 0, 3))
    again = log.append_batch(batch(7, 0, 0))
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 6


def test_sequence_gap_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 0, 5))
    assert log.log_end_offset == 3


def test_fenced_epoch_is_refused_and_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 1, 0))
    with pytest.raises(InvalidProducerEpochError):
        log.append_batch(batch(7, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 2, 3))
    assert not log.append_batch(batch(7, 2, 0)).duplicate
    assert log.log_end_offset == 6


def test_duplicate_appends_follow_kafka(tmp_path: Path) -> None:
    """Kafka's UnifiedLogTest.testDuplicateAppends: a retry of one of the five cached batches is a
    duplicate answered with its original offsets; a batch that overlaps a cached one only in part,
    or repeats a batch older than the five cached ones, is ``OutOfOrderSequence`` and nothing is
    stored."""
    log = open_log(tmp_path / "p-0")
    for seq in range(6):
        log.append_batch(batch(7, 0, seq, n=1))
    multi = log.append_batch(batch(7, 0, 6, n=3))
    assert (multi.first_offset, multi.last_offset) == (6, 8)
    again = log.append_batch(batch(7, 0, 6, n=3))
    assert again.duplicate and (again.first_offset, again.last_offset) == (6, 8)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 0, 7, n=2))        # a partial duplicate of the tail
    fourth_from_tail = log.append_batch(batch(7, 0, 2, n=1))
    assert fourth_from_tail.duplicate
    assert (fourth_from_tail.first_offset, fourth_from_tail.last_offset) == (2, 2)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 0, 1, n=1))        # older than the five cached batches
    assert log.log_end_offset == 9
    original = log.append_batch(batch(7, 0, 9, n=1))
    retried = log.append_batch(batch(7, 0, 9, n=1))
    assert retried.duplicate
    assert (retried.first_offset, retried.last_offset) == (original.first_offset,
                                                           original.last_offset) == (9, 9)
    assert log.log_end_offset == 10


def test_a_retry_older_than_the_cached_batches_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    for seq in range(0, 30, 3):
        log.append_batch(batch(7, 0, seq))
    end = log.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 0, 0))
    assert log.log_end_offset == end


def test_a_batch_overlapping_a_cached_one_in_part_is_out_of_order(tmp_path: Path) -> None:
    """ProducerStateManagerTest.testBasicIdMapping: only an exact retry of a cached batch is a
    duplicate; one that starts inside it or covers it and more is refused, not dropped."""
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0, n=3))
    log.append_batch(batch(7, 0, 3, n=3))
    for first_seq, count in ((1, 2), (3, 2), (4, 1), (0, 6), (3, 4)):
        with pytest.raises(OutOfOrderSequenceError):
            log.append_batch(batch(7, 0, first_seq, n=count))
    assert log.log_end_offset == 6
    assert log.append_batch(batch(7, 0, 3, n=3)).duplicate
    assert not log.append_batch(batch(7, 0, 6, n=1)).duplicate


def test_state_survives_clean_close(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    log.roll()
    log.append_batch(batch(7, 0, 3))
    log.flush()
    log.close()
    reopened = open_log(tmp_path / "p-0", recovery_point=6, had_clean_shutdown=True)
    assert reopened.append_batch(batch(7, 0, 3)).duplicate
    assert not reopened.append_batch(batch(7, 0, 6)).duplicate


def test_state_is_rebuilt_by_replay_after_a_kill(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    log.roll()                           # snapshot at offset 3
    log.append_batch(batch(7, 0, 3))     # only in the log, replayed after the "kill"
    log.append_batch(batch(8, 0, 0))
    copy = tmp_path / "copy" / "p-0"
    shutil.copytree(log.dir, copy)       # as a kill would leave it: no snapshot at the end
    reopened = open_log(copy)
    assert reopened.append_batch(batch(7, 0, 3)).duplicate
    assert reopened.append_batch(batch(8, 0, 0)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_batch(batch(8, 0, 9))


def test_corrupt_snapshot_falls_back_to_replay(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    log.close()
    snapshot = tmp_path / "p-0" / "00000000000000000003.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        decode_snapshot(bytes(data), snapshot)
    reopened = open_log(tmp_path / "p-0", recovery_point=3, had_clean_shutdown=True)
    assert reopened.append_batch(batch(7, 0, 0)).duplicate


def test_kafka_snapshot_file_decodes() -> None:
    path = FIXTURES / "Jeong-Rae__KafkaDemo" / "kraft-combined-logs" / "__cluster_metadata-0" / \
        "00000000000000000712.snapshot"
    assert decode_snapshot(path.read_bytes(), path) == []


def test_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(5, 2, 10, 14, 100, 104, 1234)
    state.update(9, 0, 0, 0, 105, 105, 1300)
    path = state.take_snapshot(106)
    assert decode_snapshot(path.read_bytes(), path) == [(5, 2, 14, 104, 4, 1234),
                                                        (9, 0, 0, 105, 0, 1300)]
    other = ProducerStateManager(tmp_path)
    assert other.load_latest_snapshot(200, now_ms=1300) == 106
    assert other.check(5, 2, 10, 5).duplicate


def test_snapshots_past_the_log_end_are_removed_at_load(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    log.close()
    stale = tmp_path / "p-0" / "00000000000000000099.snapshot"
    (tmp_path / "p-0" / "00000000000000000003.snapshot").rename(stale)
    reopened = open_log(tmp_path / "p-0")
    assert not stale.exists()
    assert reopened.append_batch(batch(7, 0, 0)).duplicate   # rebuilt by replay instead


# ---- producer.id.expiration.ms (Kafka's ProducerStateManagerTest expiration cases) ---------------
def test_producer_idle_for_the_expiration_is_forgotten_and_its_retry_appended(
        tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = open_log(tmp_path / "p-0", clock=clock, producer_id_expiration_ms=DAY)
    log.append_batch(batch(7, 0, 0))
    log.append_batch(batch(8, 0, 0, timestamp=NOW + 1000))
    clock.advance(DAY - 1)
    assert log.remove_expired_producers() == 0
    assert log.append_batch(batch(7, 0, 0)).duplicate
    clock.advance(1)                                 # producer 7's last batch is a day old now
    assert log.remove_expired_producers() == 1
    assert set(log.producer_state.producers) == {8}
    retry = log.append_batch(batch(7, 0, 0))         # unknown again: appended, as in Kafka
    assert not retry.duplicate and retry.first_offset == 6


def test_expiration_uses_the_last_batch_timestamp_not_the_append_time(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = open_log(tmp_path / "p-0", clock=clock, producer_id_expiration_ms=DAY)
    log.append_batch(batch(7, 0, 0, timestamp=NOW - DAY))   # stamped a day ago by the producer
    assert log.remove_expired_producers() == 1


def test_expired_producers_are_not_loaded_from_a_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0", producer_id_expiration_ms=DAY)
    log.append_batch(batch(7, 0, 0, timestamp=NOW - DAY + 10))
    log.append_batch(batch(8, 0, 0, timestamp=NOW))
    log.flush()
    log.close()
    later = FakeClock(NOW + 10)
    reopened = open_log(tmp_path / "p-0", recovery_point=6, had_clean_shutdown=True, clock=later,
                        producer_id_expiration_ms=DAY)
    assert set(reopened.producer_state.producers) == {8}
    assert reopened.append_batch(batch(8, 0, 0)).duplicate



# ---- several batches of one producer in one append (issue 11.4, Kafka's ProducerAppendInfo) ------
def test_two_batches_of_one_producer_in_one_append_are_appended_in_sequence(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))                 # the producer is known: sequences checked
    info = log.append_batch(batch(7, 0, 3) + batch(7, 0, 6))
    assert not info.duplicate and (info.first_offset, info.last_offset) == (3, 8)
    assert info.batches == 2
    assert log.producer_state.producers[7].last_seq == 8
    assert not log.append_batch(batch(7, 0, 9)).duplicate


def test_retry_of_a_pair_appended_together_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    log.append_batch(batch(7, 0, 0))
    log.append_batch(batch(7, 0, 3) + batch(7, 0, 6))
    retry = log.append_batch(batch(7, 0, 3) + batch(7, 0, 6))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (3, 8)
    assert log.log_end_offset == 9
    copy = tmp_path / "copy" / "p-0"
    shutil.copytree(log.dir, copy)                   # replayed from the log after a kill
    assert open_log(copy).append_batch(batch(7, 0, 3) + batch(7, 0, 6)).duplicate


def test_a_gap_between_two_batches_of_one_append_refuses_the_whole_append(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(batch(7, 0, 0) + batch(7, 0, 4))
    assert log.log_end_offset == 0 and log.producer_state.producers == {}
    assert not log.append_batch(batch(7, 0, 0)).duplicate


# ---- snapshots of removed segments and stray snapshots (issue 11.7) ------------------------------
def test_remove_stray_snapshots_keeps_the_clean_shutdown_snapshot(tmp_path: Path) -> None:
    """Kafka's ProducerStateManagerTest.testRemoveStraySnapshotsKeepCleanShutdownSnapshot."""
    state = ProducerStateManager(tmp_path)
    for at in (5, 2, 42):
        state.take_snapshot(at)
    state.remove_stray_snapshots([5])
    assert state.snapshot_offsets() == [5, 42]


def test_remove_all_stray_snapshots_below_the_last_segment(tmp_path: Path) -> None:
    """Kafka's ProducerStateManagerTest.testRemoveAllStraySnapshots."""
    state = ProducerStateManager(tmp_path)
    for at in (5, 2, 42):
        state.take_snapshot(at)
    state.remove_stray_snapshots([42])
    assert state.snapshot_offsets() == [42]


def test_stray_snapshots_are_removed_when_a_log_opens(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p-0")
    for seq in range(0, 9, 3):
        log.append_batch(batch(7, 0, seq))
        log.roll()                                   # snapshots at the bases 3, 6 and 9
    log.append_batch(batch(7, 0, 9))
    log.flush()
    log.close()                                      # and at the log end, 12
    for stray in (1, 4, 7):
        log.producer_state.take_snapshot(stray)
    reopened = open_log(tmp_path / "p-0", recovery_point=12, had_clean_shutdown=True)
    assert reopened.segment_base_offsets() == [0, 3, 6, 9]
    assert reopened.producer_state.snapshot_offsets() == [3, 6, 9, 12]
    assert reopened.append_batch(batch(7, 0, 9)).duplicate


def test_replacing_segments_deletes_the_snapshots_of_the_merged_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "p-1", LogConfig(segment_bytes=4096, file_delete_delay_ms=0),
                   clock=FakeClock(NOW))
    for seq in range(0, 9, 3):
        log.append_batch(batch(7, 0, seq))
        log.roll()                                   # snapshots at 3, 6 and 9
    old = log.segments()[:3]
    cleaned = log.create_cleaned_segment(0)
    for segment in old:
        fetch = log.read_raw(segment.base_offset)
        cleaned.append(segment.read_next_offset() - 1, NOW, segment.base_offset, [fetch.data])
    cleaned.on_become_inactive()
    log.replace_segments([cleaned], old)
    assert log.segment_base_offsets() == [0, 9]
    assert log.producer_state.snapshot_offsets() == [9]
    assert [r.offset for r in log.read(0)] == list(range(9))
