"""A cleaner working on a read-only ``LogView`` (as a cleaner worker in another process does) and
handing each cleaned segment to the owning ``Log`` for the swap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.records import Record
from storage.scheduler import FakeScheduler
from storage.view import LogView


def owner_log(tmp_path: Path, clock: FakeClock) -> Log:
    log = Log.open(tmp_path / "v-0", LogConfig(segment_bytes=2048, cleanup_policy="compact"),
                   recovery_point=0, had_clean_shutdown=True, clock=clock,
                   scheduler=FakeScheduler(clock))
    for i in range(300):
        log.append([Record(key=b"%d" % (i % 17), value=b"%d" % i, timestamp=i)])
    log.roll()
    return log


def test_view_clean_is_swapped_in_by_the_owner(tmp_path: Path, clock: FakeClock) -> None:
    log = owner_log(tmp_path, clock)
    end = log.active_segment.base_offset
    view = LogView.open(log.dir, log.config, log.replace_cleaned, clock=clock)
    result = Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20), clock=clock).clean(
        view, 0, clock.milliseconds(), first_uncleanable_offset=end)
    assert result.next_dirty_offset == end
    latest = {r.key: r.value for r in log.read()}
    assert latest == {b"%d" % k: b"%d" % max(i for i in range(300) if i % 17 == k)
                      for k in range(17)}
    assert len(list(log.read())) == 17
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_swap_is_refused_when_the_log_changed(tmp_path: Path, clock: FakeClock) -> None:
    log = owner_log(tmp_path, clock)
    end = log.active_segment.base_offset
    view = LogView.open(log.dir, log.config, log.replace_cleaned, clock=clock)
    log.truncate_to(5)   # deletes segments the view still lists
    before = [(r.offset, r.value) for r in log.read()]
    with pytest.raises((StorageError, FileNotFoundError)):
        Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20), clock=clock).clean(
            view, 0, clock.milliseconds(), first_uncleanable_offset=end)
    assert [(r.offset, r.value) for r in log.read()] == before
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_replace_cleaned_refuses_segments_that_are_gone(tmp_path: Path, clock: FakeClock) -> None:
    log = owner_log(tmp_path, clock)
    bases = log.segment_base_offsets()
    cleaned = log.create_cleaned_segment(bases[0])
    cleaned.close()
    with pytest.raises(StorageError, match="changed meanwhile"):
        log.replace_cleaned(bases[0], [bases[0], 99_999])
    assert log.segment_base_offsets() == bases
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
