"""LogCleanerTest scenarios on real log files (non-transactional), plus compression, producer
batches, aborts and buffer growth."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from cleaner.cleaner import Cleaner, group_segments_by_size
from cleaner.config import CleanerConfig
from cleaner.offset_map import OffsetMap
from cleaner.stats import CleanerStats
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptRecordError, LogCleaningAbortedError
from storage.files import TopicPartition
from storage.log import Log
from storage.log_read import READ_CANDIDATES
from storage.records import Compression, Record, build_batch
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment

DAY_MS = 86_400_000
MakeLog = Callable[..., Log]


@pytest.fixture
def make_log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> MakeLog:
    def make(name: str = "t-0", **config: object) -> Log:
        settings = {"segment_bytes": 1024, "cleanup_policy": "compact", "file_delete_delay_ms": 0,
                    **config}
        return Log.open(tmp_path / name, LogConfig(**settings), recovery_point=0,
                        had_clean_shutdown=True, clock=clock, scheduler=scheduler)
    return make


def make_cleaner(capacity: int, clock: FakeClock, check_done=None, io_buffer: int = 64 * 1024,
                 max_message: int = 64 * 1024) -> Cleaner:
    """Kafka's makeCleaner: a map of ``capacity`` slots at load factor 0.75."""
    config = CleanerConfig(dedupe_buffer_size=capacity * 24, dedupe_buffer_load_factor=0.75,
                           io_buffer_size=io_buffer * 2, max_message_size=max_message)
    return Cleaner(config, clock=clock, check_done=check_done,
                   offset_map=OffsetMap(capacity * 24, 0.75))


def kv(key: int | None, value: int | None, ts: int = 1_700_000_000_000) -> Record:
    return Record(key=None if key is None else str(key).encode(),
                  value=None if value is None else str(value).encode(), timestamp=ts)


def keys_in_log(log: Log) -> list[int]:
    """Keys of the records that carry a value (tombstones excluded), in log order."""
    return [int(r.key) for r in log.read() if r.value is not None and r.key is not None]


def offsets_in_log(log: Log) -> list[int]:
    return [r.offset for r in log.read()]


def test_clean_segments_removes_keys_mapped_past_them(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1000, clock)
    offset = 0
    while log.number_of_segments < 4:
        log.append([kv(offset, offset)])
        offset += 1
    original = keys_in_log(log)
    for key in (1, 3, 5, 7, 9):
        cleaner.offset_map.put(str(key).encode(), 2**62)
    segments = log.segments()[:3]
    stats = CleanerStats(clock)
    cleaner.clean_segments(log, segments, clock.milliseconds(), stats, 0, 2**62, {})
    assert keys_in_log(log) == [k for k in original if k not in (1, 3, 5, 7, 9)]
    assert stats.bytes_read == sum(s.size for s in segments)


