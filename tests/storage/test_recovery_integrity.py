"""Recovery and open-time integrity (issues 11 and 12): recovery keeps batches larger than today's
``max.message.bytes``, indexes are flushed with their segment and checked (and rebuilt) on open, the
active segment's tail is checked after a clean shutdown, swap files are validated before a swap
completes, a wrong log-start-offset checkpoint deletes nothing, temp files of atomic writes never
follow a planted symlink, and truncation and splitting keep timestamps and mtimes. Real files
throughout."""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path

import pytest

from storage import files
from storage.checkpoint import OffsetCheckpointFile
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.files import TopicPartition
from storage.log import Log
from storage.producer_state import ProducerStateManager
from storage.records import Record, build_batch, iter_batches, scan_batches
from storage.scheduler import FakeScheduler
from storage.segment import RECOVERY_CHUNK_BYTES, LogSegment


# ---- temp files of atomic writes -------------------------------------------------------------
def test_checkpoint_write_does_not_follow_a_symlink_planted_at_its_tmp_name(
        tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "recovery-point-offset-checkpoint"
    (tmp_path / "recovery-point-offset-checkpoint.tmp").symlink_to(victim)
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 42})
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink()
    assert checkpoint.read() == {TopicPartition("t", 0): 42}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_producer_snapshot_write_does_not_follow_a_symlink_planted_at_its_tmp_name(
        tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    manager = ProducerStateManager(tmp_path / "t-0")
    (tmp_path / "t-0").mkdir()
    target = tmp_path / "t-0" / "00000000000000000000.snapshot"
    target.with_name(target.name + ".tmp").symlink_to(victim)
    written = manager.take_snapshot(0)
    assert written == target
    assert victim.read_bytes() == b"precious"
    assert not target.is_symlink() and target.is_file()


def test_stale_tmp_file_is_replaced_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.with_name(path.name + ".tmp").write_bytes(b"x" * 1000)
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 1): 7})
    assert path.read_bytes() == b"0\n1\nt 1 7\n"


# ---- recovery judges batches by structure and CRC, not by max.message.bytes ------------------
MIB = 1024 * 1024
NOW = 1_700_000_000_000


def _records(first: int, count: int, ts: int = NOW, size: int = 10) -> list[Record]:
    return [Record(f"k{first + i}".encode(), f"{first + i:0{size}d}".encode(), ts + first + i)
            for i in range(count)]


def _write_big_log(directory: Path) -> list[bytes]:
    """Offsets 0..2 small, 3 a 16 MiB record, 4..6 small, a roll, 7..9 small (written while
    max.message.bytes allowed 20 MiB); returns every value in offset order."""
    config = LogConfig(max_message_bytes=20 * MIB, segment_bytes=64 * MIB)
    log = Log.open(directory, config)
    log.append(_records(0, 3))
    log.append(_records(3, 1, size=16 * MIB))
    log.append(_records(4, 3))
    log.roll()
    log.append(_records(7, 3))
    log.flush()
    values = [r.value for r in log.read()]
    log.close()
    return values


