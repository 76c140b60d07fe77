"""Moving a partition between log directories while it serves (Kafka's KIP-113 future logs):
the files and the crash rules. The driver (``node.mover``) and the two directories
(``LogDir.adopt_future`` / ``LogDir.finish_move_out``) build on this module.

A move of ``<topic>-<partition>`` from directory A (the source, owned by one node) to directory B
(the target, owned by another node on the same host) goes::

    B  mkdir <topic>-<partition>.<uuid>-future, write move-state.json (complete: false)
    B  copy rounds, under move.lock: every segment of A's log, closed segments whole with their
       .index/.timeindex/.txnindex, the active segment's .log by the bytes appended since the
       last round; a segment A dropped (retention) is dropped here too
    A  switch (A's log lock held, so appends wait), under move.lock: the last round, the
       producer-state snapshot at the log end and the active segment's indexes copied, the
       data fsynced, move-state.json rewritten complete (log start offset, recovery point, cleaner
       offset), then A renames <topic>-<partition> to <topic>-<partition>.<uuid>-delete
       ---- the commit point: from here the future log is the partition ----
    B  rename the future to <topic>-<partition>, open it, seed its checkpoints from
       move-state.json, then remove move-state.json and move.lock

Crash rules (``resolve_futures``, run by B's load before anything else; Kafka's
recoverAbandonedFutureLogs): a ``-future`` directory whose move-state says complete while A has
no live ``<topic>-<partition>`` any more is promoted; one still copying (not complete) whose
source still has its live directory is kept for the move to resume (Kafka keeps a ``-future``
log across a restart and its ReplicaAlterLogDirsThread fetches on from the future's high
watermark): the next ``move_in`` of the partition from that source carries on from the segments
the copy recorded as done, instead of copying everything again; one that is complete while its
source still serves (killed between the state and the source's commit) is abandoned (removed),
because A never committed and still holds every record, as is one whose source partition is gone;
one whose source directory cannot be seen at all, or that would collide with a live partition of
B, is left alone and reported, never loaded. ``move.lock`` (a flock, released by the kernel when
its holder dies) makes A's switch and B's decision exclusive, so B never removes a future that A
is committing to. A move that fails while its target runs is abandoned as before.

move-state.json::

    {"version": 1, "topic": str, "partition": int, "source_dir": str, "unique": str,
     "complete": bool, "log_end_offset": int, "log_start_offset": int,
     "recovery_point": int, "cleaner_offset": int | null,
     "copied": {"<base offset>": [bytes, source mtime_ns], ...}}

``copied`` lists the closed segments copied whole and durably (rewritten after every copy round,
once the round's files are fsynced): what a resumed copy keeps. A segment file of the future
that it does not list is removed before a resumed copy (it may be the active segment of then,
since rolled and cleaned, or a segment the source has dropped since).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator, Sequence

from filelock import FileLock, Timeout

from node.errors import MoveAbortedError
from storage import files
from storage.durable import atomic_write, fsync_dir
from storage.errors import CheckpointError, InvalidTopicError
from storage.files import TopicPartition
from storage.log import Log

log = logging.getLogger(__name__)

MOVE_STATE_VERSION = 1
MOVE_LOCK_TIMEOUT_S = 120.0
COPY_CHUNK = 8 << 20
COPIED_SUFFIXES = (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)


@dataclass(frozen=True, slots=True)
class MoveState:
    """What a ``-future`` directory knows of its move (see the module docstring)."""

    topic: str
    partition: int
    source_dir: str
    unique: str
    complete: bool = False
    log_end_offset: int = -1
    log_start_offset: int = 0
    recovery_point: int = 0
    cleaner_offset: int | None = None
    copied: dict[str, list[int]] = field(default_factory=dict)

    def copy_record(self) -> CopyRecord:
        """The ``CopyRecord`` a resumed copy starts from: the closed segments ``copied``."""
        return CopyRecord({int(base): (size, mtime) for base, (size, mtime)
                           in self.copied.items()})

    def with_copied(self, record: CopyRecord) -> MoveState:
        """This state listing the closed segments of ``record`` as ``copied``."""
        return replace(self, copied={str(base): [size, mtime] for base, (size, mtime)
                                     in sorted(record.segments.items()) if mtime is not None})

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def source_partition_dir(self) -> Path:
        return Path(self.source_dir) / files.partition_dir_name(self.topic, self.partition)

    def write(self, directory: Path) -> None:
        """Durably (temp file, fsync, rename, directory fsync) into ``directory``."""
        body = {"version": MOVE_STATE_VERSION, **asdict(self)}
        atomic_write(directory / files.MOVE_STATE_FILE, json.dumps(body).encode())

    @classmethod
    def read(cls, directory: Path) -> MoveState:
        """``FileNotFoundError`` when there is none; ``CheckpointError`` naming the file when it
        does not parse or has another version."""
        path = directory / files.MOVE_STATE_FILE
        raw = path.read_bytes()
        try:
            body = json.loads(raw)
            version = body.pop("version")
            if version != MOVE_STATE_VERSION:
                raise ValueError(f"version {version}, expected {MOVE_STATE_VERSION}")
            state = cls(**body)
            if not isinstance(state.copied, dict) or not all(
                    isinstance(v, list) and len(v) == 2 and all(isinstance(n, int) for n in v)
                    and int(k) >= 0 for k, v in state.copied.items()):
                raise ValueError("'copied' must map base offsets to [bytes, mtime_ns]")
            return state
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise CheckpointError(f"{path}: not a move state: {err}", path=str(path)) from None


class SourceChangedError(MoveAbortedError):
    """A source segment is shorter than the snapshot said: a cleaner swap (or a truncation)
    replaced it after the snapshot. A copy round leaves it to the next round; in the final round
    (under the source's lock, where it cannot happen) it aborts the move."""


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """One segment of the source log as its owner saw it: ``size`` bytes of batches (never the
    preallocated file length), ``mtime_ns`` of its ``.log``, ``closed`` unless it is the active
    segment."""

    base_offset: int
    size: int
    mtime_ns: int
    closed: bool


@dataclass(frozen=True, slots=True)
class SourceSnapshot:
    """The source log at one moment (``LogDirServer.move_source``): where its files are and how
    far each segment reaches."""

    partition_dir: str
    segments: tuple[SourceSegment, ...]
    log_start_offset: int
    log_end_offset: int
    topic_config: dict[str, str] = field(default_factory=dict)   # the topic's overrides

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)


