"""The cleaner never launders corruption and reads within the read path's limits (issue 12): a
batch that fails its CRC or its structure stops the clean of that partition with a typed error
naming file, position and offset, and leaves the segment as it was; a forged records count or a
decompression bomb is refused before it costs memory, whatever the topic config."""

from __future__ import annotations

import os
import struct
import tracemalloc
import zlib
from pathlib import Path

import crc32c
import pytest
import zstandard

from cleaner.config import CleanerConfig
from cleaner.errors import CorruptSegmentError
from cleaner.manager import CleanerManager
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptRecordError
from storage.log import Log
from storage.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    MAX_DECOMPRESSED_BYTES,
    RECORDS_COUNT_OFFSET,
    Compression,
    Record,
    build_batch,
    scan_batches,
)
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment
from tests.cleaner.kafka_logs import T0, make_cleaner

MIB = 1 << 20


def records_log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> Log:
    """Three closed segments: batches of five keys with values ``value-<round>-<key>``, every
    round superseding the one before, so each clean rewrites (filters) batches."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600, cleanup_policy="compact",
                                               file_delete_delay_ms=0),
                   recovery_point=0, had_clean_shutdown=True, clock=clock, scheduler=scheduler)
    round_ = 0
    while log.number_of_segments < 4:
        keys = [0, 1, 2, 3, 4] if round_ % 2 == 0 else [0, 2]
        log.append([Record(b"k%d" % k, b"value-%d-%d" % (round_, k), T0) for k in keys])
        round_ += 1
    log.roll()
    return log


def flip_bit_in(segment: LogSegment, needle: bytes) -> int:
    """Flip the lowest bit of the first byte of ``needle`` in the segment file; returns where."""
    data = segment.log_path.read_bytes()
    at = data.index(needle)
    with open(segment.log_path, "r+b") as f:
        f.seek(at)
        f.write(bytes([data[at] ^ 0x01]))
    return at


def batch_start_before(data: bytes, at: int) -> int:
    scan = scan_batches(data)
    starts = [p for p in scan.positions.tolist() if p <= at]
    return starts[-1]


@pytest.mark.parametrize("first_dirty", ["start", "past the corrupt segment"])
def test_a_corrupt_batch_stops_the_clean_and_stays_detectably_corrupt(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler, first_dirty: str) -> None:
    log = records_log(tmp_path, clock, scheduler)
    target = log.segments()[0]
    # value-0-3 survives the clean (key 3 is written once) inside a batch that loses records,
    # so a cleaner that re-encodes it would give the damaged value a fresh, valid CRC
    at = flip_bit_in(target, b"value-0-3")
    damaged = target.log_path.read_bytes()
    position = batch_start_before(damaged, at)
    files_before = {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix == ".log"}
    start = 0 if first_dirty == "start" else log.segments()[1].base_offset

    with pytest.raises(CorruptSegmentError) as caught:
        make_cleaner(1024, clock).clean(log, start, clock.milliseconds())
    err = caught.value
    assert isinstance(err, CorruptRecordError)
    assert (err.path, err.position, err.offset) == (str(target.log_path), position, 0)
    assert str(target.log_path) in str(err) and f"position {position}" in str(err)
    assert {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix == ".log"} == \
        files_before
    assert not [p for p in os.listdir(log.dir) if p.endswith((".cleaned", ".swap"))]
    assert "CRC mismatch" in (scan_batches(damaged, check_crc=True).error or "")


def test_a_corrupt_partition_goes_the_uncleanable_path_naming_the_file(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    log = records_log(tmp_path, clock, scheduler)
    flip_bit_in(log.segments()[1], b"value-")
    manager = CleanerManager([tmp_path], CleanerConfig(uncleanable_retries=0), clock=clock)
    with pytest.raises(CorruptSegmentError) as caught:
        make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    assert manager.record_cleaning_failure(log.topic_partition, tmp_path, caught.value)
    assert manager.is_uncleanable(log.topic_partition)
    entry = manager.uncleanable_partitions(tmp_path)[log.topic_partition]
    assert "CorruptSegmentError" in entry.error and str(log.segments()[1].log_path) in entry.error


def flip_base_offset_bit(segment: LogSegment, batch: int, bit: int) -> tuple[int, int]:
    """Flip ``bit`` of the base offset of the ``batch``-th batch of the segment file (the base
    offset lies outside the CRC); returns the batch's position and its new base offset."""
    data = segment.log_path.read_bytes()
    scan = scan_batches(data)
    position = int(scan.positions[batch])
    base = int(scan.base_offsets[batch]) ^ (1 << bit)
    with open(segment.log_path, "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">q", base))
    return position, base


@pytest.mark.parametrize("batch, bit, why", [
    (1, 0, "is not above 4"),                         # 5 -> 4: onto the batch before it
    (2, 3, "beyond 13"),                              # 7 -> 15: into the next segment
    (1, 40, "beyond 13"),                             # 5 -> 2^40 + 5: past the 32-bit range
])
def test_a_flipped_base_offset_stops_the_clean_and_leaves_the_segment_as_it_was(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler, batch: int, bit: int,
        why: str) -> None:
    log = records_log(tmp_path, clock, scheduler)
    target = log.segments()[0]
    assert log.segments()[1].base_offset == 14
    later = [(r.offset, r.key, r.value) for r in log.read(14)]
    position, base = flip_base_offset_bit(target, batch, bit)
    files_before = {p.name: p.read_bytes() for p in log.dir.iterdir()
                    if p.suffix in (".log", ".index", ".timeindex", ".txnindex")}

    with pytest.raises(CorruptSegmentError) as caught:
        make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    err = caught.value
    assert (err.path, err.position, err.offset, err.partition) == \
        (str(target.log_path), position, base, "t-0")
    assert "out of place" in str(err) and why in str(err)
    assert {p.name: p.read_bytes() for p in log.dir.iterdir()
            if p.suffix in (".log", ".index", ".timeindex", ".txnindex")} == files_before
    assert not [p for p in os.listdir(log.dir) if p.endswith((".cleaned", ".swap"))]
    assert [s.base_offset for s in log.segments()] == [0, 14, 28, 42, 47]
    assert [(r.offset, r.key, r.value) for r in log.read(14)] == later
    manager = CleanerManager([tmp_path], CleanerConfig(uncleanable_retries=0), clock=clock)
    assert manager.record_cleaning_failure(log.topic_partition, tmp_path, err)
    entry = manager.uncleanable_partitions(tmp_path)[log.topic_partition]
    assert "CorruptSegmentError" in entry.error and str(target.log_path) in entry.error


def test_a_flipped_base_offset_stops_the_clean_from_a_dirty_offset_past_it(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    """The offset map pass starts inside the segment (at the index entry for the first dirty
    offset) and the cleaning pass rewrites the whole segment: both check the offsets."""
    log = records_log(tmp_path, clock, scheduler)
    target = log.segments()[1]
    batches = len(scan_batches(target.log_path.read_bytes()).positions)
    position, base = flip_base_offset_bit(target, batches - 1, 2)
    with pytest.raises(CorruptSegmentError) as caught:
        make_cleaner(1024, clock).clean(log, 15, clock.milliseconds())
    assert (caught.value.path, caught.value.position, caught.value.offset) == \
        (str(target.log_path), position, base)


def test_the_error_pickles_with_its_fields() -> None:
    import pickle

    err = CorruptSegmentError("bad", path="/d/t-0/0.log", position=70, offset=3, partition="t-0")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is CorruptSegmentError
    assert (copy.path, copy.position, copy.offset, copy.partition) == ("/d/t-0/0.log", 70, 3, "t-0")


def planted_log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler, batch: bytes,
                config: LogConfig) -> Log:
    """A log whose first segment holds ``batch`` (written to the file: an append would refuse it)
    and a later record of the same key, then an active segment."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    first = LogSegment.create(directory, 0, config, clock=clock)
    first.append(0, T0, 0, [batch])
    first.append(1, T0, 1, [build_batch([Record(b"k", b"later", T0)], base_offset=1)])
    first.on_become_inactive()
    first.close()
    active = LogSegment.create(directory, 2, config, clock=clock)
    active.close()
    return Log.open(directory, config, recovery_point=2, had_clean_shutdown=True, clock=clock,
                    scheduler=scheduler)


def with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_forged_records_count_is_refused_before_allocating(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler, codec: Compression) -> None:
    batch = bytearray(build_batch([Record(b"k", b"v", T0)], compression=codec))
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, 2**31 - 1)
    log = planted_log(tmp_path, clock, scheduler, with_crc(batch),
                      LogConfig(cleanup_policy="compact", max_message_bytes=2**30))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptSegmentError, match="records count 2147483647"):
            make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB


def test_a_zstd_bomb_is_cut_at_the_shared_cap_whatever_max_message_bytes(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    size = 8 * MAX_DECOMPRESSED_BYTES                        # 512 MiB of zeros
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zero = bytes(16 * MIB)
    body = b"".join([compressor.compress(zero) for _ in range(size // len(zero))]
                    + [compressor.flush()])
    assert len(body) < MIB
    header = bytearray(build_batch([Record(b"k", b"v", T0)]))[:HEADER_SIZE]
    batch = header + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)                 # batch length
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, int(Compression.ZSTD))
    # a topic allowing 256 MiB messages: a cap of 64 x max.message.bytes would allow 16 GiB
    log = planted_log(tmp_path, clock, scheduler, with_crc(batch),
                      LogConfig(cleanup_policy="compact", max_message_bytes=256 * MIB))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptSegmentError) as caught:
            make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"more than {MAX_DECOMPRESSED_BYTES} bytes" in str(caught.value)
    assert caught.value.position == 0 and caught.value.offset == 0
    assert peak < 2 * MAX_DECOMPRESSED_BYTES + 16 * MIB


def legacy_message(offset: int, attributes: int, key: bytes | None, value: bytes) -> bytes:
    """One magic 1 entry (Kafka's LegacyRecord): offset, size, crc, magic, attributes,
    timestamp, key, value."""
    body = (struct.pack(">bbq", 1, attributes, T0)
            + struct.pack(">i", -1 if key is None else len(key)) + (key or b"")
            + struct.pack(">i", len(value)) + value)
    entry = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(entry)) + entry


def test_a_legacy_gzip_bomb_is_a_typed_error_naming_the_segment(
        tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)        # gzip framing
    zero = bytes(16 * MIB)
    bomb = b"".join([compressor.compress(zero) for _ in range(2 * MAX_DECOMPRESSED_BYTES
                                                               // len(zero))]
                    + [compressor.flush()])
    wrapper = legacy_message(0, 1, None, bomb)                 # codec 1: gzip
    log = planted_log(tmp_path, clock, scheduler, wrapper,
                      LogConfig(cleanup_policy="compact", max_message_bytes=256 * MIB))
    segment = log.segments()[0]
    with pytest.raises(CorruptSegmentError) as caught:
        make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    assert (caught.value.path, caught.value.position) == (str(segment.log_path), 0)
    assert f"more than {MAX_DECOMPRESSED_BYTES} bytes" in str(caught.value)
