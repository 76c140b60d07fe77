"""A segment's files by name (Kafka's ``LogSegment.open``, ``changeFileSuffixes``,
``updateParentDir``, ``close`` and ``deleteIfExists``): creating its ``.log``, renaming its four
files to another suffix or directory, closing and deleting them.

A segment's files are ``<base>.log``, ``<base>.index``, ``<base>.timeindex`` and
``<base>.txnindex`` (``storage.files`` names them), each with the segment's temporary suffix
(``.cleaned``, ``.swap``, ``.deleted``) when it has one. These functions are the bodies of the
``LogSegment`` methods of those names; the segment owns its descriptors and indexes, and these
close or reopen them around a rename.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from storage import files
from storage.config import LogConfig
from storage.segment_indexes import append_final_time_entry, close_indexes
from storage.segment_io import HANDLES, truncate_to_size

if TYPE_CHECKING:
    from storage.segment import LogSegment


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> tuple[Path, ...]:
    """The ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` of one segment."""
    return (files.log_file(directory, base_offset, suffix),
            files.index_file(directory, base_offset, suffix),
            files.time_index_file(directory, base_offset, suffix),
            files.txn_index_file(directory, base_offset, suffix))


def create_log_file(directory: Path, base_offset: int, config: LogConfig, suffix: str) -> None:
    """Create the empty ``.log`` of a new segment; an existing file of that name is an error
    (``FileExistsError``). With ``preallocate`` (and no suffix) the file is ``segment.bytes``
    long at once."""
    fd = os.open(files.log_file(directory, base_offset, suffix),
                 os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        if config.preallocate and not suffix:
            os.ftruncate(fd, config.segment_bytes)
    finally:
        os.close(fd)


def remove_segment_files(directory: Path, base_offset: int, suffix: str) -> None:
    """Remove whatever files of that segment exist (stale cleaner output)."""
    for path in segment_paths(directory, base_offset, suffix):
        path.unlink(missing_ok=True)


def change_file_suffixes(segment: LogSegment, new_suffix: str) -> None:
    """``LogSegment.change_file_suffixes``: rename its four files to ``new_suffix``."""
    segment._close_writer()
    HANDLES.forget(segment.file_key)
    log_path, index, time_index, txn_index = segment_paths(segment.dir, segment.base_offset,
                                                           new_suffix)
    os.replace(segment.log_path, log_path)
    segment.log_path = log_path
    segment.offset_index.rename_to(index)
    segment.time_index.rename_to(time_index)
    segment.txn_index.rename_to(txn_index)
    segment.suffix = new_suffix


def follow_dir(segment: LogSegment, directory: Path) -> None:
    """``LogSegment.rename_dir``: point the segment at its files in ``directory``."""
    segment._close_writer()
    HANDLES.forget(segment.file_key)
    segment.release()
    segment.dir = directory
    segment.log_path = files.log_file(directory, segment.base_offset, segment.suffix)
    segment._open_indexes(writable=False)
    segment.txn_index.update_parent_dir(directory)


def close(segment: LogSegment) -> None:
    """``LogSegment.close`` (Kafka's ``LogSegment.close``): a segment still writing gets its
    final time-index entry and, when preallocated, its ``.log`` cut to its batches; then the
    writer, the cached read descriptor and the index pair are closed."""
    if segment._write_fd is not None:
        append_final_time_entry(segment)
        if segment.config.preallocate:
            truncate_to_size(segment._write_fd, segment._size)
    segment._close_writer()
    HANDLES.forget(segment.file_key)
    close_indexes(segment)


def delete_files(segment: LogSegment) -> None:
    """``LogSegment.delete_files``: close the segment and remove its files (those missing are
    skipped)."""
    segment.close()
    for path in (segment.log_path, segment.offset_index.path, segment.time_index.path,
                 segment.txn_index.path):
        path.unlink(missing_ok=True)
