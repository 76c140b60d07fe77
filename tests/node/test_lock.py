"""``.lock``: one owner per directory, in this process or another; a killed owner's lock is taken
over at once (LogManagerTest testTwoLogManagersUsingSameDirFails / testLock)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from node import LogDir, LogDirLockedError
from node.lock import read_holder_pid

ROOT = Path(__file__).resolve().parents[2]


def start_holder(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-m", "tests.node._child", "hold", str(path)],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == f"locked {child.pid}\n", line
    return child


def test_second_open_in_the_same_process_fails_at_once(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    (tmp_path / "link").symlink_to(path)
    with LogDir.open(path) as d:
        for other in (path, tmp_path / "link"):   # also under another name
            start = time.monotonic()
            with pytest.raises(LogDirLockedError) as failure:
                LogDir.open(other)
            assert time.monotonic() - start < 1
            assert failure.value.same_process and failure.value.pid == os.getpid()
            assert str(other) in str(failure.value)
        assert read_holder_pid(path) == os.getpid()
        assert d.online
    with LogDir.open(tmp_path / "link"):
        pass


def test_lock_file_is_kept_and_cleared_after_close(tmp_path: Path) -> None:
    with LogDir.open(tmp_path):
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
    assert (tmp_path / ".lock").read_text() == ""
    assert read_holder_pid(tmp_path) is None


def test_another_process_holding_the_lock_is_named(tmp_path: Path) -> None:
    child = start_holder(tmp_path)
    try:
        start = time.monotonic()
        with pytest.raises(LogDirLockedError) as failure:
            LogDir.open(tmp_path)
        assert time.monotonic() - start < 1
        err = failure.value
        assert err.pid == child.pid and not err.same_process
        assert f"process {child.pid}" in str(err) and str(tmp_path) in str(err)
        copy = pickle.loads(pickle.dumps(err))
        assert copy.pid == child.pid and str(copy) == str(err)
    finally:
        child.communicate("", timeout=30)   # stdin closed: the holder closes cleanly
    with LogDir.open(tmp_path) as d:
        assert d.had_clean_shutdown


def test_lock_of_a_killed_owner_is_taken_over_at_once(tmp_path: Path) -> None:
    child = start_holder(tmp_path)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert read_holder_pid(tmp_path) == child.pid   # stale content; the flock is gone
    start = time.monotonic()
    with LogDir.open(tmp_path) as d:
        assert time.monotonic() - start < 1
        assert not d.had_clean_shutdown
        assert read_holder_pid(tmp_path) == os.getpid()
