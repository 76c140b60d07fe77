"""``topic-configs.json`` read at a node's start: a file that cannot be read as a whole is a
``CheckpointError`` naming it (never a raw ``UnicodeDecodeError`` or ``RecursionError``); one
topic's entry that cannot be used costs that topic only: its partitions are skipped untouched and
reported as problems (never opened with the defaults, which for a compacted topic would delete
records by retention), the other topics load, and the entry stays in the file as it was."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from node.errors import InvalidTopicConfigError
from node.server import LogDirServer
from storage.errors import CheckpointError
from storage.files import TOPIC_CONFIGS_FILE
from storage.records import Record, build_batch

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048", "retention.ms": "1"}


def fill(server: LogDirServer, topic: str, n: int = 200) -> None:
    for i in range(n):
        server.append_batch(topic, 0, build_batch(
            [Record(key=b"%d" % (i % 7), value=b"%d" % i, timestamp=i)]))
    server.roll(topic, 0)


def directory_with(tmp_path: Path, topics: dict[str, dict[str, str]]) -> Path:
    """A directory holding partition 0 of each topic (with its config), closed cleanly."""
    server = LogDirServer(tmp_path / "d", start_tasks=False)
    for topic, config in topics.items():
        server.create_partition(topic, 0, config)
        fill(server, topic)
    server.close()
    return tmp_path / "d"


def set_entries(directory: Path, **entries: object) -> None:
    path = directory / TOPIC_CONFIGS_FILE
    content = json.loads(path.read_text())
    content["topics"].update(entries)
    path.write_text(json.dumps(content))


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("entry, error", [
    ({**COMPACT, "segment.bytes": "junk"}, "segment.bytes"),
    ({**COMPACT, "segment.bites": "2048"}, "unknown log config key 'segment.bites'"),
    ({**COMPACT, "retention.ms": {"nested": 1}}, "not an object of key/value pairs"),
    ("compact", "not an object of key/value pairs"),
])
def test_a_bad_entry_skips_that_topics_partitions_untouched_and_the_others_load(
        tmp_path: Path, entry: object, error: str) -> None:
    directory = directory_with(tmp_path, {"bad": COMPACT, "good": COMPACT, "plain": {}})
    set_entries(directory, bad=entry)
    bad_files = files_of(directory / "bad-0")

    server = LogDirServer(directory, start_tasks=False)
    assert sorted(server.partitions()) == [("good", 0), ("plain", 0)]
    assert server.log_dir.log("good", 0).config.compact
    assert len(list(server.log_dir.log("good", 0).read(0))) == 200
    [problem] = server.stats().problems
    assert (problem.name, problem.error) == ("bad-0", "InvalidTopicConfigError")
    assert problem.path == str(directory / TOPIC_CONFIGS_FILE)
    assert error in problem.reason and "topic bad" in problem.reason
    with pytest.raises(InvalidTopicConfigError) as refused:
        server.create_partition("bad", 1)
    assert refused.value.topic == "bad" and error in str(refused.value)
    assert type(pickle.loads(pickle.dumps(refused.value))) is InvalidTopicConfigError
    with pytest.raises(InvalidTopicConfigError):
        server.create_partition("bad", 2, {"cleanup.policy": "delete"})
    with pytest.raises(InvalidTopicConfigError):
        server.create_partitions("bad", [3])
    assert not [p for p in directory.iterdir() if p.name.startswith("bad-") and p.name != "bad-0"]
    assert server.delete_partitions("bad", [0]) == 0      # skipped: neither deleted nor forgotten
    server.create_partition("new", 0, {"segment.bytes": "4096"})   # rewrites the file
    server.cleanup_logs()
    server.close()

    assert files_of(directory / "bad-0") == bad_files
    kept = json.loads((directory / TOPIC_CONFIGS_FILE).read_text())["topics"]
    assert kept["bad"] == entry and kept["new"] == {"segment.bytes": "4096"}
    set_entries(directory, bad=COMPACT)            # the entry repaired: the partition is back
    again = LogDirServer(directory, start_tasks=False)
    assert again.stats().problems == ()
    assert again.log_dir.log("bad", 0).config.compact
    assert len(list(again.log_dir.log("bad", 0).read(0))) == 200
    again.close()


@pytest.mark.parametrize("content, message", [
    (b'{"version": 1, "topics": {"t": {"segment.bytes": "\xff\xfe"}}}', "not UTF-8"),
    (b'{"version": 1, "topics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b"[" * 100_000, "nested too deeply"),
])
def test_an_unreadable_file_is_a_checkpoint_error_naming_it(
        tmp_path: Path, content: bytes, message: str) -> None:
    directory = directory_with(tmp_path, {"c": COMPACT})
    (directory / TOPIC_CONFIGS_FILE).write_bytes(content)
    with pytest.raises(CheckpointError) as refused:
        LogDirServer(directory, start_tasks=False)
    assert refused.value.path == str(directory / TOPIC_CONFIGS_FILE)
    assert str(refused.value).startswith(f"{directory / TOPIC_CONFIGS_FILE}: ")
    assert message in str(refused.value)
