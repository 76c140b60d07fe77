"""Readers never serve corrupt data as valid (issue 12, "Never serve corrupt data as valid").

Kafka's consumers check every batch's CRC (``check.crcs=true``); ours are ``Log.read``, the
cluster client and the Spark reader. Every test damages real segment files on disk, one bit at a
time, and checks that a read either raises a typed ``StorageError`` or returns exactly the records
that were written, never altered ones.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptRecordError, StorageError
from storage.log import Log
from storage.records import (
    ATTRIBUTES_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    Compression,
    Record,
    scan_batches,
)
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment

TS = 1_700_000_000_000

# every field of a v2 batch header, then the records: (name, first byte, end byte)
HEADER_REGIONS = (
    ("baseOffset", 0, SIZE_OFFSET),
    ("batchLength", SIZE_OFFSET, PARTITION_LEADER_EPOCH_OFFSET),
    ("partitionLeaderEpoch", PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET),
    ("magic", MAGIC_OFFSET, CRC_OFFSET),
    ("crc", CRC_OFFSET, ATTRIBUTES_OFFSET),
    ("attributes", ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET),
    ("lastOffsetDelta", LAST_OFFSET_DELTA_OFFSET, BASE_TIMESTAMP_OFFSET),
    ("baseTimestamp", BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET),
    ("maxTimestamp", MAX_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET + 8),
    ("producer fields", MAX_TIMESTAMP_OFFSET + 8, RECORDS_COUNT_OFFSET),
    ("recordsCount", RECORDS_COUNT_OFFSET, HEADER_SIZE),
)


def _balance(i: int) -> Record:
    return Record(key=b"account-%d" % (i % 5), value=b"balance=%06d" % i, timestamp=TS + i)


def _open(directory: Path, clock: FakeClock, **kwargs: object) -> Log:
    config = LogConfig(segment_bytes=700, index_interval_bytes=256)
    return Log.open(directory, config, clock=clock, scheduler=FakeScheduler(clock), **kwargs)


@dataclass(frozen=True)
class Partition:
    """A small flushed and cleanly closed partition, and what was written to it."""

    directory: Path
    records: list[Record]            # as read back from the undamaged log
    log_end_offset: int


def _write_partition(directory: Path, clock: FakeClock) -> Partition:
    """Three segments of batches of 1 to 6 records: plain, with headers, gzip-compressed."""
    log = _open(directory, clock, recovery_point=0, had_clean_shutdown=True)
    i = 0
    for n in (3, 1, 6, 4, 2, 5, 3, 6, 1, 4, 2, 3, 5, 2):
        records = [_balance(i + k) for k in range(n)]
        if i % 3 == 1:
            records[0] = Record(records[0].key, records[0].value, records[0].timestamp,
                                (("trace", b"t-%d" % i),))
        log.append(records, compression=Compression.GZIP if n == 5 else Compression.NONE)
        i += n
    log.flush()
    records = list(log.read())
    end = log.log_end_offset
    assert log.number_of_segments >= 3 and [r.offset for r in records] == list(range(end))
    log.close()
    return Partition(directory, records, end)


@pytest.fixture
def partition(tmp_path: Path, clock: FakeClock) -> Partition:
    return _write_partition(tmp_path / "pristine" / "bank-0", clock)


def _flip(path: Path, position: int, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))


def _read_all(log: Log, start: int | None = None) -> tuple[list[Record], StorageError | None]:
    """What a reader gets: the records before any error, and the typed error if one was raised
    (an untyped exception propagates and fails the test)."""
    got: list[Record] = []
    try:
        for record in log.read(start):
            got.append(record)
    except StorageError as err:
        return got, err
    return got, None


def _assert_never_altered(got: list[Record], error: StorageError | None,
                          expected: list[Record], what: str, log: Log | None = None) -> None:
    """Exactly the expected records, or an exact prefix of them followed by a typed error.

    With ``log``: if opening it cut damaged bytes (kept in quarantine and reported in its load
    result), records may be missing where the cut was, but every record served is still the
    one written at its offset, in offset order."""
    if log is not None and log.load_result.quarantined:
        written = {r.offset: r for r in expected}
        assert all(written.get(r.offset) == r for r in got), f"{what}: altered records served"
        assert [r.offset for r in got] == sorted({r.offset for r in got}), what
        return
    assert got == expected[:len(got)], f"{what}: altered records served"
    if error is None:
        assert got == expected, f"{what}: records lost without an error"


def _cut_at_open_or_refused(log: Log, error: StorageError | None, path: Path) -> bool:
    """The damage was found: cut at open (kept in quarantine) or refused by the read, naming
    the file."""
    if log.load_result.quarantined:
        return True
    return isinstance(error, CorruptRecordError) and error.path == str(path)


def _segment_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(files.LOG_SUFFIX))


def _flips(partition: Partition, seed: int, *, closed_only: bool = False
           ) -> Iterator[tuple[str, Path, int, int, int]]:
    """(where, file, position, bit, base offset of the damaged batch): for every batch of every
    segment (or every closed one), one seeded bit in each header field and three in its records."""
    rng = random.Random(seed)
    paths = _segment_files(partition.directory)
    for path in paths[:-1] if closed_only else paths:
        data = path.read_bytes()
        scan = scan_batches(data, check_crc=True)
        assert scan.error is None and scan.valid_bytes == len(data)
        for position, size, base in zip(scan.positions.tolist(), scan.sizes.tolist(),
                                        scan.base_offsets.tolist()):
            regions = [*HEADER_REGIONS, *[("records", HEADER_SIZE, size)] * 3]
            for name, first, end in regions:
                at = position + rng.randrange(first, end)
                yield f"{path.name}@{at} ({name})", path, at, rng.randrange(8), base


def _copy(partition: Partition, root: Path) -> Path:
    copy = root / "bank-0"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(partition.directory, copy)
    return copy


def _damaged_copy(partition: Partition, root: Path, name: str, position: int, bit: int) -> Path:
    copy = _copy(partition, root)
    _flip(copy / name, position, bit)
    return copy


# ---- (a) the reproduction ----------------------------------------------------------------------
def test_a_flipped_bit_in_a_flushed_value_is_a_corrupt_record_error_naming_file_and_offset(
        tmp_path: Path, clock: FakeClock) -> None:
    """balance=000007 must never be served as balance=800007 (bit 3 of the first '0': 0x30 ->
    0x38), even from a segment below the recovery point that no load re-checks."""
    directory = tmp_path / "bank-0"
    log = _open(directory, clock, recovery_point=0, had_clean_shutdown=True)
    for start in range(0, 12, 4):
        log.append([_balance(i) for i in range(start, start + 4)])
    log.flush()
    end = log.log_end_offset
    log.close()
    path = _segment_files(directory)[0]
    data = path.read_bytes()
    at = data.index(b"balance=000007") + len(b"balance=")
    scan = scan_batches(data)
    batch = max(i for i, p in enumerate(scan.positions.tolist()) if p <= at)
    _flip(path, at, 3)
    assert b"balance=800007" in path.read_bytes()

    reopened = _open(directory, clock, recovery_point=end, had_clean_shutdown=True)
    got, error = _read_all(reopened)
    assert isinstance(error, CorruptRecordError)
    assert [r.value for r in got] == [b"balance=%06d" % i for i in range(4)]
    assert error.path == str(path) and str(path) in str(error)
    assert batch == 1 and error.position == int(scan.positions[1])
    assert error.base_offset == 4 and "CRC mismatch" in str(error)
    assert f"position {error.position}" in str(error)
    with pytest.raises(CorruptRecordError):
        list(reopened.read(7))
    assert [r.value for r in reopened.read(8)] == [b"balance=%06d" % i for i in range(8, 12)]
    reopened.close()


def test_a_raw_fetch_of_a_damaged_batch_is_refused_by_its_decoder_naming_the_file(
        tmp_path: Path, clock: FakeClock) -> None:
    """``read_raw`` bytes decoded elsewhere (the cluster client decodes ``FetchData.batches()``)
    are CRC-checked by the decoder, and its error names the segment file and position."""
    directory = tmp_path / "bank-0"
    log = _open(directory, clock, recovery_point=0, had_clean_shutdown=True)
    log.append([_balance(i) for i in range(4)])
    path = _segment_files(directory)[0]
    fetch = log.read_raw(0)
    assert fetch is not None and fetch.path == str(path)
    damaged = bytearray(fetch.data)
    damaged[-1] ^= 0x10
    copy = type(fetch)(fetch.segment_base_offset, fetch.position, bytes(damaged), fetch.path)
    with pytest.raises(CorruptRecordError) as caught:
        [r for batch in copy.batches() for r in batch.records()]
    assert str(path) in str(caught.value) and "position 0" in str(caught.value)
    log.close()


# ---- (c) offsets and lengths, which lie outside the CRC ----------------------------------------
@pytest.mark.parametrize("batch", [0, 1, 2])
@pytest.mark.parametrize("bit", [0, 3, 20, 40])
def test_a_flipped_base_offset_is_a_corrupt_record_error_not_records_at_other_offsets(
        partition: Partition, tmp_path: Path, clock: FakeClock, batch: int, bit: int) -> None:
    """Flip one bit of a batch's baseOffset (first, middle and last batch of the first segment):
    reading from the start and from the batch's own offset never yields a record at an offset
    it was not written at."""
    path = _segment_files(partition.directory)[0]
    scan = scan_batches(path.read_bytes())
    index = [0, len(scan) // 2, len(scan) - 1][batch]
    position = int(scan.positions[index])
    base = int(scan.base_offsets[index])
    byte, within = 7 - bit // 8, bit % 8      # big-endian: bit 0 is in the last byte
    copy = _damaged_copy(partition, tmp_path / "damaged", path.name, position + byte, within)
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    got, error = _read_all(log)
    _assert_never_altered(got, error, partition.records, "from the start", log)
    if log.load_result.quarantined:
        # the open found the batch out of place (its index entry disagreed) and recovery cut it,
        # keeping its bytes in quarantine from its position, and the later segments whole
        cut, *later = [(q.original, q.position) for q in log.load_result.quarantined]
        assert cut == (path.name, position) and all(p == 0 for _, p in later)
        assert base not in {r.offset for r in got}
    else:
        assert isinstance(error, CorruptRecordError) and error.path == str(copy / path.name)
    got, error = _read_all(log, base)
    _assert_never_altered(got, error, partition.records[base:], f"from offset {base}", log)
    assert log.load_result.quarantined or isinstance(error, CorruptRecordError)
    log.close()


@pytest.mark.parametrize("bit", [0, 2, 7, 12, 30])
def test_a_flipped_batch_length_is_a_corrupt_record_error(
        partition: Partition, tmp_path: Path, clock: FakeClock, bit: int) -> None:
    """A flipped batchLength (outside the CRC) in the middle of a closed segment: the batch's
    bounds are wrong, so its CRC, the next batch or the end of the file gives it away."""
    path = _segment_files(partition.directory)[0]
    scan = scan_batches(path.read_bytes())
    position = int(scan.positions[len(scan) // 2])
    byte = SIZE_OFFSET + 3 - bit // 8
    copy = _damaged_copy(partition, tmp_path / "damaged", path.name, position + byte, bit % 8)
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    got, error = _read_all(log)
    _assert_never_altered(got, error, partition.records, "from the start", log)
    assert _cut_at_open_or_refused(log, error, copy / path.name)
    log.close()


def test_a_segment_that_ends_inside_a_batch_is_an_error_not_a_silent_end(
        partition: Partition, tmp_path: Path, clock: FakeClock) -> None:
    """A closed segment cut inside its last batch: the open's index check or a read through it
    finds it (cut into quarantine, or CorruptRecordError) instead of skipping to the next
    segment as if nothing were missing."""
    path = _segment_files(partition.directory)[0]
    copy = _copy(partition, tmp_path / "damaged")
    data = (copy / path.name).read_bytes()
    (copy / path.name).write_bytes(data[:-5])
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    got, error = _read_all(log)
    _assert_never_altered(got, error, partition.records, "from the start", log)
    assert _cut_at_open_or_refused(log, error, copy / path.name)
    log.close()


# ---- (b) the seeded bit-flip sweep -------------------------------------------------------------
@pytest.mark.parametrize("reopen", ["open log", "clean reopen"])
def test_no_single_bit_flip_in_a_segment_makes_a_reader_serve_altered_records(
        partition: Partition, tmp_path: Path, clock: FakeClock, reopen: str) -> None:
    """For a seeded bit in every header field and in the records of every batch: reading from
    the start, and from every third offset, yields the original records, or an exact prefix of
    them and then a typed error. Never a changed record, never fewer records without an error.

    "open log": every segment, damaged under a log that is open. "clean reopen": every segment,
    damaged while the log was shut down cleanly; the open checks every index against its
    segment and the active segment's tail, and may cut what it finds damaged (into quarantine,
    reported in the load result): then records may be missing, but none is ever altered."""
    starts = sorted({0, *range(0, partition.log_end_offset, 3)})
    for where, path, position, bit, _base in _flips(partition, seed=12):
        root = tmp_path / "damaged"
        if reopen == "open log":
            copy = _copy(partition, root)              # undamaged while the log opens ...
            log = _open(copy, clock, recovery_point=partition.log_end_offset,
                        had_clean_shutdown=True)
            _flip(copy / path.name, position, bit)     # ... and damaged under it
        else:
            copy = _damaged_copy(partition, root, path.name, position, bit)
            try:
                log = _open(copy, clock, recovery_point=partition.log_end_offset,
                            had_clean_shutdown=True)
            except StorageError:
                continue                                # refused to open: typed, nothing served
        try:
            for start in starts:
                got, error = _read_all(log, start)
                _assert_never_altered(got, error, partition.records[start:],
                                      f"{where} bit {bit}, {reopen}, read from {start}", log)
        finally:
            log.close()


def test_an_unclean_reopen_keeps_every_batch_before_a_damaged_one_and_serves_nothing_altered(
        partition: Partition, tmp_path: Path, clock: FakeClock) -> None:
    """The sweep through recovery (no recovery point: every segment is re-validated): the
    recovered log holds every record before the damaged batch, and a read never serves a record
    that differs from what was written at its offset."""
    written = {r.offset: r for r in partition.records}
    for where, path, position, bit, base in _flips(partition, seed=21):
        copy = _damaged_copy(partition, tmp_path / "damaged", path.name, position, bit)
        try:
            log = _open(copy, clock)
        except StorageError:
            continue
        try:
            got, _error = _read_all(log)
            assert all(written.get(r.offset) == r for r in got), f"{where}: altered records"
            assert [r.offset for r in got][:base] == list(range(base)), \
                f"{where}: records before the damaged batch at {base} lost"
        finally:
            log.close()


def test_segment_walks_name_the_file_and_one_position(partition: Partition, tmp_path: Path,
                                                      clock: FakeClock) -> None:
    """A batch with an impossible length in the middle of a segment: the error names the file
    and the batch's position in that file, once (not a position within some read chunk)."""
    path = _segment_files(partition.directory)[0]
    scan = scan_batches(path.read_bytes())
    position = int(scan.positions[2])
    copy = _damaged_copy(partition, tmp_path / "damaged", path.name, position + SIZE_OFFSET, 7)
    segment = LogSegment(copy, 0, LogConfig())
    with pytest.raises(CorruptRecordError) as caught:
        list(segment.batches(int(scan.positions[1])))
    message = str(caught.value)
    assert message.startswith(f"{copy / path.name}: record batch at position {position}: ")
    assert message.count("position") == 1 and caught.value.position == position