class _RecoveryReads:
    """The sizes of the reads ``LogSegment.recover`` makes (observed at ``os.pread``); reads of
    other code (the read path reads a batch whole by design) are not counted."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self._active = False
        real_pread, real_recover = os.pread, LogSegment.recover

        def pread(fd: int, size: int, position: int) -> bytes:
            if self._active:
                self.sizes.append(size)
            return real_pread(fd, size, position)

        def recover(segment: LogSegment, *args: object, **kwargs: object) -> int:
            self._active = True
            try:
                return real_recover(segment, *args, **kwargs)
            finally:
                self._active = False

        patch.setattr(os, "pread", pread)
        patch.setattr(LogSegment, "recover", recover)


def test_recovery_keeps_a_batch_larger_than_max_message_bytes(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    values = _write_big_log(directory)
    lowered = LogConfig(max_message_bytes=1 * MIB, segment_bytes=64 * MIB)
    with pytest.MonkeyPatch.context() as patch:
        reads = _RecoveryReads(patch)
        log = Log.open(directory, lowered)    # no recovery point: unclean, every segment recovered
    try:
        assert log.load_result.truncated_bytes == 0
        assert log.load_result.recovered_segments == 2
        assert log.log_end_offset == 10 and log.segment_base_offsets() == [0, 7]
        assert [r.value for r in log.read()] == values
        assert max(reads.sizes) <= RECOVERY_CHUNK_BYTES   # the 16 MiB batch never read whole
    finally:
        log.close()


def test_recovery_truncates_a_large_batch_whose_crc_fails_streaming(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    _write_big_log(directory)
    path = directory / "00000000000000000000.log"
    scan = scan_batches(path.read_bytes())
    big_at = int(scan.positions[1])
    with open(path, "r+b") as f:
        f.seek(big_at + 12 * MIB)
        byte = f.read(1)
        f.seek(big_at + 12 * MIB)
        f.write(bytes([byte[0] ^ 0x01]))
    size_before = path.stat().st_size
    log = Log.open(directory, LogConfig(max_message_bytes=1 * MIB, segment_bytes=64 * MIB))
    try:
        assert log.log_end_offset == 3
        assert [int(r.value) for r in log.read()] == [0, 1, 2]
        assert log.load_result.truncated_bytes == size_before - big_at
        assert path.stat().st_size == big_at
    finally:
        log.close()


# ---- truncation keeps the largest timestamp; a split keeps the mtime -------------------------
def test_truncate_to_finds_the_largest_timestamp_after_the_last_time_index_entry(
        tmp_path: Path) -> None:
    """Kafka's LogSegment.truncateTo reloads the largest timestamp with loadLargestTimestamp: the
    last time-index entry, then a scan of the batches after it."""
    config = LogConfig(index_interval_bytes=150)
    log = Log.open(tmp_path / "t-0", config)
    try:
        for i in range(8):
            log.append([Record(b"k%d" % i, b"v%d" % i, NOW + 1000 * (i + 1))])
        segment = log.active_segment
        assert 0 < segment.time_index.entries < 7    # sampled: the last batches are not indexed
        log.truncate_to(6)
        assert segment.time_index.last_entry().timestamp < NOW + 6000
        assert (segment.max_timestamp_so_far, segment.offset_of_max_timestamp_so_far) == \
            (NOW + 6000, 5)
        assert segment.largest_timestamp == NOW + 6000
    finally:
        log.close()


def test_split_segments_keep_the_original_mtime(tmp_path: Path) -> None:
    """Kafka's splitOverflowedSegment gives every new segment the original's lastModified, so
    retention by age (segments without timestamps) is not reset by a split."""
    far = 2**31 + 10
    directory = tmp_path / "t-0"
    directory.mkdir()
    original = files.log_file(directory, 0)
    original.write_bytes(build_batch(_records(0, 3, ts=-1), base_offset=0)
                         + build_batch(_records(far, 2, ts=-1), base_offset=far))
    # the cleaner of an old broker wrote it: a later segment follows, as in every real log
    files.log_file(directory, far + 2).write_bytes(
        build_batch(_records(far + 2, 1, ts=-1), base_offset=far + 2))
    old_ms = 1_500_000_000_000
    os.utime(original, ns=(old_ms * 1_000_000, old_ms * 1_000_000))
    log = Log.open(directory, LogConfig())
    try:
        assert log.segment_base_offsets() == [0, far, far + 2]
        assert [s.last_modified_ms for s in log.segments()[:2]] == [old_ms, old_ms]
    finally:
        log.close()


# ---- indexes are flushed with their segment --------------------------------------------------
def test_flush_past_a_rolled_segment_fsyncs_its_offset_and_time_index(tmp_path: Path) -> None:
    """Kafka's LogSegment.flush flushes the offset and time index with the log. The fsync calls
    are observed at the os boundary and named by the files they reach."""
    clock = FakeClock(NOW)
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=100), clock=clock,
                   scheduler=FakeScheduler(clock))
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    try:
        for i in range(10):
            log.append(_records(i, 1))
        log.roll()
        log.append(_records(10, 1))
        first = log.segments()[0]
        assert first.offset_index.entries > 0 and first.time_index.entries > 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(os, "fsync", recording_fsync)
            log.flush()
        assert log.recovery_point == 11
        assert {"00000000000000000000.log", "00000000000000000000.index",
                "00000000000000000000.timeindex"} <= set(synced)
    finally:
        log.close()


# ---- producer snapshots are made durable (Kafka's UnifiedLog.roll and close) ------------------
def _fsync_recorder(synced: list[str], failing_suffix: str | None = None):  # type: ignore[no-untyped-def]
    """An ``os.fsync`` that records the name of every file it reaches (and fails, like a dying
    disk, for a name ending with ``failing_suffix``)."""
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if failing_suffix is not None and name.endswith(failing_suffix):
            raise OSError(5, "Input/output error", name)
        synced.append(name)
        real_fsync(fd)
    return recording_fsync


def _idempotent_log(directory: Path, clock: FakeClock, scheduler: FakeScheduler) -> Log:
    log = Log.open(directory, LogConfig(), clock=clock, scheduler=scheduler)
    for seq in range(3):
        log.append(_records(seq, 1), producer_id=7, producer_epoch=0, base_sequence=seq)
    return log


def test_a_roll_fsyncs_its_producer_snapshot_before_the_segments_below_it(
        tmp_path: Path) -> None:
    """Kafka's UnifiedLog.roll writes the snapshot unsynced under the lock, and its scheduled
    flush makes it durable first, then the segments below the new base."""
    clock = FakeClock(NOW)
    scheduler = FakeScheduler(clock)
    log = _idempotent_log(tmp_path / "t-0", clock, scheduler)
    synced: list[str] = []
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(os, "fsync", _fsync_recorder(synced))
            log.roll()
            assert synced == []            # nothing synced under the log's lock
            scheduler.tick()
        snapshot = "00000000000000000003.snapshot"
        assert snapshot in synced and "00000000000000000000.log" in synced
        assert synced.index(snapshot) < synced.index("00000000000000000000.log")
        assert log.recovery_point == 3
    finally:
        log.close()


def test_the_recovery_point_stays_when_the_rolled_producer_snapshot_cannot_be_flushed(
        tmp_path: Path) -> None:
    """Kafka's testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure: the flush after
    a roll fails on the snapshot, and the recovery point does not move past the rolled segment."""
    clock = FakeClock(NOW)
    scheduler = FakeScheduler(clock)
    log = _idempotent_log(tmp_path / "t-0", clock, scheduler)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(os, "fsync", _fsync_recorder([], failing_suffix=".snapshot"))
            log.roll()
            with pytest.raises(OSError):
                scheduler.tick()
        assert log.recovery_point == 0
        log.flush()
        assert log.recovery_point == 3
    finally:
        log.close()


@pytest.mark.parametrize("gone", ["snapshot", "directory"])
def test_the_flush_after_a_roll_passes_over_a_snapshot_gone_meanwhile(tmp_path: Path,
                                                                      gone: str) -> None:
    """The snapshot deleted with its segment, or the log's directory renamed away (a deletion),
    before the background flush ran: a file that is gone is no disk failure, and the flush
    raises nothing (an error there would take the whole directory offline)."""
    clock = FakeClock(NOW)
    scheduler = FakeScheduler(clock)
    log = _idempotent_log(tmp_path / "t-0", clock, scheduler)
    try:
        log.roll()
        if gone == "snapshot":
            (tmp_path / "t-0" / "00000000000000000003.snapshot").unlink()
        else:
            log.rename_dir("t-0.abc-delete")      # as a deletion renames it first
        scheduler.tick()
    finally:
        log.close()


def test_close_fsyncs_the_producer_snapshot_at_the_log_end(tmp_path: Path) -> None:
    """Kafka's UnifiedLog.close takes its snapshot synced: a clean shutdown's marker must not
    stand for producer state a power loss can take back."""
    clock = FakeClock(NOW)
    log = _idempotent_log(tmp_path / "t-0", clock, FakeScheduler(clock))
    synced: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", _fsync_recorder(synced))
        log.close()
    # its bytes before the rename into place, then the directory that holds the new name
    assert synced.index("00000000000000000003.snapshot.tmp") < synced.index("t-0")


# ---- a swap file is validated before it replaces live segments --------------------------------
def _two_segment_log(directory: Path) -> Log:
    config = LogConfig(segment_bytes=4000, index_interval_bytes=200, retention_ms=-1)
    log = Log.open(directory, config)
    for i in range(120):
        log.append(_records(i, 1))
    log.flush()
    return log


@pytest.mark.parametrize("content", [b"", b"garbage" * 100, "torn", "bad crc", "offsets"])
def test_an_invalid_swap_file_is_quarantined_and_the_live_segment_kept(
        tmp_path: Path, content: bytes | str) -> None:
    directory = tmp_path / "t-0"
    log = _two_segment_log(directory)
    expected = [(r.offset, r.value) for r in log.read()]
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    log.close()
    live = files.log_file(directory, 0).read_bytes()
    if content == "torn":
        content = live[:-5]
    elif content == "bad crc":
        flipped = bytearray(live)
        flipped[len(live) // 2] ^= 0x10
        content = bytes(flipped)
    elif content == "offsets":     # valid batches, but the second repeats the first's offsets
        first = scan_batches(live)
        one = live[:int(first.sizes[0])]
        content = one + one
    swap = files.log_file(directory, 0, files.SWAP_SUFFIX)
    swap.write_bytes(content)
    reopened = Log.open(directory, log.config, recovery_point=120, had_clean_shutdown=True)
    try:
        assert [(r.offset, r.value) for r in reopened.read()] == expected
        assert reopened.segment_base_offsets() == bases
        assert reopened.load_result.completed_swaps == 0
        assert not swap.exists()
        kept = list((directory / files.QUARANTINE_DIR).iterdir())
        assert [p.read_bytes() for p in kept] == [content]
        assert kept[0].name.endswith("-00000000000000000000.log.swap.0")
    finally:
        reopened.close()


def test_a_valid_swap_file_still_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = _two_segment_log(directory)
    expected = [(r.offset, r.value) for r in log.read()]
    bases = log.segment_base_offsets()
    log.close()
    first, second = (files.log_file(directory, b) for b in bases[:2])
    files.log_file(directory, 0, files.SWAP_SUFFIX).write_bytes(
        first.read_bytes() + second.read_bytes())
    reopened = Log.open(directory, log.config, recovery_point=120, had_clean_shutdown=True)
    try:
        assert reopened.load_result.completed_swaps == 1
        assert reopened.segment_base_offsets() == [0, *bases[2:]]
        assert [(r.offset, r.value) for r in reopened.read()] == expected
        assert not (directory / files.QUARANTINE_DIR).exists()
    finally:
        reopened.close()


# ---- every index is checked against its segment on open --------------------------------------
def _active_log(directory: Path, n: int = 2000) -> tuple[Log, LogConfig]:
    """One active segment of ``n`` one-record batches (offsets 0..n-1), indexed every ~300 bytes,
    closed cleanly."""
    config = LogConfig(index_interval_bytes=300, retention_ms=-1)
    log = Log.open(directory, config)
    for i in range(0, n, 5):
        for j in range(5):
            log.append(_records(i + j, 1))
    log.flush()
    end = log.log_end_offset
    log.close()
    assert end == n
    return log, config


def _open_clean(directory: Path, config: LogConfig, end: int, **kwargs: object) -> Log:
    return Log.open(directory, config, recovery_point=end, had_clean_shutdown=True, **kwargs)


def _set_index_position(path: Path, slot: int, position: int) -> int:
    """Overwrite the position of offset-index entry ``slot`` (negative: from the end); returns
    the old position."""
    data = bytearray(path.read_bytes())
    at = (slot % (len(data) // 8)) * 8 + 4
    old = int.from_bytes(data[at:at + 4], "big", signed=True)
    data[at:at + 4] = position.to_bytes(4, "big", signed=True)
    path.write_bytes(bytes(data))
    return old


@pytest.mark.parametrize("damage", ["off a batch boundary", "beyond the log", "negative",
                                    "a later batch"])
def test_a_damaged_active_index_after_a_clean_close_is_rebuilt_and_no_offset_is_reused(
        tmp_path: Path, damage: str) -> None:
    """Issue 12's probe: a flipped position in the active segment's .index after a clean
    shutdown hid records, so the next append reused their offsets and was lost at the next
    unclean open (or the open failed with an untyped OSError)."""
    directory = tmp_path / "t-0"
    log, config = _active_log(directory)
    index = files.index_file(directory, 0)
    size = files.log_file(directory, 0).stat().st_size
    positions = scan_batches(files.log_file(directory, 0).read_bytes()).positions
    old = _set_index_position(index, -1, 0)
    _set_index_position(index, -1, {"off a batch boundary": old + 5,
                                    "beyond the log": size + 100,
                                    "negative": old | -2**31,
                                    "a later batch": int(positions[-3])}[damage])
    reopened = _open_clean(directory, config, 2000)
    try:
        assert reopened.load_result.rebuilt_indexes == 1
        assert reopened.log_end_offset == 2000
        assert reopened.append(_records(2000, 1)).first_offset == 2000
        reopened.flush()
    finally:
        reopened.close()
    after_crash = Log.open(directory, config)          # unclean: every batch re-validated
    try:
        assert [int(r.value) for r in after_crash.read()] == list(range(2001))
        assert after_crash.load_result.truncated_bytes == 0
    finally:
        after_crash.close()


def test_a_torn_tail_behind_a_stale_clean_shutdown_marker_is_truncated_at_open(
        tmp_path: Path) -> None:
    """Issue 12: a flushed append after the last index entry, then a torn write, under a clean
    shutdown marker that is stale: the flushed batch is kept, the torn bytes cut at open, and the
    next append (which used to land after the garbage) survives an unclean reopen."""
    directory = tmp_path / "t-0"
    log, config = _active_log(directory, n=100)
    segment_file = files.log_file(directory, 0)
    with open(segment_file, "ab") as f:
        f.write(build_batch(_records(100, 3), base_offset=100))     # flushed, never indexed
        f.write(b"\x00" * 8 + (500).to_bytes(4, "big") + b"torn write")
    reopened = _open_clean(directory, config, 100)
    try:
        assert reopened.log_end_offset == 103
        assert reopened.load_result.truncated_bytes == 8 + 4 + len(b"torn write")
        assert reopened.append(_records(103, 1)).first_offset == 103
        reopened.flush()
    finally:
        reopened.close()
    after_crash = Log.open(directory, config)
    try:
        assert [int(r.value) for r in after_crash.read()] == list(range(104))
    finally:
        after_crash.close()


def test_garbage_with_a_valid_looking_length_after_a_clean_close_is_cut_not_appended_after(
        tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, config = _active_log(directory, n=100)
    segment_file = files.log_file(directory, 0)
    good = segment_file.stat().st_size
    fake = bytearray(build_batch(_records(100, 2), base_offset=100))
    fake[-1] ^= 0xFF                                            # CRC no longer matches
    with open(segment_file, "ab") as f:
        f.write(bytes(fake))
    reopened = _open_clean(directory, config, 100)
    try:
        assert reopened.log_end_offset == 100
        assert segment_file.stat().st_size == good
        assert reopened.append(_records(100, 1)).first_offset == 100
    finally:
        reopened.close()


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("entries", ["all", "one"])
def test_a_zeroed_time_index_below_the_recovery_point_does_not_make_retention_delete_early(
        tmp_path: Path, clean: bool, entries: str) -> None:
    """Issue 11.5: after a power loss a rolled segment's .timeindex (never fsynced) reads as
    zeros; its largest timestamp became 0 and retention.ms deleted it at once. It is now
    detected on open and rebuilt from the .log."""
    clock = FakeClock(NOW + 10_000)
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, retention_ms=86_400_000)
    directory = tmp_path / "t-0"
    log = Log.open(directory, config, clock=clock, scheduler=FakeScheduler(clock))
    for i in range(100):
        log.append(_records(i, 1))
    log.flush()
    bases = log.segment_base_offsets()
    log.close()
    assert len(bases) >= 3
    time_index = files.time_index_file(directory, 0)
    length = time_index.stat().st_size if entries == "all" else 12
    time_index.write_bytes(bytes(length))
    reopened = Log.open(directory, config, recovery_point=100, had_clean_shutdown=clean,
                        clock=clock, scheduler=FakeScheduler(clock))
    try:
        first = reopened.segments()[0]
        assert first.largest_timestamp == NOW + bases[1] - 1   # checked at first use, rebuilt
        assert first.indexes_rebuilt_at_first_use
        assert reopened.delete_old_segments() == 0
        assert reopened.segment_base_offsets() == bases
        clock.advance(86_400_000)        # a day later, by the records' own timestamps
        assert reopened.delete_old_segments() == len(bases)   # every segment expired: rolled, deleted
    finally:
        reopened.close()


def test_closed_segment_indexes_that_disagree_with_their_log_are_rebuilt_after_a_clean_close(
        tmp_path: Path) -> None:
    """Monotonic entries, inside the file, on a batch boundary: each kind of doubt rebuilds."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, retention_ms=-1)
    log = Log.open(directory, config)
    for i in range(100):
        log.append(_records(i, 1, ts=NOW))
    log.flush()
    bases = log.segment_base_offsets()
    expected = [(r.offset, r.value, r.timestamp) for r in log.read()]
    lookups = [log.offset_for_timestamp(NOW + i) for i in range(0, 100, 7)]
    log.close()
    first_index = files.index_file(directory, 0)
    data = bytearray(first_index.read_bytes())
    assert len(data) >= 24
    data[8:16] = data[0:8]                                       # two equal entries
    first_index.write_bytes(bytes(data))
    second_time = files.time_index_file(directory, bases[1])
    t = bytearray(second_time.read_bytes())
    t[-4:] = (bases[2] - bases[1] + 5).to_bytes(4, "big")       # beyond the segment's offsets
    second_time.write_bytes(bytes(t))
    reopened = _open_clean(directory, config, 100)
    try:
        assert [(r.offset, r.value, r.timestamp) for r in reopened.read()] == expected
        assert [reopened.offset_for_timestamp(NOW + i) for i in range(0, 100, 7)] == lookups
        assert [s.indexes_rebuilt_at_first_use for s in reopened.segments()[:3]] == \
            [True, True, False]
    finally:
        reopened.close()


