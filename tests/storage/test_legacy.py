"""Magic 0 and 1 message sets: kafka-python's legacy builder as oracle, Kafka's lz4 checksum bug,
relative inner offsets, damage, and the asayers/kafkalite golden decodes of real Kafka files."""

from __future__ import annotations

import struct
import warnings
import zlib

import lz4.frame
import pytest

from storage import compression, legacy
from storage.errors import CorruptRecordError
from storage.records import (
    BatchHeader,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    iter_batches,
    scan_batches,
)

with warnings.catch_warnings():                 # kafka-python's import-time deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.conftest import FIXTURES
KAFKALITE = FIXTURES / "asayers__kafkalite" / "tests" / "test-data"
TS = 1_600_000_000_000
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
Pairs = list[tuple[bytes | None, bytes | None]]


def _pairs(n: int) -> Pairs:
    return [(None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 3 else b"value %d " % i * 4)
            for i in range(n)]


def _message(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None,
             timestamp: int = -1) -> bytes:
    """One legacy entry, encoded by hand."""
    def field(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = struct.pack(">bb", magic, attributes)
    body += struct.pack(">q", timestamp) if magic == 1 else b""
    body += field(key) + field(value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _set_offset(entry: bytes, offset: int) -> bytes:
    """Stamp the wrapper offset as a broker does (the offset is outside the CRC)."""
    return struct.pack(">q", offset) + entry[8:]


def _kafka_python_set(magic: int, codec: Compression, pairs: Pairs, base: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec),
                                       batch_size=1 << 20)
    for i, (key, value) in enumerate(pairs):
        offset = base + i if (magic == 0 or codec == Compression.NONE) else i
        assert builder.append(offset, timestamp=TS + i, key=key, value=value) is not None
    data = bytes(builder.build())
    if codec != Compression.NONE:
        data = _set_offset(data, base + len(pairs) - 1)
    return data


def _expected(magic: int, pairs: Pairs, base: int) -> list[Record]:
    return [Record(key, value, TS + i if magic == 1 else -1, (), base + i)
            for i, (key, value) in enumerate(pairs)]


# kafka-python needs xxhash to write magic 0 lz4 (Kafka's broken checksum): that case is built by
# hand in test_magic_0_lz4_with_kafkas_broken_header_checksum_reads
@pytest.mark.parametrize(("magic", "codec"), [(magic, codec) for magic in (0, 1)
                                              for codec in LEGACY_CODECS
                                              if (magic, codec) != (0, Compression.LZ4)])
def test_we_read_every_legacy_set_kafka_python_builds(magic: int, codec: Compression) -> None:
    pairs = _pairs(40)
    data = _kafka_python_set(magic, codec, pairs, base=1000)
    batches = list(iter_batches(data))
    assert len(batches) == (1 if codec else 40)
    assert all(b.magic == magic and b.is_valid() and b.compression == codec for b in batches)
    assert [r for b in batches for r in b.records()] == _expected(magic, pairs, 1000)


def test_magic_0_lz4_with_kafkas_broken_header_checksum_reads() -> None:
    pairs = _pairs(12)
    inner = _kafka_python_set(0, Compression.NONE, pairs, base=50)
    frame = lz4.frame.compress(inner, block_linked=False, store_size=False)
    broken = frame[:6] + bytes(((compression.xxh32(frame[:6]) >> 8) & 0xFF,)) + frame[7:]
    wrapper = _message(61, 0, int(Compression.LZ4), None, broken)
    (batch,) = iter_batches(wrapper)
    assert batch.is_valid()
    assert batch.records() == _expected(0, pairs, 50)


def test_magic_1_inner_offsets_are_relative_to_the_wrapper_offset() -> None:
    inner = b"".join(_message(rel, 1, 0, b"k", b"v%d" % rel, TS + rel) for rel in (0, 1, 2))
    wrapper = _message(702, 1, int(Compression.GZIP), None, compression.compress(1, inner), TS + 9)
    (batch,) = iter_batches(wrapper)
    assert [r.offset for r in batch.records()] == [700, 701, 702]
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (700, 702, 3)
    assert batch.max_timestamp == TS + 9
    assert [r.timestamp for r in batch.records()] == [TS, TS + 1, TS + 2]


def test_a_log_append_time_wrapper_gives_its_timestamp_to_inner_records() -> None:
    inner = b"".join(_message(rel, 1, 0, b"k", b"v", TS + rel) for rel in (0, 1))
    attributes = int(Compression.SNAPPY) | 0x08
    wrapper = _message(1, 1, attributes, None, compression.compress(2, inner), TS + 99)
    (batch,) = iter_batches(wrapper)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [TS + 99, TS + 99]


def test_legacy_batches_expose_a_synthesized_header() -> None:
    data = _kafka_python_set(1, Compression.GZIP, _pairs(5), base=20)
    batch = RecordBatch(data, 4096)
    header = batch.header
    assert (header.magic, header.base_offset, header.last_offset, header.records_count) == (
        1, 20, 24, 5)
    assert header.compression == Compression.GZIP and header.size == len(data)
    assert not batch.is_control and not batch.is_transactional
    assert (batch.producer_id, batch.partition_leader_epoch) == (-1, -1)
    assert batch.delete_horizon_ms is None
    assert BatchHeader.parse(b"\x00" * 7 + data, 7) == header


def test_a_v0_message_has_no_timestamp() -> None:
    entry = _message(3, 0, 0, b"key", b"value")
    (batch,) = iter_batches(entry)
    assert batch.max_timestamp == -1 and batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.records() == [Record(b"key", b"value", -1, (), 3)]


def test_legacy_and_v2_batches_mix_in_one_log() -> None:
    data = _message(0, 0, 0, None, b"a") + _message(1, 1, 0, None, b"b", TS) + build_batch(
        [Record(None, b"c", TS)], base_offset=2)
    batches = list(iter_batches(data))
    assert [b.magic for b in batches] == [0, 1, 2]
    assert [r.value for b in batches for r in b.records()] == [b"a", b"b", b"c"]
    scan = scan_batches(data, check_crc=True)
    assert scan.error is None and scan.magics.tolist() == [0, 1, 2]
    assert scan.max_timestamps.tolist() == [-1, TS, TS]


def test_scan_reports_a_wrapper_by_its_offset_with_an_unknown_count() -> None:
    data = (_kafka_python_set(0, Compression.SNAPPY, _pairs(4), base=0)
            + _kafka_python_set(0, Compression.NONE, _pairs(2), base=4))
    scan = scan_batches(data, check_crc=True)
    assert scan.base_offsets.tolist() == [3, 4, 5]
    assert scan.last_offsets.tolist() == [3, 4, 5]
    assert scan.records_counts.tolist() == [-1, 1, 1]
    assert scan.valid_bytes == len(data) and scan.error is None


def test_a_damaged_legacy_message_fails_its_crc() -> None:
    data = bytearray(_kafka_python_set(1, Compression.NONE, _pairs(3), base=0))
    data[-2] ^= 0x01
    batches = list(iter_batches(bytes(data)))
    assert [b.is_valid() for b in batches] == [True, True, False]
    with pytest.raises(CorruptRecordError, match="CRC"):
        batches[2].ensure_valid()
    scan = scan_batches(bytes(data), check_crc=True)
    assert len(scan) == 2 and scan.error_position == batches[2].position


_DOUBLE = _message(0, 0, 1, None, compression.compress(1, _message(0, 0, 0, None, b"x")))


@pytest.mark.parametrize(("name", "entry"), [
    ("inner compressed again", _message(0, 0, 1, None, compression.compress(1, _DOUBLE))),
    ("wrapper without value", _message(0, 0, 1, None, None)),
    ("wrapper holding nothing", _message(0, 0, 2, None, compression.compress(2, b""))),
    ("zstd is not a legacy codec", _message(0, 1, 4, None, compression.compress(4, b"x"), TS)),
    ("garbage inner set", _message(0, 0, 1, None, compression.compress(1, b"\x00" * 30))),
])
def test_broken_wrappers_are_corrupt(name: str, entry: bytes) -> None:
    (batch,) = iter_batches(entry)
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_a_key_length_past_the_message_end_is_corrupt() -> None:
    entry = bytearray(_message(0, 0, 0, b"key", b"value"))
    struct.pack_into(">i", entry, legacy.HEADER_V0.size, 1000)
    with pytest.raises(CorruptRecordError, match="key length 1000"):
        list(iter_batches(bytes(entry)))


# ---- asayers/kafkalite: real Kafka magic 0 files with their expected decodes --------------------
def _golden(name: str) -> list[tuple[int, str]]:
    rows = []
    for line in (KAFKALITE / "golden" / name).read_text().splitlines():
        offset, _, quoted = line.partition(": ")
        assert quoted[0] == quoted[-1] == '"'
        text = quoted[1:-1].replace('\\"', '"').replace("\\t", "\t").replace("\\n", "\n")
        rows.append((int(offset), text.replace("\\\\", "\\")))
    return rows


@pytest.mark.parametrize("name", ["hamlet-none-0", "hamlet-gzip-0", "hamlet-snappy-0", "numbers-0"])
def test_kafkalite_real_files_match_their_golden_decodes(name: str) -> None:
    data = (KAFKALITE / "fs-data" / name / "00000000000000000000.log").read_bytes()
    batches = list(iter_batches(data))
    assert all(b.magic == 0 and b.is_valid() for b in batches)
    decoded = [(r.offset, r.value.decode()) for b in batches for r in b.records()
               if r.value is not None]
    assert decoded == _golden(name)
