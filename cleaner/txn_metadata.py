"""``CleanedTransactionMetadata``: the cleaner's view of transactions while it walks batches in
offset order (Kafka's class of that name in LogCleaner.scala).

It is fed the aborted transactions overlapping the range being read (from the ``.txnindex``
files) and every batch in order. It answers, per batch, whether the batch may be discarded:

* a transactional data batch may be discarded when it belongs to an aborted transaction (its
  producer has an aborted transaction whose first offset is at or below the batch and whose abort
  marker has not been read yet);
* an abort marker may be discarded when no batch of its transaction was read in this pass (they
  were all removed by earlier cleans); otherwise it stays, and its ``AbortedTxn`` entry is written
  to ``cleaned_index`` (the ``.txnindex`` of the segment being written), if one is set;
* a commit marker may be discarded when no batch of its transaction was read in this pass;
* an empty control batch (already cleaned) may be discarded; other control types are kept.

A marker that may be discarded is not dropped at once: the cleaner gives it a delete horizon first
(KIP-534) and drops it in a clean after the horizon. Not thread-safe: one per cleaned group.
"""

from __future__ import annotations

import heapq
from typing import Iterable

from storage.records import ControlType
from storage.txn_index import AbortedTxn, TransactionIndex


class CleanedTransactionMetadata:
    """See the module docstring."""

    def __init__(self, cleaned_index: TransactionIndex | None = None) -> None:
        self.cleaned_index = cleaned_index
        self._pending: list[tuple[int, int, AbortedTxn]] = []     # heap by first offset
        self._queued: set[tuple[int, int]] = set()                # (producer, marker) seen once
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, int | None]] = {}
        self._ongoing_committed: set[int] = set()

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        """Queue aborted transactions; one already queued (same producer and marker) is ignored,
        so overlapping lookups per segment may be added as they come."""
        for txn in aborted:
            ident = (txn.producer_id, txn.last_offset)
            if ident not in self._queued:
                self._queued.add(ident)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, None))

    def on_batch_read(self, producer_id: int, last_offset: int, is_transactional: bool) -> bool:
        """A data batch was read; returns whether it belongs to an aborted transaction (Kafka's
        onBatchRead)."""
        self._consume_aborted_up_to(last_offset)
        if not is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(producer_id)
        if ongoing is not None:
            self._ongoing_aborted[producer_id] = (ongoing[0], last_offset)
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(self, producer_id: int, last_offset: int,
                              control_type: int | None) -> bool:
        """A control batch was read (``control_type`` None: it holds no record); returns whether
        it may be discarded (Kafka's onControlBatchRead). A kept abort marker's entry goes to
        ``cleaned_index``."""
        self._consume_aborted_up_to(last_offset)
        if control_type is None:
            return True
        if control_type == ControlType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        if control_type == ControlType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False