def test_healthy_indexes_are_not_rebuilt_after_a_clean_close(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, retention_ms=-1)
    log = Log.open(directory, config)
    for i in range(100):
        log.append(_records(i, 1))
    log.flush()
    log.close()
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".index",
                                                                                   ".timeindex")}
    reopened = _open_clean(directory, config, 100)
    try:
        assert reopened.load_result.rebuilt_indexes == 0
        assert reopened.load_result.truncated_bytes == 0
    finally:
        reopened.close()
    after = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".index",
                                                                                  ".timeindex")}
    assert after == before


# ---- Kafka's LogLoaderTest and LogSegmentTest index and corruption cases, as v2 on real files ---
def _kafka_log(directory: Path, n: int, config: LogConfig) -> None:
    """``n`` single-record batches with random 10-byte values at timestamps NOW + 10 * i."""
    rng = random.Random(7)
    log = Log.open(directory, config)
    for i in range(n):
        log.append([Record(None, rng.randbytes(10), NOW + i * 10)])
    log.close()


def _assert_every_offset_and_timestamp_found(log: Log, n: int) -> None:
    for i in range(n):
        fetch = log.read_raw(i, 100)
        assert fetch is not None and next(iter(fetch.batches())).last_offset == i
        found = log.offset_for_timestamp(NOW + i * 10)
        assert found is not None and found[0] == i


