"""A clean that meets a full disk (Kafka's rule: a failed clean leaves the log as it was) removes
its ``.cleaned`` files, closes every descriptor and map it opened, and raises the cleaner's typed
``CleanerIOError`` instead of a raw ``OSError``. On a real, small tmpfs: a descriptor left open
would keep it from being unmounted."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Callable

import pytest

from cleaner.errors import CleanerIOError
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record
from storage.scheduler import FakeScheduler
from tests.cleaner.kafka_logs import T0, make_cleaner

# large index steps written early (no mmap write into a hole of a full tmpfs: that is SIGBUS)
CONFIG = LogConfig(segment_bytes=64 * 1024, segment_index_bytes=64 * 1024,
                   index_interval_bytes=4096, cleanup_policy="compact", file_delete_delay_ms=0)


def open_paths(under: Path) -> list[str]:
    """What this process holds open under ``under``: descriptors and mapped files."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            held.append(target)
    with open("/proc/self/maps") as maps:
        held += [line.split()[-1] for line in maps if str(under) in line]
    return held


def fill_to(mount: Path, free_bytes: int) -> None:
    """Leave about ``free_bytes`` free on the file system of ``mount``."""
    stat = os.statvfs(mount)
    (mount / "ballast").write_bytes(bytes(stat.f_bavail * stat.f_frsize - free_bytes))


def unique_keys_log(directory: Path, clock: FakeClock, scheduler: FakeScheduler) -> Log:
    """Six closed segments of records with distinct keys, so a clean keeps (rewrites) nearly
    every byte, then an active segment."""
    log = Log.open(directory, CONFIG, recovery_point=0, had_clean_shutdown=True, clock=clock,
                   scheduler=scheduler)
    i = 0
    while log.number_of_segments < 7:
        log.append([Record(b"k%d" % j, b"v%d" % i * 20, T0) for j in range(i, i + 10)])
        i += 10
    log.roll()
    log.flush()
    return log


def test_a_clean_on_a_full_disk_removes_its_files_closes_them_and_raises_a_typed_error(
        tmpfs: Callable[[str], Path], clock: FakeClock, scheduler: FakeScheduler) -> None:
    mount = tmpfs("2m")
    log = unique_keys_log(mount / "t-0", clock, scheduler)
    records = [(r.offset, r.key, r.value) for r in log.read(0)]
    files_before = {p.name: p.read_bytes() for p in log.dir.iterdir()}
    fill_to(mount, 40 * 1024)          # room for part of the first cleaned segment

    with pytest.raises(CleanerIOError) as caught:
        make_cleaner(1 << 16, clock).clean(log, 0, clock.milliseconds())
    err = caught.value
    assert isinstance(err.__cause__, OSError) and err.errno == 28
    assert err.path == str(log.dir / "00000000000000000000.log.cleaned")
    assert err.partition == "t-0" and "No space left" in str(err)
    assert (copy := pickle.loads(pickle.dumps(err))).fields == err.fields
    assert type(copy) is CleanerIOError
    assert not [p for p in os.listdir(log.dir) if ".cleaned" in p or ".swap" in p]
    assert not [p for p in open_paths(mount) if ".cleaned" in p]
    assert {p.name: p.read_bytes() for p in log.dir.iterdir()} == files_before
    assert [(r.offset, r.key, r.value) for r in log.read(0)] == records

    (mount / "ballast").unlink()
    log.close()
    assert open_paths(mount) == []
    again = Log.open(mount / "t-0", CONFIG, recovery_point=log.log_end_offset,
                     had_clean_shutdown=True, clock=clock, scheduler=scheduler)
    assert [(r.offset, r.key, r.value) for r in again.read(0)] == records
    again.close()
