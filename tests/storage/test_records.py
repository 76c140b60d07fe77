"""RecordBatch v2: the reference vector, round trips, kafka-python as oracle, real Kafka logs,
the batch walks, and append validation."""

from __future__ import annotations

import collections
import json
import pickle
import struct
import warnings
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest

from storage import kernels, record_reader, records
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    Compression,
    ControlType,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_batch_columns,
    control_record,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_batches,
    parse_control_record,
    scan_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from storage.validation import validate_for_append

with warnings.catch_warnings():                 # kafka-python's import-time deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

from tests.conftest import FIXTURES
TS = 1_700_000_000_000
ALL_CODECS = list(Compression)

# kafka-storage.md §3: one record, key "k", value "v", timestamp 1000, leader epoch 0
REFERENCE_VECTOR = bytes.fromhex(
    "0000000000000000" "0000003a" "00000000" "02" "716a6189" "0000" "00000000"
    "00000000000003e8" "00000000000003e8" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "10" "00" "00" "00" "02" "6b" "02" "76" "00")


def _records(n: int, *, value_size: int = 20) -> list[Record]:
    return [Record(key=b"key-%d" % i, value=(b"value-%d-" % i).ljust(value_size, b"x"),
                   timestamp=TS + i) for i in range(n)]


def _read(data: bytes) -> list[Record]:
    return [r for batch in iter_batches(data) for r in batch.records()]


def _with_offsets(recs: list[Record], base: int = 0) -> list[Record]:
    return [Record(r.key, r.value, r.timestamp, r.headers, base + i) for i, r in enumerate(recs)]


# ---- layout and the reference vector -----------------------------------------------------------
def test_header_offsets_derive_from_the_struct_layout() -> None:
    assert (HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, HEADER_SIZE_UP_TO_MAGIC, CRC_OFFSET,
            ATTRIBUTES_OFFSET) == (61, 12, 16, 17, 17, 21)
    assert BATCH_HEADER.size == kernels.V2_HEADER_SIZE
    assert (records.LAST_OFFSET_DELTA_OFFSET, records.MAX_TIMESTAMP_OFFSET,
            records.RECORDS_COUNT_OFFSET) == (kernels.V2_LAST_OFFSET_DELTA_OFFSET,
                                              kernels.V2_MAX_TIMESTAMP_OFFSET,
                                              kernels.V2_RECORDS_COUNT_OFFSET)
    assert kernels.V2_ATTRIBUTES_OFFSET == ATTRIBUTES_OFFSET
    assert kernels.V2_CRC_OFFSET == CRC_OFFSET


def test_reference_vector_builds_byte_for_byte() -> None:
    built = build_batch([Record(b"k", b"v", 1000)], partition_leader_epoch=0)
    assert built == REFERENCE_VECTOR
    assert len(built) == 70


def test_reference_vector_parses_back() -> None:
    batch = RecordBatch(REFERENCE_VECTOR)
    assert batch.header == BatchHeader(0, 0x3A, 0, 2, 0x716A6189, 0, 0, 1000, 1000, -1, -1, -1, 1)
    assert batch.is_valid()
    assert batch.records() == [Record(b"k", b"v", 1000, (), 0)]
    assert (batch.size, batch.last_offset, batch.next_offset) == (70, 0, 1)


def test_crc32c_check_value() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283


