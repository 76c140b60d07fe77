"""``strata dump-log``: Kafka's DumpLogSegments text on known segments, JSON, decoders, index,
snapshot and checkpoint dumps, and ``--verify`` on real files damaged on purpose."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import time
from pathlib import Path
from typing import Callable

import crc32c
import msgpack
import pytest

from ops.cli.main import main
from storage.config import LogConfig
from storage.index import OffsetIndex, TimeIndex
from storage.log import Log
from storage.records import Compression, ControlType, Record, build_batch, control_record

SEGMENT = "00000000000000000000.log"
TEST_VECTOR_CRC = 0x716A6189        # kafka-storage.md §3: Kafka's own bytes for this batch


def dump(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["dump-log", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def crc(batch: bytes) -> int:
    return crc32c.crc32c(batch[21:])


def vector_batch() -> bytes:
    return build_batch([Record(b"k", b"v", 1000)], partition_leader_epoch=0)


def known_batches() -> list[bytes]:
    """The §3 vector, a transactional batch with headers and a tombstone, its COMMIT marker, and
    a gzip batch carrying a delete horizon."""
    return [
        vector_batch(),
        build_batch([Record(b"a", b"1", 2000, headers=(("h1", b"x"), ("h2", None))),
                     Record(b"b", None, 2001)], base_offset=1, producer_id=7, producer_epoch=2,
                    base_sequence=5, is_transactional=True, partition_leader_epoch=3),
        build_batch([control_record(ControlType.COMMIT, 4, 3000)], base_offset=3, producer_id=7,
                    producer_epoch=2, is_transactional=True, is_control=True,
                    partition_leader_epoch=3),
        build_batch([Record(b"z", b"zz", 4000)], base_offset=4, compression=Compression.GZIP,
                    delete_horizon_ms=5000, partition_leader_epoch=3),
    ]


def write_segment(directory: Path, batches: list[bytes], name: str = SEGMENT) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"".join(batches))
    return path


def small_log(tmp_path: Path, records: int = 12) -> Path:
    """A real partition directory: one record per append, an index entry every ~2 batches."""
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    for i in range(records):
        log.append([Record(f"k{i}".encode(), f"v{i}".encode(), 10_000 + i)])
    log.close()
    return tmp_path / "t-0"


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---- Kafka's text ------------------------------------------------------------------------------
def test_test_vector_dumps_exactly_as_kafka_prints_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, [vector_batch()])
    assert crc(vector_batch()) == TEST_VECTOR_CRC
    code, out, err = dump(capsys, path, "--print-data-log")
    assert (code, err) == (0, "")
    assert out == (
        f"Dumping {path}\n"
        "Log starting offset: 0\n"
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: 70 magic: 2 "
        "compresscodec: none crc: 1902797193 isvalid: true\n"
        "| offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] "
        "key: k payload: v\n")


def test_shallow_dump_prints_batches_only_and_deep_iteration_adds_records_without_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, known_batches())
    _, shallow, _ = dump(capsys, path)
    assert [line.split(" ")[0] for line in shallow.splitlines()[2:]] == ["baseOffset:"] * 4
    _, deep, _ = dump(capsys, "--files", f"{path},{path}", "--deep-iteration")
    assert deep.count(f"Dumping {path}") == 2                       # Kafka's --files a,b
    deep = deep[:deep.index(f"Dumping {path}", 1)]
    records = [line for line in deep.splitlines() if line.startswith("|")]
    assert len(records) == 5
    assert all("key:" not in line and "payload:" not in line for line in records)


def test_producer_fields_headers_tombstones_markers_and_delete_horizon_print_as_kafka(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batches = known_batches()
    path = write_segment(tmp_path, batches)
    code, out, _ = dump(capsys, path, "--print-data-log")
    p1, p2, p3 = 70, 70 + len(batches[1]), 70 + len(batches[1]) + len(batches[2])
    assert code == 0
    assert out.splitlines()[4:] == [
        f"baseOffset: 1 lastOffset: 2 count: 2 baseSequence: 5 lastSequence: 6 producerId: 7 "
        f"producerEpoch: 2 partitionLeaderEpoch: 3 isTransactional: true isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {p1} CreateTime: 2001 size: "
        f"{len(batches[1])} magic: 2 compresscodec: none crc: {crc(batches[1])} isvalid: true",
        "| offset: 1 CreateTime: 2000 keySize: 1 valueSize: 1 sequence: 5 headerKeys: [h1,h2] "
        "key: a payload: 1",
        "| offset: 2 CreateTime: 2001 keySize: 1 valueSize: -1 sequence: 6 headerKeys: [] key: b",
        f"baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 "
        f"producerEpoch: 2 partitionLeaderEpoch: 3 isTransactional: true isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: {p2} CreateTime: 3000 size: "
        f"{len(batches[2])} magic: 2 compresscodec: none crc: {crc(batches[2])} isvalid: true",
        "| offset: 3 CreateTime: 3000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 4",
        f"baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        f"producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong[5000] position: {p3} CreateTime: 4000 size: "
        f"{len(batches[3])} magic: 2 compresscodec: gzip crc: {crc(batches[3])} isvalid: true",
        "| offset: 4 CreateTime: 4000 keySize: 1 valueSize: 2 sequence: -1 headerKeys: [] "
        "key: z payload: zz",
    ]


def test_skip_record_metadata_prints_only_keys_and_payloads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, [vector_batch(), build_batch([Record(None, b"w", 1)],
                                                               base_offset=1)])
    _, out, _ = dump(capsys, path, "--print-data-log", "--skip-record-metadata")
    records = [line for line in out.splitlines() if not line.startswith(("baseOffset", "Dump",
                                                                         "Log starting"))]
    assert records == ["| key: k payload: v", " payload: w"]      # Kafka's own spacing


def test_garbage_after_the_last_batch_and_offset_gaps_are_reported_like_kafka(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gap = build_batch([Record(b"x", b"y", 1)], base_offset=5)
    torn = vector_batch()[:30]                               # a batch cut short by a crash
    path = write_segment(tmp_path, [vector_batch(), gap, torn])
    code, out, err = dump(capsys, path, "--deep-iteration")
    assert code == 0
    assert out.endswith(f"Found 30 invalid bytes at the end of {SEGMENT}\n")
    assert err == f"Non-consecutive offsets in {path.absolute()}\n  0 is followed by 5\n"


def test_an_impossible_batch_length_is_named_and_the_rest_counted_as_invalid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, [vector_batch(), b"\x00" * 30])
    code, out, err = dump(capsys, path)
    assert code == 0
    assert out.endswith(f"Found 30 invalid bytes at the end of {SEGMENT}\n")
    assert err == f"{path}: record batch at position 70: batch length 0 is below the minimum 14\n"


def test_max_bytes_stops_after_the_batches_that_fit(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    batches = known_batches()
    path = write_segment(tmp_path, batches)
    _, out, _ = dump(capsys, path, "--max-bytes", str(70 + len(batches[1]) + 10))
    assert [line.split(" ")[1] for line in out.splitlines() if line.startswith("baseOffset")] \
        == ["0", "1"]
    assert "invalid bytes" not in out


def test_legacy_magic_0_entries_print_offset_and_per_record_crc(
        copy_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    directory = copy_fixture("asayers__kafkalite/tests/test-data/fs-data/numbers-0")
    _, out, _ = dump(capsys, directory / SEGMENT, "--print-data-log")
    lines = out.splitlines()
    assert lines[2] == ("offset: 0 position: 0 NoTimestampType: -1 size: 27 magic: 0 "
                        "compresscodec: none crc: 1303599952 isvalid: true")
    assert lines[3] == ("| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 1 isValid: true "
                        "crc: 1303599952} payload: 0")


# ---- JSON and decoders -------------------------------------------------------------------------
def test_json_has_every_header_field_and_the_records_when_deep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, known_batches())
    code, out, _ = dump(capsys, path, "--json", "--print-data-log")
    doc = json.loads(out)
    assert code == 0 and out.count("\n") == 1
    assert (doc["file"], doc["type"], doc["logStartingOffset"]) == (str(path), "log", 0)
    assert doc["invalidBytes"] == 0 and doc["errors"] == []
    first, txn, marker, horizon = doc["batches"]
    assert first["crc"] == first["computedCrc"] == TEST_VECTOR_CRC and first["isValid"]
    assert {k: txn[k] for k in ("baseOffset", "lastOffset", "count", "baseSequence",
                                "lastSequence", "producerId", "producerEpoch",
                                "partitionLeaderEpoch", "isTransactional", "isControl",
                                "deleteHorizonMs", "timestampType", "maxTimestamp", "magic",
                                "compressCodec")} == {
        "baseOffset": 1, "lastOffset": 2, "count": 2, "baseSequence": 5, "lastSequence": 6,
        "producerId": 7, "producerEpoch": 2, "partitionLeaderEpoch": 3, "isTransactional": True,
        "isControl": False, "deleteHorizonMs": None, "timestampType": "CreateTime",
        "maxTimestamp": 2001, "magic": 2, "compressCodec": "none"}
    with_headers, tombstone = txn["records"]
    assert with_headers["headerKeys"] == ["h1", "h2"]
    assert with_headers["headers"] == [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}]
    assert (tombstone["key"], tombstone["valueSize"], "payload" in tombstone) == ("b", -1, False)
    assert marker["records"][0]["control"] == {"type": "COMMIT", "typeId": 1,
                                               "coordinatorEpoch": 4}
    assert (horizon["deleteHorizonMs"], horizon["compressCodec"]) == (5000, "gzip")
    assert horizon["records"][0]["payload"] == "zz"


def test_msgpack_and_hex_decoders_print_values_and_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = msgpack.packb({"name": "ada", "tags": [1, 2], "raw": b"\x01\x02"})
    path = write_segment(tmp_path, [build_batch([Record(b"\xffk", value, 5),
                                                 Record(b"k2", b"\xc1", 6)])])
    code, out, _ = dump(capsys, path, "--value-decoder", "msgpack", "--key-decoder", "hex")
    records = [line for line in out.splitlines() if line.startswith("|")]
    assert code == 0
    assert records[0].endswith(' key: ff6b payload: {"name":"ada","tags":[1,2],"raw":"0102"}')
    assert "payload: <not msgpack:" in records[1]
    _, out, _ = dump(capsys, path, "--json", "--value-decoder", "msgpack")
    assert json.loads(out)["batches"][0]["records"][0]["payload"] == \
        {"name": "ada", "tags": [1, 2], "raw": "0102"}


def test_string_decoder_replaces_invalid_utf8_like_kafka(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, [build_batch([Record(b"k", b"a\xffb", 5)])])
    _, out, _ = dump(capsys, path, "--print-data-log")
    assert out.splitlines()[-1].endswith("payload: a\ufffdb")


# ---- real Kafka files: control records, snapshots, checkpoints ---------------------------------
def test_cluster_metadata_leader_change_and_snapshot_control_records_decode(
        copy_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    logs = copy_fixture("Jeong-Rae__KafkaDemo/kraft-combined-logs")
    code, out, _ = dump(capsys, logs / "__cluster_metadata-0" / SEGMENT, "--deep-iteration")
    assert code == 0
    assert out.count(" controlType: LEADER_CHANGE(2)") == 5        # EXPECTED.json: type2: 5
    assert "isvalid: false" not in out
    code, out, _ = dump(capsys, logs / "bootstrap.checkpoint", "--deep-iteration")
    lines = out.splitlines()
    assert lines[1] == "KRaft bootstrap snapshot"
    assert lines[3].endswith(' SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}')
    assert lines[-1].endswith(' SnapshotFooter {"version":0}')


def test_producer_snapshots_parse_from_the_fixture_and_as_kafka_prints_them(
        tmp_path: Path, copy_fixture: Callable[[str], Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    fixture = copy_fixture("Jeong-Rae__KafkaDemo/kraft-combined-logs/__cluster_metadata-0")
    code, out, _ = dump(capsys, fixture / "00000000000000000712.snapshot", "--json")
    assert (code, json.loads(out)["entries"]) == (0, [])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 2, 6, 2, 1, 2001, 4, -1)
    snapshot = tmp_path / "00000000000000000003.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    code, out, _ = dump(capsys, snapshot)
    assert (code, out.splitlines()[1:]) == (0, [
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 4 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 2001 firstSequence: 5 lastSequence: 6 lastOffset: 2 "
        "offsetDelta: 1 timestamp: 2001"])
    snapshot.write_bytes(struct.pack(">hI", 1, 12345) + body)
    code, out, _ = dump(capsys, snapshot, "--verify")
    assert code == 1
    assert f"{snapshot}: position 0: Snapshot is corrupt (CRC is no longer valid)" in out


def test_checkpoints_dump_their_entries_and_a_malformed_one_fails_verify_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "recovery-point-offset-checkpoint"
    good.write_text("0\n2\nfoo 1 5\nbar 2 10\n")
    code, out, _ = dump(capsys, good)
    assert (code, out.splitlines()[1:]) == (0, [
        "version: 0 entries: 2", "topic: foo partition: 1 offset: 5",
        "topic: bar partition: 2 offset: 10"])
    bad = tmp_path / "leader-epoch-checkpoint"
    bad.write_text("0\n2\n1 0\nnot a line\n")
    code, out, _ = dump(capsys, bad, "--verify")
    assert code == 1
    assert f"{bad}: position 8: checkpoint file {bad}: line 4: malformed line" in out


# ---- indexes -----------------------------------------------------------------------------------
def test_index_and_time_index_dump_every_entry_and_match_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    index = OffsetIndex(partition / "00000000000000000000.index", 0, writable=False)
    times = TimeIndex(partition / "00000000000000000000.timeindex", 0, writable=False)
    assert index.entries >= 3
    code, out, err = dump(capsys, partition / "00000000000000000000.index",
                          partition / "00000000000000000000.timeindex")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[1:1 + index.entries] == [f"offset: {index.entry(i).offset} position: "
                                          f"{index.entry(i).position}"
                                          for i in range(index.entries)]
    assert lines[2 + index.entries:] == [f"timestamp: {times.entry(i).timestamp} offset: "
                                         f"{times.entry(i).offset}"
                                         for i in range(times.entries)]


def test_index_sanity_check_passes_a_good_index_and_fails_a_torn_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    index = partition / "00000000000000000000.index"
    code, out, _ = dump(capsys, index, "--index-sanity-check")
    assert (code, out.splitlines()[1]) == (0, f"{index} passed sanity check.")
    index.write_bytes(index.read_bytes() + b"\x00\x01\x02")
    code, _, err = dump(capsys, index, "--index-sanity-check")
    assert code == 1 and f"{index} failed sanity check" in err


def test_verify_index_only_reports_kafka_mismatches(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    index = partition / "00000000000000000000.index"
    entry = OffsetIndex(index, 0, writable=False).entry(1)
    index.write_bytes(struct.pack(">ii", entry.offset + 1, entry.position))
    code, out, err = dump(capsys, index, "--verify-index-only")
    assert code == 1 and "offset:" not in out
    assert err == (f"Mismatches in :{index.absolute()}\n"
                   f"  Index offset: {entry.offset + 1}, log offset: {entry.offset}\n")


# ---- --verify ----------------------------------------------------------------------------------
def test_verify_passes_a_healthy_partition_and_never_changes_a_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    before = hashes(tmp_path)
    files = sorted(p for p in partition.iterdir())
    code, out, err = dump(capsys, "--verify", *files)
    assert (code, err) == (0, "")
    assert out.count(": ok: ") == len(files)
    dump(capsys, "--print-data-log", *files)
    dump(capsys, "--json", "--deep-iteration", *files)
    assert hashes(tmp_path) == before


def test_verify_accepts_the_index_entries_of_multi_batch_appends_that_kafka_calls_mismatches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    for i in range(6):             # one append of two batches: one entry, at the first batch,
        log.append_batch(build_batch([Record(b"k", b"a", 1000 + i)])     # for the last offset
                         + build_batch([Record(b"k", b"b", 1000 + i)]))
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    code, out, _ = dump(capsys, "--verify", index, index.with_suffix(".timeindex"))
    assert code == 0 and out.count(": ok: ") == 2
    code, _, err = dump(capsys, index)
    assert code == 0 and err.startswith(f"Mismatches in :{index.absolute()}\n")


def test_verify_names_the_file_and_position_of_a_flipped_byte(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batches = known_batches()
    path = write_segment(tmp_path, batches)
    data = bytearray(path.read_bytes())
    data[70 + 40] ^= 0x01                                      # inside the second batch
    path.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--verify", path)
    assert code == 1
    assert f"{path}: position 70: batch at offsets 1..2 fails its CRC (stored crc " \
           f"{crc(batches[1])}, computed crc " in out
    assert f"{path}: damaged: 1 problem" in out and "damage found in 1 of 1 files" in err
    code, out, _ = dump(capsys, "--verify", "--json", path)
    doc = json.loads(out)
    assert (doc["ok"], doc["problems"][0]["position"], doc["validBytes"]) == (False, 70, 70)
    assert (doc["droppedBatches"], doc["droppedRecords"]) == (3, 4)


def test_verify_rejects_an_index_entry_pointing_into_the_middle_of_a_batch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    index = partition / "00000000000000000000.index"
    entry = OffsetIndex(index, 0, writable=False).entry(0)
    index.write_bytes(struct.pack(">ii", entry.offset, entry.position + 5))
    code, out, _ = dump(capsys, "--verify", index)
    assert code == 1
    assert (f"{index}: position 0: entry 0: offset {entry.offset} -> position "
            f"{entry.position + 5}: the position is inside the batch at position "
            f"{entry.position}") in out


def test_verify_rejects_a_garbage_index_and_time_index(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    noise = random.Random(7)
    index = partition / "00000000000000000000.index"
    times = partition / "00000000000000000000.timeindex"
    index.write_bytes(noise.randbytes(40))
    times.write_bytes(noise.randbytes(36))
    code, out, _ = dump(capsys, "--verify", index, times)
    assert code == 1
    assert f"{index}: position 0: entry 0:" in out and f"{times}: position 0: entry 0:" in out


def test_verify_rejects_time_index_entries_out_of_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = small_log(tmp_path)
    times = partition / "00000000000000000000.timeindex"
    times.write_bytes(struct.pack(">qi", 10_004, 4) + struct.pack(">qi", 10_002, 5))
    code, out, _ = dump(capsys, "--verify", times)
    assert code == 1
    assert (f"{times}: position 12: entry 1: timestamp 10002 -> offset 5: the timestamp is not "
            f"above the previous entry's 10004") in out


def test_verify_reports_a_torn_tail_with_its_position(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = write_segment(tmp_path, [vector_batch(), vector_batch()[:40]])
    code, out, _ = dump(capsys, "--verify", path)
    assert code == 1
    assert f"{path}: position 70: 40 bytes at the end are not a complete batch" in out


def test_missing_files_are_a_usage_error(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = dump(capsys, tmp_path / "nope.log")
    assert code == 2 and "not a file" in err


# ---- hostile file names (issue 12) -------------------------------------------------------------
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\rforged line\n\x7f\x9b.log"
HOSTILE_SHOWN = "evil\\x1b]0;pwned\\x07\\x1b[2J\\x0dforged line\\x0a\\x7f\\x9b.log"


@pytest.mark.parametrize("args", [(), ("--deep-iteration",), ("--verify",),
                                  ("--verify", "--deep-iteration"), ("--json",)])
def test_control_characters_of_a_file_name_are_escaped_in_every_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    """dump-log printed a file name's escape sequences raw (a terminal title, a screen clear,
    a carriage return forging a line). Every line naming the file escapes them now, the messages
    of the storage errors that embed the path included (the second batch fails its CRC)."""
    good, bad = vector_batch(), bytearray(vector_batch())
    bad[-1] ^= 0x01
    path = write_segment(tmp_path, [good, bytes(bad)], HOSTILE)
    code, out, err = dump(capsys, path, *args)
    assert code == (1 if "--verify" in args else 0)
    for text in (out, err):
        assert not any(ch in text for ch in "\x1b\x07\r\x7f\x9b"), repr(text)
        assert "forged line\n" not in text
    shown = str(tmp_path / HOSTILE_SHOWN)
    if "--json" in args:
        assert json.loads(out)["file"] == shown
    elif "--verify" in args:
        assert f"{shown}: position 70: " in out    # the CRC problem names the file
    else:
        assert out.startswith(f"Dumping {shown}\n")
    assert main(["dump-log", str(tmp_path / "no\x1bsuch.log")]) == 2
    assert "no\\x1bsuch.log" in capsys.readouterr().err


def test_txn_index_and_markers_written_by_the_log_dump_as_kafka_prints_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage.clock import FakeClock

    log = Log.open(tmp_path / "t-0", LogConfig(), clock=FakeClock(5000))
    for pid in (7, 8):
        log.append_batch(build_batch([Record(b"k", b"v", 1000)], producer_id=pid,
                                     producer_epoch=2, base_sequence=0, is_transactional=True))
    log.append_end_txn_marker(ControlType.ABORT, producer_id=7, producer_epoch=2,
                              coordinator_epoch=4)
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=8, producer_epoch=2,
                              coordinator_epoch=4)
    log.flush()
    log.close()
    code, out, _ = dump(capsys, tmp_path / "t-0" / "00000000000000000000.txnindex")
    assert code == 0
    assert out.splitlines()[1:] == [
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 1"]
    code, out, _ = dump(capsys, "--deep-iteration", tmp_path / "t-0" / SEGMENT)
    assert code == 0
    assert "endTxnMarker: ABORT coordinatorEpoch: 4" in out
    assert "endTxnMarker: COMMIT coordinatorEpoch: 4" in out
    code, out, _ = dump(capsys, "--verify", tmp_path / "t-0" / "00000000000000000000.txnindex")
    assert code == 0


def txn_log(tmp_path: Path) -> Path:
    """A partition with a committed (marker at 3) and an aborted (marker at 7) transaction."""
    log = Log.open(tmp_path / "x-0", LogConfig())
    now = int(time.time() * 1000)        # a record from long ago would roll the segment
    for pid in (1, 2):
        log.append_batch(build_batch([Record(b"k", b"v%d" % i, now) for i in range(3)],
                                     producer_id=pid, producer_epoch=0, base_sequence=0,
                                     is_transactional=True))
        log.append_end_txn_marker(ControlType.COMMIT if pid == 1 else ControlType.ABORT,
                                  producer_id=pid, producer_epoch=0)
    log.close()
    return tmp_path / "x-0"


def test_verify_passes_the_txn_index_of_a_healthy_transactional_partition(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition = txn_log(tmp_path)
    files = sorted(partition.iterdir())
    assert partition / "00000000000000000000.txnindex" in files
    code, out, err = dump(capsys, "--verify", *files)
    assert (code, err) == (0, "")
    assert out.count(": ok: ") == len(files)


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_verify_reports_an_abort_marker_without_its_txn_index_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    partition = txn_log(tmp_path)
    index = partition / "00000000000000000000.txnindex"
    if how == "deleted":
        index.unlink()
    else:
        index.write_bytes(b"")
    segment = partition / SEGMENT
    code, out, err = dump(capsys, "--verify", segment)
    assert code == 1
    assert "the abort marker of producer 2 at offset 7 has no entry in the .txnindex" in out
    assert f"{segment}: damaged: 1 problem" in out


def test_verify_reports_a_txn_index_entry_that_names_a_commit_marker(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage.txn_index import AbortedTxn

    partition = txn_log(tmp_path)
    index = partition / "00000000000000000000.txnindex"
    index.write_bytes(AbortedTxn(1, 0, 3, 4).encode() + AbortedTxn(2, 4, 7, 8).encode())
    code, out, _ = dump(capsys, "--verify", index)
    assert code == 1
    assert "the marker of producer 1 at offset 3 is a commit" in out
    assert f"{index}: damaged: 1 problem" in out


def test_a_live_segments_preallocated_indexes_dump_no_entries_and_no_mismatches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An active segment's indexes are preallocated zeroed slots until the segment is closed
    (trimmed then). Without an entry yet (less than index.interval.bytes appended), every slot is
    zero: the dump stops at that zeroed tail, as lookups do, instead of reading slot 0 as an
    entry for the base offset (a mismatch with the first batch, and a timestamp 0)."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    try:
        log.append_batch(build_batch([Record(b"k%d" % i, b"v", 1_700_000_000_000 + i)
                                      for i in range(5)]))
        log.flush()
        index = tmp_path / "t-0" / "00000000000000000000.index"
        times = tmp_path / "t-0" / "00000000000000000000.timeindex"
        assert index.stat().st_size > 8 and not index.read_bytes().strip(b"\0")   # preallocated
        code, out, err = dump(capsys, index, times)
        assert (code, err) == (0, "")
        assert "offset: 0 position: 0" not in out and "timestamp: 0" not in out, out
        assert "Mismatches" not in out and "Found timestamp mismatch" not in out, out
        code, out, err = dump(capsys, "--verify-index-only", index, times)
        assert (code, err) == (0, ""), err
        code, out, _ = dump(capsys, "--verify", index, times)
        assert code == 0 and out.count(": ok") == 2, out
    finally:
        log.close()
