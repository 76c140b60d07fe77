"""What a load reads: recovery after an unclean shutdown reads each segment's bytes once (the
producer-state replay that rebuilds a ``.txnindex`` takes the batches the recovery scan checked),
and a clean open reads no index of a closed segment: its indexes are checked against the ``.log``
at their first use (as Kafka's ``LazyIndex`` loads an index when first used) and rebuilt then on
any doubt, never served."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from storage import files
from storage import segment as segment_module
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.loader import LogLoader
from storage.log import Log
from storage.records import Record, scan_batches
from tests.storage.test_transactions import KAFKA_ABORTED, NOW, write_kafka_txn_log


def _count_log_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Bytes read from each ``.log`` file by ``os.pread``/``os.preadv`` from now on, by name."""
    read: Counter[str] = Counter()
    pread, preadv = os.pread, os.preadv

    def name_of(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = pread(fd, n, offset)
        read[name_of(fd)] += len(data)
        return data

    def counting_preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        n = preadv(fd, buffers, offset)
        read[name_of(fd)] += n
        return n

    monkeypatch.setattr(os, "pread", counting_pread)
    monkeypatch.setattr(os, "preadv", counting_preadv)
    return read


def _marker_bytes(path: Path) -> int:
    """Bytes of the control batches (transaction markers) of the ``.log`` at ``path``."""
    scan = scan_batches(path.read_bytes())
    return int(sum(size for size, attributes in zip(scan.sizes, scan.attributes)
                   if attributes & 0x20))


def test_recovery_reads_each_segment_once_and_rebuilds_its_txn_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "p-0"
    write_kafka_txn_log(directory).close()
    logs = sorted(directory.glob("*.log"))
    assert len(logs) > 3
    for path in directory.glob("*.txnindex"):
        path.unlink()
    read = _count_log_reads(monkeypatch)
    result = LogLoader(directory, LogConfig(segment_bytes=128 * 5), recovery_point=0,
                       log_start_offset=0, had_clean_shutdown=False, clock=FakeClock(NOW)).load()
    monkeypatch.undo()
    try:
        assert result.recovered_segments == len(logs)
        assert [txn for segment in result.segments
                for txn in segment.txn_index.all_aborted_txns()] == KAFKA_ABORTED
        for path in logs[:-1]:   # (the last one is also walked for the log end offset)
            # the recovery scan's read, and each marker's batch for its control record
            assert read[path.name] <= path.stat().st_size + _marker_bytes(path), path.name
    finally:
        for segment in result.segments:
            segment.close()


CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=200, retention_ms=-1)


def _closed_log(directory: Path, config: LogConfig = CONFIG) -> list[Record]:
    log = Log.open(directory, config, clock=FakeClock(NOW))
    for i in range(100):
        log.append([Record(key=b"%d" % i, value=b"%010d" % i, timestamp=NOW + i)])
    log.flush()
    records = list(log.read())
    assert log.number_of_segments >= 3
    log.close()
    return records


def _point_last_entry_off_its_batch(index: Path) -> None:
    """A flipped bit: the last offset-index entry points one byte past the batch it names, so
    a read trusting it would parse a batch from the middle of another."""
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    data[-4:] = (int.from_bytes(data[-4:], "big") + 1).to_bytes(4, "big")
    index.write_bytes(bytes(data))


