"""The two ends of a partition move between log directories (``node.move`` has the files and
the crash rules): ``switch_out`` runs in the source's node, ``Mover.move_in`` in the target's.

The target drives (Kafka's ReplicaAlterLogDirsThread lives with the future log): it checks the
move can be made, creates the future directory, pauses cleaning of the partition for the whole
move (``pause``, through the coordinator in a cluster), copies rounds from the source's files
until a round copies less than ``SWITCH_BYTES``, asks the source to switch, and promotes the
future. Any failure settles the future under its lock: promoted if the source committed,
removed otherwise (``MoveAbortedError``; the source serves on). A target that fails (its disk)
or is killed leaves the future on that disk, settled when it loads again: a copy in progress is
kept there, and the next ``move_in`` of the partition from the same source resumes it from the
segments its move state lists as copied (as Kafka's ReplicaAlterLogDirsThread resumes a future
log from its high watermark after a restart).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from node.errors import MoveAbortedError, MoveRefusedError
from node.logdir import LogDir
from node.move import (CopyRecord, MoveState, SourceSnapshot, complete_state,
                       copy_active_indexes, copy_producer_snapshot, copy_round, move_lock,
                       prune_unrecorded, source_snapshot)
from node.stats import disk_usage
from storage import files, kernels
from storage.errors import LogDirOfflineError, StorageError
from storage.files import TopicPartition
from storage.log import Log

log = logging.getLogger(__name__)

SWITCH_BYTES = 1 << 20            # a round copying less than this is followed by the switch
MAX_ROUNDS = 50                   # then switch anyway: the switch copies what is left, held
MOVE_RESERVE_FRACTION = 0.02      # a move must leave this share of the target file system free
INTERRUPTED = "interrupted"       # the phase of a copy a restart interrupted, kept to resume


@dataclass(frozen=True, slots=True)
class SwitchResult:
    """What the source's switch did: the completed move state and how long appends were held."""

    state: MoveState
    held_ms: float


@dataclass(frozen=True, slots=True)
class MoveResult:
    topic: str
    partition: int
    source_dir: str
    target_dir: str
    log_end_offset: int
    bytes_copied: int
    rounds: int
    held_ms: float            # appends held by the source during the switch (-1: unknown)
    switch_ms: float          # from asking the source to switch to serving here (-1: unknown)
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class MoveStatus:
    """A move in progress, as ``move_status`` lists it (Kafka's DescribeLogDirs future replica:
    ``offset_lag`` is the source's log end minus what the future log holds)."""

    topic: str
    partition: int
    source_dir: str
    target_dir: str
    future_dir: str
    phase: str                  # copying | switching | interrupted (kept to resume)
    bytes_copied: int
    bytes_total: int
    source_log_end_offset: int
    copied_log_end_offset: int
    offset_lag: int
    started_ms: float

    @property
    def running(self) -> bool:
        """True for a move running now (copying or switching), False for a copy a restart
        interrupted, kept to resume."""
        return self.phase != INTERRUPTED


class MoveSource(Protocol):
    """The source node as the target sees it (``LogDirServer`` is one)."""

    def move_source(self, topic: str, partition: int) -> SourceSnapshot: ...

    def move_switch_out(self, topic: str, partition: int, future_dir: str, unique: str,
                        target_dir: str, record: CopyRecord) -> SwitchResult: ...


def source_snapshot_of(d: LogDir, topic: str, partition: int) -> SourceSnapshot:
    """The source end's first call: the partition's files and sizes. Refuses
    (``MoveRefusedError``) a partition being deleted; ``PartitionMovedError`` or
    ``UnknownPartitionError`` when it is not here."""
    if d.being_deleted(topic, partition):
        raise MoveRefusedError(f"partition {topic}-{partition} of {d.path} is being deleted",
                               topic=topic, partition=partition, reason="being-deleted")
    lg = d.log(topic, partition)
    with lg.appends_held():
        return source_snapshot(lg)