def source_snapshot(lg: Log) -> SourceSnapshot:
    """The snapshot of ``lg``; call it under the log's lock for one consistent with its end."""
    segments = lg.segments()
    last = len(segments) - 1
    found = []
    for i, segment in enumerate(segments):
        try:
            mtime = os.stat(segment.log_path).st_mtime_ns
        except FileNotFoundError:
            continue   # deleted meanwhile by retention: the next round drops it
        found.append(SourceSegment(segment.base_offset, segment.size, mtime, i < last))
    return SourceSnapshot(str(lg.dir), tuple(found), lg.log_start_offset, lg.log_end_offset)


@dataclass
class CopyRecord:
    """What a copy has put in the future directory so far: base offset -> (bytes of the ``.log``
    copied, the source's mtime when the segment was copied closed, else None). Plain values, so
    the target sends it to the source for the last round."""

    segments: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    bytes_copied: int = 0


def copy_round(source_dir: Path, future_dir: Path, segments: Sequence[SourceSegment],
               record: CopyRecord, *, final: bool = False) -> int:
    """Bring ``future_dir`` up to ``segments`` of ``source_dir``; returns the bytes copied.

    A segment gone from the source is dropped here; a closed segment whose ``.log`` changed
    since it was copied (a cleaner swap the pause did not stop) is copied again from its start;
    the active segment grows by what was appended; a segment deleted or replaced after the
    snapshot is left to the next round. Closed segments take their index files whole.
    Every file written is fsynced before it returns (so the final round, under the source's
    lock, syncs only its own few bytes); ``final`` also copies the active segment's
    ``.txnindex``. ``FileNotFoundError`` of a source segment deleted meanwhile is left to
    the next round, except in the final one, where it propagates.
    """
    wanted = {s.base_offset for s in segments}
    for base in [b for b in record.segments if b not in wanted]:
        for suffix in (files.LOG_SUFFIX, *COPIED_SUFFIXES):
            (future_dir / f"{files.offset_name(base)}{suffix}").unlink(missing_ok=True)
        del record.segments[base]
    copied = 0
    for segment in segments:
        base = segment.base_offset
        done, seen_mtime = record.segments.get(base, (0, None))
        if done > segment.size or (seen_mtime is not None and seen_mtime != segment.mtime_ns):
            done = 0                         # replaced in the source: copy it again
        try:
            if done < segment.size or base not in record.segments:
                copied += _copy_range(files.log_file(source_dir, base),
                                      files.log_file(future_dir, base), done, segment.size,
                                      sync=True)
            if segment.closed and (seen_mtime is None or done == 0):
                for suffix in COPIED_SUFFIXES:
                    name = f"{files.offset_name(base)}{suffix}"
                    _copy_whole(source_dir / name, future_dir / name, sync=True)
            elif final:
                name = f"{files.offset_name(base)}{files.TXN_INDEX_SUFFIX}"
                _copy_whole(source_dir / name, future_dir / name, sync=False)
        except (FileNotFoundError, SourceChangedError):
            if final:
                raise
            record.segments.pop(base, None)   # deleted or replaced since the snapshot: the
            continue                          # next round's snapshot copies it afresh
        record.segments[base] = (segment.size, segment.mtime_ns if segment.closed else None)
    record.bytes_copied += copied
    fsync_dir(future_dir)
    return copied