@pytest.mark.parametrize("clean", [False, True])
def test_index_rebuild(tmp_path: Path, clean: bool) -> None:
    """Kafka LogLoaderTest.testIndexRebuild (and the same after a clean shutdown): index files
    deleted by hand are rebuilt when the log is reopened."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=200, index_interval_bytes=1, retention_ms=-1)
    _kafka_log(directory, 200, config)
    for path in directory.iterdir():
        if path.suffix in (".index", ".timeindex"):
            path.unlink()
    log = Log.open(directory, config, recovery_point=200 if clean else None,
                   had_clean_shutdown=clean)
    try:
        assert log.log_end_offset == 200
        assert log.segments()[0].offset_index.entries > 0
        assert log.segments()[0].time_index.entries > 0
        _assert_every_offset_and_timestamp_found(log, 200)
    finally:
        log.close()


@pytest.mark.parametrize("clean", [False, True])
def test_corrupt_index_rebuild(tmp_path: Path, clean: bool) -> None:
    """Kafka LogLoaderTest.testCorruptIndexRebuild (and the same after a clean shutdown): every
    offset and time index overwritten with two spaces is rebuilt on open."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=200, index_interval_bytes=1, retention_ms=-1)
    _kafka_log(directory, 200, config)
    for path in directory.iterdir():
        if path.suffix in (".index", ".timeindex"):
            path.write_bytes(b"  ")
    log = Log.open(directory, config, recovery_point=200 if clean else None,
                   had_clean_shutdown=clean)
    try:
        assert log.log_end_offset == 200
        _assert_every_offset_and_timestamp_found(log, 200)
    finally:
        log.close()


