"""TxnOffsetCommit (key 28, v0-3): a consumer's positions committed inside a producer's
transaction (``send_offsets_to_transaction``), through the group's coordinator.

Kafka's ``KafkaApis.handleTxnOffsetCommitRequest`` and ``OffsetMetadataManager
.commitTransactionalOffset``: the offsets become a transactional batch of the producer in the
group's ``__consumer_offsets`` partition, which AddOffsetsToTxn put in the transaction, so the
transaction coordinator's marker commits or aborts them; until then OffsetFetch does not show
them (UNSTABLE_OFFSET_COMMIT with ``require_stable``). v0-2 name no member: generation -1 and
an empty member id, accepted whatever the group's state; v3 adds the generation, member id and
instance id, checked as for OffsetCommit (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID); the committed leader epoch from v2. A topic or partition the cluster does
not have is UNKNOWN_TOPIC_OR_PARTITION, as for OffsetCommit.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from node.groups.messages import (
    NO_GENERATION,
    NO_LEADER_EPOCH,
    CommittedOffset,
    OffsetCommitResult,
    TxnOffsetCommit,
)
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.offset_commit import partition_errors, split_known
from node.kafka.pending import done, then
from node.kafka.versions import ApiKey


def handle_txn_offset_commit(served: ServedDir, request: Request,
                             client_host: str) -> Future[Any]:
    """The TxnOffsetCommit response to ``request``, once the offsets are durable (pending)."""
    body, version = request.body, request.api_version
    known, unknown = split_known(served, body.topics)
    offsets = [CommittedOffset(
        topic=topic, partition=int(p.partition_index), offset=int(p.committed_offset),
        leader_epoch=int(getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH)),
        metadata=p.committed_metadata) for topic, p in known]
    cls = response_class(ApiKey.TXN_OFFSET_COMMIT, version)
    order = [topic.name for topic in body.topics]

    def answer(result: OffsetCommitResult) -> Any:
        return build(cls, {"throttle_time": 0,
                           "topics": partition_errors(order, (*unknown, *result.partitions))})

    if not offsets:
        return done(answer(OffsetCommitResult(())))
    served.groups.ensure(body.group_id)
    commit = TxnOffsetCommit(
        group_id=body.group_id, transactional_id=body.transactional_id,
        producer_id=int(body.producer_id), producer_epoch=int(body.producer_epoch),
        generation_id=int(getattr(body, "generation_id", NO_GENERATION)),
        member_id=getattr(body, "member_id", ""),
        group_instance_id=getattr(body, "group_instance_id", None), offsets=tuple(offsets))
    return then(served.groups.coordinator.commit_transactional_offsets(commit), answer)