VARINTS = [(-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
           (2**31 - 1, "feffffff0f"), (0, "00"), (-(2**31), "ffffffff0f")]


@pytest.mark.parametrize(("value", "encoded"), VARINTS)
def test_varint_examples_encode_and_decode(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert encode_varint(value) == raw
    assert decode_varint(raw) == (value, len(raw))
    out = np.zeros(10, dtype=np.uint8)
    assert kernels.write_varint(out, 0, value) == len(raw)
    assert bytes(out[:len(raw)]) == raw
    assert kernels.size_of_varint(value) == len(raw)
    assert tuple(kernels.read_varint(kernels.as_input(raw), 0, len(raw))) == (value, len(raw))


@pytest.mark.parametrize(("value", "encoded"), [(-(2**63), "ffffffffffffffffff01"),
                                                (2**63 - 1, "feffffffffffffffff01"),
                                                (-1, "01"), (300, "d804")])
def test_varlong_extremes_encode_and_decode(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert encode_varlong(value) == raw
    assert decode_varlong(raw) == (value, len(raw))
    out = np.zeros(10, dtype=np.uint8)
    assert kernels.write_varlong(out, 0, value) == len(raw)
    assert bytes(out[:len(raw)]) == raw
    assert kernels.size_of_varlong(value) == len(raw)
    assert tuple(kernels.read_varlong(kernels.as_input(raw), 0, len(raw))) == (value, len(raw))


def test_overlong_varints_are_refused() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80")
    assert kernels.read_varint(kernels.as_input(b"\xff" * 6), 0, 6)[1] == -1
    assert kernels.read_varlong(kernels.as_input(b"\xff" * 11), 0, 11)[1] == -1


# ---- round trips -------------------------------------------------------------------------------
def test_null_key_and_tombstone_round_trip() -> None:
    recs = [Record(None, b"v", TS), Record(b"k", None, TS + 1), Record(None, None, TS + 2)]
    assert _read(build_batch(recs, base_offset=7)) == _with_offsets(recs, 7)


def test_headers_round_trip_with_null_values_and_unicode_keys() -> None:
    recs = [Record(b"k", b"v", TS, [("trace", b"abc"), ("nul", None), ("ключ-🔑", b"")]),
            Record(b"k2", b"v2", TS, ()), Record(b"k3", b"v3", TS, (("only", b"x" * 300),))]
    assert recs[0].headers == (("trace", b"abc"), ("nul", None), ("ключ-🔑", b""))
    assert _read(build_batch(recs)) == _with_offsets(recs)


def test_header_keys_that_are_not_utf8_survive_a_rebuild() -> None:
    raw = bytearray(build_batch([Record(b"k", b"v", TS, (("ab", b"1"),))]))
    at = raw.index(b"ab", HEADER_SIZE)
    raw[at:at + 2] = b"\xff\xfe"
    struct.pack_into(">I", raw, CRC_OFFSET, crc32c.crc32c(bytes(raw[ATTRIBUTES_OFFSET:])))
    rebuilt = build_batch(_read(bytes(raw)))
    assert rebuilt[HEADER_SIZE:] == bytes(raw[HEADER_SIZE:])


def test_delete_horizon_makes_timestamp_deltas_negative_and_round_trips() -> None:
    recs = _records(5)
    horizon = TS + 86_400_000
    batch = RecordBatch(build_batch(recs, delete_horizon_ms=horizon))
    assert batch.header.has_delete_horizon and batch.delete_horizon_ms == horizon
    assert batch.header.base_timestamp == horizon and batch.max_timestamp == TS + 4
    assert batch.records() == _with_offsets(recs)
    first_record = batch.buffer[HEADER_SIZE:]
    ts_delta, _ = decode_varlong(first_record, 2)
    assert ts_delta == TS - horizon < 0


def test_control_records_round_trip_and_parse() -> None:
    data = build_batch([control_record(ControlType.COMMIT, 7, TS)], is_control=True,
                       is_transactional=True, producer_id=42, producer_epoch=3, base_sequence=-1)
    batch = RecordBatch(data)
    assert batch.is_control and batch.is_transactional
    (record,) = batch.records()
    assert record.key == b"\x00\x00\x00\x01" and record.value == b"\x00\x00\x00\x00\x00\x07"
    assert parse_control_record(record) == (ControlType.COMMIT, 7)
    abort = control_record(ControlType.ABORT, -1, TS)
    assert parse_control_record(abort) == (ControlType.ABORT, -1)


def test_unknown_control_types_keep_their_raw_int() -> None:
    leader_change = Record(key=b"\x00\x00\x00\x02", value=b"\x00\x00\x01\x02\x03", timestamp=TS)
    control_type, epoch = parse_control_record(leader_change)
    assert control_type == 2 and not isinstance(control_type, ControlType) and epoch == -1


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00"])
def test_control_records_with_short_keys_are_corrupt(key: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(key=key, value=b"\x00" * 6))


def test_empty_batch_is_kafkas_61_byte_header() -> None:
    data = build_batch([], base_offset=100, last_offset_delta=9, producer_id=5, producer_epoch=1,
                       base_sequence=10, max_timestamp=TS, compression=Compression.ZSTD)
    assert len(data) == 61
    batch = RecordBatch(data)
    header = batch.header
    assert (header.records_count, header.base_timestamp, header.max_timestamp) == (0, -1, TS)
    assert (batch.base_offset, batch.last_offset, batch.compression) == (100, 109, Compression.NONE)
    assert header.last_sequence == 19
    assert batch.is_valid() and batch.records() == []


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_every_codec_round_trips(codec: Compression) -> None:
    recs = _records(300) + [Record(None, None, TS, (("h", None),))]
    batch = RecordBatch(build_batch(recs, compression=codec, base_offset=1000))
    assert batch.compression == codec and batch.is_valid()
    assert batch.records() == _with_offsets(recs, 1000)


def test_one_mebibyte_values_round_trip() -> None:
    big = bytes(range(256)) * 4096
    recs = [Record(b"a", big, TS), Record(b"b", big[::-1], TS + 1)]
    for codec in (Compression.NONE, Compression.LZ4):
        assert _read(build_batch(recs, compression=codec)) == _with_offsets(recs)


def test_producer_fields_and_sequence_arithmetic() -> None:
    data = build_batch(_records(3), producer_id=99, producer_epoch=4, base_sequence=2**31 - 2,
                       is_transactional=True, partition_leader_epoch=12)
    batch = RecordBatch(data)
    header = batch.header
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 4, 2**31 - 2)
    assert header.has_producer_id and batch.is_transactional
    assert header.last_sequence == 0                 # wraps past INT32_MAX
    assert batch.partition_leader_epoch == 12


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    recs = [Record(b"a", b"1", TS), Record(b"b", b"2", TS + 50)]
    batch = RecordBatch(build_batch(recs, timestamp_type=TimestampType.LOG_APPEND_TIME))
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [TS + 50, TS + 50]


def test_cleaner_rebuild_keeps_offset_deltas_and_last_offset() -> None:
    recs = _records(3)
    data = build_batch(recs, base_offset=50, offset_deltas=[1, 4, 6], last_offset_delta=9)
    batch = RecordBatch(data)
    assert [r.offset for r in batch.records()] == [51, 54, 56]
    assert (batch.last_offset, batch.records_count) == (59, 3)


@pytest.mark.parametrize("kwargs", [{"offset_deltas": [0, 0]}, {"offset_deltas": [1]},
                                    {"last_offset_delta": 0}, {"producer_epoch": 2**15}])
def test_builder_refuses_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        build_batch(_records(2), **kwargs)


def test_builder_refuses_negative_timestamps_other_than_minus_one() -> None:
    assert RecordBatch(build_batch([Record(b"k", b"v", -1)])).max_timestamp == -1
    with pytest.raises(ValueError, match="negative timestamp"):
        build_batch([Record(b"k", b"v", -5)])


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_columns_build_the_same_bytes_as_records(codec: Compression) -> None:
    recs = _records(50) + [Record(None, b"v", TS), Record(b"k", None, TS - 10)]
    by_records = build_batch(recs, compression=codec, producer_id=1, producer_epoch=0,
                             base_sequence=0)
    by_columns = build_batch_columns([r.key for r in recs], [r.value for r in recs],
                                     np.array([r.timestamp for r in recs]), compression=codec,
                                     producer_id=1, producer_epoch=0, base_sequence=0)
    assert by_columns == by_records


def test_record_normalises_header_sequences_to_tuples() -> None:
    record = Record(b"k", b"v", headers=[["a", b"1"], ("b", None)])
    assert record.headers == (("a", b"1"), ("b", None))
    assert hash(record) == hash(Record(b"k", b"v", headers=(("a", b"1"), ("b", None))))


# ---- in-place edits ----------------------------------------------------------------------------
def test_set_base_offset_and_leader_epoch_rewrite_in_place_keeping_the_crc() -> None:
    buf = bytearray(build_batch(_records(4)))
    before = bytes(buf[ATTRIBUTES_OFFSET:])
    set_base_offset(buf, 1_000_000)
    set_partition_leader_epoch(memoryview(buf), 17)
    batch = RecordBatch(buf)
    assert bytes(buf[ATTRIBUTES_OFFSET:]) == before
    assert batch.is_valid() and batch.base_offset == 1_000_000
    assert batch.partition_leader_epoch == 17
    assert [r.offset for r in batch.records()] == [1_000_000 + i for i in range(4)]


def test_set_base_offset_at_a_position_and_refuses_non_v2_bytes() -> None:
    first, second = build_batch(_records(1)), build_batch(_records(2))
    buf = bytearray(first + second)
    set_base_offset(buf, 5, position=len(first))
    assert [b.base_offset for b in iter_batches(buf)] == [0, 5]
    with pytest.raises(InvalidRecordError):
        set_base_offset(buf, 5, position=3)


# ---- kafka-python as the independent oracle ------------------------------------------------------
ORACLE_RECORDS = [
    Record(b"key-0", b"value " * 20, TS, (("h1", b"v1"), ("h2", None))),
    Record(None, b"keyless " * 20, TS + 5),
    Record(b"tomb", None, TS + 3),
    Record(b"unicode", "ünïcødé".encode() * 10, TS + 1, (("ключ", b"\x00\x01"),)),
] + _records(100, value_size=60)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_reads_every_batch_we_build(codec: Compression) -> None:
    data = build_batch(ORACLE_RECORDS, compression=codec, base_offset=500, producer_id=7,
                       producer_epoch=2, base_sequence=30, is_transactional=True,
                       partition_leader_epoch=3)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.producer_id, batch.producer_epoch,
            batch.base_sequence, batch.is_transactional, batch.leader_epoch) == (
        500, int(codec), 7, 2, 30, True, 3)
    theirs = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    ours = [(500 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(ORACLE_RECORDS)]
    assert theirs == ours


def test_kafka_python_reads_a_log_of_our_batches() -> None:
    data = b"".join(build_batch(_records(10), base_offset=10 * i, compression=codec)
                    for i, codec in enumerate(ALL_CODECS))
    stream = MemoryRecords(data)
    offsets = []
    while stream.has_next():
        batch = stream.next_batch()
        assert batch.validate_crc()
        offsets.extend(r.offset for r in batch)
    assert offsets == list(range(50))


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_we_read_every_batch_kafka_python_builds(codec: Compression) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec),
                                        is_transactional=False, producer_id=11, producer_epoch=0,
                                        base_sequence=0, batch_size=1 << 20)
    for i, r in enumerate(ORACLE_RECORDS):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    data = bytes(builder.build())
    batch = RecordBatch(data)
    assert batch.is_valid() and batch.compression == codec
    assert batch.producer_id == 11 and batch.partition_leader_epoch == 0
    assert batch.records() == _with_offsets(ORACLE_RECORDS)
    assert validate_for_append(memoryview(data), require_keys=False,
                               max_message_bytes=1 << 20).records_count == len(ORACLE_RECORDS)


