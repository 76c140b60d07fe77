"""Keep what recovery cuts (issue 12, beyond Kafka): a truncating recovery moves the damaged tail
and every later segment into ``<partition>/quarantine/`` with their exact bytes, reports them in
``LoadResult.quarantined``, and deletes nothing that passed its CRC. Kafka (LogLoader.recoverLog)
deletes every segment after the truncated one."""

from __future__ import annotations

from pathlib import Path

from storage import files
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.quarantine import QuarantinedFile, list_quarantine
from storage.records import scan_batches
from storage.scheduler import FakeScheduler
from tests.storage.helpers import batch_of, rec, values


def three_segments(path: Path, clock: FakeClock) -> LogConfig:
    """30 one-record batches, 10 per segment (bases 0, 10, 20), flushed and closed."""
    config = LogConfig(segment_bytes=len(batch_of(0)) * 10, index_interval_bytes=1)
    log = Log.open(path, config, recovery_point=0, clock=clock, scheduler=FakeScheduler(clock))
    for i in range(30):
        log.append([rec(i, ts=1000 + i)])
    assert log.segment_base_offsets() == [0, 10, 20]
    log.flush()
    log.close()
    return config


def test_recovery_quarantines_the_cut_tail_and_every_later_segment_with_their_exact_bytes(
        tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    config = three_segments(path, clock)
    first = files.log_file(path, 0)
    data = bytearray(first.read_bytes())
    bad = int(scan_batches(bytes(data)).positions[5])        # the 6th of 10 batches
    data[bad + 40] ^= 0x01                                   # inside the CRC'd part
    first.write_bytes(bytes(data))
    later = {base: files.log_file(path, base).read_bytes() for base in (10, 20)}
    clock.advance(5)
    stamp = clock.milliseconds()

    log = Log.open(path, config, recovery_point=0, clock=clock, scheduler=FakeScheduler(clock))
    kept = log.load_result.quarantined
    assert values(log.read()) == list(range(5))              # every batch before the flip
    assert log.segment_base_offsets() == [0]
    log.close()

    folder = path / files.QUARANTINE_DIR
    assert [(Path(k.path), k.original, k.position, k.bytes) for k in kept] == [
        (folder / f"{stamp}-00000000000000000000.log.{bad}", first.name, bad, len(data) - bad),
        (folder / f"{stamp}-00000000000000000010.log.0", "00000000000000000010.log", 0,
         len(later[10])),
        (folder / f"{stamp}-00000000000000000020.log.0", "00000000000000000020.log", 0,
         len(later[20])),
    ]
    assert Path(kept[0].path).read_bytes() == bytes(data[bad:])
    assert Path(kept[1].path).read_bytes() == later[10]
    assert Path(kept[2].path).read_bytes() == later[20]
    assert "recovery truncated them" in kept[0].reason
    assert all("follows 00000000000000000000.log, truncated" in k.reason for k in kept[1:])
    assert list_quarantine(path) == [QuarantinedFile(k.path, k.original, k.position, k.bytes)
                                     for k in kept]
    # every batch that passed its CRC is somewhere: in the log or in quarantine
    kept_batches = sum(len(scan_batches(Path(k.path).read_bytes())) for k in kept[1:])
    assert kept_batches == 20

    # the loader never looks into quarantine: a second unclean open finds nothing to cut
    again = Log.open(path, config, recovery_point=0, clock=clock, scheduler=FakeScheduler(clock))
    assert again.load_result.quarantined == () and values(again.read()) == list(range(5))
    again.append([rec(5)])
    again.close()
    assert len(list_quarantine(path)) == 3


def test_a_torn_tail_of_the_active_segment_is_kept_in_quarantine(
        tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    config = three_segments(path, clock)
    active = files.log_file(path, 20)
    torn = batch_of(30, base_offset=30)[:-7]
    with open(active, "ab") as f:
        f.write(torn)
    log = Log.open(path, config, recovery_point=20, clock=clock, scheduler=FakeScheduler(clock))
    [kept] = log.load_result.quarantined
    assert values(log.read()) == list(range(30))
    log.close()
    assert (kept.original, kept.bytes) == (active.name, len(torn))
    assert Path(kept.path).read_bytes() == torn
    assert log.load_result.truncated_bytes == len(torn)


def test_a_recovery_that_cuts_nothing_quarantines_nothing(tmp_path: Path,
                                                          clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    config = three_segments(path, clock)
    log = Log.open(path, config, recovery_point=0, clock=clock, scheduler=FakeScheduler(clock))
    assert log.load_result.quarantined == () and log.load_result.recovered_segments == 3
    log.close()
    assert not (path / files.QUARANTINE_DIR).exists()


def test_what_the_split_of_an_overflowed_segment_leaves_out_is_kept(
        tmp_path: Path, clock: FakeClock) -> None:
    """An old broker's segment whose offsets overflow its base is split; the batches from the
    first whose offsets do not increase are left out of the split (recovery truncates them) and
    were deleted with the original segment. They are kept now."""
    from storage.records import build_batch

    path = tmp_path / "t-0"
    path.mkdir()
    far = 2**31 + 10
    # the batch after the overflowing one follows it, vouching for its offsets
    kept = [build_batch([rec(0)], base_offset=0), build_batch([rec(1)], base_offset=far),
            build_batch([rec(3)], base_offset=far + 1)]
    stale = build_batch([rec(2)], base_offset=5)              # below the previous batch
    files.log_file(path, 0).write_bytes(b"".join(kept) + stale)
    log = Log.open(path, LogConfig(), clock=clock, scheduler=FakeScheduler(clock))
    assert [(r.offset, int(r.value)) for r in log.read()] == [(0, 0), (far, 1), (far + 1, 3)]
    [held] = log.load_result.quarantined
    log.close()
    assert (held.original, held.position, held.bytes) == \
        ("00000000000000000000.log", sum(len(b) for b in kept), len(stale))
    assert Path(held.path).read_bytes() == stale
    assert [q.path for q in list_quarantine(path)] == [held.path]
    assert sorted(p.name for p in (path / files.QUARANTINE_DIR).iterdir()) == \
        [Path(held.path).name]                                # the temporary second name is gone
