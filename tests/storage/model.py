"""A plain in-memory model of one Kafka partition log, the oracle of ``test_log_model.py``.

The model knows nothing of files, segments' bytes or indexes. It keeps what Kafka's semantics say a
reader must see: the batches appended (their records with key, value, timestamp and headers at their
offsets), the log start and end offsets, the idempotent producers' last batches, and what compaction
(Kafka's ``LogCleaner`` rules: offset map over the dirty range, KIP-534 tombstone horizons, empty
batches kept for a producer's last batch) and retention (Kafka's ``deleteOldSegments`` rules) leave.

Batches are kept below the log start offset too while their segment exists: the cleaner still reads
them (a producer's last batch), and retention removes them a whole segment at a time. Where Kafka's
outcome depends on the physical layout (which segments retention deletes), the model takes the
segment list from the log, checks it against its own records and applies Kafka's rule to it.

Transactions slot in here: ``ModelBatch`` carries ``is_transactional``/``control_type``,
``last_stable_offset`` is the one place that answers "how far is stable" (the log end while there
are no transactions), and ``readable`` is the one place that decides what a reader gets.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable, Sequence


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """One record as a reader must get it back."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


@dataclass(slots=True)
class ModelBatch:
    """One batch as it is in the log: its offset range never changes; compaction removes records
    (``records`` holds the survivors, possibly none: Kafka's empty batch) or the whole batch."""

    base_offset: int
    last_offset: int
    records: list[ModelRecord]
    max_timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    log_append_time: bool = False
    delete_horizon_ms: int | None = None
    is_transactional: bool = False
    control_type: int | None = None   # a transaction marker's type; None for data batches

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + (self.last_offset - self.base_offset)


@dataclass(slots=True)
class ModelProducer:
    """An idempotent producer as the log must know it: its epoch, its next sequence and its last
    batch (the one a retry repeats). ``retry_is_defined`` is False once a truncation removed a batch
    of this producer: what the log then remembers depends on which snapshot survived (in Kafka too),
    so a real producer bumps its epoch and the model only retries after its next append."""

    producer_id: int
    epoch: int = 0
    next_sequence: int = 0
    last_batch: ModelBatch | None = None
    last_batch_bytes: bytes = b""
    retry_is_defined: bool = False
    must_bump_epoch: bool = False


@dataclass(frozen=True, slots=True)
class SegmentMeta:
    """What retention reads from one segment of the real log."""

    base_offset: int
    size: int
    largest_timestamp: int


