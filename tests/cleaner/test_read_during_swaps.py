"""Bulk reads straight from segment files while a cleaner swaps segments under them: no batch is
half-read, none twice, no read fails on a renamed file, and the latest value of every key is seen."""

from __future__ import annotations

import threading
from pathlib import Path

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record
from storage.view import read_partition_batches


def _clean_forever(log: Log, stop: threading.Event, cleans: list[int]) -> None:
    """Clean ``log`` from its start again and again until ``stop``, counting cleans."""
    cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=120 * 24))
    while not stop.is_set():
        first = 0
        while first < log.active_segment.base_offset and not stop.is_set():
            first = cleaner.clean(log, first).next_dirty_offset
            cleans[0] += 1


def test_reading_files_during_swaps_sees_every_latest_value(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, cleanup_policy="compact", file_delete_delay_ms=0)
    log = Log.open(tmp_path / "r-0", config)
    oracle: dict[bytes, tuple[int, bytes]] = {}
    for i in range(6000):
        key, value = b"%d" % (i % 300), b"%d" % i
        info = log.append([Record(key=key, value=value, timestamp=i)])
        oracle[key] = (info.first_offset, value)
    log.roll()
    end = log.log_end_offset
    stop = threading.Event()
    cleans = [0]
    thread = threading.Thread(target=_clean_forever, args=(log, stop, cleans))
    thread.start()
    try:
        for _round in range(3):
            seen: dict[bytes, tuple[int, bytes]] = {}
            last = -1
            for batch in read_partition_batches(log.dir, config, 0, end, fetch_bytes=512):
                batch.ensure_valid()
                for record in batch.records():
                    assert record.offset > last
                    last = record.offset
                    assert record.value == b"%d" % record.offset   # each offset keeps its record
                    seen[record.key] = (record.offset, record.value)
            assert seen == oracle
    finally:
        stop.set()
        thread.join()
    assert cleans[0] > 1


def test_read_committed_file_reads_during_swaps_never_see_aborted_values(tmp_path: Path) -> None:
    """Transactional producers on a compacted topic, a third of their transactions aborted, while a
    cleaner removes aborted data, then abort markers, under the readers: every read_committed
    read of the files sees exactly the latest committed value of every key, never an aborted one."""
    from storage.producer_state import ORIGIN_COORDINATOR
    from storage.records import ControlType, build_batch, build_end_txn_marker

    config = LogConfig(segment_bytes=4096, cleanup_policy="compact", file_delete_delay_ms=0,
                       delete_retention_ms=0)
    log = Log.open(tmp_path / "r-0", config)
    sequences = {1: 0, 2: 0}
    committed: dict[bytes, bytes] = {}
    for txn in range(300):
        producer = 1 + txn % 2
        keys = [b"%d" % ((txn * 7 + j) % 120) for j in range(4)]
        aborted = txn % 3 == 0
        values = [b"%s-%d-%d" % (b"aborted" if aborted else b"ok", txn, j) for j in range(4)]
        log.append_batch(build_batch(
            [Record(key=k, value=v, timestamp=txn) for k, v in zip(keys, values)],
            producer_id=producer, producer_epoch=0, base_sequence=sequences[producer],
            is_transactional=True))
        sequences[producer] += 4
        log.append_batch(build_end_txn_marker(
            ControlType.ABORT if aborted else ControlType.COMMIT, producer_id=producer,
            producer_epoch=0, coordinator_epoch=0, timestamp=txn), origin=ORIGIN_COORDINATOR)
        if not aborted:
            committed.update(zip(keys, values))
    log.roll()
    end = log.last_stable_offset
    stop = threading.Event()
    cleans = [0]
    thread = threading.Thread(target=_clean_forever, args=(log, stop, cleans))
    thread.start()
    try:
        rounds = 0
        while rounds < 4 or (cleans[0] < 4 and rounds < 500):   # reads overlapping cleans
            rounds += 1
            seen: dict[bytes, bytes] = {}
            for batch in read_partition_batches(log.dir, config, 0, end, fetch_bytes=512,
                                                isolation="read_committed"):
                if batch.is_control:
                    continue
                for record in batch.records():
                    assert not record.value.startswith(b"aborted"), record
                    seen[record.key] = record.value
            assert seen == committed
    finally:
        stop.set()
        thread.join()
        log.close()
    assert cleans[0] >= 4


def test_a_read_that_lists_the_directory_in_the_middle_of_a_swap_misses_no_offset(
        tmp_path: Path, monkeypatch) -> None:
    """A swap renames the old segments away before it renames the cleaned one in; a reader that
    listed the directory between the two saw neither and skipped their offsets (found by the
    read_committed test above). Now it waits for a listing no swap is changing."""
    import time

    from storage import files
    from storage.segment import LogSegment

    config = LogConfig(segment_bytes=2048, cleanup_policy="compact", file_delete_delay_ms=0)
    log = Log.open(tmp_path / "r-0", config)
    for i in range(400):
        log.append([Record(key=b"%d" % i, value=b"v%d" % i, timestamp=i)])
    log.roll()
    end = log.log_end_offset
    assert log.number_of_segments > 4
    original = LogSegment.change_file_suffixes
    reads: dict[str, object] = {}

    def read_all() -> None:
        reads["offsets"] = [r.offset for b in read_partition_batches(log.dir, config, 0, end)
                            for r in b.records()]

    def pause_before_the_final_rename(self: LogSegment, old: str, new: str) -> None:
        if old == files.SWAP_SUFFIX and new == "" and "thread" not in reads:
            reads["thread"] = thread = threading.Thread(target=read_all)
            thread.start()
            time.sleep(0.3)          # the reader lists the directory now, mid-swap
        original(self, old, new)

    monkeypatch.setattr(LogSegment, "change_file_suffixes", pause_before_the_final_rename)
    Cleaner(CleanerConfig()).clean(log, 0)
    assert "thread" in reads
    reads["thread"].join()
    log.close()
    assert reads["offsets"] == list(range(end))
