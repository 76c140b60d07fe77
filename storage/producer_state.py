"""Idempotent and transactional producer state of one partition and its ``.snapshot`` files
(Kafka's ProducerStateManager, ProducerAppendInfo and ProducerStateEntry).

A producer stamps every batch with (producer id, epoch, base sequence); sequences run on without a
gap per producer and epoch. The log keeps, per producer, the epoch, the last sequence and the
offsets of its most recent batches, and uses them to drop a retried batch instead of appending it
twice: a batch whose sequences are exactly those of one of the five cached batches in the same epoch
is a duplicate (its original offsets are returned); any other sequence that does not follow the
last one (a gap, a part of a cached batch, a batch older than the cached ones) is an out-of-order
error and nothing is stored.
The batches of one append are checked in order, each against the state the earlier ones left
(``ProducerAppendInfo``), and the state changes only once the append is written.

Transactions (KIP-98): a producer's first transactional batch opens its transaction (its first
offset is ``current_txn_first_offset``); a commit or abort marker (a control batch written by the
transaction coordinator) closes it, after an epoch check and a coordinator-epoch check. The
earliest open transaction bounds the last stable offset.

Snapshot file ``<offset>.snapshot`` (state as of that offset, exclusive), all big-endian::

    Version => int16 (1)
    Crc => uint32           CRC32C of every byte after this field
    Count => int32
    Entry => ProducerId: int64 | Epoch: int16 | LastSequence: int32 | LastOffset: int64 |
             OffsetDelta: int32 | Timestamp: int64 | CoordinatorEpoch: int32 |
             CurrentTxnFirstOffset: int64 (-1 = none)          (46 bytes each)

(LastOffset -1: a producer known only by a marker. Timestamp: of its last batch or marker.)
A snapshot is written at every roll (named by the new segment's base offset) and at a clean close;
loading takes the newest valid snapshot at or below the log end that the log does not contradict
(``storage.log_producers``: a snapshot is a cache, never trusted beyond what the log confirms) and
replays the batches after it.
A log removes the snapshots of the segments the cleaner merges away, and when it opens every
snapshot that is neither at a segment's base offset nor the newest one at or above the last base
(Kafka's removeStraySnapshots).

A producer whose last batch or marker is ``producer.id.expiration.ms`` or more older than now, and
which has no open transaction, is forgotten
(Kafka's ``removeExpiredProducers``, run by a periodic task of the log directory, and the same rule
when a snapshot is loaded), so the state stays bounded by the producers of the last day however
many short-lived producers (one per Spark write task) have written. A retry from a forgotten
producer is appended again, as in Kafka.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

import crc32c

from storage import files
from storage.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS  # noqa: F401 - importable from here
from storage.durable import atomic_write, fsync_dir, fsync_file_if_exists
from storage.errors import (  # the producer errors live with the others; named here too
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from storage.records import BatchHeader, ControlType, RecordBatch, parse_control_record

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")           # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")       # see the module docstring, 46 bytes
_CRC_START = struct.calcsize(">hI")       # the CRC covers every byte from here
_COUNT_POSITION = struct.calcsize(">hI")
CACHED_BATCHES = 5                        # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1


ORIGIN_CLIENT = "client"              # a producer: every check, control batches refused
ORIGIN_COORDINATOR = "coordinator"    # the transaction coordinator: markers allowed, no sequences
ORIGIN_REPLICATION = "replication"    # replay of batches already in the log: no checks
ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer's state (Kafka's ProducerStateEntry): its epoch, its last batches, the epoch of
    the coordinator that wrote its last marker, and the first offset of its open transaction
    (``current_txn_first_offset``, -1 when none)."""

    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET
    last_timestamp: int = NO_TIMESTAMP   # of its last batch or marker (Kafka's lastTimestamp)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (Kafka's maybeUpdateProducerEpoch)."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                  last_offset: int, timestamp: int) -> None:
        self.set_epoch(epoch)
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset,
                                          timestamp))
        self.last_timestamp = timestamp

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=CACHED_BATCHES), self.coordinator_epoch,
                             self.current_txn_first_offset, self.last_timestamp)


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """The outcome of checking one batch: append it, or it duplicates an appended one."""

    duplicate: bool
    first_offset: int = -1      # of the original batch, when duplicate
    last_offset: int = -1


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker at ``last_offset`` (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def _next_seq(seq: int, delta: int) -> int:
    return (seq + delta) % (INT32_MAX + 1)


class ProducerAppendInfo:
    """The state of one producer while the batches of one append are checked (Kafka's
    ProducerAppendInfo): each batch is checked against the state left by the batches before it in
    the same append, and nothing reaches the ``ProducerStateManager`` until ``commit`` after the
    append was written. Not thread-safe."""

    __slots__ = ("producer_id", "origin", "entry", "started_transactions")

    def __init__(self, producer_id: int, current: ProducerEntry | None, origin: str) -> None:
        if origin not in ORIGINS:
            raise ValueError(f"append origin {origin!r} is not one of {ORIGINS}")
        self.producer_id = producer_id
        self.origin = origin
        self.entry = current.copy() if current is not None else ProducerEntry(producer_id, -1)
        self.started_transactions: list[int] = []   # first offsets of transactions begun here

    def _check_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.entry.epoch and self.origin != ORIGIN_REPLICATION:
            raise InvalidProducerEpochError(
                f"producer {self.producer_id} at offset {offset}: epoch {epoch} is older than "
                f"the current epoch {self.entry.epoch}", producer_id=self.producer_id,
                epoch=epoch, offset=offset)

    def check_data_batch(self, epoch: int, first_seq: int, count: int,
                         offset: int = NO_OFFSET) -> SequenceCheck:
        """Check a data batch before it is appended at ``offset``; raises on a fenced epoch and
        (a client's batch) on a sequence that does not follow the last one, and reports an exact
        retry of one of the ``CACHED_BATCHES`` last batches as a duplicate with its offsets. Any
        other sequence at or below the last one (a part of a cached batch, a batch older than the
        cached ones) is ``OutOfOrderSequenceError``, as in Kafka."""
        self._check_epoch(epoch, offset)
        if self.origin != ORIGIN_CLIENT:
            return SequenceCheck(False)
        entry = self.entry
        producer_id = self.producer_id
        last_seq = _next_seq(first_seq, count - 1)
        if entry.epoch < 0:
            return SequenceCheck(False)      # no state: any sequence starts it
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id}: a new epoch {epoch} must start at sequence 0, not "
                    f"{first_seq}", producer_id=producer_id, sequence=first_seq, offset=offset)
            return SequenceCheck(False)
        for cached in entry.batches:
            if cached.first_seq == first_seq and cached.last_seq == last_seq:
                return SequenceCheck(True, cached.first_offset, cached.last_offset)
        if first_seq == _next_seq(entry.last_seq, 1):
            return SequenceCheck(False)
        # a batch that overlaps a cached one in part, or repeats one older than the cached
        # batches, cannot be answered with its offsets: the producer must learn it is out of
        # order (Kafka's findDuplicateBatch then checkSequence), never have its records dropped
        raise OutOfOrderSequenceError(
            f"producer {producer_id}: sequence {first_seq} does not follow the last appended "
            f"sequence {entry.last_seq} (epoch {epoch})", producer_id=producer_id,
            sequence=first_seq, last_sequence=entry.last_seq, offset=offset)

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                          last_offset: int, timestamp: int, is_transactional: bool = False) -> None:
        """Record a data batch checked by ``check_data_batch``; a transactional batch opens the
        producer's transaction unless one is open. A non-transactional batch while one is open is
        refused (not when replaying the log, which is taken as it is)."""
        entry = self.entry
        if (entry.current_txn_first_offset >= 0 and not is_transactional
                and self.origin != ORIGIN_REPLICATION):
            raise InvalidTxnStateError(
                f"producer {self.producer_id} at offset {first_offset}: a non-transactional batch "
                f"while its transaction from offset {entry.current_txn_first_offset} is open",
                producer_id=self.producer_id, offset=first_offset)
        entry.add_batch(epoch, first_seq, last_seq, first_offset, last_offset, timestamp)
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, control_type: int, coordinator_epoch: int, epoch: int,
                              offset: int, timestamp: int) -> CompletedTxn | None:
        """A commit (``ControlType.COMMIT``) or abort marker at ``offset``: checks the producer
        epoch and the coordinator epoch, closes the open transaction and returns it (None when the
        producer had none open: an empty transaction changes neither the LSO nor the index)."""
        self._check_epoch(epoch, offset)
        entry = self.entry
        if entry.coordinator_epoch > coordinator_epoch and self.origin != ORIGIN_REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"producer {self.producer_id} at offset {offset}: marker from coordinator epoch "
                f"{coordinator_epoch}, older than the current {entry.coordinator_epoch}",
                producer_id=self.producer_id, coordinator_epoch=coordinator_epoch, offset=offset)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset,
                                     control_type == ControlType.ABORT)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = NO_OFFSET
        entry.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    """Per-producer sequence and transaction state of one log. Not thread-safe; the owning ``Log``
    holds its lock.

    ``ongoing_transactions`` maps the first offset of every open transaction to its producer; the
    earliest one is the first unstable offset. No replication here (high watermark = log end), so
    a transaction is stable as soon as its marker is appended (Kafka's unreplicatedTxns stay
    empty)."""

    def __init__(self, directory: Path,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}   # first offset of an open transaction -> producer id
        self.map_end_offset = 0   # state covers batches below this offset

    def update_map_end_offset(self, offset: int) -> None:
        """The state now covers the batches below ``offset`` (Kafka's updateMapEndOffset): after
        a load or a truncation, the log end it was brought in line with."""
        self.map_end_offset = offset

    def advance_map_end_offset(self, offset: int) -> None:
        """The state covers the batches below ``offset`` too (an append, a segment replayed);
        it never moves back."""
        self.map_end_offset = max(self.map_end_offset, offset)

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        return self._producers

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of every open transaction (a copy)."""
        return dict(sorted(self._ongoing.items()))

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction, None when none is open."""
        return min(self._ongoing) if self._ongoing else None

    # ---- checking and updating ---------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: str = ORIGIN_CLIENT) -> ProducerAppendInfo:
        """A working copy of one producer's state for the batches of one append."""
        return ProducerAppendInfo(producer_id, self._producers.get(producer_id), origin)

    def commit(self, info: ProducerAppendInfo) -> None:
        """Install the state an append left (after its bytes were written), and open the
        transactions it began."""
        self._producers[info.producer_id] = info.entry
        for first_offset in info.started_transactions:
            self._ongoing[first_offset] = info.producer_id

    def load_producer_entry(self, entry: ProducerEntry) -> None:
        """Install one producer's state as a snapshot would (Kafka's loadProducerEntry)."""
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self._ongoing[entry.current_txn_first_offset] = entry.producer_id

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is closed (Kafka's lastStableOffset(completedTxn)): the first
        offset of the earliest open transaction of another producer, else the marker's offset + 1.
        Written into the aborted transaction's index entry before ``complete_txn``."""
        others = [first for first, pid in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Close an open transaction (its marker was appended)."""
        if self._ongoing.pop(completed.first_offset, None) is None:
            raise StorageError(
                f"{self.dir}: transaction of producer {completed.producer_id} from offset "
                f"{completed.first_offset} was not open", path=str(self.dir),
                producer_id=completed.producer_id, offset=completed.first_offset)

    def check(self, producer_id: int, epoch: int, first_seq: int, count: int) -> SequenceCheck:
        """Check one client batch against the current state; raises on a fenced epoch or a gap."""
        return self.prepare_update(producer_id).check_data_batch(epoch, first_seq, count)

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int,
               is_transactional: bool = False) -> None:
        """Record one appended (or replayed) data batch."""
        info = self.prepare_update(producer_id, ORIGIN_REPLICATION)
        info.append_data_batch(epoch, first_seq, last_seq, first_offset, last_offset, timestamp,
                               is_transactional)
        self.commit(info)
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def replay_marker(self, producer_id: int, epoch: int, control_type: int,
                      coordinator_epoch: int, offset: int, timestamp: int) -> CompletedTxn | None:
        """Replay one marker already in the log: close the producer's transaction and return it
        (its aborted-transaction entry is the caller's to write, with
        ``last_stable_offset_after`` taken before this call completes it)."""
        info = self.prepare_update(producer_id, ORIGIN_REPLICATION)
        completed = info.append_end_txn_marker(control_type, coordinator_epoch, epoch, offset,
                                               timestamp)
        self.commit(info)
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        return completed

    def replay_batch(self, header: BatchHeader, read_batch: Callable[[], bytes]
                     ) -> CompletedTxn | None:
        """Replay one v2 batch already in the log (loading, recovery): a data batch of a producer
        updates it, a commit/abort marker (read with ``read_batch``, the whole batch) closes its
        transaction, which is returned *not yet completed*: the caller takes
        ``last_stable_offset_after`` for an index entry, then calls ``complete_txn``. Batches
        without a producer id, empty control batches (cleaned away) and other control records
        change nothing."""
        if header.producer_id < 0:
            return None
        if not header.is_control:
            self.update(header.producer_id, header.producer_epoch, header.base_sequence,
                        header.last_sequence, header.base_offset, header.last_offset,
                        header.max_timestamp, header.is_transactional)
            return None
        records = RecordBatch(read_batch()).records() if header.records_count > 0 else []
        marker = parse_control_record(records[0]) if records else None
        if marker is None or marker[0] not in (ControlType.ABORT, ControlType.COMMIT):
            self.map_end_offset = max(self.map_end_offset, header.last_offset + 1)
            return None
        return self.replay_marker(header.producer_id, header.producer_epoch, marker[0], marker[1],
                                  header.base_offset, records[0].timestamp)

    # ---- expiration --------------------------------------------------------------------------
    def is_expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        """Idle for ``producer.id.expiration.ms``; a producer with an open transaction never is."""
        return (entry.current_txn_first_offset < 0
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget every producer idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, entry in self._producers.items() if self.is_expired(entry, now_ms)]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    def delete_snapshots_above(self, offset: int) -> list[int]:
        """After a truncation: snapshots past the new log end describe batches that are gone.
        Returns the offsets of the snapshots kept, in order."""
        kept = []
        for at in self.snapshot_offsets():
            if at > offset:
                files.snapshot_file(self.dir, at).unlink(missing_ok=True)
            else:
                kept.append(at)
        return kept

    # ---- snapshots ---------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        """The offsets of the ``.snapshot`` files, in order (one directory listing; the 20-digit
        names sort as their offsets do)."""
        names = sorted(n for n in os.listdir(self.dir)
                       if n.endswith(files.SNAPSHOT_SUFFIX) and files.is_segment_file(n))
        return [files.offset_from_file_name(n) for n in names]

    def snapshot_files(self) -> list[Path]:
        return [files.snapshot_file(self.dir, at) for at in self.snapshot_offsets()]

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path:
        """Write the state as of ``offset`` (default: the end of the mapped batches), fsynced
        unless ``sync=False`` (a roll, under the log's lock, writes it unsynced and
        ``flush_snapshot`` makes it durable in the background, as Kafka's ``takeSnapshot(false)``
        and ``flushProducerStateSnapshot``)."""
        at = self.map_end_offset if offset is None else offset
        path = files.snapshot_file(self.dir, at)
        atomic_write(path, encode_snapshot(self._producers.values()), sync=sync)
        return path

    @staticmethod
    def flush_snapshot(path: Path) -> None:
        """fsync the snapshot at ``path`` and its directory entry, unless either is gone (the
        snapshot deleted with its segment, or the log deleted or moved, meanwhile), as Kafka's
        ``Utils.flushFileIfExists``: a file that is gone is no disk failure."""
        fsync_file_if_exists(path)
        try:
            fsync_dir(path.parent)
        except FileNotFoundError:
            return

    def clear(self) -> None:
        """Forget every producer and open transaction (the files are untouched)."""
        self._producers.clear()
        self._ongoing.clear()

    def load_latest_snapshot(self, below_or_at: int, now_ms: int,
                             offsets: list[int] | None = None) -> int:
        """Load the newest readable snapshot at or below ``below_or_at``, without the producers
        already expired at ``now_ms``; return its offset (0 if none). Unreadable snapshots are
        deleted (the batches are replayed instead). ``offsets``: the snapshots there are, when
        the caller just listed them. Open transactions come back with their producers."""
        self.clear()
        for offset in reversed(self.snapshot_offsets() if offsets is None else offsets):
            if offset > below_or_at:
                continue
            path = files.snapshot_file(self.dir, offset)
            try:
                entries = read_snapshot(path.read_bytes(), path)
            except CorruptRecordError:
                path.unlink(missing_ok=True)
                continue
            for snap in entries:
                entry = ProducerEntry(snap.producer_id, snap.epoch,
                                      coordinator_epoch=snap.coordinator_epoch,
                                      current_txn_first_offset=snap.current_txn_first_offset,
                                      last_timestamp=snap.timestamp)
                if snap.last_offset >= 0:
                    entry.batches.append(BatchMetadata(
                        _next_seq(snap.last_seq, -snap.offset_delta), snap.last_seq,
                        snap.last_offset - snap.offset_delta, snap.last_offset, snap.timestamp))
                if not self.is_expired(entry, now_ms):
                    self.load_producer_entry(entry)
            self.map_end_offset = offset
            return offset
        self.map_end_offset = 0
        return 0

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` if there is one (its segment was removed)."""
        files.snapshot_file(self.dir, offset).unlink(missing_ok=True)

    def remove_stray_snapshots(self, segment_bases: Iterable[int]) -> list[int]:
        """At load (Kafka's removeStraySnapshots): delete every snapshot not at a segment's base
        offset, except the newest such one when it is at or above the last segment's base (the
        snapshot a clean shutdown wrote at the log end). Returns the offsets deleted."""
        bases = set(segment_bases)
        stray = [at for at in self.snapshot_offsets() if at not in bases]
        doomed = stray[:-1]
        if stray and bases and stray[-1] < max(bases):
            doomed.append(stray[-1])
        for at in doomed:
            self.delete_snapshot(at)
        return doomed

    def delete_snapshots_below(self, offset: int) -> None:
        """Snapshots of segments removed by retention or cleaning are no longer needed; the newest
        one is always kept."""
        snapshots = self.snapshot_files()
        for path in snapshots[:-1]:
            if files.offset_from_file_name(path.name) < offset:
                path.unlink(missing_ok=True)


class SnapshotEntry(NamedTuple):
    """One producer in a ``.snapshot`` file (the fields of the entry layout, in order)."""

    producer_id: int
    epoch: int
    last_seq: int
    last_offset: int          # -1: no batch cached (a producer known only by its last marker)
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int   # -1: no open transaction

    @property
    def first_seq(self) -> int:
        """Kafka's BatchMetadata.firstSeq: the last sequence minus the delta, wrapping."""
        if self.last_seq < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_seq) + 1
        return self.last_seq - self.offset_delta


def encode_snapshot(entries) -> bytes:
    body = bytearray(_HEADER.size)
    count = 0
    for entry in entries:
        if entry.batches:
            last = entry.batches[-1]
            last_seq, last_offset, delta = (last.last_seq, last.last_offset,
                                            last.last_offset - last.first_offset)
        else:
            last_seq, last_offset, delta = -1, -1, 0
        body += _ENTRY.pack(entry.producer_id, entry.epoch, last_seq, last_offset, delta,
                            entry.last_timestamp, entry.coordinator_epoch,
                            entry.current_txn_first_offset)
        count += 1
    struct.pack_into(">i", body, _COUNT_POSITION, count)
    crc = crc32c.crc32c(memoryview(body)[_CRC_START:])
    _HEADER.pack_into(body, 0, SNAPSHOT_VERSION, crc, count)
    return bytes(body)


def read_snapshot(data: bytes, path: Path | None = None) -> list[SnapshotEntry]:
    """Every entry of a snapshot file, the one parser of the format (the loader and
    ``strata dump-log``). Checked in Kafka's order (``ProducerStateManager.readSnapshot``):
    version, layout, CRC. Raises ``CorruptRecordError`` naming ``path``; its ``reason`` field is
    Kafka's wording without the path."""
    where = str(path) if path else "snapshot"

    def corrupt(reason: str, **fields: object) -> CorruptRecordError:
        return CorruptRecordError(f"{where}: {reason}", path=where, reason=reason, **fields)

    if len(data) < _HEADER.size:
        raise corrupt(f"Snapshot failed schema validation: {len(data)} bytes, fewer than the "
                      f"{_HEADER.size}-byte header")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise corrupt(f"Snapshot contained an unknown file version {version}", version=version)
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        # stricter than Kafka, which ignores bytes after the entries: we never write any
        raise corrupt(f"Snapshot failed schema validation: {count} entries do not fill "
                      f"{len(data)} bytes", count=count)
    computed = crc32c.crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise corrupt(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                      f"Computed crc: {computed}")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size))
            for i in range(count)]


def decode_snapshot(data: bytes, path: Path | None = None) -> list[tuple[int, int, int, int, int, int]]:
    """Entries (producer id, epoch, last seq, last offset, offset delta, timestamp)."""
    return [tuple(entry[:6]) for entry in read_snapshot(data, path)]