# ---- walking buffers: iter_batches and scan_batches -------------------------------------------
def _log(*codecs: Compression) -> bytes:
    return b"".join(build_batch(_records(3 + i), base_offset=100 * i, compression=codec)
                    for i, codec in enumerate(codecs))


def test_iter_batches_stops_quietly_at_an_incomplete_tail() -> None:
    data = _log(Compression.NONE, Compression.GZIP)
    whole = list(iter_batches(data))
    assert [b.base_offset for b in whole] == [0, 100]
    assert [b.position for b in iter_batches(data, base_position=4096)] == [4096,
                                                                          4096 + whole[0].size]
    for cut in (len(data) - 1, whole[0].size + 17, whole[0].size + 5):
        assert [b.base_offset for b in iter_batches(data[:cut])] == [0]


def test_iter_batches_raises_on_a_length_below_14_naming_path_and_position() -> None:
    first = build_batch(_records(2))
    bad = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", bad, 8, 13)
    with pytest.raises(CorruptRecordError) as caught:
        list(iter_batches(first + bytes(bad), path=Path("/x/0.log"), base_position=1000))
    assert caught.value.path == Path("/x/0.log") and caught.value.position == 1000 + len(first)
    assert "0.log" in str(caught.value)


def test_iter_batches_raises_on_an_unknown_magic() -> None:
    bad = bytearray(build_batch(_records(1)))
    bad[MAGIC_OFFSET] = 7
    with pytest.raises(CorruptRecordError, match="magic 7"):
        list(iter_batches(bytes(bad)))


