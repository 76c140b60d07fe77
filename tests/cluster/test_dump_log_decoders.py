"""``strata dump-log --offsets-decoder`` and ``--transaction-log-decoder``: Kafka's
DumpLogSegments text for ``__consumer_offsets`` and ``__transaction_state`` records, checked on
real Kafka partitions (decoded again here by hand with ``struct``) and on records built byte by
byte from Kafka's schemas, one per schema version; bad bytes never stop the dump."""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops.cli.main import main
from ops.tools import group_records, transaction_records
from ops.tools.dump_log import read_only
from ops.tools.kafka_messages import java_string
from storage.records import Record, build_batch, iter_batches

SEGMENT = "00000000000000000000.log"
DSPIDER = "LanXuage__dspider/kafka-data"
SPOOLDIR = "mscaldas2012__kafka-connect-spooldir/kafka-data"
SEANORTH = "seanorth__kafka-server/kafka-logs"


def dump(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["dump-log", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def write_records(directory: Path, pairs: list[tuple[bytes | None, bytes | None]]) -> Path:
    """A real segment file holding one batch with these (key, value) records, offsets 0.."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SEGMENT
    path.write_bytes(build_batch([Record(k, v, 1000 + i) for i, (k, v) in enumerate(pairs)]))
    return path


def decoded(capsys: pytest.CaptureFixture[str], path: Path,
            option: str) -> list[tuple[str | None, str | None]]:
    """(key text, payload text) of every record line that ``option`` prints."""
    code, out, err = dump(capsys, path, option, "--skip-record-metadata")
    assert (code, err) == (0, "")
    found = []
    for line in out.splitlines():
        if line.startswith("| key: "):
            key, sep, payload = line[len("| key: "):].partition(" payload: ")
            found.append((key, payload if sep else None))
        elif line.startswith(" payload: "):
            found.append((None, line[len(" payload: "):]))
    return found


def records_of(path: Path) -> list[Record]:
    return [r for batch in iter_batches(read_only(path), path=path) for r in batch.records()]


# ---- the wire rules, written from Kafka's schemas ----------------------------------------------
def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(text: str | None) -> bytes:
    if text is None:
        return i16(-1)
    raw = text.encode()
    return i16(len(raw)) + raw


def blob(raw: bytes | None) -> bytes:
    return i32(-1) if raw is None else i32(len(raw)) + raw


def array(items: list[bytes] | None) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def cstring(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def cblob(raw: bytes | None) -> bytes:
    return uvarint(0) if raw is None else uvarint(len(raw) + 1) + raw


def carray(items: list[bytes] | None) -> bytes:
    return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d
                                           for t, d in sorted(fields.items()))


def commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    return i16(version) + string(group) + string(topic) + i32(partition)


def group_key(group: str) -> bytes:
    return i16(2) + string(group)


def commit_value(version: int, offset: int, metadata: str, commit_ts: int, *,
                 leader_epoch: int = -1, expire_ts: int = -1) -> bytes:
    """OffsetCommitValue: offset, leaderEpoch (v3+), metadata, commitTimestamp, expire (v1)."""
    body = {0: i64(offset) + string(metadata) + i64(commit_ts),
            1: i64(offset) + string(metadata) + i64(commit_ts) + i64(expire_ts),
            2: i64(offset) + string(metadata) + i64(commit_ts),
            3: i64(offset) + i32(leader_epoch) + string(metadata) + i64(commit_ts),
            4: i64(offset) + i32(leader_epoch) + cstring(metadata) + i64(commit_ts) + tags()}
    return i16(version) + body[version]


def member(version: int, member_id: str, client: str, host: str, session: int,
           subscription: bytes, assignment: bytes, *, instance: str | None = None,
           rebalance: int = -1) -> bytes:
    """GroupMetadataValue.MemberMetadata at ``version`` (flexible from 4)."""
    s, b = (cstring, cblob) if version >= 4 else (string, blob)
    return (s(member_id) + (s(instance) if version >= 3 else b"") + s(client) + s(host)
            + (i32(rebalance) if version >= 1 else b"") + i32(session) + b(subscription)
            + b(assignment) + (tags() if version >= 4 else b""))


def group_value(version: int, protocol_type: str, generation: int, protocol: str | None,
                leader: str | None, members: list[bytes], *, state_ts: int = -1) -> bytes:
    s, a = (cstring, carray) if version >= 4 else (string, array)
    return (i16(version) + s(protocol_type) + i32(generation) + s(protocol) + s(leader)
            + (i64(state_ts) if version >= 2 else b"") + a(members)
            + (tags() if version >= 4 else b""))


def subscription(version: int, topics: list[str], user_data: bytes | None = None,
                 owned: list[tuple[str, list[int]]] | None = None, generation: int = -1,
                 rack: str | None = None) -> bytes:
    """ConsumerProtocolSubscription (never flexible): version-prefixed."""
    out = i16(version) + array([string(t) for t in topics]) + blob(user_data)
    if version >= 1:
        out += array([string(t) + array([i32(p) for p in ps]) for t, ps in owned or []])
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += string(rack)
    return out


def assignment(version: int, partitions: list[tuple[str, list[int]]],
               user_data: bytes | None = None) -> bytes:
    return (i16(version) + array([string(t) + array([i32(p) for p in ps])
                                  for t, ps in partitions]) + blob(user_data))


# ---- real __consumer_offsets partitions --------------------------------------------------------
def hand_decoded_commit(key: bytes, value: bytes) -> tuple[str, str, int, int, int, str, int]:
    """A type-1 OffsetCommitKey and a v3 OffsetCommitValue, unpacked field by field."""
    record_type, group_length = struct.unpack_from(">hh", key)
    group = key[4:4 + group_length].decode()
    (topic_length,) = struct.unpack_from(">h", key, 4 + group_length)
    at = 6 + group_length
    topic = key[at:at + topic_length].decode()
    (partition,) = struct.unpack_from(">i", key, at + topic_length)
    version, offset, leader_epoch, metadata_length = struct.unpack_from(">hqih", value)
    metadata = value[16:16 + metadata_length].decode()
    (commit_ts,) = struct.unpack_from(">q", value, 16 + metadata_length)
    assert (record_type, version) == (1, 3)
    return group, topic, partition, offset, leader_epoch, metadata, commit_ts


def test_every_commit_of_a_real_consumer_offsets_partition_prints_its_group_topic_and_offset(
        copy_fixture: Callable[[str], Path], kafka_fixtures: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    directory = copy_fixture(f"{DSPIDER}/__consumer_offsets-8")
    path = directory / SEGMENT
    records = records_of(path)
    lines = decoded(capsys, path, "--offsets-decoder")
    assert len(lines) == len(records) == 23_102
    committed: dict[int, int] = {}
    kinds: Counter[str] = Counter()
    for record, (key, payload) in zip(records, lines):
        if struct.unpack_from(">h", record.key)[0] == 2:
            kinds["group"] += 1
            assert key == json.dumps({"type": "2", "data": {"group": "spiders"}},
                                     separators=(",", ":"))
            continue
        group, topic, partition, offset, epoch, metadata, ts = \
            hand_decoded_commit(record.key, record.value)
        kinds[group] += 1
        assert key == (f'{{"type":"1","data":{{"group":"{group}","topic":"{topic}",'
                       f'"partition":{partition}}}}}')
        assert payload == (f'{{"version":"3","data":{{"offset":{offset},"leaderEpoch":{epoch},'
                           f'"metadata":"{metadata}","commitTimestamp":{ts}}}}}')
        committed[partition] = offset
    assert kinds == {"spiders": 22_981, "group": 121}
    assert committed == {0: 167, 1: 146, 2: 197, 3: 162, 4: 153, 5: 177, 6: 159, 7: 166,
                         8: 155, 9: 167}
    expected = json.loads((kafka_fixtures / "EXPECTED.json").read_text())[DSPIDER.split("/")[0]]
    for partition, offset in committed.items():       # a consumer commits at most the log end
        log = expected[f"{DSPIDER.split('/', 1)[1]}/dspiderTask-{partition}/{SEGMENT}"]
        assert offset <= log["parsed"]["last_offset"] + 1
    log_end_0 = expected[f"{DSPIDER.split('/', 1)[1]}/dspiderTask-0/{SEGMENT}"]
    assert committed[0] == log_end_0["parsed"]["last_offset"] + 1 == 167


def test_real_group_metadata_prints_members_with_their_decoded_subscriptions(
        copy_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_fixture(f"{SEANORTH}/__consumer_offsets-16") / SEGMENT
    empty_group = records_of(path)[21]
    assert struct.unpack(">hh8sihhqi", empty_group.value) == (
        3, 8, b"consumer", 2, -1, -1, 1641705943538, 0)
    lines = decoded(capsys, path, "--offsets-decoder")
    assert lines[21] == ('{"type":"2","data":{"group":"simple-consumer-example"}}',
                         '{"version":"3","data":{"protocolType":"consumer","generation":2,'
                         '"protocol":null,"leader":null,"currentStateTimestamp":1641705943538,'
                         '"members":[]}}')
    code, out, _ = dump(capsys, path, "--offsets-decoder", "--json")
    first = json.loads(out)["batches"][0]["records"][0]
    assert code == 0 and first["key"] == {"type": "2",
                                          "data": {"group": "simple-consumer-example"}}
    group = first["payload"]["data"]
    assert (first["payload"]["version"], group["generation"], group["protocol"]) == \
        ("3", 1, "range")
    one, two = group["members"]
    assert (one["clientId"], one["groupInstanceId"], one["clientHost"], one["rebalanceTimeout"],
            one["sessionTimeout"]) == ("consumer-simple-consumer-example-1", None,
                                       "/192.168.1.10", 300000, 10000)
    assert one["subscription"] == {"topics": ["test-topic"], "userData": None,
                                   "ownedPartitions": []}                     # version 1
    assert one["assignment"] == {"assignedPartitions": [{"topic": "test-topic",
                                                         "partitions": [0]}], "userData": None}
    assert two["assignment"]["assignedPartitions"] == []
    assert group["leader"] == one["memberId"]


def test_group_metadata_v2_of_kafka_streams_prints_user_data_as_base64(
        copy_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_fixture(f"{SPOOLDIR}/__consumer_offsets-13") / SEGMENT
    raw = records_of(path)[0].value
    after_topic = raw.index(b"_confluent-command") + len(b"_confluent-command")
    (length,) = struct.unpack_from(">i", raw, after_topic)     # the subscription's userData
    user_data = raw[after_topic + 4:after_topic + 4 + length]
    code, out, _ = dump(capsys, path, "--offsets-decoder", "--json")
    group = json.loads(out)["batches"][0]["records"][0]["payload"]
    assert code == 0 and group["version"] == "2" and length == 36
    (member_,) = group["data"]["members"]
    assert member_["subscription"] == {"topics": ["_confluent-command"],   # version 0
                                       "userData": base64.b64encode(user_data).decode()}
    assert member_["subscription"]["userData"] == "AAAABAAAAAT/p9TYv59CV7v61+4yfm+PAAAAAAAAAAAAAAAA"
    assert member_["assignment"]["assignedPartitions"] == [{"topic": "_confluent-command",
                                                            "partitions": [0]}]
    assert (group["data"]["protocol"], member_["rebalanceTimeout"]) == ("stream", 2**31 - 1)


def test_tombstones_of_real_partitions_print_delete_and_json_null(
        copy_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_fixture(f"{SPOOLDIR}/__consumer_offsets-0") / SEGMENT
    lines = decoded(capsys, path, "--offsets-decoder")
    assert lines[5] == ('{"type":"1","data":{"group":"","topic":"docker-connect-configs",'
                        '"partition":0}}', "<DELETE>")
    _, out, _ = dump(capsys, path, "--offsets-decoder", "--json")
    last = json.loads(out)["batches"][-1]["records"][-1]
    assert (last["valueSize"], last["payload"]) == (-1, None)


def test_every_real_consumer_offsets_partition_decodes_without_an_error_line(
        copy_fixture: Callable[[str], Path], kafka_fixtures: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.loads((kafka_fixtures / "EXPECTED.json").read_text())
    checked = 0
    for repo in (SPOOLDIR, SEANORTH, DSPIDER):
        owner, under = repo.split("/", 1)
        for name, entry in expected[owner].items():
            if "__consumer_offsets" not in name or not name.endswith(".log") or \
                    not entry["bytes"]:
                continue
            partition = name.removeprefix(f"{under}/").split("/")[0]
            path = copy_fixture(f"{repo}/{partition}") / SEGMENT
            lines = decoded(capsys, path, "--offsets-decoder")
            assert len(lines) == entry["parsed"]["kp_records"]
            assert all(key is not None and key.startswith('{"type":"') for key, _ in lines)
            assert all(p == "<DELETE>" or p.startswith('{"version":"') for _, p in lines if p)
            checked += 1
    assert checked == 7


# ---- every schema version, built byte by byte --------------------------------------------------
def test_offset_commit_keys_v0_v1_and_the_group_metadata_key_v2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_records(tmp_path, [(commit_key("g", "t", 3, version=0), None),
                                    (commit_key("g", "t", 3, version=1), None),
                                    (group_key("g"), None)])
    assert decoded(capsys, path, "--offsets-decoder") == [
        ('{"type":"0","data":{"group":"g","topic":"t","partition":3}}', "<DELETE>"),
        ('{"type":"1","data":{"group":"g","topic":"t","partition":3}}', "<DELETE>"),
        ('{"type":"2","data":{"group":"g"}}', "<DELETE>")]


@pytest.mark.parametrize(("version", "expected"), [
    (0, '{"offset":42,"metadata":"m","commitTimestamp":1000}'),
    (1, '{"offset":42,"metadata":"m","commitTimestamp":1000,"expireTimestamp":2000}'),
    (2, '{"offset":42,"metadata":"m","commitTimestamp":1000}'),
    (3, '{"offset":42,"leaderEpoch":5,"metadata":"m","commitTimestamp":1000}'),
    (4, '{"offset":42,"leaderEpoch":5,"metadata":"m","commitTimestamp":1000}'),
])
def test_offset_commit_values_print_the_fields_of_their_version(
        version: int, expected: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    value = commit_value(version, 42, "m", 1000, leader_epoch=5, expire_ts=2000)
    path = write_records(tmp_path, [(commit_key("g", "t", 0), value)])
    assert decoded(capsys, path, "--offsets-decoder") == [
        ('{"type":"1","data":{"group":"g","topic":"t","partition":0}}',
         f'{{"version":"{version}","data":{expected}}}')]


GROUP_FIELDS = {
    0: '"protocolType":"consumer","generation":7,"protocol":"range","leader":"m1",',
    1: '"protocolType":"consumer","generation":7,"protocol":"range","leader":"m1",',
    2: '"protocolType":"consumer","generation":7,"protocol":"range","leader":"m1",'
       '"currentStateTimestamp":1234,',
    3: '"protocolType":"consumer","generation":7,"protocol":"range","leader":"m1",'
       '"currentStateTimestamp":1234,',
    4: '"protocolType":"consumer","generation":7,"protocol":"range","leader":"m1",'
       '"currentStateTimestamp":1234,',
}
MEMBER_FIELDS = {
    0: '"memberId":"m1","clientId":"c1","clientHost":"/10.0.0.1",',
    1: '"memberId":"m1","clientId":"c1","clientHost":"/10.0.0.1","rebalanceTimeout":300000,',
    2: '"memberId":"m1","clientId":"c1","clientHost":"/10.0.0.1","rebalanceTimeout":300000,',
    3: '"memberId":"m1","groupInstanceId":"i1","clientId":"c1","clientHost":"/10.0.0.1",'
       '"rebalanceTimeout":300000,',
    4: '"memberId":"m1","groupInstanceId":"i1","clientId":"c1","clientHost":"/10.0.0.1",'
       '"rebalanceTimeout":300000,',
}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_values_print_the_fields_and_members_of_their_version(
        version: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m1 = member(version, "m1", "c1", "/10.0.0.1", 10000,
                subscription(0, ["orders", "payments"], b"\x01\x02"),
                assignment(0, [("orders", [0, 2]), ("payments", [1])]),
                instance="i1", rebalance=300000)
    value = group_value(version, "consumer", 7, "range", "m1", [m1], state_ts=1234)
    path = write_records(tmp_path, [(group_key("g"), value)])
    assert decoded(capsys, path, "--offsets-decoder") == [(
        '{"type":"2","data":{"group":"g"}}',
        f'{{"version":"{version}","data":{{{GROUP_FIELDS[version]}"members":[{{'
        f'{MEMBER_FIELDS[version]}"sessionTimeout":10000,'
        '"subscription":{"topics":["orders","payments"],"userData":"AQI="},'
        '"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,2]},'
        '{"topic":"payments","partitions":[1]}],"userData":null}}]}}')]


def test_kafka_test_vectors_for_the_consumer_embedded_protocol(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The two GroupMetadataValue v4 cases of Kafka's DumpLogSegmentsTest.
    testOffsetsMessageParser, with Kafka's expected strings."""
    def value(sub: bytes, assign: bytes) -> bytes:
        return group_value(4, "consumer", 10, "range", "member", [member(
            4, "member", "client", "host", 100, sub, assign, instance="instance",
            rebalance=1000)])

    parsed = value(subscription(3, ["foo"], None, [("foo", [0])], 0, "rack"),
                   assignment(3, [("foo", [0])]))
    malformed = value(b"Subscription", b"Assignment")
    path = write_records(tmp_path, [(group_key("group"), parsed), (group_key("group"), malformed)])
    head = ('{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range",'
            '"leader":"member","currentStateTimestamp":-1,"members":[{"memberId":"member",'
            '"groupInstanceId":"instance","clientId":"client","clientHost":"host",'
            '"rebalanceTimeout":1000,"sessionTimeout":100,')
    assert decoded(capsys, path, "--offsets-decoder") == [
        ('{"type":"2","data":{"group":"group"}}',
         head + '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":'
                '"foo","partitions":[0]}],"generationId":0,"rackId":"rack"},"assignment":'
                '{"assignedPartitions":[{"topic":"foo","partitions":[0]}],"userData":null}}]}}'),
        ('{"type":"2","data":{"group":"group"}}',
         head + '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}')]


def test_members_of_a_non_consumer_protocol_keep_their_bytes_as_base64(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m1 = member(3, "w1", "connect-1", "/10.0.0.2", 10000, subscription(0, ["t"]),
                b"\x00\x01", rebalance=60000)
    path = write_records(tmp_path, [(group_key("connect-cluster"),
                                     group_value(3, "connect", 2, "sessioned", "w1", [m1]))])
    ((_, payload),) = decoded(capsys, path, "--offsets-decoder")
    assert payload is not None
    assert payload.endswith('"sessionTimeout":10000,"subscription":"AAAAAAABAAF0/////w==",'
                            '"assignment":"AAE="}]}}')


def test_flexible_values_skip_unknown_tagged_fields_and_newer_versions_read_like_the_last(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tagged = (i16(4) + i64(9) + i32(1) + cstring("x") + i64(50)
              + tags({7: b"future", 90: b""}))
    newer = i16(5) + i64(9) + i32(1) + cstring("x") + i64(50) + tags()     # KIP-915
    path = write_records(tmp_path, [(commit_key("g", "t", 0), tagged),
                                    (commit_key("g", "t", 0), newer)])
    assert [p for _, p in decoded(capsys, path, "--offsets-decoder")] == [
        '{"version":"4","data":{"offset":9,"leaderEpoch":1,"metadata":"x","commitTimestamp":50}}',
        '{"version":"5","data":{"offset":9,"leaderEpoch":1,"metadata":"x","commitTimestamp":50}}']


def test_strings_print_as_jackson_escapes_them_and_decode_bad_utf8_as_java(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw_group = "é\"\\\t\x01".encode() + b"\xed\xa0\x80" + b"\xed\xbfA"
    key = i16(2) + i16(len(raw_group)) + raw_group
    path = write_records(tmp_path, [(key, None)])
    ((printed, _),) = decoded(capsys, path, "--offsets-decoder")
    assert printed == '{"type":"2","data":{"group":"é\\"\\\\\\t\\u0001\ufffd\ufffdA"}}'
    assert java_string(b"\xf0\x9f\x98\x80\xf0\x9f") == "\U0001F600\ufffd"


# ---- bad bytes ---------------------------------------------------------------------------------
def test_records_that_do_not_decode_print_kafkas_error_line_and_the_dump_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = commit_value(3, 1, "", 5)
    path = write_records(tmp_path, [
        (commit_key("g", "t", 0), good[:-3]),                          # truncated value
        (commit_key("g", "t", 0), i16(4) + i64(1) + i32(0) + uvarint(2**29) + b"x"),
        (commit_key("g", "t", 0), i16(4) + i64(1) + i32(0) + uvarint(11) + b"x"),
        (i16(32767) + b"junk", good),
        (None, good),
        (b"\x01", good),
        (commit_key("g", "t", 0), b"\x00"),
        (i16(3) + cstring("new-group") + tags(), i16(0) + i32(10) + tags()),
        (commit_key("g", "t", 0)[:-2], good),                          # truncated key
        (commit_key("g", "t", 0), good),
    ])
    assert decoded(capsys, path, "--offsets-decoder") == [
        ("Error at offset 0, skipping. Could not read record with version 3 from value's buffer "
         "due to: null.", None),
        ("Error at offset 1, skipping. Could not read record with version 4 from value's buffer "
         "due to: string field metadata had invalid length 536870911.", None),
        ("Error at offset 2, skipping. Could not read record with version 4 from value's buffer "
         "due to: Error reading byte array of 10 byte(s): only 1 byte(s) available.", None),
        ("Unknown record type 32767 at offset 3, skipping.", None),
        ("Failed to decode message at offset 4 using offset topic decoder (message had a "
         "missing key)", None),
        ("Error at offset 5, skipping. Could not read version from key's buffer.", None),
        ("Error at offset 6, skipping. Could not read version from value's buffer.", None),
        ("Record type 3 (ConsumerGroupMetadataKey) at offset 7 is not decoded by strata, "
         "skipping.", None),
        ("Error at offset 8, skipping. Could not read record with version 1 from key's buffer "
         "due to: null.", None),
        ('{"type":"1","data":{"group":"g","topic":"t","partition":0}}',
         '{"version":"3","data":{"offset":1,"leaderEpoch":-1,"metadata":"","commitTimestamp":5}}'),
    ]


def test_json_carries_decoded_objects_and_names_records_that_do_not_decode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_records(tmp_path, [(commit_key("g", "t", 2), commit_value(1, 7, "", 5,
                                                                          expire_ts=9)),
                                    (commit_key("g", "t", 2), None),
                                    (commit_key("g", "t", 2), b"\x00\x03\x00")])
    code, out, _ = dump(capsys, path, "--offsets-decoder", "--json")
    commit, tombstone, broken = json.loads(out)["batches"][0]["records"]
    assert code == 0
    assert commit["key"] == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 2}}
    assert commit["payload"] == {"version": "1", "data": {
        "offset": 7, "metadata": "", "commitTimestamp": 5, "expireTimestamp": 9}}
    assert (tombstone["key"]["data"]["partition"], tombstone["payload"]) == (2, None)
    assert broken == {**{k: broken[k] for k in ("offset", "timestamp", "keySize", "valueSize",
                                                 "sequence", "headerKeys")},
                      "decodeError": "Error at offset 2, skipping. Could not read record with "
                                     "version 3 from value's buffer due to: null."}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_type=st.sampled_from([0, 1, 2, 3, -1, 99]), version=st.integers(-2, 6),
       body=st.binary(max_size=200), key_tail=st.binary(max_size=12))
def test_random_value_bytes_never_crash_either_decoder(record_type: int, version: int,
                                                       body: bytes, key_tail: bytes) -> None:
    key = (commit_key("g", "t", 0, version=record_type) if record_type in (0, 1)
           else i16(record_type) + string("g")) + key_tail
    value = i16(version) + body
    for decoder in (group_records, transaction_records):
        key_text, payload = decoder.format_record(key, value, 17)
        doc = decoder.record_json(key, value, 17)
        assert isinstance(key_text, str)
        assert payload is None or isinstance(payload, str)
        if payload is None and not key_text.startswith("unknown::"):
            assert "offset 17" in key_text and "decodeError" in doc
        else:
            json.dumps(doc)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 200), flip=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_truncated_or_flipped_real_group_metadata_never_crashes(cut: int, flip: int,
                                                                bit: int) -> None:
    m1 = member(4, "m1", "c1", "h", 10, subscription(3, ["a"], b"u", [("a", [0])], 1, "r"),
                assignment(1, [("a", [0, 1])]), instance="i", rebalance=5)
    value = bytearray(group_value(4, "consumer", 1, "range", "m1", [m1, m1]))
    value[flip % len(value)] ^= 1 << bit
    damaged = bytes(value[:len(value) - cut % len(value)])
    key_text, payload = group_records.format_record(group_key("g"), damaged, 3)
    assert payload is not None or key_text.startswith("Error at offset 3, skipping.")


# ---- __transaction_state -----------------------------------------------------------------------
def txn_key(transactional_id: str, version: int = 0) -> bytes:
    return i16(version) + string(transactional_id)


def txn_value(version: int, producer_id: int, epoch: int, timeout_ms: int, state: int,
              partitions: list[tuple[str, list[int]]] | None, updated: int, started: int,
              tagged: dict[int, bytes] | None = None) -> bytes:
    """TransactionLogValue: v0, or v1 (flexible) with tags 0 previousProducerId,
    1 nextProducerId, 2 clientTransactionVersion."""
    if version == 0:
        groups = None if partitions is None else [string(t) + array([i32(p) for p in ps])
                                                  for t, ps in partitions]
        return (i16(0) + i64(producer_id) + i16(epoch) + i32(timeout_ms) + bytes([state])
                + array(groups) + i64(updated) + i64(started))
    groups = None if partitions is None else [cstring(t) + carray([i32(p) for p in ps]) + tags()
                                              for t, ps in partitions]
    return (i16(version) + i64(producer_id) + i16(epoch) + i32(timeout_ms) + bytes([state])
            + carray(groups) + i64(updated) + i64(started) + tags(tagged))


def test_transaction_log_values_v0_and_v1_print_as_kafka(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1_tags = {0: i64(6), 1: i64(8), 2: i16(2), 9: b"??"}
    path = write_records(tmp_path, [
        (txn_key("tx-1"), txn_value(0, 7, 2, 60000, 1, [("orders", [2, 0])], 1500, 1400)),
        (txn_key("tx-1"), txn_value(1, 7, 3, 60000, 4, [("orders", [2, 0]), ("payments", [1])],
                                    1600, 1400, v1_tags)),
        (txn_key("tx-2"), txn_value(0, 9, 0, 10000, 0, None, 1700, -1)),
        (txn_key("tx-3"), txn_value(1, 11, 0, 10000, 0, [("ignored", [5])], 1800, -1)),
        (txn_key("tx-1"), None),
        (txn_key("tx-4", version=1), b"anything"),
    ])
    assert decoded(capsys, path, "--transaction-log-decoder") == [
        ("transaction_metadata::transactionalId=tx-1",
         "producerId:7,producerEpoch:2,state=Ongoing,partitions=[orders-0,orders-2],"
         "txnLastUpdateTimestamp=1500,txnTimeoutMs=60000"),
        ("transaction_metadata::transactionalId=tx-1",
         "producerId:7,producerEpoch:3,state=CompleteCommit,partitions=[payments-1,orders-0,"
         "orders-2],txnLastUpdateTimestamp=1600,txnTimeoutMs=60000"),
        ("transaction_metadata::transactionalId=tx-2",
         "producerId:9,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=1700,"
         "txnTimeoutMs=10000"),
        ("transaction_metadata::transactionalId=tx-3",                # Empty: partitions dropped
         "producerId:11,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=1800,"
         "txnTimeoutMs=10000"),
        ("transaction_metadata::transactionalId=tx-1", "<DELETE>"),
        ("unknown::version=1", None),
    ]
    code, out, _ = dump(capsys, path, "--transaction-log-decoder", "--json")
    records = json.loads(out)["batches"][0]["records"]
    assert records[1]["key"] == {"type": "0", "data": {"transactionalId": "tx-1"}}
    assert records[1]["payload"] == {"version": "1", "data": {
        "producerId": 7, "previousProducerId": 6, "nextProducerId": 8, "producerEpoch": 3,
        "transactionTimeoutMs": 60000, "transactionStatus": 4, "transactionPartitions": [
            {"topic": "orders", "partitionIds": [2, 0]}, {"topic": "payments",
                                                          "partitionIds": [1]}],
        "transactionLastUpdateTimestampMs": 1600, "transactionStartTimestampMs": 1400,
        "clientTransactionVersion": 2}}
    assert records[2]["payload"]["data"]["transactionPartitions"] is None
    assert (records[4]["payload"], records[5]["decodeError"]) == (None, "unknown::version=1")


def test_transaction_records_kafka_cannot_read_print_an_error_naming_the_offset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = txn_value(0, 7, 2, 60000, 1, [("t", [0])], 1500, 1400)
    path = write_records(tmp_path, [
        (txn_key("a"), txn_value(0, 7, 2, 60000, 9, [], 1, 1)),
        (txn_key("a"), txn_value(1, 7, 2, 60000, 1, [], 1, 1, {2: i16(7)})),
        (txn_key("a"), txn_value(0, 7, 2, 60000, 2, None, 1, 1)),
        (txn_key("a"), i16(2) + good[2:]),
        (txn_key("a"), good[:20]),
        (None, good),
        (txn_key("a"), good),
    ])
    assert decoded(capsys, path, "--transaction-log-decoder") == [
        ("Error at offset 0, skipping. Unknown transaction state id 9 from the transaction "
         "status message", None),
        ("Error at offset 1, skipping. No feature:transaction.version with feature level 7",
         None),
        ("Error at offset 2, skipping. transactionPartitions is null in state PrepareCommit",
         None),
        ("Error at offset 3, skipping. Unknown version 2 from the transaction log message value",
         None),
        ("Error at offset 4, skipping. Could not read record with version 0 from value's buffer "
         "due to: null.", None),
        ("Error at offset 5, skipping. The record has no key.", None),
        ("transaction_metadata::transactionalId=a", "producerId:7,producerEpoch:2,state=Ongoing,"
         "partitions=[t-0],txnLastUpdateTimestamp=1500,txnTimeoutMs=60000"),
    ]


@pytest.mark.parametrize(("groups", "expected"), [      # printed by Scala 2.13's HashSet
    ([("orders", list(range(10)))],
     "orders-7,orders-8,orders-9,orders-0,orders-1,orders-2,orders-3,orders-4,orders-5,orders-6"),
    ([("orders", [2, 0]), ("payments", [1])], "payments-1,orders-0,orders-2"),
    ([("t", [0, 1, 2]), ("t", [3, 4, 5]), ("t", [6, 7, 8]), ("t", [9, 10, 11]),
      ("t", [12, 13, 14])],                               # grows from 16 to 32 buckets
     ",".join(f"t-{p}" for p in range(14, -1, -1))),
])
def test_transaction_partitions_print_in_the_order_of_kafkas_scala_hash_set(
        groups: list[tuple[str, list[int]]], expected: str) -> None:
    order = transaction_records.scala_hash_set_order(groups)
    assert ",".join(f"{t}-{p}" for t, p in order) == expected


SCALA_PROBE = """
import java.util.*;
public class Probe {
  static final class TP {
    final String topic; final int partition;
    TP(String t, int p) { topic = t; partition = p; }
    public int hashCode() { int r = 31 + partition; r = 31 * r + topic.hashCode(); return r; }
    public boolean equals(Object o) {
      return o instanceof TP && ((TP) o).partition == partition && ((TP) o).topic.equals(topic); }
    public String toString() { return topic + "-" + partition; }
  }
  @SuppressWarnings("unchecked")
  public static void main(String[] a) {
    Scanner in = new Scanner(System.in, "UTF-8");
    while (in.hasNextLine()) {
      scala.collection.mutable.Set<TP> set = scala.collection.mutable.Set$.MODULE$.empty();
      for (String group : in.nextLine().split(";")) {
        String[] parts = group.trim().split(" ");
        List<TP> tps = new ArrayList<>();
        for (int i = 1; i < parts.length; i++)
          tps.add(new TP(parts[0], Integer.parseInt(parts[i])));
        set.$plus$plus$eq(scala.jdk.javaapi.CollectionConverters.asScala(tps).toSet());
      }
      System.out.println(set.mkString("", ",", ""));
    }
  }
}
"""


def _scala_library() -> Path:
    """The scala-library 2.13 jar pyspark ships (``scripts/setup`` installs javac beside it)."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is a dependency"
    jars = sorted((Path(spec.origin).parent / "jars").glob("scala-library-2.13.*.jar"))
    assert jars, "pyspark ships scala-library 2.13"
    assert shutil.which("javac"), "scripts/setup installs a JDK (javac)"
    return jars[-1]


def test_hash_set_order_matches_scala_itself_on_random_transactions(tmp_path: Path) -> None:
    import random

    rng = random.Random(11)
    cases = [[(rng.choice(["a", "orders", "payments-v2", "élan", "x" * 30]),
               [rng.randint(0, rng.choice([5, 60, 2**31 - 1]))
                for _ in range(rng.choice([0, 1, 3, 4, 5, 9, 40]))])
              for _ in range(rng.choice([1, 2, 3, 6]))] for _ in range(300)]
    (tmp_path / "Probe.java").write_text(SCALA_PROBE)
    classpath = f"{_scala_library()}:{tmp_path}"
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(tmp_path),
                    str(tmp_path / "Probe.java")], check=True, capture_output=True)
    lines = "\n".join(";".join(" ".join([t, *map(str, ids)]) for t, ids in groups)
                      for groups in cases) + "\n"
    scala = subprocess.run(["java", "-cp", classpath, "Probe"], input=lines.encode(),
                           check=True, capture_output=True).stdout.decode().splitlines()
    ours = [",".join(f"{t}-{p}" for t, p in transaction_records.scala_hash_set_order(groups))
            for groups in cases]
    assert ours == scala
