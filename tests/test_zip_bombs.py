"""A compression bomb (a small zstd batch that decompresses to 512 MiB) on every path that
decompresses a batch: append, read, clean, dump-log. Each refuses it with a typed error that names
where it is, in memory bounded by the one shared cap (``MAX_DECOMPRESSED_BYTES``), whatever the
topic's ``max.message.bytes``; nothing stored before it is lost."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import crc32c
import pytest
import zstandard

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from ops.cli.main import main
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    MAX_DECOMPRESSED_BYTES,
    Compression,
    Record,
    build_batch,
)
from storage.segment import LogSegment

MIB = 1 << 20
T0 = 1_700_000_000_000
BIG_TOPIC = LogConfig(cleanup_policy="compact", max_message_bytes=256 * MIB)   # 64x: 16 GiB
BOUND = 2 * MAX_DECOMPRESSED_BYTES + 16 * MIB


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """One v2 batch at offset 0 with a valid CRC whose zstd records section inflates to 512 MiB."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zero = bytes(16 * MIB)
    body = b"".join([compressor.compress(zero) for _ in range(32)] + [compressor.flush()])
    assert len(body) < MIB
    batch = bytearray(build_batch([Record(b"k", b"v", T0)]))[:HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, int(Compression.ZSTD))
    struct.pack_into(">I", batch, CRC_OFFSET,
                     crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _bounded(call) -> StorageError:
    tracemalloc.start()
    try:
        with pytest.raises(StorageError) as caught:
            call()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BOUND, f"{peak} bytes traced"
    return caught.value


def _planted(tmp_path: Path, bomb: bytes) -> Path:
    """A partition whose first segment holds one good batch, then the bomb; then an active one."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    first = LogSegment.create(directory, 0, BIG_TOPIC)
    good = build_batch([Record(b"k", b"good", T0)], base_offset=0)
    first.append(0, T0, 0, [good])
    bomb_at_1 = bytearray(bomb)
    struct.pack_into(">q", bomb_at_1, 0, 1)          # base offset: outside the CRC
    first.append(1, T0, 1, [bytes(bomb_at_1)])
    first.on_become_inactive()
    first.close()
    LogSegment.create(directory, 2, BIG_TOPIC).close()
    return directory


def test_append_refuses_a_bomb_and_keeps_what_was_stored(tmp_path: Path, bomb: bytes) -> None:
    log = Log.open(tmp_path / "t-0", BIG_TOPIC)
    log.append([Record(b"k", b"before", T0)])
    error = _bounded(lambda: log.append_batch(bomb))
    assert "t-0" in str(error)
    assert [(r.offset, r.value) for r in log.read()] == [(0, b"before")]
    log.close()


def test_a_read_through_a_bomb_is_a_typed_error_after_the_records_before_it(
        tmp_path: Path, bomb: bytes) -> None:
    directory = _planted(tmp_path, bomb)
    log = Log.open(directory, BIG_TOPIC, recovery_point=2, had_clean_shutdown=True)
    got: list[bytes | None] = []

    def read_all() -> None:
        for record in log.read(0):
            got.append(record.value)

    error = _bounded(read_all)
    assert got == [b"good"]
    assert "00000000000000000000.log" in str(error)
    log.close()


def test_the_cleaner_refuses_a_bomb_and_leaves_the_segment_as_it_was(
        tmp_path: Path, bomb: bytes) -> None:
    directory = _planted(tmp_path, bomb)
    before = (directory / "00000000000000000000.log").read_bytes()
    log = Log.open(directory, BIG_TOPIC, recovery_point=2, had_clean_shutdown=True)
    clock = FakeClock(T0)
    error = _bounded(lambda: Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20),
                                     clock=clock).clean(log, 0, clock.milliseconds()))
    assert "00000000000000000000.log" in str(error)
    log.close()
    assert (directory / "00000000000000000000.log").read_bytes() == before


def test_dump_log_reports_a_bomb_in_one_line(tmp_path: Path, bomb: bytes,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    directory = _planted(tmp_path, bomb)
    tracemalloc.start()
    try:
        code = main(["dump-log", "--deep-iteration", "--print-data-log",
                     str(directory / "00000000000000000000.log")])
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert peak < BOUND
    assert "Traceback" not in out + err
    assert "payload: good" in out
    assert f"more than {MAX_DECOMPRESSED_BYTES} bytes" in out + err
    assert code in (0, 1)
