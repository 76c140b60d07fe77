"""Idempotent-producer state of one partition and its ``.snapshot`` files (Kafka's
ProducerStateManager, without transactions).

A producer stamps every batch with (producer id, epoch, base sequence); sequences run on without a
gap per producer and epoch. The log keeps, per producer, the epoch, the last sequence and the
offsets of its most recent batches, and uses them to drop a retried batch instead of appending it
twice: a batch whose sequences are at or below the producer's last sequence in the same epoch is a
duplicate (its original offsets are returned when still cached); a gap is an out-of-order error.

Snapshot file ``<offset>.snapshot`` (state as of that offset, exclusive), all big-endian::

    Version => int16 (1)
    Crc => uint32           CRC32C of every byte after this field
    Count => int32
    Entry => ProducerId: int64 | Epoch: int16 | LastSequence: int32 | LastOffset: int64 |
             OffsetDelta: int32 | Timestamp: int64 | CoordinatorEpoch: int32 |
             CurrentTxnFirstOffset: int64 (-1 = none)          (46 bytes each)

A snapshot is written at every roll (named by the new segment's base offset) and at a clean close;
loading takes the newest valid snapshot at or below the log end and replays the batches after it.

A producer whose last batch is ``producer.id.expiration.ms`` or more older than now is forgotten
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

import crc32c

from storage import files
from storage.durable import atomic_write
from storage.errors import CorruptRecordError, InvalidRecordError

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")           # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")       # see the module docstring, 46 bytes
_CRC_START = struct.calcsize(">hI")       # the CRC covers every byte from here
_COUNT_POSITION = struct.calcsize(">hI")
CACHED_BATCHES = 5                        # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000   # producer.id.expiration.ms


class OutOfOrderSequenceError(InvalidRecordError):
    """A batch whose first sequence does not follow the producer's last one (a gap)."""


class InvalidProducerEpochError(InvalidRecordError):
    """A batch from an epoch older than the producer's current epoch (a fenced producer)."""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The max timestamp of the last batch (Kafka's ``lastTimestamp``), -1 when none."""
        return self.batches[-1].timestamp if self.batches else NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """The outcome of checking one batch: append it, or it duplicates an appended one."""

    duplicate: bool
    first_offset: int = -1      # of the original batch, when duplicate and still cached
    last_offset: int = -1


def _next_seq(seq: int, delta: int) -> int:
    return (seq + delta) % (INT32_MAX + 1)


class ProducerStateManager:
    """Per-producer sequence state of one log. Not thread-safe; the owning ``Log`` holds its lock."""

    def __init__(self, directory: Path,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0   # state covers batches below this offset

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        return self._producers

    # ---- checking and updating ---------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int, count: int) -> SequenceCheck:
        """Check a batch before it is appended; raises on a fenced epoch or a sequence gap."""
        entry = self._producers.get(producer_id)
        last_seq = _next_seq(first_seq, count - 1)
        if entry is None or not entry.batches:
            return SequenceCheck(False)
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {epoch} is older than the current epoch "
                f"{entry.epoch}", producer_id=producer_id, epoch=epoch)
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id}: a new epoch {epoch} must start at sequence 0, not "
                    f"{first_seq}", producer_id=producer_id, sequence=first_seq)
            return SequenceCheck(False)
        for cached in entry.batches:
            if cached.first_seq == first_seq and cached.last_seq == last_seq:
                return SequenceCheck(True, cached.first_offset, cached.last_offset)
        if first_seq == _next_seq(entry.last_seq, 1):
            return SequenceCheck(False)
        if 0 <= first_seq <= entry.last_seq and last_seq <= entry.last_seq:
            return SequenceCheck(True)   # older than the cached batches: appended long ago
        raise OutOfOrderSequenceError(
            f"producer {producer_id}: sequence {first_seq} does not follow the last appended "
            f"sequence {entry.last_seq} (epoch {epoch})", producer_id=producer_id,
            sequence=first_seq, last_sequence=entry.last_seq)

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record an appended (or replayed) batch."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerEntry(producer_id, epoch)
            self._producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset,
                                           timestamp))
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    # ---- expiration --------------------------------------------------------------------------
    def is_expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

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

    def take_snapshot(self, offset: int | None = None) -> Path:
        """Write the state as of ``offset`` (default: the end of the mapped batches)."""
        at = self.map_end_offset if offset is None else offset
        path = files.snapshot_file(self.dir, at)
        atomic_write(path, encode_snapshot(self._producers.values()), sync=False)
        return path

    def load_latest_snapshot(self, below_or_at: int, now_ms: int,
                             offsets: list[int] | None = None) -> int:
        """Load the newest readable snapshot at or below ``below_or_at``, without the producers
        already expired at ``now_ms``; return its offset (0 if none). Unreadable snapshots are
        deleted (the batches are replayed instead). ``offsets``: the snapshots there are, when
        the caller just listed them."""
        self._producers.clear()
        for offset in reversed(self.snapshot_offsets() if offsets is None else offsets):
            if offset > below_or_at:
                continue
            path = files.snapshot_file(self.dir, offset)
            try:
                entries = decode_snapshot(path.read_bytes(), path)
            except CorruptRecordError:
                path.unlink(missing_ok=True)
                continue
            for producer_id, epoch, last_seq, last_offset, offset_delta, ts in entries:
                entry = ProducerEntry(producer_id, epoch)
                entry.batches.append(BatchMetadata(_next_seq(last_seq, -offset_delta), last_seq,
                                                   last_offset - offset_delta, last_offset, ts))
                if not self.is_expired(entry, now_ms):
                    self._producers[producer_id] = entry
            self.map_end_offset = offset
            return offset
        self.map_end_offset = 0
        return 0

    def delete_snapshots_below(self, offset: int) -> None:
        """Snapshots of segments removed by retention or cleaning are no longer needed; the newest
        one is always kept."""
        snapshots = self.snapshot_files()
        for path in snapshots[:-1]:
            if files.offset_from_file_name(path.name) < offset:
                path.unlink(missing_ok=True)


def encode_snapshot(entries) -> bytes:
    body = bytearray(_HEADER.size)
    count = 0
    for entry in entries:
        if not entry.batches:
            continue
        last = entry.batches[-1]
        body += _ENTRY.pack(entry.producer_id, entry.epoch, last.last_seq, last.last_offset,
                            last.last_offset - last.first_offset, last.timestamp, -1, -1)
        count += 1
    struct.pack_into(">i", body, _COUNT_POSITION, count)
    crc = crc32c.crc32c(memoryview(body)[_CRC_START:])
    _HEADER.pack_into(body, 0, SNAPSHOT_VERSION, crc, count)
    return bytes(body)


def decode_snapshot(data: bytes, path: Path | None = None) -> list[tuple[int, int, int, int, int, int]]:
    """Entries (producer id, epoch, last seq, last offset, offset delta, timestamp)."""
    where = str(path) if path else "snapshot"
    if len(data) < _HEADER.size:
        raise CorruptRecordError(f"{where}: {len(data)} bytes is shorter than the header",
                                 path=where)
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"{where}: snapshot version {version}, expected "
                                 f"{SNAPSHOT_VERSION}", path=where, version=version)
    if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptRecordError(f"{where}: snapshot CRC mismatch", path=where)
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptRecordError(f"{where}: {count} entries do not fill {len(data)} bytes",
                                 path=where, count=count)
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, _coord, _txn = _ENTRY.unpack_from(
            data, _HEADER.size + i * _ENTRY.size)
        out.append((pid, epoch, last_seq, last_offset, delta, ts))
    return out