def _copy_range(source: Path, target: Path, start: int, end: int, *, sync: bool) -> int:
    """Copy bytes [start, end) of ``source`` to the same positions of ``target`` and cut
    ``target`` at ``end``."""
    src = os.open(source, os.O_RDONLY)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            position = start
            while position < end:
                count = min(COPY_CHUNK, end - position)
                done = _copy_chunk(src, dst, count, position)
                if not done:
                    raise SourceChangedError(
                        f"{source}: ends at {position}, expected {end} bytes (replaced since "
                        "the snapshot)", path=str(source), position=position,
                        reason="source segment replaced")
                position += done
            os.ftruncate(dst, end)
            if sync:
                os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return end - start


def _copy_chunk(src: int, dst: int, count: int, position: int) -> int:
    """Copy up to ``count`` bytes at ``position`` of one file to the same position of another,
    in the kernel where it can (``copy_file_range``); returns how many (0 at the source's end)."""
    try:
        return os.copy_file_range(src, dst, count, position, position)
    except OSError as err:
        if err.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
    data = os.pread(src, count, position)
    return os.pwrite(dst, data, position) if data else 0


def _copy_whole(source: Path, target: Path, *, sync: bool) -> None:
    """Copy a small file whole (an index); a source without it removes the target's copy."""
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        return
    atomic_write(target, data, sync=sync)


def copy_active_indexes(lg: Log, future_dir: Path) -> None:
    """Copy the entries of the active segment's offset and time indexes (call under the log's
    lock, after the final round: they then describe exactly the copied bytes), so the promoted
    log need not rebuild them by reading the whole active segment. Not synced: an index lost
    or torn by a power failure is found and rebuilt at the next load."""
    segment = lg.active_segment
    for index in (segment.offset_index, segment.time_index):
        if not index.exists():
            continue
        with open(index.path, "rb") as f:
            data = f.read(index.size_in_bytes)
        atomic_write(future_dir / index.path.name, data, sync=False)