def test_partial_segment_clean(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(2, clock)
    for key in (0, 1, 0, 1, 0):
        log.append([kv(key, key)])
    log.roll()
    cleaner.clean(log, 2, clock.milliseconds())
    assert keys_in_log(log) == [1, 0, 1, 0]
    assert offsets_in_log(log) == [1, 2, 3, 4]
    cleaner.clean(log, 3, clock.milliseconds())
    assert keys_in_log(log) == [0, 1, 0]
    assert offsets_in_log(log) == [2, 3, 4]
    cleaner.clean(log, 4, clock.milliseconds())
    assert keys_in_log(log) == [1, 0]
    assert offsets_in_log(log) == [3, 4]


def test_cleaner_stats(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(4, clock)
    for key in (0, 1, 0, 1, 0):
        log.append([kv(key, key)])
    log.roll()
    size_before = sum(s.size for s in log.segments()[:-1])
    result = cleaner.clean(log, 2, clock.milliseconds())
    assert result.next_dirty_offset == 5
    assert result.stats.messages_read == 5
    assert result.stats.bytes_read == size_before
    assert result.stats.messages_written == 2
    assert result.stats.bytes_written == sum(s.size for s in log.segments()[:-1])
    assert result.stats.invalid_messages_read == 0


def test_cleaning_with_deletes_removes_deleted_keys(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    while log.number_of_segments < 4:
        for key in range(20):
            log.append([kv(key, key)])
    for key in range(0, 20, 2):
        log.append([kv(key, None)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    assert keys_in_log(log)
    assert all(k % 2 == 1 for k in keys_in_log(log))


def test_tombstone_survives_first_clean_even_if_old(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(delete_retention_ms=DAY_MS)
    cleaner = make_cleaner(1024, clock)
    log.append([kv(0, 0, ts=1)])
    log.append([kv(0, None, ts=2)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    records = list(log.read())
    assert [(r.key, r.value) for r in records] == [(b"0", None)]


def test_tombstone_removed_after_delete_horizon_on_second_pass(make_log: MakeLog,
                                                              clock: FakeClock) -> None:
    log = make_log(delete_retention_ms=DAY_MS)
    cleaner = make_cleaner(1024, clock)
    log.append([kv(0, 0), kv(1, 1)])
    log.append([kv(0, None)])
    log.roll()
    t = clock.milliseconds()
    cleaner.clean(log, 0, t)
    batches = list(log.read_raw(0, 1 << 20).batches())
    horizon = [b.delete_horizon_ms for b in batches if b.records_count and
               any(r.value is None for r in b.records())]
    assert horizon == [t + DAY_MS]
    cleaner.clean(log, 0, t + DAY_MS - 1)
    assert [(r.key, r.value) for r in log.read()] == [(b"1", b"1"), (b"0", None)]
    cleaner.clean(log, 0, t + DAY_MS + 1)
    assert [(r.key, r.value) for r in log.read()] == [(b"1", b"1")]


def test_unkeyed_records_are_dropped_and_counted(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(cleanup_policy="delete")
    cleaner = make_cleaner(1024, clock)
    while log.number_of_segments < 3:
        for i in range(10):
            log.append([kv(i, i)])
        log.append([kv(None, 7), kv(None, 8)])
    log.roll()
    unkeyed = sum(1 for r in log.read() if r.key is None)
    result = cleaner.clean(log, 0, clock.milliseconds())
    assert result.stats.invalid_messages_read == unkeyed
    assert all(r.key is not None for r in log.read())


def test_last_empty_batch_keeps_last_offset_when_all_keys_deleted(make_log: MakeLog,
                                                                  clock: FakeClock) -> None:
    log = make_log(delete_retention_ms=0)
    cleaner = make_cleaner(1024, clock)
    log.append([kv(0, 0), kv(1, 1)])
    log.append([kv(0, None), kv(1, None)])
    log.roll()
    t = clock.milliseconds()
    cleaner.clean(log, 0, t)
    cleaner.clean(log, 0, t + 1)
    assert list(log.read()) == []
    assert log.number_of_segments == 2
    fetch = log.read_raw(0)
    assert fetch is not None
    batches = list(fetch.batches())
    assert len(batches) == 1
    assert batches[0].records_count == 0
    assert batches[0].last_offset == log.active_segment.base_offset - 1
    assert log.log_end_offset == 4


def test_producer_last_batch_retained_as_empty(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    log.append_batch(build_batch([kv(0, 0), kv(1, 1)], producer_id=7, producer_epoch=0,
                                 base_sequence=0))
    log.append_batch(build_batch([kv(0, 2)], producer_id=8, producer_epoch=0, base_sequence=0))
    log.append_batch(build_batch([kv(1, 3)], producer_id=8, producer_epoch=0, base_sequence=1))
    log.append_batch(build_batch([kv(0, 4)], producer_id=9, producer_epoch=0, base_sequence=0))
    log.append([kv(2, 5)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    batches = list(log.read_raw(0, 1 << 20).batches())
    kept = [(b.producer_id, b.base_sequence, b.last_offset, b.records_count) for b in batches]
    assert kept == [(7, 0, 1, 0), (8, 1, 3, 1), (9, 0, 4, 1), (-1, -1, 5, 1)]
    assert keys_in_log(log) == [1, 0, 2]


def test_an_expired_producers_last_batch_is_not_retained(make_log: MakeLog,
                                                         clock: FakeClock) -> None:
    # Kafka keeps the last batch of *active* producers only: one idle for
    # producer.id.expiration.ms has left the producer state, and its emptied batch goes
    day = 24 * 60 * 60 * 1000
    log = make_log()
    cleaner = Cleaner(CleanerConfig(producer_id_expiration_ms=day), clock=clock,
                      offset_map=OffsetMap(1024 * 24, 0.75))
    now = clock.milliseconds()
    log.append_batch(build_batch([kv(0, 0, ts=now - day)], producer_id=7, producer_epoch=0,
                                 base_sequence=0))
    log.append_batch(build_batch([kv(1, 1, ts=now - day + 1)], producer_id=8, producer_epoch=0,
                                 base_sequence=0))
    log.append([kv(0, 2, ts=now), kv(1, 3, ts=now)])
    log.roll()
    cleaner.clean(log, 0, now)
    kept = [(b.producer_id, b.last_offset, b.records_count)
            for b in log.read_raw(0, 1 << 20).batches()]
    assert kept == [(8, 1, 0), (-1, 3, 2)]      # 7 expired a millisecond ago; 8 is still active
    assert CleanerConfig.from_properties({"producer.id.expiration.ms": "5"}) \
        .producer_id_expiration_ms == 5


def test_segment_grouping(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(segment_bytes=300, index_interval_bytes=1)
    for i in range(50):
        log.append([kv(i, i)])
    segments = log.segments()[:-1]
    end = log.active_segment.base_offset
    assert len(group_segments_by_size(segments, 2**31 - 1, 2**31 - 1, end)) == 1
    assert [len(g) for g in group_segments_by_size(segments, 1, 2**31 - 1, end)] == \
        [1] * len(segments)
    assert [len(g) for g in group_segments_by_size(segments, 2**31 - 1, 1, end)] == \
        [1] * len(segments)
    three = sum(s.size for s in segments[:3]) + 1
    groups = group_segments_by_size(segments, three, 2**31 - 1, end)
    assert all(len(g) <= 3 for g in groups)
    assert len(groups[0]) == 3
    assert [s for g in groups for s in g] == segments


def test_build_offset_map(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(segment_bytes=4096)
    cleaner = make_cleaner(1000, clock)
    for i in range(500):
        log.append([kv(i, i)])
    log.roll()
    bases = log.segment_base_offsets()
    assert len(bases) > 4
    for start, end in ((0, bases[1]), (bases[1], bases[3]), (bases[3], log.log_end_offset)):
        stats = CleanerStats(clock)
        cleaner.build_offset_map(log, start, end, stats)
        m = cleaner.offset_map
        assert m.latest_offset + 1 == end
        for i in range(start, end):
            assert m.get(str(i).encode()) == i
        assert m.get(str(start - 1).encode()) == -1
        assert m.get(str(end).encode()) == -1
        assert stats.map_messages_read == end - start


def test_build_partial_offset_map(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(3, clock)
    for i in range(5):
        log.append([kv(i, i)])
    log.roll()
    stats = CleanerStats(clock)
    cleaner.build_offset_map(log, 2, log.log_end_offset, stats)
    m = cleaner.offset_map
    assert m.get(b"2") == 2
    assert m.get(b"3") == 3
    assert m.get(b"0") == -1
    assert m.get(b"4") == -1
    assert m.latest_offset == 3
    assert stats.map_messages_read == 4   # Kafka counts the records before the start it reads past


def test_cleaning_beyond_missing_offsets_reaches_active_segment(tmp_path: Path,
                                                                clock: FakeClock) -> None:
    directory = tmp_path / "gap-0"
    directory.mkdir()
    config = LogConfig(cleanup_policy="compact")
    for base, offsets in ((0, range(0, 6)), (11, range(11, 13))):
        segment = LogSegment.create(directory, base, config, clock=clock)
        for offset in offsets:
            segment.append(offset, 1, offset, [build_batch([kv(offset % 3, offset)],
                                                           base_offset=offset)])
        segment.on_become_inactive()
        segment.close()
    log = Log.open(directory, config, recovery_point=13, had_clean_shutdown=True, clock=clock)
    assert log.active_segment.base_offset == 11
    result = make_cleaner(1024, clock).clean(log, 0, clock.milliseconds())
    assert result.next_dirty_offset == 11
    assert [r.offset for r in log.read()] == [3, 4, 5, 11, 12]


def test_large_message_grows_read_buffer(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(segment_bytes=1024 * 1024, max_message_bytes=200_000)
    cleaner = make_cleaner(1024, clock, io_buffer=1024, max_message=200_000)
    big = b"x" * 100_000
    log.append([Record(key=b"big", value=big, timestamp=1)])
    log.append([kv(1, 1)])
    log.append([Record(key=b"big", value=big + b"y", timestamp=2)])
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    records = list(log.read())
    assert [(r.key, len(r.value)) for r in records] == [(b"1", 1), (b"big", 100_001)]


def test_corrupt_batch_size_larger_than_file_raises(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock, io_buffer=64)
    log.append([Record(key=b"k", value=b"v" * 200, timestamp=1)])
    log.append([kv(1, 1)])
    log.roll()
    first = log.segments()[0]
    with open(first.log_path, "r+b") as f:
        f.seek(8)
        f.write((10**6).to_bytes(4, "big"))
    with pytest.raises(CorruptRecordError):
        cleaner.clean(log, 0, clock.milliseconds())


def test_abort_leaves_log_unchanged_and_no_cleaned_files(make_log: MakeLog,
                                                         clock: FakeClock) -> None:
    log = make_log()
    calls = []

    def check_done(tp: TopicPartition) -> None:
        calls.append(tp)
        if len(calls) > 3:
            raise LogCleaningAbortedError("aborted", partition=str(tp))
    cleaner = make_cleaner(1024, clock, check_done=check_done)
    while log.number_of_segments < 4:
        log.append([kv(len(calls) % 3, 1)])
    before = [(r.offset, r.key, r.value) for r in log.read()]
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean(log, 0, clock.milliseconds())
    assert [(r.offset, r.key, r.value) for r in log.read()] == before
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


@pytest.mark.parametrize("codec", list(Compression))
def test_compressed_batches_are_cleaned_and_keep_their_codec(make_log: MakeLog, clock: FakeClock,
                                                             codec: Compression) -> None:
    log = make_log(segment_bytes=4096)
    cleaner = make_cleaner(1024, clock)
    for round_ in range(5):
        log.append([kv(k, round_ * 100 + k) for k in range(10)], compression=codec)
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    assert {int(r.key): int(r.value) for r in log.read()} == {k: 400 + k for k in range(10)}
    assert [r.offset for r in log.read()] == list(range(40, 50))
    for batch in log.read_raw(0, 1 << 20).batches():
        batch.ensure_valid()
        assert batch.compression == codec


def test_cleaned_segment_keeps_source_mtime(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    for i in range(30):
        log.append([kv(i % 5, i)])
    log.roll()
    for segment in log.segments()[:-1]:
        os.utime(segment.log_path, ns=(1_600_000_000_000_000_000,) * 2)
    cleaner.clean(log, 0, clock.milliseconds())
    assert [s.last_modified_ms for s in log.segments()[:-1]] == \
        [1_600_000_000_000] * (log.number_of_segments - 1)


def test_clean_at_every_offset_preserves_latest_value_per_key(make_log: MakeLog,
                                                               clock: FakeClock) -> None:
    log = make_log()
    cleaner = make_cleaner(1024, clock)
    latest: dict[int, tuple[int, int]] = {}
    for i in range(200):
        key = (i * 7) % 23
        info = log.append([kv(key, i)])
        latest[key] = (info.first_offset, i)
    log.roll()
    cleaner.clean(log, 0, clock.milliseconds())
    found = {int(r.key): (r.offset, int(r.value)) for r in log.read()}
    assert found == latest


def test_a_read_goes_past_more_empty_cleaned_segments_than_it_takes_at_a_time(
        make_log: MakeLog, clock: FakeClock) -> None:
    """A read takes ``READ_CANDIDATES`` segments at a time under the log's lock (a fetch costs
    O(log segments)); a run of segments that cleaning emptied, longer than that, is read past to
    the first record after it, from any offset inside the run."""
    log = make_log()
    cleaner = make_cleaner(1000, clock)
    offset = 0
    while log.number_of_segments < 3 * READ_CANDIDATES:
        log.append([kv(offset, offset)])
        offset += 1
    emptied = log.segments()[:2 * READ_CANDIDATES + 1]
    for key in range(emptied[-1].read_next_offset()):
        cleaner.offset_map.put(str(key).encode(), 2**62)
    for segment in emptied:
        stats = CleanerStats(clock)
        cleaner.clean_segments(log, [segment], clock.milliseconds(), stats, 0, 2**62, {})
    first_kept = log.segments()[2 * READ_CANDIDATES + 1].base_offset
    assert all(s.size == 0 for s in log.segments()[:2 * READ_CANDIDATES + 1])
    for start in (0, 1, first_kept // 2, first_kept - 1):
        got = next(iter(log.read(start)))
        assert (got.offset, int(got.key)) == (first_kept, first_kept)
    assert offsets_in_log(log) == list(range(first_kept, offset))


def test_clean_writes_behind_its_cleaned_segment_and_fsyncs_each_file_once_before_the_swap(
        make_log: MakeLog, clock: FakeClock) -> None:
    """Kafka's cleanSegments flushes the cleaned segment once before the swap. Its ``.log``
    starts its disk writes as the clean appends (every WRITE_BEHIND_BYTES), so that one fsync
    waits for the tail only; each cleaned file is still fsynced exactly once, and before it is
    renamed to ``.swap``. The fsync and rename calls are observed at the os boundary and named
    by the files they reach."""
    log = make_log(segment_bytes=8 * 2**20, max_message_bytes=2**20)
    value = 200_000
    for i in range(40):   # 40 distinct keys: the clean keeps every record (~8 MB)
        log.append([kv(i, 0), Record(key=b"%d" % i, value=b"v" * value, timestamp=0)])
    log.roll()
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def recording_fsync(fd: int) -> None:
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def recording_replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        events.append(("rename", os.path.basename(source)))
        real_replace(source, target)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", recording_fsync)
        patch.setattr(os, "replace", recording_replace)
        make_cleaner(1000, clock, io_buffer=2**20, max_message=2**20).clean(log, 0)
    cleaned = log.segments()[0]
    assert cleaned.size > 4 * 2**20 and cleaned.writeback_started >= cleaned.size - 2**20 - 4096
    names = [f"00000000000000000000.{kind}.cleaned" for kind in ("log", "index", "timeindex")]
    for name in names:
        synced = [i for i, event in enumerate(events) if event == ("fsync", name)]
        renamed = events.index(("rename", name))
        assert len(synced) == 1 and synced[0] < renamed, (name, events)
    assert sorted(r.key for r in log.read() if r.value) == sorted(b"%d" % i for i in range(40))
