"""Fuzzing the readers: random bytes, mutations and truncations of valid batches (with and without
a repaired CRC) never raise anything but the storage errors, never hang, never allocate memory in
proportion to a length they read from the bytes."""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import compression, kernels
from storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CRC_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    Compression,
    ControlType,
    Record,
    RecordBatch,
    build_batch,
    control_record,
    encode_varint,
    iter_batches,
    scan_batches,
)
from storage.validation import validate_for_append

STORAGE_ERRORS = (CorruptRecordError, InvalidRecordError, RecordTooLargeError)
TS = 1_700_000_000_000
MiB = 1024 * 1024
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

kernels.warm_up()


def _legacy(offset: int, magic: int, attributes: int, key: bytes | None,
            value: bytes | None) -> bytes:
    def field(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", TS) if magic else b"")
    body += field(key) + field(value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _corpus() -> list[bytes]:
    recs = [Record(b"k%d" % i if i % 4 else None, b"v%d" % i * 3 if i % 5 else None, TS + i,
                   (("h", b"x"), ("n", None)) if i % 3 == 0 else ()) for i in range(12)]
    batches = [build_batch(recs, compression=codec, base_offset=10) for codec in Compression]
    batches.append(build_batch([control_record(ControlType.COMMIT, 3, TS)], is_control=True))
    batches.append(build_batch([], last_offset_delta=4))
    batches.append(build_batch(recs[:3], delete_horizon_ms=TS + 1000, producer_id=1,
                               producer_epoch=0, base_sequence=0))
    inner0 = b"".join(_legacy(i, 0, 0, b"k", b"v%d" % i) for i in range(4))
    inner1 = b"".join(_legacy(i, 1, 0, None, b"v%d" % i) for i in range(4))
    batches.append(_legacy(0, 0, 0, b"key", b"value"))
    batches.append(_legacy(3, 0, 1, None, compression.compress(1, inner0)))
    batches.append(_legacy(3, 1, 2, None, compression.compress(2, inner1)))
    batches.append(_legacy(3, 1, 3, None, compression.compress(3, inner1)))
    return batches


CORPUS = _corpus()
LOG = b"".join(CORPUS)


def _exercise(data: bytes) -> None:
    """Run every reader over ``data``; only the storage errors may escape them."""
    for check_crc in (False, True):
        scan = scan_batches(data, check_crc=check_crc)
        assert 0 <= scan.valid_bytes <= len(data)
        assert len(scan.positions) == len(scan.sizes) == len(scan.base_offsets)
    try:
        for batch in iter_batches(data, path=Path("fuzz.log")):
            batch.is_valid()
            _ = (batch.last_offset, batch.max_timestamp, batch.size, batch.magic)
            try:
                batch.records(max_decompressed_bytes=MiB)
                _ = (batch.header, batch.base_offset, batch.compression)
            except STORAGE_ERRORS:
                pass
    except STORAGE_ERRORS:
        pass
    try:
        validate_for_append(memoryview(data), require_keys=True, max_message_bytes=MiB,
                            max_decompressed_bytes=MiB)
    except STORAGE_ERRORS:
        pass
    try:
        RecordBatch(data).records(max_decompressed_bytes=MiB)
    except STORAGE_ERRORS:
        pass


def _repair_crc(data: bytearray) -> bytearray:
    """Make the CRC match again so that the mutation reaches the record parsers."""
    if len(data) >= HEADER_SIZE and data[MAGIC_OFFSET] == 2:
        struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    elif len(data) >= 18 and data[MAGIC_OFFSET] in (0, 1):
        struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[MAGIC_OFFSET:])))
    return data


@pytest.mark.timeout(60)
@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes_only_raise_storage_errors(data: bytes) -> None:
    _exercise(data)


@pytest.mark.timeout(60)
@FUZZ
@given(st.sampled_from(CORPUS), st.data(), st.booleans())
def test_single_byte_mutations_only_raise_storage_errors(batch: bytes, draw: st.DataObject,
                                                         repair: bool) -> None:
    data = bytearray(batch)
    index = draw.draw(st.integers(0, len(data) - 1))
    data[index] = draw.draw(st.integers(0, 255))
    _exercise(bytes(_repair_crc(data) if repair else data))


@pytest.mark.timeout(60)
@FUZZ
@given(st.sampled_from(CORPUS), st.data(), st.binary(max_size=8))
def test_truncations_only_raise_storage_errors(batch: bytes, draw: st.DataObject,
                                               tail: bytes) -> None:
    cut = draw.draw(st.integers(0, len(batch)))
    _exercise(batch[:cut] + tail)
    _exercise(LOG[:draw.draw(st.integers(0, len(LOG)))])


