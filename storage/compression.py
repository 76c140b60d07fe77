"""The compression codecs of Kafka record batches, as Kafka's Java client writes and reads them.

Codec ids are the low three bits of the batch attributes (``storage.records.Compression``):

* 1 gzip: an RFC 1952 gzip stream (Java's ``GZIPOutputStream``); concatenated members are read.
* 2 snappy: xerial-framed (Java's ``SnappyOutputStream``)::

      Header => Magic: 8 bytes 82 'SNAPPY' 00 | Version: int32 (1) | Compatible: int32 (1)
      Block  => Length: int32 (compressed bytes) | Data: raw snappy of at most 32 KiB of input

  Reading also accepts a plain raw snappy block, as ``SnappyInputStream`` does.
* 3 lz4: the LZ4 frame format, 64 KiB independent blocks, no content size (``KafkaLZ4Block*``).
  Magic 0 messages carry Kafka's broken header checksum (KAFKA-3160: xxh32 over the magic number
  and descriptor instead of the descriptor alone); ``legacy_lz4_checksum=True`` repairs it before
  decoding.
* 4 zstd: standard zstd frames.

``decompress`` never produces more than ``max_size`` bytes and never asks a library for an
unbounded buffer: gzip and lz4 are read with an output limit, snappy's declared sizes are checked
before decoding, zstd is fed in small slices whose worst-case expansion is bounded. Every failure
is a ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from storage.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

GZIP_LEVEL = 6                                  # java.util.zip.Deflater.DEFAULT_COMPRESSION
ZSTD_LEVEL = 3                                  # zstd-jni's default
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = struct.Struct(">8sii")          # magic, version, compatible version
XERIAL_VERSION = 1
XERIAL_BLOCK = struct.Struct(">i")              # compressed length of the block that follows
XERIAL_BLOCK_SIZE = 32 * 1024                   # SnappyOutputStream's default block size
LZ4_MAGIC = b"\x04\x22\x4d\x18"
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
# A zstd block regenerates at most 128 KiB and an RLE block takes 4 bytes, so one input byte can
# expand to at most 32 KiB: feeding slices of max_size / 32 KiB bytes bounds the overshoot.
_ZSTD_MAX_EXPANSION = 32 * 1024
_ZSTD_MIN_SLICE = 256
_ZSTD_MAX_SLICE = 1 << 16
_ZSTD_ERRORS = (zstandard.ZstdError, ValueError, RuntimeError)

Buffer = bytes | bytearray | memoryview


def compress(codec: int, data: Buffer) -> bytes:
    """Compress the records section of a batch with ``codec`` (0 returns the bytes as they are)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        return _snappy_xerial(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, block_checksum=False, store_size=False)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, *, max_size: int,
               legacy_lz4_checksum: bool = False) -> bytes:
    """Decompress ``data`` written with ``codec``; at most ``max_size`` bytes come out.

    Raises ``CorruptRecordError`` when the data does not decode, is truncated, or would expand
    beyond ``max_size`` (the field ``codec`` names the codec).
    """
    name = CODEC_NAMES.get(codec, str(codec))
    if codec == NONE:
        if len(data) > max_size:
            raise _too_large(name, max_size)
        return bytes(data)
    try:
        if codec == GZIP:
            return _gunzip(data, max_size)
        if codec == SNAPPY:
            return _unsnappy(data, max_size)
        if codec == LZ4:
            return _unlz4(data, max_size, legacy_lz4_checksum)
        if codec == ZSTD:
            return _unzstd(data, max_size)
    except CorruptRecordError:
        raise
    except (zlib.error, cramjam.DecompressionError, RuntimeError, ValueError, EOFError,
            struct.error, *_ZSTD_ERRORS) as err:
        raise CorruptRecordError(f"{name} data does not decompress: {err}", codec=name) from err
    raise CorruptRecordError(f"unknown compression codec {codec}", codec=name)


