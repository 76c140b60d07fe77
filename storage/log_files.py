"""A log's files as a whole: deleting segment files, renaming and deleting the partition directory
(Kafka's ``LocalLog.deleteSegmentFiles``, ``renameDir`` and ``deleteEmptyDir``), for ``LocalLog``.

A segment leaving the log (retention, truncation, a swap) is renamed ``.deleted`` at once, so a
reader that opens it by name fails and retries, and a restart removes it (loader pass 1); its files
are removed after ``file.delete.delay.ms`` by the scheduler, or at once with a delay of 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from storage import files
from storage.durable import fsync_dir
from storage.segment import LogSegment

Schedule = Callable[[str, Callable[[], object], int], None]   # (task name, task, delay ms)


def delete_segment_files(segments: Sequence[LogSegment], delay_ms: int, schedule: Schedule, *,
                         sync: bool = False) -> None:
    """Rename every file of ``segments`` to ``.deleted`` now; remove them after ``delay_ms``
    through ``schedule``, or at once with ``sync`` or a delay of 0."""
    if not segments:
        return
    for segment in segments:
        segment.close()
        segment.change_file_suffixes("", files.DELETED_SUFFIX)
    doomed = list(segments)

    def delete() -> None:
        for segment in doomed:
            segment.delete_files()
    if sync or delay_ms == 0:
        delete()
    else:
        schedule("delete-file", delete, delay_ms)


def rename_partition_dir(directory: Path, name: str, segments: Sequence[LogSegment], *,
                         sync: bool) -> Path:
    """Close ``segments``, rename ``directory`` to ``name`` beside it and point the segments at
    the new path, which is returned. ``sync`` fsyncs the parent directory."""
    for segment in segments:
        segment.close()
    target = directory.parent / name
    os.replace(directory, target)
    if sync:
        fsync_dir(directory.parent)
    for segment in segments:
        segment.rename_dir(target)
    return target


def delete_partition_dir(directory: Path) -> None:
    """Delete every file of ``directory``, its folders (quarantine) and the directory itself
    (the caller closed its segments)."""
    for path in sorted(directory.iterdir(), reverse=True):
        if path.is_dir():
            for sub in path.iterdir():
                sub.unlink()
            path.rmdir()
        else:
            path.unlink()
    directory.rmdir()
