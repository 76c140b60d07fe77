"""The rules of a Kafka client's transaction (``TxnKind.KAFKA``): what InitProducerId,
AddPartitionsToTxn and EndTxn make of a transactional id's state, or which Kafka error they
answer. Pure functions over ``TxnMetadata`` (Kafka's ``TransactionCoordinator.
prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction`` and ``endTransaction`` for
a client of transaction version 1, read for behaviour); ``TransactionCoordinator`` holds the
id's lock, calls them and writes what they return.

Kafka's ``pendingState`` (a transition written but not yet applied) has no counterpart: the
coordinator writes and applies under the id's lock, and completes a Prepare* before it answers,
so CONCURRENT_TRANSACTIONS comes only from a Prepare* left by a failed marker write (completed
by the next ``tick``) and from the fencing of an Ongoing transaction by InitProducerId.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from cluster.transactions.txn_state import (
    ProducerFencedError,
    TransactionStateError,
    TxnKind,
    TxnMetadata,
    TxnState,
)
from node.kafka.transactions import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767                      # Short.MAX_VALUE


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``TransactionMetadata.isEpochExhausted``: one bump left for fencing."""
    return epoch >= MAX_EPOCH - 1


def new_kafka_txn(transactional_id: str, producer_id: int, timeout_ms: int,
                  now_ms: int) -> TxnMetadata:
    """A transactional id seen for the first time: ``producer_id``, epoch 0, Empty."""
    return TxnMetadata(transactional_id, 0, TxnState.EMPTY, timeout_ms, update_ms=now_ms,
                       kind=TxnKind.KAFKA, producer_id=producer_id)


def check_kind(meta: TxnMetadata) -> None:
    """``TransactionStateError`` for a Strata transaction met by a Kafka client's call."""
    if meta.kind != TxnKind.KAFKA:
        raise TransactionStateError(
            f"transactional id {meta.transactional_id} belongs to a Strata transaction "
            "(Cluster.begin_transaction), not to a Kafka producer",
            transactional_id=meta.transactional_id, kind=meta.kind.value)


class InitStep(enum.Enum):
    """What InitProducerId does with an existing id."""

    BUMP = "bump"          # Empty or Complete*: a new epoch (or a new producer id), Empty
    FENCE = "fence"        # Ongoing: abort it with epoch + 1, answer CONCURRENT_TRANSACTIONS