def copy_producer_snapshot(lg: Log, future_dir: Path) -> None:
    """Snapshot ``lg``'s producer state at its log end (call under its lock) into
    ``future_dir``, so the moved log starts with the same producers, sequences and open
    transactions without replaying anything."""
    written = lg.producer_state.take_snapshot(lg.log_end_offset, sync=False)
    atomic_write(future_dir / written.name, written.read_bytes(), sync=False)


@contextmanager
def move_lock(future_dir: Path, timeout_s: float = MOVE_LOCK_TIMEOUT_S) -> Iterator[None]:
    """The flock of a move (see the module docstring). ``MoveAbortedError`` when the future
    directory is gone (abandoned meanwhile) or the lock is not free within ``timeout_s``."""
    lock = FileLock(str(future_dir / files.MOVE_LOCK_FILE))
    try:
        lock.acquire(timeout=timeout_s)
    except (FileNotFoundError, Timeout) as err:
        raise MoveAbortedError(f"{future_dir}: the move's lock cannot be taken ({err})",
                               path=str(future_dir), reason="future directory gone or busy"
                               ) from None
    try:
        yield
    finally:
        lock.release()


# ---- deciding at load (and after a failure) what a future directory is -----------------------
PROMOTE, ABANDON, KEEP, RESUME = "promote", "abandon", "keep", "resume"


def committed(state: MoveState) -> bool | None:
    """True when the source committed the move (complete, and no live source directory), False
    when it did not, None when the source directory cannot be seen (nothing can be decided)."""
    root = Path(state.source_dir)
    if not root.is_dir():
        return None
    return state.complete and not state.source_partition_dir.exists()


def decide(directory: Path, future: Path, *, resumable: bool = False
           ) -> tuple[str, MoveState | None, str]:
    """(``PROMOTE``/``ABANDON``/``KEEP``/``RESUME``, its state, why) for ``future`` in log
    directory ``directory``; call it holding ``move_lock(future)``. ``RESUME`` (with
    ``resumable``, at load) for a copy in progress whose source still serves the partition;
    without ``resumable`` such a future is abandoned."""
    try:
        state = MoveState.read(future)
    except FileNotFoundError:
        if any(name != files.MOVE_LOCK_FILE for name in os.listdir(future)):
            return KEEP, None, "no move state: not a move of this node's making"
        return ABANDON, None, "no move state: the move stopped before it began"
    except CheckpointError as err:
        return KEEP, None, err.message
    done = committed(state)
    if done is None:
        return KEEP, state, f"its source directory {state.source_dir} cannot be seen"
    live_here = (directory / files.partition_dir_name(state.topic, state.partition)).exists()
    if not done:
        if not state.source_partition_dir.exists():
            return ABANDON, state, f"the source {state.source_partition_dir} is gone"
        if not resumable or state.complete:
            return ABANDON, state, f"the source {state.source_partition_dir} still serves it"
        if live_here:
            return KEEP, state, "a live directory of the same partition is already here"
        return RESUME, state, (f"a copy in progress; the source {state.source_partition_dir} "
                               "still serves it: the next move of the partition resumes it")
    if live_here:
        return KEEP, state, "a live directory of the same partition is already here"
    return PROMOTE, state, "the source committed the move"


def promote(directory: Path, future: Path, state: MoveState) -> Path:
    """Rename ``future`` to the partition's live name (durably); returns the new path. The
    move state stays inside until ``seeded_states``'s caller has used it."""
    live = directory / files.partition_dir_name(state.topic, state.partition)
    os.replace(future, live)
    fsync_dir(directory)
    log.info("moved partition %s-%d promoted in %s (from %s)", state.topic, state.partition,
             directory, state.source_dir)
    return live


def abandon(directory: Path, future: Path) -> None:
    """Remove an uncommitted future directory and everything in it."""
    shutil.rmtree(future, ignore_errors=True)
    fsync_dir(directory)
    log.info("abandoned the move into %s", future)


