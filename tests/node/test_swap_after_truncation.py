"""A clean that finishes after an unpaused truncation (the coordinator unreachable, so the node
truncated without pausing cleaning) is refused at the swap by the segments' identities, and the
data written after the truncation stays."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from cleaner.cleaner import Cleaner
from cleaner.config import CleanerConfig
from node.server import LogDirServer
from storage.errors import LogCleaningAbortedError, SegmentsChangedError
from storage.records import Record, build_batch
from storage.segment import SegmentIdentity
from storage.view import LogView

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "800", "file.delete.delay.ms": "0"}


def append(server: LogDirServer, first: int, prefix: bytes) -> None:
    for i in range(first, 30):
        server.append_batch("c", 0, build_batch(
            [Record(b"k%02d" % (i % 20), prefix + b"%03d" % i, 1)]))
    server.roll("c", 0)


def test_a_swap_after_an_unpaused_truncation_is_refused_and_new_data_stays(
        tmp_path: Path) -> None:
    server = LogDirServer(tmp_path / "d", start_tasks=False)     # no coordinator: no pause
    server.create_partition("c", 0, COMPACT)
    append(server, 0, b"v")
    log = server.log_dir.log("c", 0)
    assert log.segment_base_offsets() == [0, 10, 20, 30]
    sizes = [s.size for s in log.segments()]
    refused: list[BaseException] = []

    def swap(base: int, old: list[SegmentIdentity]) -> None:
        if not refused:
            server.truncate_to("c", 0, 5)          # a follower truncates, then refetches
            append(server, 5, b"w")
            assert [s.size for s in log.segments()] == sizes
        try:
            server.swap_cleaned("c", 0, base, old)
        except SegmentsChangedError as err:      # as Ray would carry it to the cleaner
            refused.append(err)
            raise pickle.loads(pickle.dumps(err)) from None

    view = LogView.open(log.dir, log.config, swap)
    with pytest.raises(SegmentsChangedError) as caught:
        Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)).clean(
            view, 0, first_uncleanable_offset=30)
    view.close()
    assert isinstance(caught.value, LogCleaningAbortedError)   # abandoned, not a failure
    assert (caught.value.partition, caught.value.offset, caught.value.changed) == ("c-0", 0, [0])
    values = [(r.offset, r.value) for r in server.log_dir.log("c", 0).read()]
    assert values == [(i, (b"v" if i < 5 else b"w") + b"%03d" % i) for i in range(30)]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    server.close()
