"""The Spark reader's decoders refuse a damaged batch (issue 12): unit level, no Spark, no Ray.

The Spark reader walks segment files itself (``storage.view.read_partition_batches``) and decodes
them column-wise (``cluster.spark.decoding``); neither may turn a flipped bit into a row. The
column-wise decoder builds only the columns a read asks for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster.spark.decoding import arrow_batches, decode_batch
from storage.config import LogConfig
from storage.errors import CorruptRecordError
from storage.log import Log
from storage.records import Compression, Record, RecordBatch, build_batch, scan_batches
from storage.view import read_partition_batches

TS = 1_700_000_000_000


def _balances(start: int, n: int) -> list[Record]:
    return [Record(b"k%d" % i, b"balance=%06d" % i, TS + i) for i in range(start, start + n)]


def _partition(directory: Path, config: LogConfig) -> int:
    """A partition of 40 balances in batches of 4, closed; returns its end offset."""
    log = Log.open(directory, config, recovery_point=0, had_clean_shutdown=True)
    for start in range(0, 40, 4):
        log.append(_balances(start, 4))
    log.flush()
    end = log.log_end_offset
    log.close()
    return end


def _flip_a_bit(path: Path, value: bytes, bit: int, *, batch: int) -> int:
    """Flip ``bit`` in the digits of ``value`` in the segment file ``path``; returns the position
    of the ``batch``-th batch of the file, the one expected to hold it."""
    data = bytearray(path.read_bytes())
    at = bytes(data).index(value) + len(b"balance=")
    data[at] ^= bit
    path.write_bytes(bytes(data))
    return int(scan_batches(bytes(data)).positions[batch])


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_decode_batch_refuses_a_batch_whose_crc_does_not_match(compression: Compression) -> None:
    """The column-wise path (uncompressed) and the record path (compressed) both check the CRC
    before decoding: balance=000007 never becomes a row holding balance=800007."""
    data = bytearray(build_batch(_balances(0, 10), base_offset=100, compression=compression))
    assert decode_batch(RecordBatch(bytes(data)), 0, 10**9) is not None
    if compression == Compression.NONE:
        at = bytes(data).index(b"balance=000007") + len(b"balance=")
        data[at] ^= 0x08
    else:
        data[-3] ^= 0x08
    path = Path("/data/t-0/00000000000000000100.log")
    with pytest.raises(CorruptRecordError) as caught:
        decode_batch(RecordBatch(bytes(data), 4096, path), 0, 10**9)
    assert caught.value.position == 4096 and caught.value.base_offset == 100
    assert str(caught.value).startswith(f"{path}: record batch at position 4096: CRC mismatch")


def test_the_spark_reader_refuses_a_damaged_segment_naming_the_file(tmp_path: Path) -> None:
    """``read_partition_batches`` + ``arrow_batches`` over a partition directory whose closed
    segment has one flipped bit: the rows before the damaged batch, then CorruptRecordError
    naming the file and the batch's position; reads from after the damaged batch still work."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=600)
    end = _partition(directory, config)
    assert len(list(directory.glob("*.log"))) > 1
    path = directory / "00000000000000000000.log"
    damaged_position = _flip_a_bit(path, b"balance=000007", 0x08, batch=1)

    rows: list[bytes] = []
    with pytest.raises(CorruptRecordError) as caught:
        for batch in arrow_batches(read_partition_batches(directory, config, 0, end), "t", 0,
                                   0, end):
            rows.extend(batch.column("value").to_pylist())
    assert rows == [b"balance=%06d" % i for i in range(len(rows))] and len(rows) <= 4
    assert caught.value.path == str(path) and caught.value.position == damaged_position
    assert str(caught.value).startswith(f"{path}: record batch at position {damaged_position}")

    after = [v for batch in arrow_batches(read_partition_batches(directory, config, 8, end),
                                          "t", 0, 8, end)
             for v in batch.column("value").to_pylist()]
    assert after == [b"balance=%06d" % i for i in range(8, end)]


