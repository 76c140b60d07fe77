"""Producer batch validation before an append (Kafka's LogValidator): what it accepts and reports,
and a typed error naming the batch, its source and the position for every refusal."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest

from storage import kernels, records
from storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from storage.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    Compression,
    ControlType,
    Record,
    build_batch,
    control_record,
)
from storage.validation import AppendValidation, validate_for_append

TS = 1_700_000_000_000
ALL_CODECS = list(Compression)


def _records(n: int) -> list[Record]:
    return [Record(key=b"key-%d" % i, value=(b"value-%d-" % i).ljust(20, b"x"), timestamp=TS + i)
            for i in range(n)]


def _validate(data: bytes | bytearray, *, require_keys: bool = True,
              max_message_bytes: int = 1 << 20) -> AppendValidation:
    return validate_for_append(memoryview(data), require_keys=require_keys,
                               max_message_bytes=max_message_bytes, path=Path("/p/0.log"))


def _recrc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    return data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_validate_accepts_good_batches_and_reports_max_timestamp(codec: Compression) -> None:
    recs = [Record(b"a", b"1", TS + 5), Record(b"b", b"2", TS + 9), Record(b"c", b"3", TS + 9),
            Record(b"d", b"4", TS)]
    data = build_batch(recs, compression=codec)
    result = _validate(data)
    assert (result.records_count, result.last_offset_delta, result.max_timestamp,
            result.shallow_offset_of_max_timestamp, result.has_null_key, result.size) == (
        4, 3, TS + 9, 1, False, len(data))


def test_validate_reports_null_keys_when_keys_are_not_required() -> None:
    data = build_batch([Record(b"a", b"1", TS), Record(None, b"2", TS)])
    assert _validate(data, require_keys=False).has_null_key


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_validate_rejects_keyless_records_for_compacted_topics(codec: Compression) -> None:
    data = build_batch([Record(b"a", b"1", TS), Record(b"b", b"2", TS), Record(None, b"3", TS)],
                       compression=codec)
    with pytest.raises(InvalidRecordError, match="without key.*offset delta 2") as caught:
        _validate(data)
    assert caught.value.offset_delta == 2
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is InvalidRecordError and again.offset_delta == 2
    assert again.path == Path("/p/0.log")


def test_validate_rejects_a_bad_crc() -> None:
    data = bytearray(build_batch(_records(5)))
    data[-3] ^= 0x10
    with pytest.raises(CorruptRecordError, match="crc") as caught:
        _validate(data)
    assert caught.value.stored_crc != caught.value.computed_crc


def test_validate_rejects_truncated_and_padded_batches() -> None:
    data = build_batch(_records(5))
    for broken in (data[:-1], data[:HEADER_SIZE], data[:10], data + b"\x00"):
        with pytest.raises(CorruptRecordError):
            _validate(broken)


def test_validate_rejects_a_records_count_that_disagrees_with_the_offsets() -> None:
    data = bytearray(build_batch(_records(5)))
    struct.pack_into(">i", data, records.RECORDS_COUNT_OFFSET, 4)
    with pytest.raises(InvalidRecordError, match="count of records 4"):
        _validate(_recrc(data))


def test_validate_rejects_a_records_count_the_bytes_do_not_hold() -> None:
    data = bytearray(build_batch(_records(5)))
    struct.pack_into(">i", data, records.RECORDS_COUNT_OFFSET, 6)
    struct.pack_into(">i", data, records.LAST_OFFSET_DELTA_OFFSET, 5)
    with pytest.raises(CorruptRecordError):
        _validate(_recrc(data))
    data = bytearray(build_batch(_records(5)))
    struct.pack_into(">i", data, records.RECORDS_COUNT_OFFSET, 4)
    struct.pack_into(">i", data, records.LAST_OFFSET_DELTA_OFFSET, 3)
    with pytest.raises(CorruptRecordError, match="bytes remain"):
        _validate(_recrc(data))


def test_validate_rejects_empty_and_negative_counts() -> None:
    with pytest.raises(InvalidRecordError):
        _validate(build_batch([]))


def test_validate_rejects_non_sequential_offset_deltas() -> None:
    data = bytearray(build_batch(_records(3), offset_deltas=[0, 2, 3]))
    struct.pack_into(">i", data, records.LAST_OFFSET_DELTA_OFFSET, 2)
    with pytest.raises(InvalidRecordError, match="incremental offsets") as caught:
        _validate(_recrc(data))
    assert caught.value.offset_delta == 2 and caught.value.record_index == 1


def test_validate_rejects_oversize_batches() -> None:
    data = build_batch(_records(50))
    with pytest.raises(RecordTooLargeError) as caught:
        _validate(data, max_message_bytes=len(data) - 1)
    assert caught.value.size == len(data)
    assert pickle.loads(pickle.dumps(caught.value)).max_message_bytes == len(data) - 1
    assert _validate(data, max_message_bytes=len(data)).size == len(data)


def test_validate_rejects_control_batches_from_clients() -> None:
    data = build_batch([control_record(ControlType.ABORT, 0, TS)], is_control=True)
    with pytest.raises(InvalidRecordError, match="control"):
        _validate(data)


def test_validate_rejects_legacy_magic_and_unknown_magic() -> None:
    data = bytearray(build_batch(_records(1)))
    data[MAGIC_OFFSET] = 1
    with pytest.raises(InvalidRecordError, match="magic 1"):
        _validate(data)
    data[MAGIC_OFFSET] = 9
    with pytest.raises(CorruptRecordError, match="magic 9"):
        _validate(data)


def test_validate_rejects_a_producer_id_without_a_sequence() -> None:
    data = build_batch(_records(2), producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        _validate(data)


def test_validate_rejects_a_record_whose_length_lies() -> None:
    data = bytearray(build_batch(_records(3)))
    data[HEADER_SIZE] += 2                          # first record claims 1 more byte
    with pytest.raises(CorruptRecordError) as caught:
        _validate(_recrc(data))
    assert caught.value.record_index == 0


def test_validate_rejects_an_unknown_codec() -> None:
    data = bytearray(build_batch(_records(3)))
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, 6)
    with pytest.raises(CorruptRecordError, match="codec 6"):
        _validate(_recrc(data))


def _patched(fmt: str, offset: int, value: int, *, codec: Compression = Compression.NONE,
             recrc: bool = True) -> bytearray:
    data = bytearray(build_batch(_records(3), compression=codec))
    struct.pack_into(fmt, data, offset, value)
    return _recrc(data) if recrc else data


def _short_v2_batch() -> bytearray:
    data = bytearray(40)
    struct.pack_into(">i", data, records.SIZE_OFFSET, len(data) - records.LOG_OVERHEAD)
    data[MAGIC_OFFSET] = 2
    return data


def _overcounted_compressed_batch() -> bytearray:
    """A gzip batch of 3 records whose count and last offset delta claim 10,000 records."""
    data = bytearray(build_batch(_records(3), compression=Compression.GZIP))
    struct.pack_into(">i", data, records.LAST_OFFSET_DELTA_OFFSET, 9_999)
    struct.pack_into(">i", data, records.RECORDS_COUNT_OFFSET, 10_000)
    return _recrc(data)


@pytest.mark.parametrize("make, error, message, position", [
    (lambda: build_batch(_records(1))[:16], CorruptRecordError, "fewer than 17 bytes", 0),
    (lambda: _patched(">i", records.SIZE_OFFSET, 10, recrc=False), CorruptRecordError,
     "batch length field 10 does not match", records.SIZE_OFFSET),
    (lambda: _patched(">b", MAGIC_OFFSET, 0, recrc=False), InvalidRecordError,
     "magic 0 batches cannot be appended", None),
    (lambda: _patched(">b", MAGIC_OFFSET, 3, recrc=False), CorruptRecordError, "unknown magic 3",
     MAGIC_OFFSET),
    (_short_v2_batch, CorruptRecordError, "smaller than the 61-byte v2 header", 0),
    (lambda: _patched(">i", records.LAST_OFFSET_DELTA_OFFSET, -1), InvalidRecordError,
     r"invalid offset range: last offset delta -1", None),
    (lambda: _patched(">i", records.RECORDS_COUNT_OFFSET, 0), InvalidRecordError,
     "invalid reported count for record batch: 0", None),
    (lambda: _patched(">q", kernels.V2_PRODUCER_ID_OFFSET, 5, codec=Compression.LZ4),
     InvalidRecordError, "invalid sequence number -1 in record batch with producerId 5", None),
    (lambda: _patched(">h", ATTRIBUTES_OFFSET, records.CONTROL_MASK), InvalidRecordError,
     "not allowed to write control records", None),
    (_overcounted_compressed_batch, CorruptRecordError, "records count 10000 cannot fit in", None),
])
def test_validate_names_each_header_refusal_and_its_position(
        make: Any, error: type[Exception], message: str, position: int | None) -> None:
    with pytest.raises(error, match=message) as caught:
        _validate(make())
    assert type(caught.value) is error
    assert caught.value.path == Path("/p/0.log")
    if position is not None:
        assert caught.value.position == position
