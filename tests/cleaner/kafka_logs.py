"""Kafka's LogCleanerTest helpers, on real files: ``logConfig``, ``makeLog``, ``makeCleaner``,
``record``, ``keysInLog``, ``offsetsInLog``, ``lastOffsetsPerBatchInLog``, ``lastSequencesInLog``
and ``appendAsFollower`` (``follower_log``: records at offsets a leader chose, written to the
segment files directly)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from cleaner.offset_map import OffsetMap
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record, RecordBatch, build_batch
from storage.scheduler import FakeScheduler
from storage.segment import LogSegment

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
TOMBSTONE_RETENTION_MS = 86_400_000
LARGE_TIMESTAMP = LONG_MAX - TOMBSTONE_RETENTION_MS - 1     # Kafka's largeTimestamp
T0 = 1_700_000_000_000
MakeLog = Callable[..., Log]


def kafka_config(**overrides: object) -> LogConfig:
    """LogCleanerTest's ``logConfig``: segment.bytes 1024, segment.index.bytes 1024, compact (and
    file.delete.delay.ms 0 so swapped-out files go at once)."""
    settings: dict[str, object] = {"segment_bytes": 1024, "segment_index_bytes": 1024,
                                   "cleanup_policy": "compact", "file_delete_delay_ms": 0}
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def log_factory(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> MakeLog:
    """Kafka's ``makeLog(config)``: a new log ``test-N`` with ``kafka_config(**overrides)``."""
    counter = iter(range(1_000_000))

    def make(**overrides: object) -> Log:
        return Log.open(tmp_path / f"test-{next(counter)}", kafka_config(**overrides),
                        recovery_point=0, had_clean_shutdown=True, clock=clock,
                        scheduler=scheduler)
    return make


def make_cleaner(capacity: int, clock: FakeClock, *, max_message_size: int = 64 * 1024,
                 check_done: Callable[..., None] | None = None) -> Cleaner:
    """Kafka's ``makeCleaner``: an offset map of ``capacity`` slots at load factor 0.75 and I/O
    buffers of ``maxMessageSize`` bytes."""
    slots = min(capacity, 1 << 16)
    config = CleanerConfig(dedupe_buffer_size=slots * 24, dedupe_buffer_load_factor=0.75,
                           io_buffer_size=max_message_size * 2,
                           max_message_size=max_message_size)
    return Cleaner(config, clock=clock, check_done=check_done,
                   offset_map=OffsetMap(slots * 24, 0.75))


def key(k: int | str) -> bytes:
    return str(k).encode()


def record(k: int | None, v: int | bytes | None, *, producer_id: int = -1,
           producer_epoch: int = -1, sequence: int = -1, timestamp: int = T0) -> bytes:
    """Kafka's ``record(key, value, producerId, producerEpoch, sequence)``: one-record batch."""
    value = v if isinstance(v, bytes) or v is None else key(v)
    return build_batch([Record(None if k is None else key(k), value, timestamp)],
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=sequence)


def batches(log: Log) -> Iterator[RecordBatch]:
    """Every batch of every segment, straight from the files (control and empty ones too)."""
    for segment in log.segments():
        for entry in segment.batches():
            yield RecordBatch(segment.read_bytes(entry.position, entry.size), entry.position,
                              segment.log_path)


def keys_in_log(log: Log) -> list[int]:
    """LogTestUtils.keysInLog: keys of keyed records with a value, control batches skipped."""
    return [int(r.key) for b in batches(log) if not b.is_control for r in b.records()
            if r.key is not None and r.value is not None]


def offsets_in_log(log: Log) -> list[int]:
    """LogCleanerTest.offsetsInLog: offsets of the records with a key and a value."""
    return [r.offset for b in batches(log) for r in b.records()
            if r.key is not None and r.value is not None]


def last_offsets_per_batch(log: Log) -> list[int]:
    return [b.last_offset for b in batches(log)]


def last_sequences_in_log(log: Log) -> dict[int, int]:
    return {b.producer_id: b.header.last_sequence for b in batches(log)
            if not b.is_control and b.producer_id >= 0}


def follower_log(directory: Path, config: LogConfig, layout: list[tuple[int, list[int]]],
                 clock: FakeClock, scheduler: FakeScheduler,
                 keys: Callable[[int], bytes] = lambda offset: b"key") -> Log:
    """A log whose records sit at offsets a leader chose (Kafka's ``appendAsFollower``): one
    segment per ``(base offset, [record offsets])`` of ``layout``, written to the files directly,
    the last one active. Record values are their offsets."""
    directory.mkdir(parents=True)
    end = 0
    for base, offsets in layout:
        segment = LogSegment.create(directory, base, config, clock=clock)
        for offset in offsets:
            data = build_batch([Record(keys(offset), key(offset), T0)], base_offset=offset)
            segment.append(offset, T0, offset, [data])
            end = offset + 1
        segment.on_become_inactive()
        segment.close()
    return Log.open(directory, config, recovery_point=max(end, layout[-1][0]),
                    had_clean_shutdown=True, clock=clock, scheduler=scheduler)