def switch_out(d: LogDir, topic: str, partition: int, future_dir: Path, unique: str,
               target_dir: str, record: CopyRecord) -> SwitchResult:
    """The source end's switch (see ``node.move``): with cleaning paused, the move's lock taken
    and appends held, the last copy round, the producer snapshot, the complete move state, then
    the commit (``-delete`` rename) and ``LogDir.finish_move_out``. ``MoveAbortedError`` when the
    future is gone or belongs to another move; the log then stays here, untouched."""
    tp = TopicPartition(topic, partition)
    lg = d.log(topic, partition)
    with d.pause_cleaning(tp), move_lock(future_dir):
        try:
            state = MoveState.read(future_dir)
        except FileNotFoundError:
            raise MoveAbortedError(f"{future_dir} has no move state: abandoned", topic=topic,
                                   partition=partition, reason="future abandoned") from None
        if (state.unique != unique or state.complete or state.topic_partition != tp
                or Path(state.source_dir) != d.path):
            raise MoveAbortedError(f"{future_dir} belongs to another move ({state})",
                                   topic=topic, partition=partition, reason="not this move")
        cleaner_offset = d.cleaner_offset(tp)   # cleaning is paused: it stays as read
        with lg.appends_held():
            started = time.perf_counter()     # appends wait from here (not for our turn)
            if lg.is_closed:
                raise MoveAbortedError(f"{lg.dir} was closed meanwhile", topic=topic,
                                       partition=partition, reason="source log closed")
            snapshot = source_snapshot(lg)
            copy_round(lg.dir, future_dir, snapshot.segments, record, final=True)
            copy_active_indexes(lg, future_dir)
            copy_producer_snapshot(lg, future_dir)
            state = complete_state(state, lg, cleaner_offset)
            state.write(future_dir)
            lg.rename_dir(files.delete_dir_name(topic, partition, unique))   # the commit
        held_ms = (time.perf_counter() - started) * 1000
        d.finish_move_out(tp, lg, target_dir)
    return SwitchResult(state, held_ms)