def test_scan_batches_reports_every_header_field() -> None:
    data = _log(Compression.NONE, Compression.SNAPPY, Compression.ZSTD)
    scan = scan_batches(data)
    batches = list(iter_batches(data))
    assert scan.error is None and scan.error_position == -1 and scan.valid_bytes == len(data)
    assert scan.positions.tolist() == [b.position for b in batches]
    assert scan.sizes.tolist() == [b.size for b in batches]
    assert scan.base_offsets.tolist() == [0, 100, 200]
    assert scan.last_offsets.tolist() == [b.last_offset for b in batches] == [2, 103, 204]
    assert scan.max_timestamps.tolist() == [TS + 2, TS + 3, TS + 4]
    assert scan.records_counts.tolist() == [3, 4, 5]
    assert scan.magics.tolist() == [2, 2, 2]
    assert (scan.attributes & 7).tolist() == [0, 2, 4]
    assert scan.crcs.tolist() == [b.header.crc for b in batches]


def test_scan_batches_accepts_arrays_memoryviews_and_a_range() -> None:
    data = _log(Compression.NONE, Compression.NONE, Compression.NONE)
    first_size = RecordBatch(data).size
    for buf in (data, memoryview(bytearray(data)), np.frombuffer(data, dtype=np.uint8)):
        scan = scan_batches(buf, first_size, check_crc=True)
        assert scan.base_offsets.tolist() == [100, 200]
        assert scan.positions.tolist()[0] == first_size
        assert scan.valid_bytes == len(data) - first_size
    assert len(scan_batches(data, 0, len(data) - 1)) == 2