def test_an_index_entry_pointing_past_the_wanted_batch_does_not_make_a_reader_skip_records(
        partition: Partition, tmp_path: Path, clock: FakeClock) -> None:
    """An offset-index entry whose offset was damaged downwards (it now claims a lower offset
    for a later position) would start a read past the batches it wants. The batch at the
    entry's position ends above the entry's offset, so the reader walks from the segment's
    start instead, and returns every record."""
    path = _segment_files(partition.directory)[0]
    copy = _copy(partition, tmp_path / "damaged")
    index_path = copy / path.name.replace(files.LOG_SUFFIX, files.INDEX_SUFFIX)
    entries = index_path.read_bytes()
    relative = int.from_bytes(entries[0:4], "big")       # the first entry's relative offset
    lowered = relative // 2
    assert lowered > 0
    index_path.write_bytes(lowered.to_bytes(4, "big") + entries[4:])
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    for start in range(lowered, relative + 1):
        got, error = _read_all(log, start)
        assert error is None and got == partition.records[start:], f"read from {start}"
    log.close()


def test_an_index_entry_pointing_inside_a_batch_does_not_make_a_read_fail(
        partition: Partition, tmp_path: Path, clock: FakeClock) -> None:
    """An offset-index entry whose position was damaged (it now points inside a batch): the
    read walks the segment from its start and returns every record, since the data is intact."""
    path = _segment_files(partition.directory)[0]
    copy = _copy(partition, tmp_path / "damaged")
    index_path = copy / path.name.replace(files.LOG_SUFFIX, files.INDEX_SUFFIX)
    entries = index_path.read_bytes()
    relative = int.from_bytes(entries[0:4], "big")
    position = int.from_bytes(entries[4:8], "big")
    index_path.write_bytes(entries[:4] + (position + 9).to_bytes(4, "big") + entries[8:])
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    got, error = _read_all(log, relative)
    assert error is None and got == partition.records[relative:]
    log.close()


