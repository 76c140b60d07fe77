"""A log's producer state across loads and truncations (Kafka's ``UnifiedLog.rebuildProducerState``
and the transaction completion after a marker's append).

The producer state (``storage.producer_state``) is a cache of what the log's batches say about
each producer; these functions bring it in line with the segments after the log was opened or cut.
"""

from __future__ import annotations

from typing import Callable

from storage.producer_state import CompletedTxn, ProducerStateManager
from storage.segment import LogSegment


def rebuild_producer_state(state: ProducerStateManager, log_end_offset: int, now_ms: int,
                           segments_in_range: Callable[[int, int], list[LogSegment]], *,
                           had_clean_shutdown: bool, load_cut: bool) -> None:
    """Load the newest snapshot at or below ``log_end_offset`` and replay the batches after it
    from ``segments_in_range(from, to)``. A clean shutdown without any snapshot replays nothing,
    unless the load cut something (``load_cut``: the snapshots past the cut are gone, not
    missing)."""
    end = log_end_offset
    snapshots = state.delete_snapshots_above(end)   # e.g. left by batches recovery truncated
    if had_clean_shutdown and not snapshots and not load_cut:
        state.map_end_offset = end
        return
    start = state.load_latest_snapshot(end, now_ms, snapshots)
    for segment in segments_in_range(start, end):
        segment.replay_producer_state(state, start)
    state.map_end_offset = end


def complete_txn(state: ProducerStateManager, segment: LogSegment, txn: CompletedTxn) -> None:
    """Close a transaction whose marker is in ``segment`` (Kafka: the LSO after it goes into the
    aborted transaction's index entry, then the transaction completes)."""
    segment.update_txn_index(txn, state.last_stable_offset_after(txn))
    state.complete_txn(txn)