def test_corrupt_index_entries_of_whole_size_are_rebuilt_after_a_clean_shutdown(
        tmp_path: Path) -> None:
    """testCorruptIndexRebuild's damage with random bytes of a valid index length, which the
    length check alone cannot see: after a clean shutdown every index is still checked."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=200, index_interval_bytes=1, retention_ms=-1)
    _kafka_log(directory, 200, config)
    rng = random.Random(11)
    for path in directory.iterdir():
        if path.suffix in (".index", ".timeindex") and path.stat().st_size:
            path.write_bytes(rng.randbytes(path.stat().st_size))
    log = Log.open(directory, config, recovery_point=200, had_clean_shutdown=True)
    try:
        assert log.log_end_offset == 200
        _assert_every_offset_and_timestamp_found(log, 200)
    finally:
        log.close()


def test_bogus_index_segments_are_removed(tmp_path: Path) -> None:
    """Kafka LogLoaderTest.testBogusIndexSegmentsAreRemoved: index files without a .log are
    deleted on open; the first segment's indexes are created anew and appends work."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    bogus = [files.index_file(directory, 5), files.time_index_file(directory, 5)]
    for path in bogus:
        path.touch()
    one = build_batch([Record(None, b"test", NOW)])
    config = LogConfig(segment_bytes=len(one) * 5, segment_index_bytes=1000,
                       index_interval_bytes=1)
    log = Log.open(directory, config)
    try:
        first = log.segments()[0]
        first.offset_index.entries, first.time_index.entries   # materialise the lazy indexes
        assert files.index_file(directory, 0).stat().st_size > 0
        assert files.time_index_file(directory, 0).stat().st_size > 0
        assert not any(path.exists() for path in bogus)
        for _ in range(10):
            log.append([Record(None, b"test", NOW)])
        assert log.log_end_offset == 10
    finally:
        log.close()