def test_a_clean_open_reads_no_index_of_a_closed_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "t-0"
    _closed_log(directory)
    closed = sorted(directory.glob("*.log"))[:-1]
    opened: list[str] = []
    os_open = os.open

    def recording_open(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        opened.append(os.path.basename(os.fspath(path)))
        return os_open(path, flags, *args)

    monkeypatch.setattr(os, "open", recording_open)
    log = Log.open(directory, CONFIG, recovery_point=100, had_clean_shutdown=True,
                   clock=FakeClock(NOW))
    monkeypatch.undo()
    try:
        for path in closed:
            stem = path.name[:-len(files.LOG_SUFFIX)]
            assert f"{stem}{files.INDEX_SUFFIX}" not in opened
            assert f"{stem}{files.TIME_INDEX_SUFFIX}" not in opened
    finally:
        log.close()


def test_a_doubtful_closed_segment_index_is_rebuilt_at_first_use_not_served(
        tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    records = _closed_log(directory)
    index = files.index_file(directory, 0)
    healthy = index.read_bytes()
    _point_last_entry_off_its_batch(index)
    doubtful = index.read_bytes()
    log = Log.open(directory, CONFIG, recovery_point=100, had_clean_shutdown=True,
                   clock=FakeClock(NOW))
    try:
        assert log.load_result.rebuilt_indexes == 0
        first = log.segments()[0]
        assert index.read_bytes() == doubtful and not first.indexes_rebuilt_at_first_use
        end = log.segments()[1].base_offset
        for record in records[:end]:   # a read from inside the segment looks its index up
            assert [(r.offset, r.value) for r in log.read(record.offset, max_offset=end)] == \
                [(r.offset, r.value) for r in records[record.offset:end]]
        assert first.indexes_rebuilt_at_first_use
        assert index.read_bytes() == healthy
    finally:
        log.close()
    reopened = Log.open(directory, CONFIG, recovery_point=100, had_clean_shutdown=True,
                        clock=FakeClock(NOW))
    try:
        assert [r.offset for r in reopened.read(0)] == [r.offset for r in records]
        assert not reopened.segments()[0].indexes_rebuilt_at_first_use
    finally:
        reopened.close()


def test_concurrent_first_uses_rebuild_a_doubtful_index_once(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    records = _closed_log(directory)
    _point_last_entry_off_its_batch(files.index_file(directory, 0))
    log = Log.open(directory, CONFIG, recovery_point=100, had_clean_shutdown=True,
                   clock=FakeClock(NOW))
    first = log.segments()[0]
    results: list[list[int]] = []
    errors: list[BaseException] = []

    middle = log.segments()[1].base_offset // 2

    def read_first_segment() -> None:
        try:
            results.append([r.offset for r in log.read(middle, max_offset=middle + 3)])
        except BaseException as err:   # seen by the test thread
            errors.append(err)

    threads = [threading.Thread(target=read_first_segment) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert results == [[middle, middle + 1, middle + 2]] * 4
        assert records[middle].offset == middle
        assert first.indexes_rebuilt_at_first_use
    finally:
        log.close()


def test_a_rebuild_at_first_use_holds_up_the_readers_of_its_segment_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "t-0"
    records = _closed_log(directory)
    _point_last_entry_off_its_batch(files.index_file(directory, 0))
    log = Log.open(directory, CONFIG, recovery_point=100, had_clean_shutdown=True,
                   clock=FakeClock(NOW))
    first, second = log.segments()[:2]
    scanning, finish = threading.Event(), threading.Event()
    real_scan = segment_module.scan_file

    def held_scan(*args: object, **kwargs: object) -> object:
        scanning.set()          # the first segment's rebuild is reading its .log ...
        finish.wait(10)         # ... and takes its time
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(segment_module, "scan_file", held_scan)
    rebuilt: list[list[int]] = []
    rebuilding = threading.Thread(target=lambda: rebuilt.append(
        [r.offset for r in log.read(1, max_offset=3)]))
    read_second: list[list[int]] = []
    reader = threading.Thread(target=lambda: read_second.append(
        [r.offset for r in log.read(second.base_offset + 1, max_offset=second.base_offset + 3)]))
    try:
        rebuilding.start()
        assert scanning.wait(10)
        reader.start()           # the second segment's first use: its own check
        reader.join(10)
        finished_meanwhile = not reader.is_alive()
        finish.set()
        rebuilding.join(10)
        reader.join(10)
        assert finished_meanwhile, "a read of another segment waited for the rebuild"
        assert read_second == [[second.base_offset + 1, second.base_offset + 2]]
        assert rebuilt == [[1, 2]] and records[1].offset == 1
        assert first.indexes_rebuilt_at_first_use and not second.indexes_rebuilt_at_first_use
    finally:
        finish.set()
        log.close()


def test_a_compacted_log_checks_its_closed_segments_indexes_at_open(tmp_path: Path) -> None:
    """A cleaned segment may overlap the segments it replaced (a swap that did not finish);
    only a load can resolve that layout, so a compacted log still checks every index there."""
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, retention_ms=-1,
                       cleanup_policy="compact")
    directory = tmp_path / "t-0"
    records = _closed_log(directory, config)
    _point_last_entry_off_its_batch(files.index_file(directory, 0))
    log = Log.open(directory, config, recovery_point=100, had_clean_shutdown=True,
                   clock=FakeClock(NOW))
    try:
        assert log.load_result.rebuilt_indexes == 1
        assert [r.offset for r in log.read(5)] == [r.offset for r in records[5:]]
    finally:
        log.close()
