"""Compression codecs: round trips, Kafka's framings, foreign encoders, bombs and damage."""

from __future__ import annotations

import os
import random
import struct
import warnings
import zlib

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard

with warnings.catch_warnings():                 # kafka-python's import-time deprecation noise
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec

from storage import compression
from storage.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress,
    fix_lz4_header_checksum,
    xxh32,
)
from storage.errors import CorruptRecordError

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
MiB = 1024 * 1024


def _payload(size: int) -> bytes:
    """Compressible but not trivial bytes."""
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", os.urandom(3)]
    out = bytearray()
    i = 0
    while len(out) < size:
        out += words[(i * 7 + i // 3) % len(words)]
        i += 1
    return bytes(out[:size])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 1000, 200_000])
def test_every_codec_round_trips(codec: int, size: int) -> None:
    data = _payload(size)
    assert decompress(codec, compress(codec, data), max_size=MiB) == data


@pytest.mark.parametrize("codec", CODECS)
def test_compress_accepts_a_memoryview_slice(codec: int) -> None:
    data = bytearray(_payload(50_000))
    view = memoryview(data)[100:40_000]
    assert decompress(codec, compress(codec, view), max_size=MiB) == bytes(view)


def test_snappy_is_written_xerial_framed_in_32_kib_blocks() -> None:
    data = _payload(XERIAL_BLOCK_SIZE * 2 + 10)
    framed = compress(SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4:pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 10]
    assert b"".join(blocks) == data


def test_snappy_reads_kafka_python_xerial_and_plain_raw_snappy() -> None:
    data = _payload(100_000)
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data), max_size=MiB) == data
    assert decompress(SNAPPY, snappy.compress(data), max_size=MiB) == data


def test_snappy_reads_concatenated_xerial_streams() -> None:
    first, second = _payload(1000), _payload(3000)
    assert decompress(SNAPPY, compress(SNAPPY, first) + compress(SNAPPY, second),
                      max_size=MiB) == first + second


def test_gzip_reads_concatenated_members_and_ignores_trailing_bytes() -> None:
    first, second = _payload(1000), _payload(2000)
    stream = compress(GZIP, first) + compress(GZIP, second)
    assert decompress(GZIP, stream, max_size=MiB) == first + second
    assert decompress(GZIP, stream + b"\x00\x00junk", max_size=MiB) == first + second


def test_gzip_reads_kafka_python_gzip() -> None:
    data = _payload(10_000)
    assert decompress(GZIP, kafka_codec.gzip_encode(data), max_size=MiB) == data


def test_lz4_frames_use_independent_64_kib_blocks_without_content_size() -> None:
    frame = compress(LZ4, _payload(10))
    flags, block_descriptor = frame[4], frame[5]
    assert frame[:4] == compression.LZ4_MAGIC
    assert flags & 0x20                       # block independence
    assert not flags & 0x08                   # no content size
    assert (block_descriptor >> 4) & 0x7 == 4  # 64 KiB maximum block size


def test_lz4_reads_kafka_python_frames_with_content_size() -> None:
    data = _payload(300_000)
    assert decompress(LZ4, kafka_codec.lz4_encode(data), max_size=MiB) == data


def _broken_checksum_frame(data: bytes) -> bytes:
    """An LZ4 frame as Kafka 0.8/0.9 wrote it for magic 0 (KAFKA-3160): the header checksum
    hashes the magic number too."""
    frame = lz4.frame.compress(data, block_linked=False, store_size=False)
    wrong = (xxh32(frame[0:6]) >> 8) & 0xFF
    assert wrong != frame[6], "pick data whose two checksums differ"
    return frame[:6] + bytes((wrong,)) + frame[7:]


def test_lz4_broken_kafka_header_checksum_is_repaired_for_legacy_messages() -> None:
    data = _payload(5000)
    frame = _broken_checksum_frame(data)
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)
    assert decompress(LZ4, frame, max_size=MiB, legacy_lz4_checksum=True) == data
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, frame, max_size=MiB)


def test_repairing_a_correct_lz4_header_checksum_changes_nothing() -> None:
    frame = compress(LZ4, _payload(100))
    assert fix_lz4_header_checksum(frame) == frame


def test_xxh32_matches_reference_values_and_lz4_header_checksums() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    for options in ({}, {"store_size": False}, {"content_checksum": True}):
        frame = lz4.frame.compress(b"header checksum " * 8, **options)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert (xxh32(frame[4:end]) >> 8) & 0xFF == frame[end]


def test_zstd_reads_concatenated_frames_and_streamed_frames_without_size() -> None:
    first, second = _payload(70_000), _payload(5000)
    streamed = zstandard.ZstdCompressor().compressobj()
    frame_without_size = streamed.compress(second) + streamed.flush()
    assert decompress(ZSTD, compress(ZSTD, first) + frame_without_size,
                      max_size=MiB) == first + second


@pytest.mark.parametrize("codec", CODECS)
def test_a_compression_bomb_stops_at_max_size(codec: int) -> None:
    bomb = compress(codec, bytes(20 * MiB))
    assert len(bomb) < MiB
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, bomb, max_size=MiB)


@pytest.mark.parametrize("codec", CODECS)
def test_exactly_max_size_is_allowed(codec: int) -> None:
    data = _payload(4096)
    assert decompress(codec, compress(codec, data), max_size=4096) == data


@pytest.mark.parametrize("codec", CODECS)
def test_a_truncated_stream_is_corrupt(codec: int) -> None:
    stream = compress(codec, os.urandom(50_000))
    with pytest.raises(CorruptRecordError):
        decompress(codec, stream[:len(stream) // 2], max_size=MiB)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("garbage", [b"", b"\x07", b"not compressed at all" * 3,
                                     random.Random(7).randbytes(64)],
                         ids=["empty", "one-byte", "text", "random"])
def test_garbage_is_corrupt(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage, max_size=MiB)


def test_a_snappy_block_claiming_more_than_max_size_is_refused_before_decoding() -> None:
    claim = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])          # 4 GiB uncompressed, raw preamble
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 5) + claim
    for stream in (claim, framed):
        with pytest.raises(CorruptRecordError, match="more than"):
            decompress(SNAPPY, stream, max_size=MiB)


def test_a_xerial_block_length_past_the_end_is_corrupt() -> None:
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 1000) + b"\x01\x00"
    with pytest.raises(CorruptRecordError, match="runs past"):
        decompress(SNAPPY, framed, max_size=MiB)


def test_unknown_codecs_are_refused() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec 6"):
        decompress(6, b"x", max_size=10)
    with pytest.raises(ValueError):
        compress(7, b"x")


def test_decompression_errors_name_the_codec_and_pickle() -> None:
    import pickle

    with pytest.raises(CorruptRecordError) as caught:
        decompress(GZIP, zlib.compress(b"zlib framing, not gzip"), max_size=MiB)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is CorruptRecordError
    assert again.codec == "gzip" and again.message == caught.value.message


def test_codec_none_passes_bytes_through_within_the_bound() -> None:
    assert compress(compression.NONE, memoryview(b"abc")) == b"abc"
    assert decompress(compression.NONE, b"abc", max_size=3) == b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(compression.NONE, b"abcd", max_size=3)
