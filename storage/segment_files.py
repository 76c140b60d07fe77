"""A segment's files by name: the ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` of one
segment (``storage.files`` names them), each with the segment's temporary suffix (``.cleaned``,
``.swap``, ``.deleted``) when it has one, and the removal of stale ones.

Renaming, closing and deleting the files of a live segment is the segment's own
(``LogSegment.change_file_suffixes``, ``rename_dir``, ``close``, ``delete_files``).
"""

from __future__ import annotations

from pathlib import Path

from storage import files


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> tuple[Path, ...]:
    """The ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` of one segment."""
    return (files.log_file(directory, base_offset, suffix),
            files.index_file(directory, base_offset, suffix),
            files.time_index_file(directory, base_offset, suffix),
            files.txn_index_file(directory, base_offset, suffix))


def remove_segment_files(directory: Path, base_offset: int, suffix: str) -> None:
    """Remove whatever files of that segment exist (stale cleaner output)."""
    for path in segment_paths(directory, base_offset, suffix):
        path.unlink(missing_ok=True)