@pytest.mark.timeout(60)
@FUZZ
@given(st.integers(0, 4), st.integers(0, 0x7FFF), st.integers(-3, 50), st.integers(-2, 40),
       st.binary(max_size=200))
def test_random_records_under_a_valid_header_only_raise_storage_errors(
        codec: int, attributes: int, last_offset_delta: int, count: int, body: bytes) -> None:
    """Header checks pass (sizes and CRC are right), so the record parsers see the garbage."""
    if codec:
        body = compression.compress(codec, body)
    data = bytearray(HEADER_SIZE + len(body))
    BATCH_HEADER.pack_into(data, 0, 0, len(data) - 12, -1, 2, 0,
                           (attributes & ~0x07) | codec, last_offset_delta, TS, TS, -1, -1, -1,
                           count)
    data[HEADER_SIZE:] = body
    _exercise(bytes(_repair_crc(data)))


@pytest.mark.timeout(60)
@FUZZ
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=8), st.integers(1, 4))
def test_random_varints_in_a_record_only_raise_storage_errors(fields: list[int],
                                                              count: int) -> None:
    record = b"".join(encode_varint(f) for f in fields)
    body = encode_varint(len(record)) + record
    data = bytearray(build_batch([Record(b"k", b"v", TS)] * count))
    data = data[:HEADER_SIZE] + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    _exercise(bytes(_repair_crc(data)))


# ---- lengths that claim far more than the bytes hold -------------------------------------------
def _peak_allocation(fn: object) -> int:
    tracemalloc.start()
    try:
        fn()  # type: ignore[operator]
    except STORAGE_ERRORS:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _batch_with_records_section(section: bytes, count: int) -> bytes:
    data = bytearray(build_batch([Record(b"k", b"v", TS)]))[:HEADER_SIZE] + section
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">i", data, 23, count - 1)
    return bytes(_repair_crc(data))


def test_a_varint_claiming_a_2_gib_key_is_refused_by_bounds_not_by_allocation() -> None:
    record = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(2**31 - 1) + b"abc"
    data = _batch_with_records_section(encode_varint(len(record)) + record, 1)
    for read in (lambda: RecordBatch(data).records(),
                 lambda: validate_for_append(memoryview(data), require_keys=False,
                                             max_message_bytes=MiB)):
        with pytest.raises(CorruptRecordError):
            read()
        assert _peak_allocation(read) < MiB


def test_a_records_count_of_int_max_is_refused_before_allocating() -> None:
    data = _batch_with_records_section(b"\x0c\x00\x00\x00\x02k\x02v\x00" * 3, 2**31 - 1)
    for read in (lambda: RecordBatch(data).records(),
                 lambda: validate_for_append(memoryview(data), require_keys=False,
                                             max_message_bytes=MiB)):
        with pytest.raises(STORAGE_ERRORS):
            read()
        assert _peak_allocation(read) < MiB


def test_a_legacy_value_length_of_int_max_is_refused() -> None:
    entry = bytearray(_legacy(0, 1, 0, None, b"value"))
    struct.pack_into(">i", entry, 30, 2**31 - 1)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(_repair_crc(entry))))


def test_a_batch_length_of_int_max_is_an_incomplete_tail_not_an_allocation() -> None:
    data = bytearray(build_batch([Record(b"k", b"v", TS)]))
    struct.pack_into(">i", data, 8, 2**31 - 1)
    assert list(iter_batches(bytes(data))) == []
    scan = scan_batches(bytes(data))
    assert len(scan) == 0 and scan.error is None and scan.valid_bytes == 0


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_a_compression_bomb_inside_a_batch_is_corrupt_at_the_bound(codec: Compression) -> None:
    big = [Record(b"k", bytes(4 * MiB), TS)]
    data = build_batch(big, compression=codec)
    assert len(data) < MiB // 4
    with pytest.raises(CorruptRecordError, match="more than"):
        RecordBatch(data).records(max_decompressed_bytes=MiB)
    with pytest.raises(CorruptRecordError, match="more than"):
        validate_for_append(memoryview(data), require_keys=True, max_message_bytes=MiB,
                            max_decompressed_bytes=MiB)
    assert RecordBatch(data).records()[0].value == bytes(4 * MiB)


def test_kernels_reject_every_truncation_of_a_valid_records_section() -> None:
    data = build_batch([Record(b"key", b"value" * 10, TS, (("h", b"v"),))] * 3)
    section = data[HEADER_SIZE:]
    for cut in range(len(section)):
        fields = np.empty((kernels.RECORD_ROWS, 3), dtype=np.int64)
        _, status, _ = kernels.walk_records(kernels.as_input(section[:cut]), 0, cut, fields)
        assert status != kernels.OK