def init_step(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> InitStep:
    """The step InitProducerId takes for ``meta``, or its error: PRODUCER_FENCED when a v3+
    client names a producer id that is not the id's (``isValidProducerId``),
    CONCURRENT_TRANSACTIONS while a Prepare* is being completed."""
    check_kind(meta)
    if producer_id != NO_PRODUCER_ID and producer_id != meta.producer_id:
        raise ProducerFencedError(
            f"transactional id {meta.transactional_id}: producer id {producer_id} is not its "
            f"producer {meta.producer_id}", transactional_id=meta.transactional_id,
            producer_id=producer_id, current_producer_id=meta.producer_id)
    if meta.state.preparing:
        raise ConcurrentTransactionsError(
            f"transaction {meta.transactional_id} is {meta.state.value}: retry",
            transactional_id=meta.transactional_id, state=meta.state.value)
    if meta.state == TxnState.ONGOING:
        return InitStep.FENCE
    return InitStep.BUMP


def bumped(meta: TxnMetadata, producer_epoch: int, timeout_ms: int, now_ms: int,
           new_producer_id: Callable[[], int]) -> TxnMetadata:
    """``meta`` (Empty or Complete*) Empty again with the next epoch (Kafka's
    ``prepareIncrementProducerEpoch``), or with a ``new_producer_id()`` and epoch 0 once the epoch
    is exhausted (``prepareProducerIdRotation``). A client's epoch equal to the one before the
    last bump it asked for is a retry of that call: ``meta`` itself is returned. Any other
    epoch that is not the current one is PRODUCER_FENCED."""
    asked = producer_epoch != NO_PRODUCER_EPOCH
    if asked and producer_epoch != meta.epoch and producer_epoch == meta.last_epoch:
        return meta
    if asked and producer_epoch != meta.epoch:
        raise ProducerFencedError(
            f"transactional id {meta.transactional_id}: epoch {producer_epoch} is fenced, the "
            f"current epoch is {meta.epoch}", transactional_id=meta.transactional_id,
            epoch=producer_epoch, current_epoch=meta.epoch)
    if epoch_exhausted(meta.epoch):
        return meta.transition(TxnState.EMPTY, now_ms, producer_id=new_producer_id(), epoch=0,
                               last_epoch=-1, timeout_ms=timeout_ms, start_ms=-1, members={},
                               commit=frozenset())
    return meta.transition(TxnState.EMPTY, now_ms, epoch=meta.epoch + 1,
                           last_epoch=meta.epoch if asked else -1, timeout_ms=timeout_ms,
                           start_ms=-1, members={}, commit=frozenset())


def check_producer(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> None:
    """INVALID_PRODUCER_ID_MAPPING for another producer id, PRODUCER_FENCED for another epoch
    (in Kafka's order)."""
    check_kind(meta)
    if producer_id != meta.producer_id:
        raise InvalidProducerIdMappingError(
            f"transactional id {meta.transactional_id} has producer {meta.producer_id}, not "
            f"{producer_id}", transactional_id=meta.transactional_id, producer_id=producer_id)
    if producer_epoch != meta.epoch:
        raise ProducerFencedError(
            f"transactional id {meta.transactional_id}: epoch {producer_epoch} of producer "
            f"{producer_id} is fenced, the current epoch is {meta.epoch}",
            transactional_id=meta.transactional_id, epoch=producer_epoch,
            current_epoch=meta.epoch)


def with_partitions(meta: TxnMetadata, producer_id: int, producer_epoch: int,
                    partitions: Iterable[tuple[str, int]], now_ms: int) -> TxnMetadata | None:
    """AddPartitionsToTxn: ``meta`` Ongoing with ``partitions`` added (the transaction starts
    now when it was not Ongoing), or None when it holds them already."""
    check_producer(meta, producer_id, producer_epoch)
    if meta.state.preparing:
        raise ConcurrentTransactionsError(
            f"transaction {meta.transactional_id} is {meta.state.value}: retry",
            transactional_id=meta.transactional_id, state=meta.state.value)
    known = meta.members.get(producer_id, frozenset())
    parts = frozenset((str(t), int(p)) for t, p in partitions)
    if meta.state == TxnState.ONGOING and parts <= known:
        return None
    ongoing = meta.state == TxnState.ONGOING
    return meta.transition(TxnState.ONGOING, now_ms,
                           members={producer_id: (known if ongoing else frozenset()) | parts},
                           start_ms=meta.start_ms if ongoing else now_ms, commit=frozenset())


def end_step(meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool) -> bool:
    """EndTxn: True when the transaction is to be ended now (it is Ongoing); False when it
    already ended this way (a retry, answered NONE). CONCURRENT_TRANSACTIONS while it is being
    ended this way, INVALID_TXN_STATE when it ended (or is ending) the other way or is Empty."""
    check_producer(meta, producer_id, producer_epoch)
    if meta.state == TxnState.ONGOING:
        return True
    same = {True: (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT),
            False: (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)}[commit]
    if meta.state == same[0]:
        raise ConcurrentTransactionsError(
            f"transaction {meta.transactional_id} is {meta.state.value}: retry",
            transactional_id=meta.transactional_id, state=meta.state.value)
    if meta.state == same[1]:
        return False
    raise TransactionStateError(
        f"transaction {meta.transactional_id} (epoch {meta.epoch}) is {meta.state.value}: it "
        f"cannot be {'committed' if commit else 'aborted'}",
        transactional_id=meta.transactional_id, state=meta.state.value, epoch=meta.epoch)
