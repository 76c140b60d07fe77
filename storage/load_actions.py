"""What a load does to a partition directory, and the directory as the load sees it.

Owns the ``LoadAction`` kinds, the ``LoadAction`` record, the ``LoadResult`` of a load, and
``LoadActions``: the log of actions every loader pass writes to, which also performs the removals
and swap renames of a real load and, in a dry run (``strata recover``), only remembers them, so
that later passes see the directory as a real load would have left it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from storage import files
from storage.quarantine import QuarantinedFile
from storage.segment import LogSegment

# the kinds of LoadAction
DELETE_TEMP = "delete-temp"                 # pass 1: a *.deleted, *.cleaned or unfinished *.swap
QUARANTINE_SWAP = "quarantine-swap"         # pass 2: a swap file not fit to complete
DELETE_SWAPPED = "delete-swapped"           # pass 2: a segment file a finished swap replaces
COMPLETE_SWAP = "complete-swap"             # pass 3: a finished swap renamed to its final name
DELETE_ORPHAN_INDEX = "delete-orphan-index"  # pass 4: an index without its .log
REBUILD_INDEXES = "rebuild-indexes"         # pass 4: missing or doubtful indexes
RECOVER_SEGMENT = "recover-segment"         # passes 4, 5: every batch re-validated
TRUNCATE = "truncate"                       # a segment cut at ``position`` (tail to quarantine)
SPLIT = "split"                             # a segment whose offsets overflow its base
QUARANTINE_SEGMENT = "quarantine-segment"   # a segment after a truncated one, moved whole
CREATE_SEGMENT = "create-segment"           # pass 6: the first segment of an empty directory


@dataclass(frozen=True, slots=True)
class LoadAction:
    """One thing the loader did (or, in a dry run, would do) to ``path``: a ``kind`` above,
    ``position`` the byte of ``path`` it starts at (a truncation, a split), ``bytes`` how many
    bytes it concerns (removed, cut or moved), ``reason`` in words."""

    kind: str
    path: Path
    reason: str
    position: int | None = None
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What the loader found and did."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    truncated_bytes: int
    recovered_segments: int
    rebuilt_indexes: int
    deleted_temp_files: int
    completed_swaps: int
    clean_shutdown: bool = False   # loaded after a clean shutdown: nothing was re-validated
    quarantined: tuple[QuarantinedFile, ...] = ()   # what recovery cut, kept in quarantine/
    actions: tuple[LoadAction, ...] = ()    # what it did (a dry run: would do), in order
    dry_run: bool = False                   # nothing was changed; ``segments`` is empty


class LoadActions:
    """The actions of one load of ``directory``, in order, and the directory as the load sees it.

    A real load removes and renames files through ``unlink`` and ``rename_swap``; a dry run
    changes nothing and remembers the names a real load would have removed (``gone``) and the
    final names of the swaps it would have renamed (``renamed``), so ``listdir`` and
    ``segment_suffix`` answer as after a real load. Single use; not thread-safe."""

    def __init__(self, directory: Path, *, dry_run: bool) -> None:
        self.dir = directory
        self.dry_run = dry_run
        self.actions: list[LoadAction] = []
        self.deleted_temp = 0
        self.gone: set[str] = set()          # dry run: names a real load would have removed
        self.renamed: dict[str, str] = {}    # dry run: final name -> the swap file holding it

    def act(self, kind: str, path: Path, reason: str, position: int | None = None,
            size: int = 0) -> None:
        """Record one action."""
        if kind != COMPLETE_SWAP and path.name.endswith(files.SWAP_SUFFIX) and \
                files.log_file(self.dir, files.offset_from_file_name(path.name)).name \
                in self.renamed:
            path = files.strip_temp_suffix(path)   # a dry run names a swapped-in segment's
            #                                        files as a real load does
        self.actions.append(LoadAction(kind, path, reason, position, size))

    def listdir(self) -> list[str]:
        """The directory's names as a load would see them at this point (a dry run: minus what
        it would have removed, plus the final names of swaps it would have renamed)."""
        names = [n for n in os.listdir(self.dir) if n not in self.gone]
        return names + [n for n in self.renamed if n not in names]

    def segment_suffix(self, base: int) -> str:
        """The suffix of the ``.log`` of the segment at ``base`` (a dry run: ``.swap`` for a swap
        file a real load would have renamed)."""
        name = f"{files.offset_name(base)}{files.LOG_SUFFIX}"
        return files.SWAP_SUFFIX if name in self.renamed else ""

    def unlink(self, path: Path, kind: str = DELETE_TEMP, reason: str = "") -> None:
        """Remove ``path`` (a dry run: remember it gone) and record it; a missing file is
        skipped."""
        if self.dry_run:
            if path.name in self.gone or not path.exists():
                return
            self.act(kind, path, reason, None, path.stat().st_size)
            self.gone.add(path.name)
            self.deleted_temp += 1
            return
        try:
            size = path.stat().st_size
            path.unlink()
            self.act(kind, path, reason, None, size)
            self.deleted_temp += 1
        except FileNotFoundError:
            pass

    def rename_swap(self, path: Path, target: Path) -> None:
        """Rename the finished swap ``path`` to its final name ``target`` and record it."""
        self.act(COMPLETE_SWAP, path, f"a finished swap; renamed to {target.name}")
        if self.dry_run:
            self.renamed[target.name] = path.name
            self.gone.add(path.name)
        else:
            os.replace(path, target)