def test_scan_batches_stops_at_an_impossible_batch_without_raising() -> None:
    good = _log(Compression.NONE)
    bad = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", bad, 8, 3)
    scan = scan_batches(good + bytes(bad) + good)
    assert len(scan) == 1 and scan.valid_bytes == len(good)
    assert scan.error is not None and scan.error_position == len(good)


def test_scan_batches_flags_a_v2_batch_smaller_than_its_header() -> None:
    tiny = bytearray(40)
    struct.pack_into(">qib", tiny, 0, 0, 28, 0)
    tiny[MAGIC_OFFSET] = 2
    scan = scan_batches(bytes(tiny))
    assert len(scan) == 0 and "header" in (scan.error or "") and scan.error_position == 0
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(tiny)))


def test_scan_batches_with_check_crc_stops_at_the_first_bad_crc() -> None:
    data = bytearray(_log(Compression.NONE, Compression.NONE, Compression.NONE))
    sizes = scan_batches(data).sizes.tolist()
    data[sizes[0] + HEADER_SIZE + 3] ^= 0x40
    assert scan_batches(data).error is None
    scan = scan_batches(data, check_crc=True)
    assert len(scan) == 1 and scan.valid_bytes == sizes[0]
    assert scan.error_position == sizes[0] and "CRC" in (scan.error or "")


def test_scan_batches_walks_more_batches_than_one_kernel_call_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_reader, "_SCAN_CHUNK", 3)   # the reader owns the scan
    data = b"".join(build_batch(_records(1), base_offset=i) for i in range(10))
    scan = scan_batches(data, check_crc=True)
    assert scan.base_offsets.tolist() == list(range(10)) and scan.valid_bytes == len(data)


def test_scan_of_an_empty_or_tiny_buffer_finds_nothing() -> None:
    for buf in (b"", b"\x00" * 17):
        scan = scan_batches(buf)
        assert len(scan) == 0 and scan.valid_bytes == 0 and scan.error is None