def test_only_the_columns_asked_for_are_built_in_the_order_asked() -> None:
    """``arrow_batches(columns=...)``: the columns of a schema given with ``.schema(...)``, in its
    order; keys and headers are not gathered when not asked for."""
    from cluster.spark import decoding

    data = build_batch([Record(key=b"k%d" % i, value=b"v%d" % i, timestamp=1000 + i,
                               headers=(("h", b"x"),)) for i in range(5)], base_offset=10)
    full = next(arrow_batches([RecordBatch(data)], "t", 3, 0, 100))
    assert full.schema.names == list(decoding.FIXED_COLUMNS)
    picked = next(arrow_batches([RecordBatch(data)], "t", 3, 12, 100,
                                columns=["value", "offset", "topic"]))
    assert picked.schema.names == ["value", "offset", "topic"]
    assert picked.column("value").to_pylist() == [b"v2", b"v3", b"v4"]
    assert picked.column("offset").to_pylist() == [12, 13, 14]
    assert picked.column("topic").to_pylist() == ["t"] * 3
    for name in ("offset", "value", "topic"):
        assert picked.column(name).equals(full.column(name).slice(2))
    piece = decoding.decode_batch(RecordBatch(data), 0, 100, decoding.Wanted(keys=False,
                                                                            headers=False))
    assert piece is not None and piece.keys is None and piece.headers is None
    assert piece.values.to_pylist() == [b"v%d" % i for i in range(5)]


def test_the_spark_read_reads_each_batch_once_and_checks_its_crc_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_partition_batches`` + ``arrow_batches`` (the Spark read) read each segment file's
    bytes once and compute one CRC per batch: the walk's check, whose bytes are the ones
    decoded (before, the batch was read again and its CRC checked again by the decoder)."""
    import crc32c

    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=600)
    end = _partition(directory, config)
    logs = sorted(directory.glob("*.log"))
    assert len(logs) > 1
    log_bytes = sum(p.stat().st_size for p in logs)
    batches = sum(len(scan_batches(p.read_bytes()).positions) for p in logs)

    crc_calls = [0]
    read_bytes = [0]
    crc, pread = crc32c.crc32c, os.pread

    def counting_crc(data: object) -> int:
        crc_calls[0] += 1
        return crc(data)

    def counting_pread(fd: int, n: int, at: int) -> bytes:
        data = pread(fd, n, at)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            read_bytes[0] += len(data)
        return data

    monkeypatch.setattr(crc32c, "crc32c", counting_crc)
    monkeypatch.setattr(os, "pread", counting_pread)
    rows = [v for batch in arrow_batches(read_partition_batches(directory, config, 0, end),
                                         "t", 0, 0, end)
            for v in batch.column("value").to_pylist()]
    assert rows == [b"balance=%06d" % i for i in range(end)]
    assert crc_calls[0] == batches
    assert read_bytes[0] == log_bytes


def test_a_damaged_batch_in_the_active_segment_is_refused_by_the_single_check(
        tmp_path: Path) -> None:
    """With the CRC checked once, by the walk, a flipped bit in the active segment (the walk
    there tolerates a torn tail, not a damaged batch) still ends the Spark read with
    ``CorruptRecordError`` naming the file and the batch's position, after only the rows of
    the intact batches before it."""
    directory = tmp_path / "t-0"
    config = LogConfig()
    end = _partition(directory, config)
    path = directory / "00000000000000000000.log"
    damaged_position = _flip_a_bit(path, b"balance=000021", 0x04, batch=5)

    rows: list[bytes] = []
    with pytest.raises(CorruptRecordError) as caught:
        for batch in arrow_batches(read_partition_batches(directory, config, 0, end), "t", 0,
                                   0, end, rows_per_batch=1):
            rows.extend(batch.column("value").to_pylist())
    assert rows == [b"balance=%06d" % i for i in range(20)]
    assert caught.value.path == str(path) and caught.value.position == damaged_position
    assert caught.value.base_offset == 20
    assert str(caught.value).startswith(f"{path}: record batch at position {damaged_position}: "
                                        f"CRC mismatch")
