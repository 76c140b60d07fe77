"""The fault hooks of ``ops.drills.inject`` on a real log, without Ray: an armed hook must keep
the signature of what it wraps, so the code under test runs as it does unarmed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ops.drills import inject
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record


def test_arm_swap_forwards_the_expected_identities_the_cleaner_passes(tmp_path: Path) -> None:
    """``Cleaner`` calls ``log.replace_segments(new, old, expected)``; the armed hook used to take
    only (new, old) and failed with TypeError, so no swap drill reached its fsync. Armed to pause
    at the second directory fsync (``release`` already there, so it goes on at once), the swap
    with ``expected`` completes and the hook fires."""
    clock = FakeClock(1_000_000)
    lg = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)
    lg.append([Record(offset=0, timestamp=clock.milliseconds(), key=b"k", value=b"v1")])
    lg.roll()
    old = lg.segments()[0]
    expected = [old.identity]
    cleaned = lg.create_cleaned_segment(old.base_offset)
    data = old.read_bytes(0, old.size)
    cleaned.append(old.read_next_offset() - 1, old.max_timestamp_so_far,
                   old.offset_of_max_timestamp_so_far, [data])
    cleaned.on_become_inactive()
    flags = tmp_path / "flags"
    flags.mkdir()
    (flags / "release").touch()
    node = SimpleNamespace(log_dir=SimpleNamespace(log=lambda topic, partition: lg))

    assert inject.arm_swap(node, "t", 0, 2, "pause", str(flags)) == str(lg.dir)
    lg.replace_segments([cleaned], [old], expected)

    assert (flags / "paused").exists()
    assert [s.base_offset for s in lg.segments()] == [0, 1]
    assert [r.value for r in lg.read()] == [b"v1"]
    lg.close()
