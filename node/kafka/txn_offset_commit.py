"""TxnOffsetCommit (key 28, v0-3): a transactional producer's consumed positions (KIP-98, the
offsets of a consume-transform-produce loop), committed through the group's coordinator as part
of the producer's transaction.

Version rules (Kafka's ``KafkaApis.handleTxnOffsetCommitRequest``, ``TxnOffsetCommitRequest``
and ``OffsetMetadataManager.commitTransactionalOffset``): the committed leader epoch from v2;
the generation, member id and instance id from v3 (KIP-447: ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID as for OffsetCommit), before v3 none (generation -1). A
topic or partition the cluster does not have is answered UNKNOWN_TOPIC_OR_PARTITION here. The
group's ``__consumer_offsets`` partition must be in the producer's open transaction
(AddOffsetsToTxn): when the partition's log holds no open transaction of the producer at this
epoch, the transaction coordinator is asked (as a produce's first transactional batch is,
KIP-890's verification), and INVALID_TXN_STATE answers a partition it does not have. The
offsets are answered once their transactional batch is durable and become visible to
OffsetFetch at the transaction's COMMIT marker.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.groups.messages import (
    NO_LEADER_EPOCH,
    CommittedOffset,
    OffsetCommit,
    OffsetCommitResult,
    PartitionError,
    TxnOffsetCommit,
)
from node.kafka.codec import Request, build, response_class
from node.kafka.errors import error_code_for
from node.kafka.context import ServedDir
from node.kafka.offset_commit import partition_errors, split_known
from node.kafka.pending import done, then
from node.kafka.txn_apis import service
from node.kafka.versions import ApiKey
from storage.errors import StorageError

NO_GENERATION = -1


def handle_txn_offset_commit(served: ServedDir, request: Request,
                             client_host: str) -> Future[Any]:
    """The TxnOffsetCommit response to ``request``, once the pending offsets are durable."""
    body, version = request.body, request.api_version
    known, unknown = split_known(served, body.topics)
    offsets = tuple(CommittedOffset(
        topic=topic, partition=int(p.partition_index), offset=int(p.committed_offset),
        leader_epoch=int(getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH)),
        metadata=p.committed_metadata, expire_timestamp_ms=None) for topic, p in known)
    cls = response_class(ApiKey.TXN_OFFSET_COMMIT, version)
    order = [topic.name for topic in body.topics]

    def answer(result: OffsetCommitResult) -> Any:
        return build(cls, {"throttle_time": 0,
                           "topics": partition_errors(order, (*unknown, *result.partitions))})

    def every(code: ErrorCode) -> Any:
        return answer(OffsetCommitResult(tuple(PartitionError(o.topic, o.partition, code)
                                               for o in offsets)))

    if not offsets:
        return done(answer(OffsetCommitResult(())))
    producer_id, producer_epoch = int(body.producer_id), int(body.producer_epoch)
    if body.group_id:
        code = _verify(served, body.transactional_id, producer_id, producer_epoch,
                       served.groups.partition_for(body.group_id))
        if code != ErrorCode.none:
            return done(every(code))
        served.groups.ensure(body.group_id)
    commit = TxnOffsetCommit(
        transactional_id=body.transactional_id, producer_id=producer_id,
        producer_epoch=producer_epoch,
        commit=OffsetCommit(
            group_id=body.group_id,
            generation_id=int(getattr(body, "generation_id", NO_GENERATION)),
            member_id=getattr(body, "member_id", ""),
            group_instance_id=getattr(body, "group_instance_id", None), offsets=offsets))
    return then(served.groups.coordinator.commit_transactional_offsets(commit), answer)


def _verify(served: ServedDir, transactional_id: str, producer_id: int, producer_epoch: int,
            partition: int) -> ErrorCode:
    """NONE when the group's partition of ``__consumer_offsets`` is in the producer's open
    transaction: its log already holds the transaction (an earlier TxnOffsetCommit), or the
    transaction coordinator added it (AddOffsetsToTxn); else INVALID_TXN_STATE, or the
    coordinator's error. A partition not held here is left to the group coordinator
    (NOT_COORDINATOR)."""
    log = served.logdir.get_log(OFFSETS_TOPIC, partition)
    if log is None:
        return ErrorCode.none
    entry = log.producer_state.producers.get(producer_id)
    if entry is not None and entry.epoch == producer_epoch and \
            entry.current_txn_first_offset >= 0:
        return ErrorCode.none
    try:
        added = service(served).verify(transactional_id, producer_id, producer_epoch,
                                       OFFSETS_TOPIC, partition)
    except StorageError as err:
        return error_code_for(err)
    return ErrorCode.none if added else ErrorCode.invalid_txn_state