def test_ensure_valid_names_path_position_offset_and_both_crcs() -> None:
    data = bytearray(build_batch(_records(3), base_offset=40))
    data[-1] ^= 1
    batch = RecordBatch(data, 8192, Path("/log/00000000000000000040.log"))
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as caught:
        batch.ensure_valid()
    err = caught.value
    assert err.path == Path("/log/00000000000000000040.log") and err.position == 8192
    assert err.offset == 42 and err.stored_crc == batch.header.crc
    assert err.computed_crc == crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:]))
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.position, again.stored_crc) == (err.path, 8192, err.stored_crc)


def test_a_truncated_batch_buffer_is_corrupt() -> None:
    data = build_batch(_records(3))
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatch(data[:-1])


def test_batch_header_parse_reads_a_header_at_a_position() -> None:
    first, second = build_batch(_records(1)), build_batch(_records(2), base_offset=9)
    header = BatchHeader.parse(first + second, len(first))
    assert (header.base_offset, header.records_count, header.size) == (9, 2, len(second))
    with pytest.raises(CorruptRecordError):
        BatchHeader.parse(second[:40])


# ---- real Kafka logs ---------------------------------------------------------------------------
def _expected_logs() -> list[tuple[str, str, dict[str, Any]]]:
    expected = json.loads((FIXTURES / "EXPECTED.json").read_text())
    return [(repo, rel, info["parsed"]) for repo, files in expected.items()
            for rel, info in files.items() if "walk_batches" in info.get("parsed", {})]


def test_the_real_kafka_fixtures_are_present() -> None:
    assert len(_expected_logs()) >= 260


def _summarise(data: bytes, path: Path) -> dict[str, Any]:
    scan = scan_batches(data, check_crc=True)
    batches = list(iter_batches(data, path=path))
    per_batch = [b.records() for b in batches]
    recs = [r for batch_records in per_batch for r in batch_records]
    control = collections.Counter(
        f"type{parse_control_record(r)[0]}" for b, rs in zip(batches, per_batch) if b.is_control
        for r in rs)
    extra = {"null_keys": sum(r.key is None for r in recs),
             "tombstones": sum(r.value is None for r in recs),
             "with_headers": sum(bool(r.headers) for r in recs)}
    got: dict[str, Any] = {
        "walk_batches": len(scan), "walk_valid_bytes": scan.valid_bytes,
        "walk_all_crc_ok": scan.error is None and all(b.is_valid() for b in batches),
        "kp_batches": len(batches), "kp_records": len(recs),
        "compression": dict(collections.Counter(b.compression.name.lower() for b in batches)),
        "magics": dict(collections.Counter(str(b.magic) for b in batches)),
        "control_batches": sum(b.is_control for b in batches), "control_records": dict(control),
        "txn_batches": sum(b.is_transactional for b in batches),
        "idempotent_batches": sum(b.producer_id >= 0 for b in batches),
        "max_recs_per_batch": max((len(rs) for rs in per_batch), default=0),
        "rec_extra": {k: v for k, v in extra.items() if v},
    }
    if batches:
        v2_epochs = scan.partition_leader_epochs[scan.magics == 2]
        v2_times = scan.max_timestamps[scan.magics == 2]
        got.update({
            "first_offset": int(scan.base_offsets[0]), "last_offset": int(scan.last_offsets[-1]),
            "first_record_offset": recs[0].offset, "last_record_offset": recs[-1].offset,
            "leader_epochs": sorted(set(v2_epochs.tolist())),
            "gaps": int((scan.base_offsets[1:] != scan.last_offsets[:-1] + 1).sum()),
            "monotonic": bool((np.diff(scan.last_offsets) > 0).all()),
        })
        if len(v2_times):
            got["max_ts_range"] = [int(v2_times.min()), int(v2_times.max())]
    return got


def test_every_real_kafka_log_reads_exactly_as_expected() -> None:
    checked = 0
    for repo, rel, expected in _expected_logs():
        data = (FIXTURES / repo / rel).read_bytes()
        got = _summarise(data, Path(rel))
        mismatches = {k: (expected[k], v) for k, v in got.items()
                      if k in expected and expected[k] != v}
        assert not mismatches, f"{repo}/{rel}: {mismatches}"
        assert got["walk_valid_bytes"] == expected["bytes"] - expected["trailing_bytes"]
        checked += 1
    assert checked == len(_expected_logs())


