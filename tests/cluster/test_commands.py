"""The cluster subcommands' pure parts, without Ray: Kafka's log-dirs document, produce's line
parsing and partitioning, JSON of snapshots. The whole path runs in test_cli_cluster.py."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json

import pytest

from ops.cli import jsonable, parse_config, topic_partition
from ops.cli.consume import _record_json, _record_text
from ops.cli.log_dirs import STORAGE_ERROR, describe
from ops.cli.produce import _chunks, _parse, _route
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from cluster.status import WorkerSlot
from ops.tools import UsageError
from storage.files import TopicPartition
from storage.records import Record

ROWS = [
    {"kind": "log_dir", "log_dir": "/b", "online": True, "disk_total_bytes": 100,
     "disk_free_bytes": 40},
    {"kind": "log_dir", "log_dir": "/a", "online": False, "offline_reason": "EIO on x.log",
     "disk_total_bytes": 100, "disk_free_bytes": 40},
    {"kind": "log_dir", "log_dir": "/c", "online": True, "disk_total_bytes": 7,
     "disk_free_bytes": 3},
    {"kind": "partition", "log_dir": "/b", "topic": "t", "partition": 10, "size_bytes": 5,
     "dirty_ratio": 0.5, "log_start_offset": 2, "log_end_offset": 7},
    {"kind": "partition", "log_dir": "/b", "topic": "t", "partition": 2, "size_bytes": 9,
     "dirty_ratio": 0.0, "log_start_offset": 0, "log_end_offset": 3},
    {"kind": "partition", "log_dir": "/b", "topic": "u", "partition": 0, "size_bytes": 1,
     "dirty_ratio": 0.0, "log_start_offset": 1, "log_end_offset": 1},
    {"kind": "cleaner", "log_dir": "/b"},
]


def test_log_dirs_describe_is_kafkas_document_with_bytes_and_dirty_ratio() -> None:
    document = describe(ROWS, {"/a": "h1", "/b": "h1", "/c": "h2"})
    assert document["version"] == 1
    assert [b["broker"] for b in document["brokers"]] == [0, 1]      # one per host
    h1 = document["brokers"][0]["logDirs"]
    assert [d["logDir"] for d in h1] == ["/a", "/b"]
    offline, online = h1
    assert offline["error"] == STORAGE_ERROR and offline["offlineReason"] == "EIO on x.log"
    assert offline["partitions"] == []
    assert online["error"] is None and "offlineReason" not in online
    assert (online["totalBytes"], online["usableBytes"]) == (100, 40)
    assert online["partitions"] == [
        {"partition": "t-2", "size": 9, "offsetLag": 0, "isFuture": False, "dirtyRatio": 0.0,
         "logStartOffset": 0, "logEndOffset": 3},
        {"partition": "t-10", "size": 5, "offsetLag": 0, "isFuture": False, "dirtyRatio": 0.5,
         "logStartOffset": 2, "logEndOffset": 7},
        {"partition": "u-0", "size": 1, "offsetLag": 0, "isFuture": False, "dirtyRatio": 0.0,
         "logStartOffset": 1, "logEndOffset": 1}]
    only_u = describe(ROWS, {"/a": "h1", "/b": "h1", "/c": "h2"}, {"u"})
    assert [p["partition"] for p in only_u["brokers"][0]["logDirs"][1]["partitions"]] == ["u-0"]
    json.dumps(document)


def test_log_dirs_describe_shows_the_last_stable_offset_only_where_it_lags() -> None:
    rows = [{"kind": "log_dir", "log_dir": "/a", "online": True},
            {"kind": "partition", "log_dir": "/a", "topic": "t", "partition": 0, "size_bytes": 1,
             "dirty_ratio": 0.0, "log_start_offset": 0, "log_end_offset": 10,
             "last_stable_offset": 4},
            {"kind": "partition", "log_dir": "/a", "topic": "t", "partition": 1, "size_bytes": 1,
             "dirty_ratio": 0.0, "log_start_offset": 0, "log_end_offset": 10,
             "last_stable_offset": 10}]
    lagging, stable = describe(rows, {"/a": "h"})["brokers"][0]["logDirs"][0]["partitions"]
    assert lagging["lastStableOffset"] == 4 and "lastStableOffset" not in stable


def test_produce_parses_key_tab_value_lines_and_refuses_a_line_without_separator() -> None:
    chunks = list(_chunks(io.BytesIO(b"k1\tv1\nk2\tNULL\r\n\tempty key\nlast\tno newline"),
                          1 << 20))
    assert len(chunks) == 1
    lines, size = chunks[0]
    assert lines[-1] == (4, b"last\tno newline") and size == sum(len(line) for _, line in lines)
    records = _parse(lines, b"\t", b"NULL", value_only=False)
    assert [(r.key, r.value) for r in records] == [
        (b"k1", b"v1"), (b"k2", None), (b"", b"empty key"), (b"last", b"no newline")]
    assert [r.key for r in _parse([(1, b"a\tb")], b"\t", None, value_only=True)] == [None]
    with pytest.raises(UsageError, match="line 7: no separator"):
        _parse([(7, b"no tab here")], b"\t", None, value_only=False)


def test_produce_reads_in_chunks_of_about_the_batch_size() -> None:
    chunks = list(_chunks(io.BytesIO(b"".join(b"k\t%04d\n" % i for i in range(100))), 60))
    assert sum(len(c) for c, _ in chunks) == 100 and len(chunks) == 10
    assert [n for c, _ in chunks for n, _ in c] == list(range(1, 101))
    assert [size for _, size in chunks] == [60] * 10       # 10 lines of 6 bytes each


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "interpreted"])
def test_produce_routes_keys_as_kafkas_default_partitioner_and_keyless_round_robin(
        compiled: bool) -> None:
    """Both routes (the numba kernel for large chunks, the interpreted hash for small ones)
    put every key where Kafka's default partitioner does."""
    keyed = [Record(key=b"key%d" % i, value=b"v") for i in range(50)]
    routed = _route(keyed, None, 4, chunk_index=0, compiled=compiled)
    expected = [(kafka_python_murmur2(r.key) & 0x7FFFFFFF) % 4 for r in keyed]
    assert {p: [r.key for r in rs] for p, rs in routed.items()} == {
        p: [r.key for r, e in zip(keyed, expected) if e == p] for p in set(expected)}
    keyless = [Record(key=None, value=b"v")] * 3
    assert list(_route(keyless, None, 4, chunk_index=5, compiled=compiled)) == [1]
    assert list(_route(keyed, 2, 4, chunk_index=0, compiled=compiled)) == [2]