def _too_large(name: str, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{name} data decompresses to more than {max_size} bytes", codec=name, max_size=max_size)


def _truncated(name: str) -> CorruptRecordError:
    return CorruptRecordError(f"{name} data ends in the middle of the stream", codec=name)


# ---- gzip ----------------------------------------------------------------------------------------
def _gunzip(data: Buffer, max_size: int) -> bytes:
    out: list[bytes] = []
    total = 0
    pending: Buffer = data
    decoder = zlib.decompressobj(_GZIP_WBITS)
    while True:
        chunk = decoder.decompress(pending, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large("gzip", max_size)
        out.append(chunk)
        if decoder.eof:
            rest = decoder.unused_data
            # Java's GZIPInputStream reads concatenated members and ignores other trailing bytes
            if rest[:2] != _GZIP_MAGIC:
                return b"".join(out)
            decoder = zlib.decompressobj(_GZIP_WBITS)
            pending = rest
            continue
        pending = decoder.unconsumed_tail
        if not pending:
            raise _truncated("gzip")


# ---- snappy --------------------------------------------------------------------------------------
def _snappy_xerial(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_VERSION)]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(XERIAL_BLOCK.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_length(view: memoryview) -> int:
    """The uncompressed length that opens a raw snappy block (a little-endian base-128 varint)."""
    value = 0
    for i in range(min(len(view), 5)):
        byte = view[i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value
    raise CorruptRecordError("snappy block has no valid length preamble", codec="snappy")


def _unsnappy_raw(view: memoryview, budget: int, max_size: int) -> bytes:
    if _raw_snappy_length(view) > budget:
        raise _too_large("snappy", max_size)
    return bytes(cramjam.snappy.decompress_raw(view))


def _unsnappy(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data).cast("B")
    if bytes(view[:len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _unsnappy_raw(view, max_size, max_size)
    out: list[bytes] = []
    total = 0
    pos = XERIAL_HEADER.size
    if len(view) < pos:
        raise _truncated("snappy")
    while pos < len(view):
        # SnappyInputStream also reads streams concatenated header and all
        if bytes(view[pos:pos + len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
            pos += XERIAL_HEADER.size
            continue
        if len(view) - pos < XERIAL_BLOCK.size:
            raise _truncated("snappy")
        (length,) = XERIAL_BLOCK.unpack_from(view, pos)
        pos += XERIAL_BLOCK.size
        if length < 0 or length > len(view) - pos:
            raise CorruptRecordError(
                f"snappy block of {length} bytes at {pos - XERIAL_BLOCK.size} runs past the "
                f"{len(view)} bytes of the stream", codec="snappy")
        block = _unsnappy_raw(view[pos:pos + length], max_size - total, max_size)
        total += len(block)
        out.append(block)
        pos += length
    return b"".join(out)


# ---- lz4 -----------------------------------------------------------------------------------------
def _unlz4(data: Buffer, max_size: int, legacy_checksum: bool) -> bytes:
    pending = bytes(data)
    if legacy_checksum:
        pending = fix_lz4_header_checksum(pending)
    out: list[bytes] = []
    total = 0
    while True:
        decoder = lz4.frame.LZ4FrameDecompressor()
        chunk = decoder.decompress(pending, max_length=max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large("lz4", max_size)
        out.append(chunk)
        if not decoder.eof:
            raise _truncated("lz4")
        pending = decoder.unused_data or b""
        # KafkaLZ4BlockInputStream stops at the end mark; read further frames, ignore other bytes
        if pending[:4] != LZ4_MAGIC:
            return b"".join(out)


def fix_lz4_header_checksum(frame: bytes) -> bytes:
    """Recompute the header checksum byte of an LZ4 frame (KAFKA-3160): magic 0 producers hashed
    the magic number along with the frame descriptor. A correct checksum is left as it is."""
    if len(frame) < 7 or frame[:4] != LZ4_MAGIC:
        return frame
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)   # content size, dict id
    if len(frame) <= end:
        return frame
    checksum = (xxh32(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((checksum,)) + frame[end + 1:]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (used only for the few bytes of an LZ4 frame descriptor)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos:pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        lane = int.from_bytes(data[pos:pos + 4], "little")
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ---- zstd ----------------------------------------------------------------------------------------
def _unzstd(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data).cast("B")
    if not view:
        raise _truncated("zstd")
    out: list[bytes] = []
    total = 0
    pos = 0
    while pos < len(view):
        decoder = zstandard.ZstdDecompressor().decompressobj()
        while not decoder.eof:
            if pos >= len(view):
                raise _truncated("zstd")
            step = (max_size - total) // _ZSTD_MAX_EXPANSION
            step = min(max(step, _ZSTD_MIN_SLICE), _ZSTD_MAX_SLICE)
            piece = view[pos:pos + step]
            pos += len(piece)
            chunk = decoder.decompress(piece)
            total += len(chunk)
            if total > max_size:
                raise _too_large("zstd", max_size)
            out.append(chunk)
        # the bytes of this slice after the end of the frame start the next frame
        pos -= len(decoder.unused_data)
    return b"".join(out)