def settle(directory: Path, future: Path, *, resumable: bool = False
           ) -> tuple[str, MoveState | None, str]:
    """Decide and act on ``future`` under its lock: promote (returning the live path's state),
    abandon, keep, or (with ``resumable``) leave it to resume. A future already gone counts as
    abandoned."""
    try:
        with move_lock(future):
            action, state, why = decide(directory, future, resumable=resumable)
            if action == PROMOTE and state is not None:
                promote(directory, future, state)
            elif action == ABANDON:
                abandon(directory, future)
            return action, state, why
    except MoveAbortedError:
        if future.exists():
            raise
        return ABANDON, None, "the future directory is gone"


def resolve_futures(directory: Path) -> list[tuple[str, str]]:
    """Kafka's recoverAbandonedFutureLogs for one directory, before it loads: settle every
    ``-future`` directory (a copy in progress is left to resume). Returns (name, why) of those
    kept (reported, never loaded); those left to resume are ``resumable_futures``."""
    kept = []
    for name, _parsed in _future_dirs(directory):
        action, _state, why = settle(directory, directory / name, resumable=True)
        log.warning("move leftover %s in %s: %s (%s)", name, directory, action, why)
        if action == KEEP:
            kept.append((name, why))
    return kept


def resumable_futures(directory: Path) -> dict[str, MoveState]:
    """The ``-future`` directories of ``directory`` holding a copy in progress (not complete),
    by name, with their states: what ``resolve_futures`` left to resume. Read-only."""
    found = {}
    for name, parsed in _future_dirs(directory):
        try:
            state = MoveState.read(directory / name)
        except (FileNotFoundError, NotADirectoryError, CheckpointError):
            continue
        if not state.complete and state.topic_partition == parsed.topic_partition:
            found[name] = state
    return found


def _future_dirs(directory: Path) -> list[tuple[str, files.PartitionDir]]:
    """The ``-future`` directories of ``directory``, by name, with their parsed names."""
    found = []
    for name in sorted(os.listdir(directory)):
        try:
            parsed = files.parse_partition_dir(name)
        except InvalidTopicError:
            continue
        if parsed.is_future and (directory / name).is_dir():
            found.append((name, parsed))
    return found


def prune_unrecorded(future: Path, record: CopyRecord) -> None:
    """Remove the segment files of ``future`` whose base offset ``record`` does not list
    (before a resumed copy: see the module docstring), and the producer snapshots (the switch
    writes the one the promoted log needs)."""
    for name in os.listdir(future):
        if not files.is_segment_file(name):
            continue
        base = files.offset_from_file_name(name)
        if base not in record.segments or name.endswith(files.SNAPSHOT_SUFFIX):
            (future / name).unlink(missing_ok=True)
    fsync_dir(future)


def seeded_states(directory: Path) -> dict[TopicPartition, MoveState]:
    """The move states still inside live partition directories (promoted, not yet settled):
    their log start offset, recovery point and cleaner offset seed the directory's
    checkpoints."""
    found = {}
    for name in os.listdir(directory):
        state_file = directory / name / files.MOVE_STATE_FILE
        if not state_file.is_file():
            continue
        try:
            parsed = files.parse_partition_dir(name)
            state = MoveState.read(directory / name)
        except (InvalidTopicError, CheckpointError, OSError) as err:
            log.warning("ignoring %s: %s", state_file, err)
            continue
        if not parsed.kind and state.complete:
            found[parsed.topic_partition] = state
    return found


def clear_state(partition_dir: Path) -> None:
    """Remove a settled move's files from a live partition directory."""
    for name in (files.MOVE_STATE_FILE, files.MOVE_LOCK_FILE):
        (partition_dir / name).unlink(missing_ok=True)


def complete_state(state: MoveState, lg: Log, cleaner_offset: int | None) -> MoveState:
    """``state`` marked complete with ``lg``'s offsets (call under its lock, after the final
    copy round fsynced every file: the copy is durable up to the log end, so that is its
    recovery point and the promoted log recovers nothing)."""
    return replace(state, complete=True, log_end_offset=lg.log_end_offset,
                   log_start_offset=lg.log_start_offset, recovery_point=lg.log_end_offset,
                   cleaner_offset=cleaner_offset)
