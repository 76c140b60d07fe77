"""A segment's transactions (Kafka's ``LogSegment.updateTxnIndex`` and the producer-state replay
of ``LogSegment.recover``): replaying its producer batches into a ``ProducerStateManager`` and
rebuilding its ``.txnindex`` from the ``.log``.

These functions are the bodies of ``LogSegment.update_txn_index``, ``replay_producer_state``
and ``rebuild_txn_index``; ``segment_read.producer_batch_headers`` finds the batches. They take
the segment as a ``TxnSegment``: its batches, its ``.txnindex`` and where its batches end.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterable, Protocol

from storage.segment_read import SegmentFile, producer_batch_headers
from storage.txn_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from storage.producer_state import CompletedTxn, ProducerStateManager
    from storage.records import BatchHeader

ProducerBatches = Iterable[tuple[int, int, "BatchHeader"]]   # (position, size, header)


class TxnSegment(SegmentFile, Protocol):
    """What the replay needs of a segment beyond its batches (``LogSegment`` is one)."""

    @property
    def txn_index(self) -> TransactionIndex: ...

    def read_next_offset(self) -> int: ...


def update_txn_index(txn_index: TransactionIndex, completed: CompletedTxn,
                     last_stable_offset: int) -> None:
    """``LogSegment.update_txn_index``: an aborted transaction gets a ``.txnindex`` entry."""
    if completed.is_aborted:
        txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                    completed.last_offset, last_stable_offset))


def replay_producer_state(segment: TxnSegment, state: ProducerStateManager,
                          from_offset: int | None = None, *, write_txn_index: bool = False,
                          batches: ProducerBatches | None = None) -> None:
    """``LogSegment.replay_producer_state`` (see its contract). ``batches``: the segment's
    producer batches as (position, size, header), in order, when the caller already has them
    (a recovery that just checked every batch); else they are read from the ``.log``."""
    if batches is None:
        position = 0
        if from_offset is not None and from_offset > segment.base_offset:
            position = segment.offset_index.lookup(from_offset).position
        batches = producer_batch_headers(segment, position)
    for batch_position, size, header in batches:
        if from_offset is not None and header.last_offset < from_offset:
            continue
        completed = state.replay_batch(header, partial(segment.read_bytes, batch_position, size))
        if completed is not None:
            if write_txn_index:
                update_txn_index(segment.txn_index, completed,
                                 state.last_stable_offset_after(completed))
            state.complete_txn(completed)
    state.advance_map_end_offset(segment.read_next_offset())


def rebuild_txn_index(segment: TxnSegment, state: ProducerStateManager,
                      batches: ProducerBatches | None = None) -> None:
    """``LogSegment.rebuild_txn_index`` (see its contract); ``batches`` as
    ``replay_producer_state`` takes them."""
    segment.txn_index.reset()
    replay_producer_state(segment, state, write_txn_index=True, batches=batches)