class Mover:
    """The moves into one directory. Thread-safe: ``move_in`` runs on the caller's thread (one
    move per partition at a time), ``status`` from any thread."""

    def __init__(self, log_dir: Callable[[], LogDir],
                 pause: Callable[[TopicPartition], AbstractContextManager[object]] | None = None,
                 adopt_config: Callable[[str, dict[str, str]], None] | None = None) -> None:
        self._log_dir = log_dir
        self._pause = pause or (lambda _tp: nullcontext())
        self._adopt_config = adopt_config or (lambda _topic, _config: None)
        self._lock = threading.Lock()
        self._moves: dict[TopicPartition, dict[str, object]] = {}

    def moving_in(self, topic: str, partition: int) -> bool:
        """True while a move of ``topic``-``partition`` into this directory runs."""
        with self._lock:
            return TopicPartition(topic, partition) in self._moves

    def status(self) -> list[MoveStatus]:
        with self._lock:
            return [MoveStatus(**entry) for _, entry in sorted(     # type: ignore[arg-type]
                self._moves.items(), key=lambda item: (item[0].topic, item[0].partition))
                if entry]     # an entry is empty until the move's first step publishes it

    def interrupted(self, d: LogDir) -> list[MoveStatus]:
        """The copies into ``d`` a restart interrupted and no ``move_in`` runs now (phase
        ``interrupted``, ``bytes_copied`` what a resumed copy keeps; the figures that need the
        source are -1)."""
        with self._lock:
            running = set(self._moves)
        return [MoveStatus(state.topic, state.partition, state.source_dir, str(d.path),
                           str(d.path / name), INTERRUPTED,
                           sum(size for size, _ in state.copy_record().segments.values()),
                           -1, -1, -1, -1, -1.0)
                for name, state in d.interrupted_moves().items()
                if state.topic_partition not in running]

    def move_in(self, topic: str, partition: int, source_dir: str,
                source: MoveSource) -> MoveResult:
        """Move ``topic``-``partition`` from ``source_dir`` (served by ``source``) into this
        directory; returns when this directory serves it. Refusals (``MoveRefusedError``,
        ``LogDirOfflineError`` for an offline target) change nothing; ``MoveAbortedError``
        means the move was abandoned and the source serves on."""
        d = self._log_dir()
        files.validate_topic(topic)
        partition = files.validate_partition(partition, topic)
        tp = TopicPartition(topic, partition)
        if Path(source_dir).resolve() == d.path.resolve():
            raise MoveRefusedError(f"partition {tp} is already in {d.path}", topic=topic,
                                   partition=partition, reason="same-dir")
        if d.get_log(topic, partition) is not None:
            raise MoveRefusedError(f"{d.path} already holds partition {tp}", topic=topic,
                                   partition=partition, reason="already-there")
        with self._lock:
            if tp in self._moves:
                raise MoveRefusedError(f"partition {tp} is already moving into {d.path}",
                                       topic=topic, partition=partition, reason="in-progress")
            self._moves[tp] = {}
        try:
            return self._move(d, tp, source_dir, source)
        finally:
            with self._lock:
                self._moves.pop(tp, None)

    def _move(self, d: LogDir, tp: TopicPartition, source_dir: str,
              source: MoveSource) -> MoveResult:
        started = time.perf_counter()
        snapshot = source.move_source(tp.topic, tp.partition)
        resumed = d.resume_move_in(tp.topic, tp.partition, source_dir)
        record = CopyRecord() if resumed is None else MoveState.read(resumed).copy_record()
        needed = snapshot.size_bytes - sum(size for size, _ in record.segments.values())
        total, _used, free = disk_usage(str(d.path))
        if needed + int(total * MOVE_RESERVE_FRACTION) > free:
            raise MoveRefusedError(
                f"{d.path} has {free} bytes free; partition {tp} needs {needed} "
                f"and {MOVE_RESERVE_FRACTION:.0%} of the file system must stay free",
                topic=tp.topic, partition=tp.partition, reason="no-room", free_bytes=free,
                needed_bytes=needed)
        self._adopt_config(tp.topic, snapshot.topic_config)   # persisted before any copy
        kernels.warm_up()   # before the switch: the promotion's recovery must not compile
        if resumed is None:
            future = d.begin_move_in(tp.topic, tp.partition, source_dir)
        else:
            future = resumed
            with d.io_guard(f"resume move of {tp}"), move_lock(future):
                prune_unrecorded(future, record)
            log.info("resuming the move of %s into %s: %d segments already copied", tp,
                     d.path, len(record.segments))
        unique = future.name.rsplit(".", 1)[1][: -len(files.FUTURE_DIR_SUFFIX)]
        self._publish(tp, source_dir, d, future, "copying", record, snapshot, started)
        rounds = 0
        held_ms = switch_ms = -1.0
        try:
            with self._pause(tp):
                # again, now that no clean can swap segments: the first round copies this one
                snapshot = source.move_source(tp.topic, tp.partition)
                while True:
                    rounds += 1
                    with d.io_guard(f"move copy of {tp}"), move_lock(future):
                        copied = copy_round(Path(snapshot.partition_dir), future,
                                            snapshot.segments, record)
                        MoveState.read(future).with_copied(record).write(future)
                    self._publish(tp, source_dir, d, future, "copying", record, snapshot,
                                  started)
                    if copied < SWITCH_BYTES or rounds >= MAX_ROUNDS:
                        break
                    snapshot = source.move_source(tp.topic, tp.partition)
                self._publish(tp, source_dir, d, future, "switching", record, snapshot, started)
                switching = time.perf_counter()
                switched = source.move_switch_out(tp.topic, tp.partition, str(future), unique,
                                                  str(d.path), record)
                held_ms = switched.held_ms
                opened = d.settle_move_in(future)
                switch_ms = (time.perf_counter() - switching) * 1000
        except BaseException as err:
            opened = self._after_failure(d, future, tp, err)
        return MoveResult(tp.topic, tp.partition, str(Path(source_dir)), str(d.path),
                          opened.log_end_offset, record.bytes_copied, rounds, held_ms,
                          switch_ms, (time.perf_counter() - started) * 1000)

    @staticmethod
    def _after_failure(d: LogDir, future: Path, tp: TopicPartition, err: BaseException) -> Log:
        """Settle ``future`` after ``err``: the log if the source had committed (the move is
        done after all), else raise ``MoveAbortedError`` (or, when this directory itself
        failed, its ``LogDirOfflineError``)."""
        log.warning("move of %s into %s failed: %r; settling %s", tp, d.path, err, future.name)
        try:
            return d.settle_move_in(future)
        except MoveAbortedError as aborted:
            raise MoveAbortedError(
                f"move of {tp} into {d.path} abandoned after {type(err).__name__}: {err} "
                f"({aborted.message})", topic=tp.topic, partition=tp.partition,
                reason=str(err)) from aborted
        except LogDirOfflineError:
            raise
        except StorageError:
            raise err from None

    def _publish(self, tp: TopicPartition, source_dir: str, d: LogDir, future: Path,
                 phase: str, record: CopyRecord, snapshot: SourceSnapshot,
                 started: float) -> None:
        copied_end = _copied_end(record, snapshot)
        with self._lock:
            self._moves[tp] = dict(
                topic=tp.topic, partition=tp.partition, source_dir=str(source_dir),
                target_dir=str(d.path), future_dir=str(future), phase=phase,
                bytes_copied=record.bytes_copied, bytes_total=snapshot.size_bytes,
                source_log_end_offset=snapshot.log_end_offset, copied_log_end_offset=copied_end,
                offset_lag=max(0, snapshot.log_end_offset - copied_end),
                started_ms=started * 1000)


def _copied_end(record: CopyRecord, snapshot: SourceSnapshot) -> int:
    """The log end offset of the copy: the snapshot's end once every segment of it is copied
    up to its size, else the base offset of the first segment not fully copied."""
    for segment in snapshot.segments:
        done = record.segments.get(segment.base_offset, (0, None))[0]
        if done < segment.size:
            return segment.base_offset
    return snapshot.log_end_offset