def test_consume_prints_the_produce_format_and_json_lines() -> None:
    args = argparse.Namespace(value_only=False, print_offsets=True, separator="\t",
                              null_marker="NULL")
    record = Record(key=b"k", value=None, timestamp=5, offset=42, headers=(("h", b"\xff"),))
    assert _record_text(3, record, args) == "3\t42\tk\tNULL"
    assert _record_json(3, record) == {"partition": 3, "offset": 42, "timestamp": 5, "key": "k",
                                       "value": None, "headers": [["h", {"base64": "/w=="}]]}


def test_json_of_snapshots_and_argument_helpers() -> None:
    slot = WorkerSlot(0, "w", "host", "idle", None, None)
    assert jsonable({TopicPartition("t", 1): slot}) == {
        "t-1": {"cleaner_id": 0, "name": "w", "host": "host", "state": "idle", "topic": None,
                "partition": None}}
    assert topic_partition("my-topic-12") == ("my-topic", 12)
    with pytest.raises(UsageError):
        topic_partition("nopartition")
    assert parse_config(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_config(["novalue"])


def _dir_with_a_skipped_partition(path) -> tuple[dict, object]:
    """A real LogDir's stats row (as Cluster.stats turns it into one) after a restart that
    skipped ``bad-0`` (a directory where its segment file should be) and cut 4 torn bytes from
    ``good-0``'s active segment; and that segment's path."""
    from node import LogDir
    from storage.config import LogConfig

    config = LogConfig(segment_bytes=300)
    with LogDir.open(path, default_config=config, start_tasks=False) as d:
        for topic in ("good", "bad"):
            for i in range(10):
                d.get_or_create_log(topic, 0).append([Record(b"k", b"v%d" % i, 1_000)])
    (path / "bad-0" / "00000000000000000000.log").unlink()
    (path / "bad-0" / "00000000000000000000.log").mkdir()
    (path / ".kafka_cleanshutdown").unlink()
    active = max((path / "good-0").glob("*.log"))
    with open(active, "ab") as f:
        f.write(b"torn")
    with LogDir.open(path, default_config=config, start_tasks=False) as d:
        stats = dataclasses.asdict(d.stats())
    stats.pop("partitions")
    stats.pop("invalid_dirs")
    return {"kind": "log_dir", "log_dir": str(path), **stats}, active


def test_log_dirs_describe_lists_skipped_partitions_and_quarantined_files(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12: a partition skipped at load and the bytes a recovery cut show in log-dirs
    describe (from a real LogDir's stats, turned into rows as Cluster.stats does)."""
    from ops.cli.log_dirs import _print

    path = tmp_path / "logs"
    row, active = _dir_with_a_skipped_partition(path)
    document = describe([row], {str(path): "h"})
    [entry] = document["brokers"][0]["logDirs"]
    [problem] = entry["problems"]
    assert (problem["partition"], problem["error"], problem["action"]) == \
        ("bad-0", "InvalidSegmentFileError", "skipped")
    assert problem["path"] == str(path / "bad-0" / "00000000000000000000.log")
    [kept] = entry["quarantined"]
    assert (kept["original"], kept["bytes"]) == (active.name, 4)
    assert kept["path"].startswith(str(path / "good-0" / "quarantine" / ""))
    json.dumps(document)
    _print(document)
    out = capsys.readouterr().out
    assert "partitions not loaded" in out and "InvalidSegmentFileError" in out
    assert "quarantined by recovery" in out


def test_cluster_status_counts_a_partition_skipped_at_load_as_a_problem(tmp_path) -> None:
    """``cluster status`` exits 1 when a directory skipped a partition when it loaded, as when
    one is offline, and names the partition (its summary row of a real LogDir's stats)."""
    from node import LogDir
    from ops.cli import dir_summary, dirs_need_attention

    row, _ = _dir_with_a_skipped_partition(tmp_path / "logs")
    summary = dir_summary(row)
    assert summary["online"]
    assert [(s["partition"], s["error"]) for s in summary["skipped"]] == \
        [("bad-0", "InvalidSegmentFileError")]
    assert dirs_need_attention([summary])
    with LogDir.open(tmp_path / "healthy", start_tasks=False) as d:
        d.get_or_create_log("t", 0).append([Record(b"k", b"v", 1_000)])
        healthy = dir_summary({"kind": "log_dir", "log_dir": str(d.path),
                               **dataclasses.asdict(d.stats())})
    assert healthy["skipped"] == [] and not dirs_need_attention([healthy])
    assert dirs_need_attention([healthy, {**healthy, "online": False}])