@dataclass
class PartitionModel:
    """The oracle. Offsets: ``log_start_offset <= readable offsets < log_end_offset``."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    batches: list[ModelBatch] = field(default_factory=list)
    producers: dict[int, ModelProducer] = field(default_factory=dict)
    cleaner_checkpoint: int | None = None
    # key -> (its latest appended record, the time of the first clean that covered it or None):
    # compaction's promise, kept apart from the batch simulation above so the two check each other
    latest_by_key: dict[bytes, tuple[ModelRecord, int | None]] = field(default_factory=dict)

    # ---- views -------------------------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end (no transactions
        are modelled yet)."""
        return self.log_end_offset

    def readable(self, start: int, stop: int | None = None) -> list[ModelRecord]:
        """Every record a read from ``start`` (up to ``stop``, exclusive) returns, in order."""
        stop = self.log_end_offset if stop is None else min(stop, self.log_end_offset)
        start = max(start, self.log_start_offset)
        out: list[ModelRecord] = []
        for batch in self.batches[self._first_batch_at_or_after(start):]:
            if batch.base_offset >= stop:
                break
            if batch.control_type is not None:
                continue
            out.extend(r for r in batch.records if start <= r.offset < stop)
        return out

    def live_bytes(self) -> int:
        """An estimate of the bytes a full read returns (keys and values)."""
        return sum(len(r.key or b"") + len(r.value or b"")
                   for b in self.batches for r in b.records)

    def batch_ends(self) -> list[int]:
        """The next offset of every batch below the log end: where a truncation cuts no batch and
        leaves no gap before the new log end."""
        return [b.next_offset for b in self.batches if b.next_offset < self.log_end_offset]

    def _first_batch_at_or_after(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= ``offset``."""
        lasts = [b.last_offset for b in self.batches]
        return bisect.bisect_left(lasts, offset)

    # ---- appends -----------------------------------------------------------------------------
    def append(self, batch: ModelBatch) -> None:
        """A batch appended at the log end (its offsets were assigned by the log and checked)."""
        assert batch.base_offset == self.log_end_offset
        self.batches.append(batch)
        self.log_end_offset = batch.next_offset
        for record in batch.records:
            if record.key is not None:
                self.latest_by_key[record.key] = (record, None)
        if batch.producer_id >= 0:
            producer = self.producers[batch.producer_id]
            producer.last_batch = batch
            producer.next_sequence = batch.last_sequence + 1
            producer.retry_is_defined = True
            producer.must_bump_epoch = False

    # ---- truncation and log start ------------------------------------------------------------
    def truncate_to(self, target: int, first_segment_base: int) -> None:
        """Kafka's UnifiedLog.truncateTo, at any offset (``first_segment_base`` is the real log's
        first segment before the call: below it, the log is emptied and restarts there): the
        batches ending at or past the target go whole and the log ends at the target."""
        if target >= self.log_end_offset:
            return
        # the batch holding the target goes whole (Kafka's LogSegment.truncateTo): its records
        # below the target too
        cut = min([target, *(b.base_offset for b in self.batches if b.next_offset > target)])
        if first_segment_base > target:
            self.batches.clear()
            self.log_start_offset = target
            for producer in self.producers.values():
                producer.retry_is_defined = False
                producer.must_bump_epoch = True
        else:
            gone = [b for b in self.batches if b.next_offset > target]
            self.batches = [b for b in self.batches if b.next_offset <= target]
            self.log_start_offset = min(self.log_start_offset, target)
            for batch in gone:
                if batch.producer_id >= 0:
                    producer = self.producers[batch.producer_id]
                    producer.retry_is_defined = False
                    producer.must_bump_epoch = True
        self.log_end_offset = target
        self._forget_latest(lambda record: record.offset >= cut)

    def reopened(self, active_segment_base: int) -> None:
        """A reopen of the log (after a clean shutdown or a kill): the log end is read back from
        the segments, the offset after the last batch (or the active segment's base when it holds
        none), so a log end that a truncation inside a batch left past the last batch falls back
        to it, as in Kafka (nothing records it); never below the log start offset, where the
        loader starts a log whose checkpointed start lies beyond what it recovered."""
        last = max((b.next_offset for b in self.batches), default=0)
        end = max(last, active_segment_base)
        if end < self.log_start_offset:
            # the checkpointed log start lies beyond what is left: the log starts there, empty
            # (Kafka's LogLoader; the segments go to quarantine)
            self.batches.clear()
            self._forget_latest(lambda record: True)
            for producer in self.producers.values():   # their batches went with the segments
                producer.retry_is_defined = False
                producer.must_bump_epoch = True
            end = self.log_start_offset
        if end < self.log_end_offset:
            for producer in self.producers.values():
                producer.retry_is_defined = False
        self.log_end_offset = end

    def lose_tail(self, flushed: int) -> None:
        """A power loss: every batch not wholly below ``flushed`` (the recovery point) is gone,
        and its producer's next batch is no retry of it. ``reopened`` follows."""
        gone = [b for b in self.batches if b.next_offset > flushed]
        if not gone:
            return
        cut = min(b.base_offset for b in gone)
        self.batches = [b for b in self.batches if b.next_offset <= flushed]
        for batch in gone:
            if batch.producer_id >= 0:
                producer = self.producers[batch.producer_id]
                producer.retry_is_defined = False
                producer.must_bump_epoch = True
        self._forget_latest(lambda record: record.offset >= cut)

    def _forget_latest(self, gone) -> None:
        """Keys whose latest record is gone (truncated or deleted with its segment): the key's
        latest is now unknown to the promise, so it is no longer checked."""
        for key in [k for k, (record, _) in self.latest_by_key.items() if gone(record)]:
            del self.latest_by_key[key]

    def increment_log_start_offset(self, offset: int) -> bool:
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        return True

    # ---- retention ---------------------------------------------------------------------------
    def retention_deletions(self, segments: Sequence[SegmentMeta], *, delete: bool,
                            retention_bytes: int, retention_ms: int, now_ms: int) -> dict[str, int]:
        """Kafka's deleteOldSegments over ``segments`` (the log's, oldest first, the active one
        last): how many leading segments each rule deletes. First the log-start-offset rule,
        then, with cleanup.policy delete, retention.bytes and retention.ms, each on what is
        left."""
        remaining = list(segments)
        deleted: dict[str, int] = {}

        def run(rule: str, predicate) -> None:
            count = 0
            for i, segment in enumerate(remaining):
                following = remaining[i + 1] if i + 1 < len(remaining) else None
                if following is None and segment.size == 0:
                    break
                if not predicate(segment, following):
                    break
                count += 1
            del remaining[:count]
            deleted[rule] = count

        run("log start", lambda s, n: n is not None and n.base_offset <= self.log_start_offset)
        if delete and retention_bytes >= 0:
            diff = [sum(s.size for s in remaining) - retention_bytes]
            if diff[0] > 0:
                def over(segment: SegmentMeta, _n: SegmentMeta | None) -> bool:
                    if diff[0] - segment.size >= 0:
                        diff[0] -= segment.size
                        return True
                    return False
                run("size", over)
        if delete and retention_ms >= 0:
            run("time", lambda s, _n: now_ms - s.largest_timestamp > retention_ms)
        return deleted

    def drop_below(self, first_segment_base: int) -> None:
        """Segments below ``first_segment_base`` were deleted: their batches are gone and the log
        start offset moves up to it."""
        self.batches = [b for b in self.batches if b.base_offset >= first_segment_base]
        self.log_start_offset = max(self.log_start_offset, first_segment_base)
        self._forget_latest(lambda record: record.offset < first_segment_base)

    def largest_timestamp_in(self, base: int, next_base: int) -> int | None:
        """The largest batch max timestamp of the batches in ``[base, next_base)``, None if none
        (the segment then reports its file's mtime)."""
        stamps = [b.max_timestamp for b in self.batches
                  if base <= b.base_offset < next_base]
        return max(stamps) if stamps else None

    # ---- compaction --------------------------------------------------------------------------
    def first_dirty_offset(self) -> int:
        """Kafka's cleanableOffsets: the checkpoint, reset to the log start when outside
        [log start, log end]."""
        checkpoint = self.cleaner_checkpoint
        if checkpoint is None or checkpoint < self.log_start_offset \
                or checkpoint > self.log_end_offset:
            return self.log_start_offset
        return checkpoint

    def clean(self, first_dirty: int, end: int, now_ms: int, *, delete_retention_ms: int,
              producer_id_expiration_ms: int) -> tuple[int, int]:
        """One clean of ``[first_dirty, end)`` at ``now_ms`` (the map never fills: ``end`` is the
        first uncleanable offset), applied to every batch below ``end`` (Kafka cleans the clean
        section too). Kafka's rules, record by record: keep when past the map, or keyed, at or
        after the key's latest mapped offset, and not a tombstone past its batch's horizon. A
        batch keeping a tombstone gets its horizon ``now + delete.retention.ms`` once. A batch
        left without records stays as an empty batch when it is an active producer's last batch
        or ends at ``end``; otherwise it goes. Returns (records removed, readable tombstones
        removed past their horizon while still their key's latest)."""
        latest: dict[bytes, int] = {}
        for batch in self.batches:
            if batch.base_offset >= end:
                break
            for record in batch.records:
                if record.key is not None and first_dirty <= record.offset < end:
                    latest[record.key] = record.offset
        last_of_producer: dict[int, ModelBatch] = {}
        for batch in self.batches:
            if batch.producer_id >= 0:
                last_of_producer[batch.producer_id] = batch
        active_last = {pid: b.last_offset for pid, b in last_of_producer.items()
                       if now_ms - b.max_timestamp < producer_id_expiration_ms}
        kept_batches: list[ModelBatch] = []
        before = [r for b in self.batches for r in b.records]
        for batch in self.batches:
            if batch.base_offset >= end or batch.control_type is not None:
                kept_batches.append(batch)
                continue
            retain_deletes = batch.delete_horizon_ms is None or now_ms < batch.delete_horizon_ms
            kept = [r for r in batch.records
                    if r.offset > end - 1 or (r.key is not None
                                               and r.offset >= latest.get(r.key, -1)
                                               and (not r.is_tombstone or retain_deletes))]
            if not kept:
                if active_last.get(batch.producer_id) == batch.last_offset \
                        or batch.next_offset == end:
                    batch.records = []
                    kept_batches.append(batch)
                continue
            if len(kept) != len(batch.records):
                batch.records = kept
                if not batch.log_append_time:
                    batch.max_timestamp = max(r.timestamp for r in kept)
            if batch.delete_horizon_ms is None and any(r.is_tombstone for r in kept):
                batch.delete_horizon_ms = now_ms + delete_retention_ms
                batch.max_timestamp = max(r.timestamp for r in kept)
            kept_batches.append(batch)
        self.batches = kept_batches
        self.cleaner_checkpoint = end
        survivors = {r.offset for b in self.batches for r in b.records}
        removed = [r for r in before if r.offset not in survivors]
        self._check_compaction_promise(end, now_ms, delete_retention_ms, survivors)
        expired = [r for r in removed if r.is_tombstone and r.offset >= latest.get(r.key, -1)
                   and r.offset >= self.log_start_offset]
        return len(removed), len(expired)

    def _check_compaction_promise(self, end: int, now_ms: int, delete_retention_ms: int,
                                  survivors: set[int]) -> None:
        """Kafka's promise, independent of the batch-level rules: every key's latest record
        stays at its offset; a tombstone stays at least ``delete.retention.ms`` after the first
        clean that reached it (KIP-534: that clean sets its horizon)."""
        for key, (record, first_clean) in list(self.latest_by_key.items()):
            if record.offset < end and first_clean is None:
                self.latest_by_key[key] = (record, now_ms)   # this clean sets its horizon
            elif record.is_tombstone and first_clean is not None \
                    and now_ms >= first_clean + delete_retention_ms:
                continue
            assert record.offset in survivors, (
                f"the model's clean removed key {key!r}'s latest record at {record.offset}")



def records_equal(got: Iterable[object], expected: Sequence[ModelRecord]) -> str | None:
    """None when the log's records equal the model's, else a description of the first difference."""
    got_list = list(got)
    for i, (record, want) in enumerate(zip(got_list, expected)):
        fields = (record.offset, record.key, record.value, record.timestamp, tuple(record.headers))
        if fields != (want.offset, want.key, want.value, want.timestamp, want.headers):
            return (f"record {i}: the log has offset {record.offset} key {record.key!r} "
                    f"value {_short(record.value)} ts {record.timestamp} headers {record.headers}; "
                    f"the model has offset {want.offset} key {want.key!r} value "
                    f"{_short(want.value)} ts {want.timestamp} headers {want.headers}")
    if len(got_list) != len(expected):
        common = min(len(got_list), len(expected))
        extra = got_list[common:common + 3] or expected[common:common + 3]
        return (f"the log returned {len(got_list)} records, the model expects {len(expected)}; "
                f"first offsets past the common part: {[r.offset for r in extra]}")
    return None


def _short(value: bytes | None) -> str:
    if value is None:
        return "None"
    return repr(value[:24]) + (f"...({len(value)} bytes)" if len(value) > 24 else "")
