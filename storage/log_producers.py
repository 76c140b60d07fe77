"""A log's producer state across loads and truncations (Kafka's ``UnifiedLog.rebuildProducerState``
and the transaction completion after a marker's append).

The producer state (``storage.producer_state``) is a cache of what the log's batches say about
each producer; these functions bring it in line with the segments after the log was opened or cut.

A snapshot is trusted only as far as the log confirms it (``snapshot_contradiction``): every
producer it loads whose last batch lies in the log (at or above the log start offset) must have
that batch in the log, at that last offset, with that producer id, epoch and last sequence; every
open transaction it names whose first offset lies in the log must begin there with a
transactional batch of that producer; and nothing it names may lie at or past the snapshot's own
offset. A snapshot the log contradicts is deleted and the next older one tried, down to a replay of
the whole log; so is the case of no snapshot at all, even after a clean shutdown (a clean close
always writes one, so none means they were lost). What lies below the log start offset (the
batches of producers whose segments retention removed) cannot be checked and is taken as the
snapshot says, as Kafka takes it.
"""

from __future__ import annotations

from typing import Protocol

from storage.errors import CorruptIndexError, CorruptRecordError
from storage.producer_state import CompletedTxn, ProducerStateManager
from storage.records import HEADER_SIZE, BatchHeader
from storage.segment import LogSegment



class SegmentsInRange(Protocol):
    """``Log.segments_in_range``: the segments that may hold offsets in [from, to), the first
    ``limit`` of them when given."""

    def __call__(self, from_offset: int, to_offset: int,
                 limit: int | None = None) -> list[LogSegment]: ...


def rebuild_producer_state(state: ProducerStateManager, log_start_offset: int,
                           log_end_offset: int, now_ms: int,
                           segments_in_range: SegmentsInRange) -> None:
    """Load the newest snapshot at or below ``log_end_offset`` that the log does not contradict
    (see the module docstring) and replay the batches after it from ``segments_in_range(from,
    to)``; without one, replay every batch of the log."""
    end = log_end_offset
    snapshots = state.delete_snapshots_above(end)   # e.g. left by batches recovery truncated
    while True:
        start = state.load_latest_snapshot(end, now_ms, snapshots)
        if snapshot_contradiction(state, start, log_start_offset, end,
                                  segments_in_range) is None:
            break
        state.delete_snapshot(start)
        snapshots = [at for at in snapshots if at < start]
    for segment in segments_in_range(start, end):
        segment.replay_producer_state(state, start)
    state.update_map_end_offset(end)


def snapshot_contradiction(state: ProducerStateManager, snapshot_offset: int,
                           log_start_offset: int, log_end_offset: int,
                           segments_in_range: SegmentsInRange) -> str | None:
    """Why the state just loaded from the snapshot at ``snapshot_offset`` contradicts the log,
    or None when it does not (the rules are in the module docstring). One batch header is read
    per producer with a batch or an open transaction in the log."""
    def held(offset: int) -> BatchHeader | None:
        return batch_header_at(offset, log_end_offset, segments_in_range)

    for pid, entry in state.producers.items():
        if entry.batches:
            last = entry.batches[-1]
            if last.last_offset >= snapshot_offset:
                return (f"producer {pid}: batch at offset {last.last_offset}, at or past the "
                        f"snapshot's offset {snapshot_offset}")
            if last.last_offset >= log_start_offset:
                header = held(last.last_offset)
                if (header is None or header.is_control or header.producer_id != pid
                        or header.producer_epoch != entry.epoch
                        or header.last_offset != last.last_offset
                        or header.last_sequence != last.last_seq):
                    return (f"producer {pid}: the log holds no batch of it ending at offset "
                            f"{last.last_offset} with sequence {last.last_seq}")
        first = entry.current_txn_first_offset
        if first >= snapshot_offset:
            return (f"producer {pid}: open transaction from offset {first}, at or past the "
                    f"snapshot's offset {snapshot_offset}")
        if first >= log_start_offset:
            header = held(first)
            if (header is None or header.is_control or not header.is_transactional
                    or header.producer_id != pid or header.base_offset != first):
                return (f"producer {pid}: the log holds no transactional batch of it at offset "
                        f"{first}, where the snapshot says its open transaction begins")
    return None


def batch_header_at(offset: int, log_end_offset: int, segments_in_range: SegmentsInRange
                    ) -> BatchHeader | None:
    """The header of the v2 batch holding ``offset``, or None when the log holds none there (a
    gap, past the end, a batch that fails its checks)."""
    if offset >= log_end_offset:
        return None
    segments = segments_in_range(offset, log_end_offset, limit=2)
    if not segments:
        return None
    next_base = segments[1].base_offset if len(segments) > 1 else log_end_offset
    try:
        found = segments[0].translate_offset(offset, next_base_offset=next_base)
        if found is None or found.base_offset > offset or found.magic < 2:
            return None
        return BatchHeader.parse(segments[0].read_bytes(found.position, HEADER_SIZE))
    except (CorruptRecordError, CorruptIndexError):
        return None


def complete_txn(state: ProducerStateManager, segment: LogSegment, txn: CompletedTxn) -> None:
    """Close a transaction whose marker is in ``segment`` (Kafka: the LSO after it goes into the
    aborted transaction's index entry, then the transaction completes)."""
    segment.update_txn_index(txn, state.last_stable_offset_after(txn))
    state.complete_txn(txn)
