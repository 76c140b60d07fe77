"""A seeded bit-flip sweep over every file type of a cleanly closed log directory: segments,
offset, time and transaction indexes, producer snapshots, the directory's checkpoints and the
clean-shutdown marker. After each flip the directory is opened again and the partition read
(both isolation levels): every flip gives a typed error, or a load that reports what it cut or
skipped, or a log that serves exactly what was written. No flip makes a read return a record
that differs from the one written at its offset, and no record goes missing without a trace."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from node import LogDir
from storage.clock import FakeClock
from storage.errors import StorageError
from storage.records import Compression, ControlType, Record, build_batch
from storage.scheduler import FakeScheduler

T0 = 1_700_000_000_000
TOPIC = {"t": {"segment.bytes": 900, "index.interval.bytes": 200}}
FLIPS_PER_FILE = 12


def _write(root: Path) -> None:
    clock = FakeClock(T0)
    with LogDir.open(root, topic_configs=TOPIC, clock=clock, scheduler=FakeScheduler(clock),
                     start_tasks=False) as d:
        log = d.get_or_create_log("t", 0)
        sequence = 0
        for i in range(24):
            records = [Record(b"k%d" % (i % 5), b"value-%04d-%d" % (i, k), T0 + i)
                       for k in range(1 + i % 3)]
            if i % 6 == 5:                           # a transaction, aborted every other time
                log.append_batch(build_batch(records, producer_id=9, producer_epoch=0,
                                             base_sequence=sequence, is_transactional=True))
                sequence += len(records)
                log.append_end_txn_marker(ControlType.ABORT if i % 12 == 5 else
                                          ControlType.COMMIT, producer_id=9, producer_epoch=0,
                                          coordinator_epoch=1)
            else:
                log.append(records, compression=Compression.GZIP if i % 4 == 0
                           else Compression.NONE)
        log.flush()
        d.checkpoint()


def _read(root: Path) -> tuple[dict[str, list[Record]], int, bool]:
    """(records by isolation level, log start offset, whether the load reported a cut or skip)."""
    clock = FakeClock(T0 + 10_000)
    with LogDir.open(root, topic_configs=TOPIC, clock=clock, scheduler=FakeScheduler(clock),
                     start_tasks=False) as d:
        reported = bool(d.problems or d.quarantined)
        log = d.get_log("t", 0)
        if log is None:
            return {}, 0, reported
        got = {level: list(log.read(0 if log.log_start_offset == 0 else None, isolation=level))
               for level in ("read_uncommitted", "read_committed")}
        return got, log.log_start_offset, reported


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Record]]]:
    root = tmp_path_factory.mktemp("pristine") / "d"
    _write(root)
    expected, start, reported = _read(root)
    assert start == 0 and not reported and len(expected["read_committed"]) < \
        len(expected["read_uncommitted"])
    return root, expected


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock"
                  and p.stat().st_size > 0)


def test_the_sweep_covers_every_kind_of_file(pristine: tuple[Path, dict]) -> None:
    suffixes = {p.suffix or p.name for p in _files(pristine[0])}
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot",
            "recovery-point-offset-checkpoint", ".kafka_cleanshutdown"} <= suffixes


def test_no_bit_flip_in_any_file_makes_a_reader_serve_altered_or_silently_lost_records(
        pristine: tuple[Path, dict], tmp_path: Path) -> None:
    root, expected = pristine
    rng = random.Random(20261123)
    checked = 0
    for source in _files(root):
        relative = source.relative_to(root)
        for _ in range(FLIPS_PER_FILE):
            copy = tmp_path / f"flip{checked}"
            shutil.copytree(root, copy)
            target = copy / relative
            data = bytearray(target.read_bytes())
            position, bit = rng.randrange(len(data)), rng.randrange(8)
            data[position] ^= 1 << bit
            target.write_bytes(bytes(data))
            where = f"{relative}@{position} bit {bit}"
            checked += 1
            try:
                got, start, reported = _read(copy)
            except StorageError:
                continue                           # typed: refused, nothing served
            for level, records in got.items():
                written = {r.offset: r for r in expected[level]}
                assert all(written.get(r.offset) == r for r in records), \
                    f"{where}, {level}: altered records served"
                missing = [o for o in written if o >= start and o not in
                           {r.offset for r in records}]
                assert not missing or reported, \
                    f"{where}, {level}: offsets {missing[:5]}... missing without a trace"
            shutil.rmtree(copy)
    assert checked >= FLIPS_PER_FILE * 10