@pytest.mark.parametrize("clean", [False, True])
def test_corrupt_log(tmp_path: Path, clean: bool) -> None:
    """Kafka LogLoaderTest.testCorruptLog (and the same under a stale clean-shutdown marker):
    nonsense appended to the active segment's .index and .log is cut on open; every record
    written before stays, with its key, value and timestamp."""
    config = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024,
                       retention_ms=-1)
    rng = random.Random(5)
    for attempt in range(10):
        directory = tmp_path / f"t-{attempt}"
        log = Log.open(directory, config)
        count = 50 + rng.randrange(50)
        for _ in range(count):
            log.append([Record(None, b"test", NOW)])
        written = [(r.offset, r.key, r.value, r.timestamp) for r in log.read()]
        active = log.active_segment
        log.close()
        for path in (active.offset_index.path, active.log_path):
            with open(path, "ab") as f:
                f.write(rng.randbytes(rng.randrange(1024) + 1))
        log = Log.open(directory, config, recovery_point=50 if not clean else count,
                       had_clean_shutdown=clean)
        try:
            assert log.log_end_offset == count
            assert [(r.offset, r.key, r.value, r.timestamp) for r in log.read()] == written
        finally:
            log.close()


def _kafka_segment(directory: Path) -> LogSegment:
    """LogSegmentTest.createSegment(0): index every 10 bytes; 100 one-record batches at offsets
    0..99 with timestamps 10 * i."""
    directory.mkdir()
    segment = LogSegment.create(directory, 0, LogConfig(index_interval_bytes=10,
                                                        segment_index_bytes=4096))
    for i in range(100):
        data = build_batch([Record(None, str(i).encode(), i * 10)], base_offset=i)
        segment.append(i, i * 10, i, [data])
    return segment


