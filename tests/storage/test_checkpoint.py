"""Checkpoint file tests: Kafka's OffsetCheckpointFile, LeaderEpochCheckpointFile and
CleanShutdownFileHandler tests on real files, plus every checkpoint Kafka wrote in
fixtures/kafka-real."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pytest

from storage.checkpoint import (
    CleanShutdownFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from storage.errors import CheckpointError
from storage.files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
)

from tests.conftest import FIXTURES
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)


def checkpoint_path(directory: Path) -> Path:
    return directory / RECOVERY_POINT_CHECKPOINT


# -- offset checkpoints: Kafka's OffsetCheckpointFileWithFailureHandlerTest ---------------------


def test_offsets_persist_and_are_overwritten(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path), create=True)
    offsets = {TopicPartition("foo", 1): 5, TopicPartition("bar", 2): 10}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    assert checkpoint.path.read_text() == "0\n2\nfoo 1 5\nbar 2 10\n"

    overwrite = {TopicPartition("foo", 2): 15, TopicPartition("bar", 3): 20}
    checkpoint.write(overwrite)
    assert checkpoint.read() == overwrite
    assert OffsetCheckpointFile(checkpoint.path).read() == overwrite


def test_offsets_of_many_partitions_round_trip(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path))
    offsets = {TopicPartition("foo", n): 5 for n in range(1, 6)}
    offsets |= {TopicPartition("bar", n): 10 for n in range(6, 11)}
    offsets[TopicPartition("__consumer_offsets", 49)] = 2**62
    offsets[TopicPartition("my.topic-with_all-3.kinds", 0)] = 0
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets


def test_empty_file_reads_as_no_offsets(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path), create=True)
    assert checkpoint.path.read_bytes() == b""
    assert checkpoint.read() == {}
    checkpoint.write({})
    assert checkpoint.path.read_text() == "0\n0\n"
    assert checkpoint.read() == {}


def test_version_line_alone_reads_as_no_offsets(tmp_path: Path) -> None:
    checkpoint_path(tmp_path).write_text("0\n")
    assert OffsetCheckpointFile(checkpoint_path(tmp_path)).read() == {}


def test_create_makes_a_missing_file_and_keeps_an_existing_one(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path)
    with pytest.raises(FileNotFoundError):
        OffsetCheckpointFile(path).read()
    assert not path.exists(), "without create, nothing is created"

    OffsetCheckpointFile(path, create=True).write({TopicPartition("foo", 0): 7})
    assert OffsetCheckpointFile(path, create=True).read() == {TopicPartition("foo", 0): 7}


def test_wrong_version_raises_checkpoint_error_naming_the_file(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path)
    path.write_text("1\n1\nfoo 5 10\n")
    with pytest.raises(CheckpointError) as raised:
        OffsetCheckpointFile(path).read()
    err = raised.value
    assert str(path) in str(err)
    assert (err.path, err.line_number, err.version, err.expected_version) == (path, 1, 1, 0)

    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is CheckpointError
    assert (copy.path, copy.line_number, copy.version, str(copy)) == (path, 1, 1, str(err))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("0\n3\nfoo 1 5\nbar 2 10\n", 2),
        ("0\n1\nfoo 1 5\nbar 2 10\n", 2),
        ("0\n2\n", 0),
    ],
)
def test_count_that_does_not_match_the_entries_raises(
    tmp_path: Path, text: str, found: int
) -> None:
    path = checkpoint_path(tmp_path)
    path.write_text(text)
    with pytest.raises(CheckpointError) as raised:
        OffsetCheckpointFile(path).read()
    assert (raised.value.path, raised.value.line_number, raised.value.count) == (path, 2, found)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("content", "line_number"),
    [
        (b"zero\n0\n", 1),
        (b"0\ntwo\n", 2),
        (b"0\n1\nfoo 1\n", 3),
        (b"0\n1\nfoo 1 5 6\n", 3),
        (b"0\n2\nfoo 1 5\nfoo x 5\n", 4),
        (b"0\n2\nfoo 1 5\nfoo 1 5.0\n", 4),
        (b"0\n1\nfoo 1 5\n\n", 4),
        (b"0\n1\nf\xffo 1 5\n", 3),
    ],
)
def test_malformed_line_raises_checkpoint_error_with_its_number(
    tmp_path: Path, content: bytes, line_number: int
) -> None:
    path = checkpoint_path(tmp_path)
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        OffsetCheckpointFile(path).read()
    assert (raised.value.path, raised.value.line_number) == (path, line_number)
    assert f"line {line_number}" in str(raised.value)


def test_entries_split_on_any_whitespace_and_any_line_ending(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path)
    path.write_bytes(b"0\r\n2\r\nfoo\t1   5\r\nbar 2 10")
    assert OffsetCheckpointFile(path).read() == {
        TopicPartition("foo", 1): 5,
        TopicPartition("bar", 2): 10,
    }


def test_a_topic_with_whitespace_is_never_written(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path))
    checkpoint.write({TopicPartition("foo", 0): 1})
    with pytest.raises(ValueError):
        checkpoint.write({TopicPartition("foo bar", 0): 1})
    assert checkpoint.read() == {TopicPartition("foo", 0): 1}


def test_write_if_dir_exists_does_not_raise_when_the_directory_is_gone(tmp_path: Path) -> None:
    renamed = tmp_path / "foo-0"
    removed = tmp_path / "foo-1"
    for directory in (renamed, removed):
        directory.mkdir()
    renamed_checkpoint = LeaderEpochCheckpointFile(renamed / LEADER_EPOCH_CHECKPOINT)
    removed_checkpoint = OffsetCheckpointFile(checkpoint_path(removed))
    renamed.rename(tmp_path / "foo-0.deleted")
    removed.rmdir()

    renamed_checkpoint.write_if_dir_exists([(1, 42)])
    removed_checkpoint.write_if_dir_exists({TopicPartition("foo", 1): 5})
    with pytest.raises(FileNotFoundError):
        removed_checkpoint.write({TopicPartition("foo", 1): 5})
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["foo-0.deleted"]


def test_write_if_dir_exists_writes_when_the_directory_exists(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path))
    checkpoint.write_if_dir_exists({TopicPartition("foo", 1): 5})
    assert checkpoint.read() == {TopicPartition("foo", 1): 5}


def test_crash_before_the_rename_leaves_the_old_content(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path))
    checkpoint.write({TopicPartition("foo", 0): 1})
    tmp = checkpoint.path.with_name(checkpoint.path.name + ".tmp")
    tmp.write_text("0\n2\nfoo 0 2\nbar 0")  # a write cut short before its rename

    assert OffsetCheckpointFile(checkpoint.path).read() == {TopicPartition("foo", 0): 1}
    checkpoint.write({TopicPartition("foo", 0): 3})
    assert checkpoint.read() == {TopicPartition("foo", 0): 3}
    assert not tmp.exists()


def test_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(checkpoint_path(tmp_path))
    checkpoint.write({TopicPartition("foo", 0): 1})
    assert [path.name for path in tmp_path.iterdir()] == [RECOVERY_POINT_CHECKPOINT]


# -- leader-epoch-checkpoint: Kafka's LeaderEpochCheckpointFileWithFailureHandlerTest -----------


def test_leader_epochs_persist_and_are_overwritten(tmp_path: Path) -> None:
    checkpoint = LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT, create=True)
    assert checkpoint.read() == []
    epochs = [(0, 1), (1, 2), (2, 3)]
    checkpoint.write(epochs)
    assert checkpoint.read() == epochs
    assert checkpoint.path.read_text() == "0\n3\n0 1\n1 2\n2 3\n"

    overwrite = [EpochEntry(3, 4), EpochEntry(4, 5)]
    checkpoint.write(overwrite)
    assert checkpoint.read() == [(3, 4), (4, 5)]
    assert checkpoint.read()[1].start_offset == 5


def test_leader_epochs_are_kept_when_the_checkpoint_is_recreated(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpointFile(path, create=True).write([(0, 1), (1, 2), (2, 3)])
    assert LeaderEpochCheckpointFile(path, create=True).read() == [(0, 1), (1, 2), (2, 3)]


def test_leader_epoch_line_with_three_fields_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n1\n0 1 2\n")
    with pytest.raises(CheckpointError) as raised:
        LeaderEpochCheckpointFile(path).read()
    assert raised.value.line_number == 3


# -- .kafka_cleanshutdown: Kafka's CleanShutdownFileHandlerTest ---------------------------------


def test_clean_shutdown_file_reads_back_the_epoch_and_is_gone_after_delete(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    assert not marker.exists()
    assert marker.read_epoch() is None
    marker.write(10)
    assert marker.exists()
    assert marker.read_epoch() == 10
    assert marker.path.read_text() == '{"version":0,"brokerEpoch":10}'
    marker.delete()
    assert not marker.exists()
    assert marker.read_epoch() is None
    marker.delete()


def test_clean_shutdown_file_defaults_to_epoch_minus_one(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    marker.write()
    assert marker.read_epoch() == -1
    assert [path.name for path in tmp_path.iterdir()] == [CLEAN_SHUTDOWN_FILE]


def test_clean_shutdown_file_tolerates_unknown_fields(tmp_path: Path) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":10,"unknown":123}')
    assert CleanShutdownFile(tmp_path).read_epoch() == 10


@pytest.mark.parametrize("content", [b"", b'{"version":0}', b'{"brokerEpoch":"10"}'])
def test_clean_shutdown_file_without_a_readable_epoch_still_counts(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    marker = CleanShutdownFile(tmp_path)
    assert marker.exists()
    assert marker.read_epoch() is None
    assert marker.read() == (True, None, None)


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"not json", "is not JSON (JSONDecodeError)"), (b"[1]", "is not a JSON object"),
     (b"\xff\xfe", "is not JSON (JSONDecodeError)"),
     (b"[" * 2000 + b"]" * 2000, "is not JSON (RecursionError)"),
     (b"[" * 100_000 + b"]" * 100_000, "has 200000 bytes, more than 4096")],
)
def test_a_clean_shutdown_marker_that_does_not_parse_means_unclean(
    tmp_path: Path, content: bytes, why: str
) -> None:
    """Issue 12: a nested-JSON marker raised RecursionError out of LogDir.open. A marker that
    cannot be read as one now counts as an unclean shutdown (recovery), never as a crash."""
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    marker = CleanShutdownFile(tmp_path)
    state = marker.read()
    assert (state.clean, state.epoch) == (False, None)
    assert state.problem == f"{marker.path} {why}: counted as an unclean shutdown"
    assert marker.read_epoch() is None


def test_a_clean_shutdown_marker_that_is_a_directory_means_unclean_and_is_removed(
    tmp_path: Path
) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).mkdir()
    marker = CleanShutdownFile(tmp_path)
    assert marker.read() == (False, None, f"{marker.path} is not a regular file: counted as an "
                                          "unclean shutdown")
    marker.delete()
    assert not marker.path.exists()
    assert marker.read() == (False, None, None)


# -- checkpoints written by Kafka ----------------------------------------------------------------


def kafka_files(names: tuple[str, ...]) -> list[object]:
    """One pytest param per fixture file with one of ``names``: (path, its EXPECTED.json record)."""
    if not (FIXTURES / "EXPECTED.json").exists():
        return []
    expected = json.loads((FIXTURES / "EXPECTED.json").read_text())
    found: list[object] = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.name in names:
            source, *rest = path.relative_to(FIXTURES).parts
            record = expected[source]["/".join(rest)]
            found.append(pytest.param(path, record, id=str(path.relative_to(FIXTURES))))
    return found


def expected_lines(path: Path, record: dict[str, object]) -> list[list[str]]:
    """A fixture's entry lines as whitespace-split fields, from the text EXPECTED.json gives."""
    assert hashlib.sha256(path.read_bytes()).hexdigest() == record["sha256"]
    parsed = record["parsed"]
    assert isinstance(parsed, dict)
    lines = str(parsed["text"]).splitlines()
    assert lines[:1] in ([], ["0"])
    assert len(lines) < 2 or int(lines[1]) == len(lines) - 2
    return [line.split() for line in lines[2:]]