def test_real_kafka_batches_pass_append_validation() -> None:
    validated = 0
    for repo, rel, expected in _expected_logs():
        if expected.get("magics") != {"2": expected["kp_batches"]} or expected["control_batches"]:
            continue
        data = (FIXTURES / repo / rel).read_bytes()
        for batch in iter_batches(data):
            result = validate_for_append(batch.buffer, require_keys=False,
                                         max_message_bytes=1 << 24)
            assert result.records_count == batch.records_count
            validated += 1
    assert validated > 1000


def test_only_the_kernels_module_imports_numba() -> None:
    import ast

    storage_dir = Path(records.__file__).parent
    for name in ("records.py", "compression.py", "legacy.py"):
        tree = ast.parse((storage_dir / name).read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom)}
        assert "numba" not in imported, name


@pytest.mark.parametrize("compression", [records.Compression.NONE, records.Compression.ZSTD])
def test_check_records_fails_exactly_where_records_fails_without_building_them(
        compression: records.Compression) -> None:
    """``RecordBatch.check_records`` (strata recover's decode check of every batch it judges)
    passes a good batch and raises the reader's error for one whose CRC is right but whose
    records count cannot be true."""
    good = records.build_batch([records.Record(b"k%d" % i, b"v" * 50, 1_000) for i in range(20)],
                               compression=compression)
    records.RecordBatch(good).check_records()
    forged = bytearray(good)
    at = records.RECORDS_COUNT_OFFSET
    forged[at:at + 4] = (100_000).to_bytes(4, "big")
    forged[records.CRC_OFFSET:records.CRC_OFFSET + 4] = \
        crc32c.crc32c(bytes(forged[records.ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    batch = records.RecordBatch(bytes(forged), 0)
    assert batch.is_valid()
    with pytest.raises(CorruptRecordError) as expected:
        batch.records()
    with pytest.raises(CorruptRecordError) as checked:
        batch.check_records()
    assert checked.value.message == expected.value.message


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_build_batch_slices_reads_records_where_they_lie_and_equals_build_batch(
        compression: Compression) -> None:
    """Records scattered over two buffers, out of buffer order, some keys null, some with
    header blocks, in three pieces: the batch equals ``build_batch`` of the same records."""
    from storage.record_builder import RecordSlices, build_batch_slices, header_block

    recs = [Record(key=None if i % 5 == 0 else f"k{i}".encode(), value=None if i % 7 == 0
                   else bytes([i]) * (i % 13), timestamp=1_000 + 3 * i,
                   headers=(("h", b"x" * (i % 3)),) if i % 4 == 0 else ())
            for i in range(40)]
    pieces = []
    for chunk in (recs[:7], recs[7:8], recs[8:]):
        order = list(range(len(chunk)))[::-1]             # stored back to front in the buffer
        keys = b"".join(chunk[i].key or b"" for i in order)
        values = b"".join(chunk[i].value or b"" for i in order)
        blocks = [header_block(r.headers) for r in chunk]
        headers = b"".join(blocks[i] for i in order)

        def starts(lens: list[int]) -> np.ndarray:
            at = dict(zip(order, np.cumsum([0] + [max(lens[i], 0) for i in order])[:-1]))
            return np.array([at[i] for i in range(len(chunk))], dtype=np.int64)

        key_lens = [-1 if r.key is None else len(r.key) for r in chunk]
        value_lens = [-1 if r.value is None else len(r.value) for r in chunk]
        header_lens = [len(b) for b in blocks]
        pieces.append(RecordSlices(
            kernels.as_input(keys), starts(key_lens), np.array(key_lens, dtype=np.int64),
            kernels.as_input(values), starts(value_lens), np.array(value_lens, dtype=np.int64),
            kernels.as_input(headers), starts(header_lens), np.array(header_lens, dtype=np.int64),
            np.array([r.timestamp for r in chunk], dtype=np.int64)))
    built = build_batch_slices(pieces, compression=compression, producer_id=5, producer_epoch=1,
                               base_sequence=10, is_transactional=True)
    assert built == build_batch(recs, compression=compression, producer_id=5, producer_epoch=1,
                                base_sequence=10, is_transactional=True)
