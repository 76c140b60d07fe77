"""The owner's half of cleaning done by another process, as plain functions over a node's
``LogDir``: snapshots of the compacted logs for a cleaner, the swap of a cleaned segment into its
log, removal of the ``.cleaned`` files a dead cleaner left, and retention of compacted logs run
for the cleaner manager. ``LogDirServer`` documents each call; the cleaner checkpoint itself is
``LogDir``'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from node.logdir import LogDir
from node.snapshot import LogSnapshot, snapshot_log
from storage import files
from storage.errors import StorageError
from storage.segment import SegmentIdentity

log = logging.getLogger(__name__)


def cleaning_snapshots(d: LogDir) -> list[LogSnapshot]:
    return [snapshot_log(lg) for lg in d.logs().values() if lg.config.compact]


def swap_cleaned(d: LogDir, topic: str, partition: int, cleaned_base: int,
                 old_bases: list[int] | list[SegmentIdentity]) -> None:
    target = d.log(topic, partition)
    if not files.log_file(target.dir, cleaned_base, files.CLEANED_SUFFIX).exists():
        raise StorageError(f"{target.name}: no cleaned segment {cleaned_base} to swap in",
                           partition=target.name, offset=cleaned_base)
    target.replace_cleaned(cleaned_base, old_bases)


def remove_cleaned_files(d: LogDir, topic: str | None, partition: int | None) -> int:
    logs = d.logs()
    targets = [lg for (t, p), lg in logs.items()
               if topic is None or (t == topic and (partition is None or p == partition))]
    removed = 0
    for target in targets:
        for name in os.listdir(target.dir):
            if name.endswith(files.CLEANED_SUFFIX):
                (target.dir / name).unlink(missing_ok=True)
                removed += 1
    if removed:
        log.info("removed %d stale .cleaned files in %s", removed, d.path)
    return removed


def delete_old_segments(d: LogDir, partitions: Iterable[tuple[str, int]]) -> int:
    deleted = 0
    for topic, partition in partitions:
        target = d.get_log(topic, partition)
        if target is not None:
            deleted += target.delete_old_segments()
    return deleted


__all__ = ["cleaning_snapshots", "delete_old_segments", "remove_cleaned_files", "swap_cleaned"]
