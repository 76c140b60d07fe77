"""The stray-file table (issue 12): one bad entry in a log directory, next to a healthy partition.

Each row plants one entry a failing disk, an operator or an attacker can leave behind. Opening the
directory must load the healthy partition unchanged and readable, and turn the bad entry into a
typed, reported problem of its own partition (skipped, never changed) — or, for the directory's
own files, into an unclean shutdown (a bad clean-shutdown marker), an empty checkpoint, or a typed
refusal (``.lock``).
Before this, every row except the bad name stopped the whole directory with an untyped error
(RecursionError, OSError, IsADirectoryError, a struct.error later) or loaded garbage.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from node import InvalidLogDirError, LogDir, LogDirOfflineError, PartitionSkippedError
from storage.config import LogConfig
from storage.records import Record
from tests.strays import (
    SEGMENT,
    build_good_and_bad,
    directory_as_segment,
    fifo_as_segment,
    offset_beyond_int64,
    over_long_name,
    snapshot,
    symlink_loop,
)

CONFIG = LogConfig(segment_bytes=400)


def build(path: Path) -> None:
    """Partitions good-0 and bad-0, 12 records each in several segments, shut down cleanly."""
    build_good_and_bad(path, CONFIG, 12)


def unreadable(bad: Path) -> None:
    os.chmod(bad / SEGMENT, 0)


@dataclass(frozen=True)
class Stray:
    plant: Callable[[Path], None]   # called with the bad partition's directory
    reason: str                     # in the problem's reason


PARTITION_ROWS = {
    "symlink-loop": Stray(symlink_loop, "Too many levels of symbolic links"),
    "directory-named-like-a-segment": Stray(directory_as_segment,
                                            "a directory named like a segment"),
    "offset-beyond-int64": Stray(offset_beyond_int64, "does not fit int64"),
    "fifo-named-like-a-segment": Stray(fifo_as_segment, "a FIFO named like a segment"),
    "over-long-numeric-name": Stray(over_long_name, "has 25 digits"),
    "quarantine-that-is-a-file": Stray(lambda bad: (bad / "quarantine").write_bytes(b""),
                                       "quarantine: not a directory"),
    "index-that-is-a-directory": Stray(
        lambda bad: directory_as_segment(bad, "00000000000000000000.timeindex"),
        "a directory named like a segment"),
}


def assert_good_reads_back(d: LogDir) -> None:
    log = d.log("good", 0)
    assert [(r.offset, r.value) for r in log.read()] == \
        [(i, f"good{i}".encode()) for i in range(12)]


@pytest.mark.parametrize("row", sorted(PARTITION_ROWS))
def test_a_stray_entry_skips_only_its_partition_and_is_reported_typed(
        tmp_path: Path, row: str) -> None:
    path = tmp_path / "logs"
    build(path)
    PARTITION_ROWS[row].plant(path / "bad-0")
    before = snapshot(path)
    d = LogDir.open(path, default_config=CONFIG, start_tasks=False)
    try:
        assert sorted(d.logs()) == [("good", 0)]
        assert_good_reads_back(d)
        [problem] = d.problems
        assert (problem.name, problem.error, problem.action) == \
            ("bad-0", "InvalidSegmentFileError", "skipped")
        assert PARTITION_ROWS[row].reason in problem.reason
        assert problem.path.startswith(str(path / "bad-0"))
        stats = d.stats()
        assert stats.problems == (problem,) and pickle.loads(pickle.dumps(stats)) == stats
        assert d.load_progress().problems == (problem,)
        with pytest.raises(PartitionSkippedError, match="bad-0 .* was skipped at load"):
            d.get_or_create_log("bad", 0)
    finally:
        d.close()
    # the skipped partition was never recovered: the next open must count as unclean
    assert not (path / ".kafka_cleanshutdown").exists()
    after = snapshot(path)
    assert {k: v for k, v in after.items() if k.startswith(("good-0", "bad-0"))} == \
        {k: v for k, v in before.items() if k.startswith(("good-0", "bad-0"))}


def test_an_unreadable_segment_is_its_partitions_problem_unless_we_may_read_it(
        tmp_path: Path) -> None:
    """chmod 000 on a segment: a process that may not read it skips the partition; root (who
    ignores the mode, as in this container) may, and the partition loads whole."""
    path = tmp_path / "logs"
    build(path)
    unreadable(path / "bad-0")
    denied = not os.access(path / "bad-0" / SEGMENT, os.R_OK | os.W_OK)
    with LogDir.open(path, default_config=CONFIG, start_tasks=False) as d:
        assert_good_reads_back(d)
        if denied:
            assert [(p.name, p.error) for p in d.problems] == [("bad-0", "InvalidSegmentFileError")]
            assert "not readable and writable" in d.problems[0].reason
        else:
            assert d.problems == ()
            assert [r.value for r in d.log("bad", 0).read()] == \
                [f"bad{i}".encode() for i in range(12)]


@pytest.mark.parametrize("marker", [
    b"[" * 100_000 + b"]" * 100_000,            # RecursionError in json, and over 4 KiB
    b"[" * 2_000 + b"]" * 2_000,                 # RecursionError within 4 KiB
    b"not json", b"[1]", b"\xff\xfe",
])
def test_a_bad_clean_shutdown_marker_means_unclean_and_everything_is_recovered(
        tmp_path: Path, marker: bytes) -> None:
    path = tmp_path / "logs"
    build(path)
    (path / ".kafka_cleanshutdown").write_bytes(marker)
    before = snapshot(path / "good-0")
    with LogDir.open(path, default_config=CONFIG, start_tasks=False) as d:
        assert not d.had_clean_shutdown and d.clean_shutdown_epoch is None
        assert not (path / ".kafka_cleanshutdown").exists()
        # the unclean path: every segment from the checkpointed recovery point re-validated
        assert all(not log.load_result.clean_shutdown and log.load_result.recovered_segments >= 1
                   for log in d.logs().values())
        assert d.problems == ()
        assert_good_reads_back(d)
    assert snapshot(path / "good-0") == before


def test_a_clean_shutdown_marker_that_is_a_directory_means_unclean(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    build(path)
    (path / ".kafka_cleanshutdown").unlink()
    (path / ".kafka_cleanshutdown").mkdir()
    with LogDir.open(path, default_config=CONFIG, start_tasks=False) as d:
        assert not d.had_clean_shutdown
        assert_good_reads_back(d)
    assert (path / ".kafka_cleanshutdown").is_file()     # the next clean shutdown wrote one


def test_a_lock_that_is_a_directory_refuses_the_directory_typed(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    build(path)
    (path / ".lock").unlink()
    (path / ".lock").mkdir()
    before = snapshot(path)
    with pytest.raises(InvalidLogDirError, match=r"cannot be locked: .*\.lock: Is a directory"):
        LogDir.open(path, default_config=CONFIG, start_tasks=False)
    assert snapshot(path) == before


@pytest.mark.parametrize("name", ["bad\n-0", "bad name-0", "symlink-loop"])
def test_a_partition_directory_with_a_bad_name_is_reported_and_left_alone(
        tmp_path: Path, name: str) -> None:
    path = tmp_path / "logs"
    build(path)
    if name == "symlink-loop":
        name = "loop-1"
        os.symlink(name, path / name)
    else:
        (path / name).mkdir()
        (path / name / SEGMENT).write_bytes(b"stray bytes")
    before = snapshot(path / "good-0")
    with LogDir.open(path, default_config=CONFIG, start_tasks=False) as d:
        assert sorted(d.logs()) == [("bad", 0), ("good", 0)]
        assert [bad.name for bad in d.invalid_dirs] == [name]
        assert_good_reads_back(d)
    assert snapshot(path / "good-0") == before
    assert os.path.lexists(path / name)


@pytest.mark.parametrize("threads", [1, 4])
def test_a_typed_load_error_skips_its_partition_and_the_others_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Damage the loader refuses (a typed ``StorageError`` out of ``LogLoader.load``) is that
    partition's problem, whatever the thread count: the others still load (none is cancelled)."""
    from storage.errors import CorruptRecordError
    from storage.loader import LoadResult, LogLoader

    path = tmp_path / "logs"
    build(path)
    with LogDir.open(path, default_config=CONFIG, start_tasks=False) as d:
        for topic in ("a", "c", "d"):
            d.get_or_create_log(topic, 0).append([Record(b"k", b"v", 1)])
    real_load = LogLoader.load

    def refusing(loader: LogLoader) -> LoadResult:
        if loader.dir.name == "bad-0":
            raise CorruptRecordError(f"{loader.dir}/x.log.swap: garbage at position 0",
                                     path=f"{loader.dir}/x.log.swap", position=0)
        return real_load(loader)

    monkeypatch.setattr(LogLoader, "load", refusing)
    with LogDir.open(path, default_config=CONFIG, start_tasks=False,
                     recovery_threads=threads) as d:
        assert sorted(d.logs()) == [("a", 0), ("c", 0), ("d", 0), ("good", 0)]
        assert_good_reads_back(d)
        assert [(p.name, p.error, p.path) for p in d.problems] == \
            [("bad-0", "CorruptRecordError", str(path / "bad-0" / "x.log.swap"))]
        progress = d.load_progress()
        assert (progress.done, progress.remaining_logs, progress.problems) == \
            (True, 0, d.problems)


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink-loop"])
def test_a_checkpoint_that_is_no_regular_file_reads_as_empty(tmp_path: Path, kind: str) -> None:
    """A FIFO named recovery-point-offset-checkpoint blocked LogDir.open for ever; a directory or
    a symlink loop failed it with an untyped OSError. Each reads as an empty checkpoint now, as a
    malformed one does (Kafka's rule): every log recovers from its first segment."""
    path = tmp_path / "logs"
    build(path)
    checkpoint = path / "recovery-point-offset-checkpoint"
    checkpoint.unlink()
    (path / ".kafka_cleanshutdown").unlink()
    if kind == "fifo":
        os.mkfifo(checkpoint)
    elif kind == "directory":
        checkpoint.mkdir()
    else:
        os.symlink(checkpoint.name, checkpoint)
    d = LogDir.open(path, default_config=CONFIG, start_tasks=False)
    assert sorted(d.logs()) == [("bad", 0), ("good", 0)]
    assert all(log.load_result.recovered_segments == log.number_of_segments
               for log in d.logs().values())
    assert_good_reads_back(d)
    if kind == "directory":     # no checkpoint can be written over it: typed, at shutdown
        with pytest.raises(LogDirOfflineError, match="recovery-point-offset-checkpoint"):
            d.close()
    else:                       # the first checkpoint replaces the FIFO or the link
        d.close()
        assert checkpoint.is_file() and not checkpoint.is_symlink()


def test_a_segment_name_with_a_non_ascii_digit_skips_only_its_partition(tmp_path: Path) -> None:
    """``str.isdigit`` takes "²": such a stray name made the whole open fail with ValueError."""
    with LogDir.open(tmp_path / "d") as d:
        d.get_or_create_log("good", 0).append([Record(key=b"k", value=b"v", timestamp=1)])
        d.get_or_create_log("bad", 0)
    (tmp_path / "d" / "bad-0" / "0000000000000000000\u00b2.log").touch()
    with LogDir.open(tmp_path / "d") as d:
        assert [r.value for r in d.log("good", 0).read(0)] == [b"v"]
        assert [(p.name, p.error) for p in d.problems] == [("bad-0", "InvalidSegmentFileError")]
