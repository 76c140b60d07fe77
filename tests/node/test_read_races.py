"""Reads racing the owner's changes to a log (retention, delete-records, rolls, truncation) in one
process, with no disk fault: a segment stays readable for as long as a reader holds it, whatever
deletes, renames or cuts it meanwhile, and only a real I/O fault may take a directory offline."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

from node import LogDir
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.log import READ_COMMITTED, READ_UNCOMMITTED
from storage.records import Record
from storage.segment import LogSegment

# small segments and no delete delay: every few appends a roll, and old segments are unlinked
# the moment retention or delete-records takes them
RACY = LogConfig(segment_bytes=2048, file_delete_delay_ms=0, retention_bytes=12_000)
RUN_SECONDS = 4.0


def test_readers_racing_retention_delete_records_and_truncation_see_no_error(
        tmp_path: Path) -> None:
    d = LogDir.open(tmp_path / "d", default_config=RACY, start_tasks=False)
    log = d.get_or_create_log("t", 0)
    other = d.get_or_create_log("u", 0)
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def write() -> None:
        i = 0
        try:
            while not stop.is_set():
                log.append([Record(key=b"k%d" % i, value=b"v" * 100) for _ in range(5)])
                i += 1
                if i % 37 == 0:
                    log.truncate_to(log.log_end_offset - 3)
                if i % 20 == 0:
                    log.maybe_increment_log_start_offset(max(log.log_end_offset - 200, 0))
                    log.delete_old_segments()
        except BaseException as err:  # noqa: BLE001 - reported by the test
            errors.append(err)
            stop.set()

    def read(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                end = log.log_end_offset
                start = rng.randint(max(log.log_start_offset, end - 40), end)
                previous = -1
                try:
                    for record in log.read(start, isolation=rng.choice(
                            [READ_COMMITTED, READ_UNCOMMITTED])):
                        assert record.offset > previous
                        previous = record.offset
                except OffsetOutOfRangeError:
                    continue     # retention passed the offset taken: the reader's business
                reads[0] += 1
        except BaseException as err:  # noqa: BLE001 - reported by the test
            errors.append(err)
            stop.set()

    threads = [threading.Thread(target=write)] + [
        threading.Thread(target=read, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + RUN_SECONDS
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert reads[0] > 10
    assert d.online
    other.append([Record(key=b"a", value=b"b")])
    assert other.log_end_offset == 1
    d.close()


def test_a_segment_deleted_during_a_read_is_read_to_its_end(tmp_path: Path) -> None:
    d = LogDir.open(tmp_path / "d", default_config=LogConfig(file_delete_delay_ms=0),
                    start_tasks=False)
    log = d.get_or_create_log("t", 0)
    for i in range(10):
        log.append([Record(key=b"k", value=b"%d" % i)])
    old = log.active_segment
    log.roll()
    log.append([Record(key=b"k", value=b"new")])
    with old.reading():
        log.maybe_increment_log_start_offset(10)
        assert log.delete_old_segments() == 1
        assert not old.log_path.exists()
        data = old.read(0, 1 << 20)
        assert data is not None
    records = [r for b in _batches(data[1], old) for r in b.records()]
    assert [r.value for r in records] == [b"%d" % i for i in range(10)]
    d.close()


def test_a_roll_during_a_read_of_the_active_segment_never_hands_it_another_file(
        tmp_path: Path) -> None:
    d = LogDir.open(tmp_path / "d", default_config=LogConfig(), start_tasks=False)
    log = d.get_or_create_log("t", 0)
    log.append([Record(key=b"k", value=b"first")])
    segment = log.active_segment
    with segment.reading():
        log.roll()                           # closes the writer's descriptor
        log.append([Record(key=b"k", value=b"second")])
        fresh = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR)   # takes a free number
        os.write(fresh, b"\0" * 200)
        found = segment.read(0, 1 << 20)
        os.close(fresh)
    assert found is not None
    assert [r.value for b in _batches(found[1], segment) for r in b.records()] == [b"first"]
    d.close()


def test_a_truncation_waits_for_a_read_in_flight(tmp_path: Path) -> None:
    d = LogDir.open(tmp_path / "d", default_config=LogConfig(), start_tasks=False)
    log = d.get_or_create_log("t", 0)
    for i in range(4):
        log.append([Record(key=b"k", value=b"%d" % i)])
    segment = log.active_segment
    done = threading.Event()
    with segment.reading():
        cutter = threading.Thread(target=lambda: (log.truncate_to(1), done.set()))
        cutter.start()
        assert not done.wait(0.3)           # the cut waits for the read
        assert segment.size == os.path.getsize(segment.log_path)
    cutter.join(timeout=10)
    assert done.is_set()
    assert log.log_end_offset == 1
    assert segment.cuts == 1
    d.close()


def _batches(data: bytes, segment: LogSegment):
    from storage.records import iter_batches
    return iter_batches(data, path=segment.log_path)
