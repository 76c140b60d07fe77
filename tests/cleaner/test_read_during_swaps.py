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

    def clean_forever() -> None:
        cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=120 * 24))
        while not stop.is_set():
            first = 0
            while first < log.active_segment.base_offset and not stop.is_set():
                first = cleaner.clean(log, first).next_dirty_offset
                cleans[0] += 1

    thread = threading.Thread(target=clean_forever)
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