def _write_nonsense(path: Path, position: int, size: int) -> None:
    rng = random.Random(3)
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(bytes(rng.randrange(255) for _ in range(size)))


def _every_offset_is_read(segment: LogSegment) -> None:
    for i in range(100):
        read = segment.read(i, 1, segment.size, True)
        assert read is not None
        batch = next(iter(iter_batches(read[1])))
        assert next(iter(batch.records())).offset == i


def _every_timestamp_is_found(segment: LogSegment) -> None:
    for i in range(100):
        assert segment.find_offset_by_timestamp(i * 10, 0)[0] == i
        if i < 99:
            assert segment.find_offset_by_timestamp(i * 10 + 1, 0)[0] == i + 1


@pytest.mark.parametrize("index, check", [("offset_index", _every_offset_is_read),
                                          ("time_index", _every_timestamp_is_found)])
def test_recovery_fixes_corrupt_index(tmp_path: Path, index: str, check) -> None:
    """Kafka LogSegmentTest.testRecoveryFixesCorruptIndex and testRecoveryFixesCorruptTimeIndex:
    nonsense from byte 5 to the end of the index, then recover: every lookup is right again."""
    segment = _kafka_segment(tmp_path / "t-0")
    try:
        path = getattr(segment, index).path
        _write_nonsense(path, 5, path.stat().st_size)
        segment.recover()
        check(segment)
    finally:
        segment.close()