@pytest.mark.parametrize(("path", "record"), kafka_files(OFFSET_CHECKPOINTS))
def test_offset_checkpoint_written_by_kafka_reads(path: Path, record: dict[str, object]) -> None:
    expected = {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partition, offset in expected_lines(path, record)
    }
    assert OffsetCheckpointFile(path).read() == expected


@pytest.mark.parametrize(("path", "record"), kafka_files((LEADER_EPOCH_CHECKPOINT,)))
def test_leader_epoch_checkpoint_written_by_kafka_reads(
    path: Path, record: dict[str, object]
) -> None:
    expected = [(int(epoch), int(offset)) for epoch, offset in expected_lines(path, record)]
    assert LeaderEpochCheckpointFile(path).read() == expected


@pytest.mark.parametrize(("path", "record"), kafka_files((CLEAN_SHUTDOWN_FILE,)))
def test_clean_shutdown_file_written_by_kafka_reads(
    path: Path, record: dict[str, object]
) -> None:
    parsed = record["parsed"]
    assert isinstance(parsed, dict)
    text = str(parsed["text"])
    marker = CleanShutdownFile(path.parent)
    assert marker.exists()
    assert marker.read_epoch() == (json.loads(text)["brokerEpoch"] if text else None)


def test_kafka_fixtures_hold_every_kind_of_checkpoint() -> None:
    for names in (OFFSET_CHECKPOINTS, (LEADER_EPOCH_CHECKPOINT,), (CLEAN_SHUTDOWN_FILE,)):
        assert kafka_files(names), names