def test_a_lowered_base_offset_at_an_index_entry_does_not_make_a_reader_skip_its_records(
        partition: Partition, tmp_path: Path, clock: FakeClock) -> None:
    """The batch an offset-index entry points at has one set bit of its baseOffset cleared, so
    it claims to end below the entry's offset. A read from that offset walks from the entry
    before, where the batch's predecessor shows it out of place: an error, not a silent skip
    of the offsets it holds."""
    path = _segment_files(partition.directory)[0]
    copy = _copy(partition, tmp_path / "damaged")
    entries = (copy / path.name.replace(files.LOG_SUFFIX, files.INDEX_SUFFIX)).read_bytes()
    entry_offset = int.from_bytes(entries[0:4], "big")
    entry_position = int.from_bytes(entries[4:8], "big")
    data = (copy / path.name).read_bytes()
    scan = scan_batches(data)
    index = scan.positions.tolist().index(entry_position)
    base = int(scan.base_offsets[index])
    assert int(scan.last_offsets[index]) == entry_offset and base > 0
    bit = (base & -base).bit_length() - 1                  # the lowest set bit
    _flip(copy / path.name, entry_position + 7 - bit // 8, bit % 8)
    log = _open(copy, clock, recovery_point=partition.log_end_offset, had_clean_shutdown=True)
    got, error = _read_all(log, entry_offset)
    _assert_never_altered(got, error, partition.records[entry_offset:], f"from {entry_offset}")
    assert isinstance(error, CorruptRecordError) and error.position == entry_position
    log.close()


@pytest.mark.timeout(60)
def test_a_segment_file_shorter_than_its_size_ends_the_walk_instead_of_looping(
        tmp_path: Path) -> None:
    """A .log cut short under an open segment: an empty read once became a 12-byte "batch" that
    was asked for again and again, and every reader of the segment hung."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    for _ in range(2):
        log.append([Record(key=b"k", value=b"v" * 1000, timestamp=1)])
    log.roll()
    segment = log.segments()[0]
    with open(segment.log_path, "r+b") as f:
        f.truncate(100)
    assert list(segment.batches()) == []
    with pytest.raises(CorruptRecordError, match=str(segment.log_path)):
        list(segment.batches(verify=True))
    with pytest.raises(CorruptRecordError):
        list(log.read(0))
    log.close()
