"""Each binary format is parsed in one place (issue 13): the producer snapshot by
``storage.producer_state.read_snapshot`` (the loader and ``strata dump-log`` used to disagree on
what is damaged), the batch header by ``storage.batch_layout`` (the client's record overhead used
to disagree with the builder's bound)."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from cluster.client.data_path import encode_batches
from ops.cli.main import main
from storage import batch_layout, kernels, legacy
from storage.errors import CorruptRecordError
from storage.producer_state import read_snapshot
from storage.records import BATCH_HEADER, HEADER_SIZE, Record, build_batch, max_record_size

ENTRY = struct.pack(">qhiqiqiq", 7, 2, 6, 2, 1, 2001, 4, -1)


def _snapshot(body: bytes) -> bytes:
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_a_snapshot_with_bytes_after_its_entries_is_damaged_for_the_loader_and_dump_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its CRC covers the extra bytes, so dump-log's own parser called it valid ("1 producers")
    while the loader's rejected it and replayed the log instead."""
    path = tmp_path / "00000000000000000003.snapshot"
    path.write_bytes(_snapshot(struct.pack(">i", 1) + ENTRY + b"\x00" * 5))
    with pytest.raises(CorruptRecordError) as raised:
        read_snapshot(path.read_bytes(), path)
    reason = raised.value.fields["reason"]
    assert reason.startswith("Snapshot failed schema validation: 1 entries do not fill")
    assert main(["dump-log", "--verify", str(path)]) == 1
    assert f"{path}: position 0: {reason}" in capsys.readouterr().out


def test_the_loader_and_dump_log_word_a_bad_snapshot_crc_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000003.snapshot"
    path.write_bytes(struct.pack(">hI", 1, 12345) + struct.pack(">i", 1) + ENTRY)
    with pytest.raises(CorruptRecordError) as raised:
        read_snapshot(path.read_bytes(), path)
    assert str(raised.value).startswith(
        f"{path}: Snapshot is corrupt (CRC is no longer valid). Stored crc: 12345.")
    assert main(["dump-log", "--verify", str(path)]) == 1
    assert f"position 0: {raised.value.fields['reason']}" in capsys.readouterr().out


def test_every_header_offset_comes_from_the_one_layout() -> None:
    fields = dict(batch_layout.V2_FIELDS)
    assert BATCH_HEADER.format == ">" + "".join(fields.values())
    assert HEADER_SIZE == kernels.V2_HEADER_SIZE == 61
    batch = build_batch([Record(b"k", b"v", 1_234)], base_offset=40)
    values = BATCH_HEADER.unpack_from(batch)
    for name, code in batch_layout.V2_FIELDS:
        at = batch_layout.V2_OFFSETS[name]
        assert struct.unpack_from(">" + code, batch, at)[0] == \
            values[batch_layout.V2_FIELD_INDEX[name]], name
    assert legacy.HEADER_V1.format == ">qiIbbq" and legacy.HEADER_V0.format == ">qiIbb"
    assert (legacy.CRC_OFFSET, legacy.MAGIC_OFFSET, kernels.LEGACY_TIMESTAMP_OFFSET) == (12, 16, 18)


@pytest.mark.parametrize("headers", [
    (),
    (("ключ-" * 20, b"x"),) * 5,                  # multi-byte UTF-8 header keys
    (("é" * 60, b""),) * 70,                      # a header count whose varint takes 2 bytes
    (("k", None),),
])
def test_max_record_size_bounds_the_encoded_record(headers: tuple) -> None:
    record = Record(b"key", b"value" * 3, 1_000, headers=headers)
    assert len(build_batch([record])) - HEADER_SIZE <= max_record_size(record)


def test_client_batches_stay_within_their_limit_with_multibyte_header_keys() -> None:
    """The client counted a header key's characters, not its UTF-8 bytes (and its own record
    overhead of 36 disagreed with the builder's 32): batches of records with Cyrillic header keys
    came out 5,695 bytes for a 4,096-byte limit, which a topic's max.message.bytes refuses."""
    records = [Record(b"k", b"v" * 10, 1_000, headers=(("ключ-" * 20, b"x"),) * 5)
               for _ in range(200)]
    batches = list(encode_batches(records, 4096))
    assert sum(len(b) for b in batches) > 4 * 4096
    assert max(len(b) for b in batches) <= 4096
