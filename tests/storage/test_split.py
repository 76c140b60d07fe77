"""A segment whose valid batches overflow its base offset (written by an old broker) is split by
recovery into segments that each fit their base, never truncated; an interrupted split ends as
before or after it (Kafka's splitOverflowedSegment and testSplitOnOffsetOverflow cases)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, build_batch
from storage.scheduler import FakeScheduler

with warnings.catch_warnings():                 # kafka-python's import-time deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

FAR = 2**31 + 10          # past base 0 + Int.MaxValue
TS = 1_700_000_000_000


def v2(base: int, count: int) -> bytes:
    return build_batch([Record(b"k%d" % (base + i), b"v%d" % (base + i), TS) for i in range(count)],
                       base_offset=base)


def overflowing_partition(root: Path, data: bytes) -> Path:
    """A partition directory holding one ``0.log`` and no indexes, as an old broker left it."""
    directory = root / "t-0"
    directory.mkdir(parents=True)
    files.log_file(directory, 0).write_bytes(data)
    return directory


def open_unclean(directory: Path, clock: FakeClock) -> Log:
    return Log.open(directory, LogConfig(), clock=clock, scheduler=FakeScheduler(clock))


def read_all(log: Log) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in log.read(0)]


EXPECTED = [(o, b"v%d" % o) for o in (0, 1, 2, 3, 4, FAR, FAR + 1, FAR + 2, FAR + 3)]


def test_recovery_splits_an_overflowing_v2_segment_and_keeps_every_record(
        tmp_path: Path, clock: FakeClock) -> None:
    directory = overflowing_partition(tmp_path, v2(0, 3) + v2(3, 2) + v2(FAR, 3) + v2(FAR + 3, 1))
    log = open_unclean(directory, clock)
    assert log.segment_base_offsets() == [0, FAR]
    assert read_all(log) == EXPECTED
    assert log.log_end_offset == FAR + 4
    assert log.append([Record(b"k", b"next", TS)]).first_offset == FAR + 4
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log.close()
    reopened = Log.open(directory, LogConfig(), recovery_point=FAR + 5, had_clean_shutdown=True,
                        clock=clock, scheduler=FakeScheduler(clock))
    assert read_all(reopened)[:-1] == EXPECTED
    assert reopened.offset_for_timestamp(TS) == (0, TS)
    reopened.close()


def test_recovery_splits_an_overflowing_magic_1_segment(tmp_path: Path, clock: FakeClock) -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for offset in (0, 1, 2, 3, 4, FAR, FAR + 1, FAR + 2, FAR + 3):
        assert builder.append(offset, timestamp=TS, key=b"k", value=b"v%d" % offset) is not None
    log = open_unclean(overflowing_partition(tmp_path, bytes(builder.build())), clock)
    assert log.segment_base_offsets() == [0, FAR]
    assert read_all(log) == EXPECTED
    log.close()


def test_a_split_cut_off_before_its_swap_is_redone_from_the_original(
        tmp_path: Path, clock: FakeClock) -> None:
    data = v2(0, 3) + v2(3, 2) + v2(FAR, 3) + v2(FAR + 3, 1)
    directory = overflowing_partition(tmp_path, data)
    # the crash left a half-written first part and the second part already renamed .swap
    files.log_file(directory, 0, files.CLEANED_SUFFIX).write_bytes(data[:40])
    files.log_file(directory, FAR, files.SWAP_SUFFIX).write_bytes(v2(FAR, 3))
    log = open_unclean(directory, clock)
    assert log.segment_base_offsets() == [0, FAR]
    assert read_all(log) == EXPECTED
    log.close()


def test_a_split_cut_off_after_its_swap_is_completed(tmp_path: Path, clock: FakeClock) -> None:
    data = v2(0, 3) + v2(3, 2) + v2(FAR, 3) + v2(FAR + 3, 1)
    done = overflowing_partition(tmp_path / "done", data)
    open_unclean(done, clock).close()
    crashed = overflowing_partition(tmp_path / "crashed", data)
    # both parts renamed .swap, the original not yet deleted
    for base in (0, FAR):
        for name in (files.log_file, files.index_file, files.time_index_file):
            source = name(done, base)
            if source.exists():
                shutil.copy(source, name(crashed, base, files.SWAP_SUFFIX))
    log = open_unclean(crashed, clock)
    assert log.segment_base_offsets() == [0, FAR]
    assert read_all(log) == EXPECTED
    assert log.load_result.completed_swaps >= 1
    log.close()


def test_a_damaged_tail_after_the_overflow_is_truncated_not_the_valid_parts(
        tmp_path: Path, clock: FakeClock) -> None:
    data = v2(0, 3) + v2(3, 2) + v2(FAR, 3) + v2(FAR + 3, 1)
    log = open_unclean(overflowing_partition(tmp_path, data + b"\x00\x01garbage"), clock)
    assert read_all(log) == EXPECTED
    assert log.load_result.truncated_bytes == len(b"\x00\x01garbage")
    log.close()