def test_a_compacted_segment_starting_above_its_base_offset_is_not_rebuilt(
        tmp_path: Path) -> None:
    """A cleaned segment keeps its base offset while its first batch may start later (here 0.log
    starts at offset 5); that is no reason to doubt its indexes."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    config = LogConfig(index_interval_bytes=4096, retention_ms=-1)
    for base, first, count in ((0, 5, 5), (10, 12, 3)):
        segment = LogSegment.create(directory, base, config)
        for offset in range(first, first + count):
            data = build_batch(_records(offset, 1), base_offset=offset)
            segment.append(offset, NOW + offset, offset, [data])
        segment.on_become_inactive()
        segment.close()
    log = _open_clean(directory, config, 15)
    try:
        assert log.load_result.rebuilt_indexes == 0
        assert [r.offset for r in log.read()] == [5, 6, 7, 8, 9, 12, 13, 14]
        assert log.log_end_offset == 15
    finally:
        log.close()


def test_recover_reports_where_it_cuts_before_cutting(tmp_path: Path) -> None:
    """``keep_cut`` (the loader's quarantine hook) sees the position while the bytes are there."""
    segment = _kafka_segment(tmp_path / "t-0")
    size = segment.size
    with open(segment.log_path, "ab") as f:
        f.write(b"\x00" * 30)
    seen: list[tuple[int, int]] = []
    try:
        truncated = segment.recover(keep_cut=lambda at: seen.append(
            (at, segment.log_path.stat().st_size)))
        assert truncated == 30
        assert seen == [(size, size + 30)]
    finally:
        segment.close()


@pytest.mark.parametrize("magic", [0, 1])
def test_recovery_keeps_a_legacy_message_larger_than_a_read_chunk_and_checks_its_crc(
        tmp_path: Path, magic: int) -> None:
    """A pre-0.11 broker's 9 MiB message (magic 0 or 1) is CRC-checked streaming like a v2
    batch: kept when intact, truncated when a byte in its middle flipped."""
    with warnings.catch_warnings():                 # kafka-python's import-time deprecation noise
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.legacy_records import LegacyRecordBatchBuilder
    sets = []
    for offset, value in ((0, b"small"), (1, b"x" * (9 * MIB)), (2, b"after")):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=16 * MIB)
        assert builder.append(offset, timestamp=NOW if magic else None, key=b"k",
                              value=value) is not None
        sets.append(bytes(builder.build()))
    for flip in (False, True):
        directory = tmp_path / f"t-{int(flip)}"
        directory.mkdir()
        data = bytearray(b"".join(sets))
        if flip:
            data[len(sets[0]) + 5 * MIB] ^= 0x01
        files.log_file(directory, 0).write_bytes(bytes(data))
        with pytest.MonkeyPatch.context() as patch:
            reads = _RecoveryReads(patch)
            log = Log.open(directory, LogConfig(max_message_bytes=1 * MIB))
        try:
            assert reads.sizes and max(reads.sizes) <= RECOVERY_CHUNK_BYTES
            assert log.log_end_offset == (1 if flip else 3)
            assert [r.offset for r in log.read()] == ([0] if flip else [0, 1, 2])
        finally:
            log.close()
