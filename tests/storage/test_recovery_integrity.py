"""Recovery and open-time integrity (issues 11 and 12): recovery keeps batches larger than today's
``max.message.bytes``, indexes are flushed with their segment and checked (and rebuilt) on open, the
active segment's tail is checked after a clean shutdown, swap files are validated before a swap
completes, a wrong log-start-offset checkpoint deletes nothing, temp files of atomic writes never
follow a planted symlink, and truncation and splitting keep timestamps and mtimes. Real files
throughout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import storage.segment as segment_module
from storage import files
from storage.checkpoint import OffsetCheckpointFile
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.files import TopicPartition
from storage.log import Log
from storage.producer_state import ProducerStateManager
from storage.records import Record, build_batch, scan_batches
from storage.scheduler import FakeScheduler
from storage.segment import RECOVERY_CHUNK_BYTES


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


def test_recovery_keeps_a_batch_larger_than_max_message_bytes(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    values = _write_big_log(directory)
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, size: int, position: int) -> bytes:
        reads.append(size)
        return real_pread(fd, size, position)

    lowered = LogConfig(max_message_bytes=1 * MIB, segment_bytes=64 * MIB)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segment_module.os, "pread", counting_pread)
        log = Log.open(directory, lowered)    # no recovery point: unclean, every segment recovered
    try:
        assert log.load_result.truncated_bytes == 0
        assert log.load_result.recovered_segments == 2
        assert log.log_end_offset == 10 and log.segment_base_offsets() == [0, 7]
        assert [r.value for r in log.read()] == values
        assert max(reads) <= RECOVERY_CHUNK_BYTES   # the 16 MiB batch was never read whole
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
    old_ms = 1_500_000_000_000
    os.utime(original, ns=(old_ms * 1_000_000, old_ms * 1_000_000))
    log = Log.open(directory, LogConfig())
    try:
        assert log.segment_base_offsets() == [0, far]
        assert [s.last_modified_ms for s in log.segments()] == [old_ms, old_ms]
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
