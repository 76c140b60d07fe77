"""``OffsetManager``: the committed offsets of one ``__consumer_offsets`` partition, Kafka's
``OffsetMetadataManager`` for classic groups.

Every operation that changes offsets returns the records that make the change durable, and has
already applied them: the coordinator appends them (in the order given, before any record of a
later operation) and answers only then. If the append fails the coordinator unloads the whole
partition, so this state is never ahead of a log that stays in use. Loading replays the
partition's records in log order through ``replay`` and ``replay_end_transaction``, which
leave the same state as the operations that wrote them.

Transactional offset commits (KIP-98, TxnOffsetCommit) stay pending per producer id until the
transaction's marker: COMMIT moves them into the committed offsets, unless a plain commit of the
same partition came later in the log (Kafka keeps the most recent by record offset; here, by
the order of the records this manager made or replayed), ABORT drops them. A tombstone drops
the partition's pending offsets too.

The group, member and generation checks of a request are the coordinator's and come first;
this class does the per-partition work. Not thread-safe: the coordinator holds the partition's
lock around every call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from node.groups.config import GroupCoordinatorConfig
from node.groups.messages import (
    NO_LEADER_EPOCH, NO_OFFSET, CommittedOffset, FetchedOffset, OffsetCommit,
    OffsetCommitResult, OffsetDelete, OffsetDeleteResult, OffsetFetch, OffsetFetchResult,
    PartitionError)
from node.groups.records import (
    CoordinatorRecord, OffsetCommitKey, OffsetCommitValue, offset_commit_record)
from storage.clock import Clock

CONSUMER_PROTOCOL_TYPE = "consumer"
EMPTY = "Empty"
STABLE = "Stable"
NO_METADATA = ""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator holds it (Kafka's ``OffsetAndMetadata``).

    ``leader_epoch`` -1 is none; ``expire_timestamp_ms`` only from OffsetCommit v2-4 with a
    retention time; ``sequence`` orders the records this manager made or replayed (Kafka's
    ``recordOffset``), so a transaction's COMMIT keeps the more recent of a transactional and a
    plain commit of one partition."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None
    sequence: int

    @classmethod
    def from_record(cls, value: OffsetCommitValue, sequence: int) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms,
                   value.expire_timestamp_ms, sequence)

    def to_record(self) -> OffsetCommitValue:
        return OffsetCommitValue(self.offset, self.leader_epoch, self.metadata,
                                 self.commit_timestamp_ms, self.expire_timestamp_ms)


@dataclass(frozen=True, slots=True)
class OffsetExpirationCondition:
    """When a group's committed offsets expire (KIP-211; Kafka's ``OffsetExpirationConditionImpl``
    with the group's ``isSubscribedToTopic``).

    An offset with an explicit expire timestamp expires at that time. Any other expires
    ``offsets.retention.minutes`` after its base: ``empty_since_ms`` (an Empty group's
    current-state timestamp: the retention counts from when the group lost its last member) or,
    when that is None, the offset's own commit timestamp. Offsets of a topic the group
    subscribes to never expire (``subscribed_topics``; ``every_topic_subscribed`` when the group
    uses the consumer protocol but its subscriptions are not known), and neither does one with a
    pending transactional commit. Build it with ``expiration_condition``."""

    empty_since_ms: int | None = None
    subscribed_topics: frozenset[str] = frozenset()
    every_topic_subscribed: bool = False

    def is_subscribed(self, topic: str) -> bool:
        return self.every_topic_subscribed or topic in self.subscribed_topics

    def base_timestamp_ms(self, offset: OffsetAndMetadata) -> int:
        return offset.commit_timestamp_ms if self.empty_since_ms is None else self.empty_since_ms

    def is_expired(self, offset: OffsetAndMetadata, now_ms: int, retention_ms: int) -> bool:
        if offset.expire_timestamp_ms is not None:
            return now_ms >= offset.expire_timestamp_ms
        return now_ms - self.base_timestamp_ms(offset) >= retention_ms


def expiration_condition(protocol_type: str | None, state: str,
                         current_state_timestamp_ms: int | None,
                         subscribed_topics: frozenset[str] | None
                         ) -> OffsetExpirationCondition | None:
    """The condition for a classic group (Kafka's ``ClassicGroup.offsetExpirationCondition``),
    or None when none of its offsets may expire now.

    ``protocol_type`` None or "" is a standalone group (offsets committed without membership):
    offsets expire from their commit. An Empty group's expire from ``current_state_timestamp_ms``
    (from their commit when None: metadata written before Kafka 2.1). A Stable group using the
    consumer protocol whose ``subscribed_topics`` are known: offsets of the other topics expire
    from their commit. Any other group (rebalancing, or not knowing its topics): None.
    ``state`` is one of "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead";
    ``subscribed_topics`` is what the members' consumer-protocol subscriptions name (empty for a
    consumer group without members), None when not known."""
    uses_consumer_protocol = protocol_type == CONSUMER_PROTOCOL_TYPE
    topics = subscribed_topics or frozenset()
    every_topic = subscribed_topics is None and uses_consumer_protocol
    if not protocol_type:
        return OffsetExpirationCondition(None, topics, every_topic)
    if state == EMPTY:
        return OffsetExpirationCondition(current_state_timestamp_ms, topics, every_topic)
    if uses_consumer_protocol and subscribed_topics is not None and state == STABLE:
        return OffsetExpirationCondition(None, topics, every_topic)
    return None


class _Offsets:
    """Offsets by group, topic and partition (Kafka's ``Offsets``); empty maps are removed."""

    __slots__ = ("by_group",)

    def __init__(self) -> None:
        self.by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.by_group.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self.by_group.setdefault(group, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self.by_group.get(group)
        if topics is None or topic not in topics:
            return None
        removed = topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.by_group[group]
        return removed

    def of_group(self, group: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partitions in self.by_group.get(group, {}).items():
            for partition, offset in partitions.items():
                yield topic, partition, offset


class OffsetManager:
    """The committed and pending transactional offsets of one ``__consumer_offsets`` partition.

    ``_pending`` holds each open transaction's offsets by producer id; ``_open_transactions``
    the producer ids that committed offsets of a group (Kafka's ``openTransactionsByGroup``) and
    ``_transaction_groups`` the reverse, both kept until the transaction's marker even when a
    tombstone dropped the offsets themselves. Not thread-safe."""

    def __init__(self, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._offsets = _Offsets()
        self._pending: dict[int, _Offsets] = {}
        self._open_transactions: dict[str, set[int]] = {}
        self._transaction_groups: dict[int, set[str]] = {}
        self._sequence = 0

    # ---- requests ------------------------------------------------------------------------------

    def commit(self, request: OffsetCommit
               ) -> tuple[OffsetCommitResult, list[CoordinatorRecord]]:
        """Kafka's ``commitOffset`` after validation: each partition is committed with the
        clock's time as its commit timestamp (and its expire timestamp when given), or answered
        OFFSET_METADATA_TOO_LARGE when its metadata is longer than ``offset.metadata.max.bytes``
        (counted in UTF-16 units, as Java's ``String.length``). One record per committed
        partition, in request order."""
        return self._commit(request, producer_id=None)

    def commit_transactional(self, producer_id: int, producer_epoch: int, request: OffsetCommit
                             ) -> tuple[OffsetCommitResult, list[CoordinatorRecord]]:
        """Kafka's ``commitTransactionalOffset`` after validation: like ``commit`` (expire
        timestamps ignored: TxnOffsetCommit has none), but the offsets stay pending for
        ``producer_id`` until ``complete_transaction``. The coordinator appends the records as a
        transactional batch of ``producer_id`` at ``producer_epoch``; the log's producer state
        fences an old epoch, so the epoch is not kept here: each record carries the producer."""
        result, records = self._commit(request, producer_id=producer_id)
        return result, [CoordinatorRecord(r.key, r.value, (producer_id, producer_epoch))
                        for r in records]

    def _commit(self, request: OffsetCommit, producer_id: int | None
                ) -> tuple[OffsetCommitResult, list[CoordinatorRecord]]:
        now = self._clock.milliseconds()
        answers: list[PartitionError] = []
        records: list[CoordinatorRecord] = []
        for committed in request.offsets:
            if self._metadata_too_large(committed.metadata):
                answers.append(PartitionError(committed.topic, committed.partition,
                                              ErrorCode.offset_metadata_too_large))
                continue
            answers.append(PartitionError(committed.topic, committed.partition, ErrorCode.none))
            key = OffsetCommitKey(request.group_id, committed.topic, committed.partition)
            value = self._value(committed, now, transactional=producer_id is not None)
            records.append(offset_commit_record(key, value))
            self.replay(key, value, producer_id)
        return OffsetCommitResult(tuple(answers)), records

    def _metadata_too_large(self, metadata: str | None) -> bool:
        if metadata is None:
            return False
        java_length = len(metadata.encode("utf-16-le", "surrogatepass")) // 2
        return java_length > self._config.offset_metadata_max_bytes

    @staticmethod
    def _value(committed: CommittedOffset, now_ms: int, transactional: bool) -> OffsetCommitValue:
        return OffsetCommitValue(
            offset=committed.offset, leader_epoch=committed.leader_epoch,
            metadata=NO_METADATA if committed.metadata is None else committed.metadata,
            commit_timestamp_ms=now_ms,
            expire_timestamp_ms=None if transactional else committed.expire_timestamp_ms)

    def fetch(self, request: OffsetFetch) -> OffsetFetchResult:
        """Kafka's ``fetchOffsets``/``fetchAllOffsets``: each asked partition's committed
        offset, or -1, epoch -1 and "" when it has none; every committed offset of the group
        (by topic, then partition) when ``partitions`` is None. With ``require_stable`` a
        partition with a pending transactional offset is UNSTABLE_OFFSET_COMMIT instead."""
        group = request.group_id
        if request.partitions is None:
            asked: Iterable[tuple[str, int]] = sorted(
                (topic, partition) for topic, partition, _ in self._offsets.of_group(group))
        else:
            asked = request.partitions
        answers = []
        for topic, partition in asked:
            offset = self._offsets.get(group, topic, partition)
            if request.require_stable and self.has_pending_offset(group, topic, partition):
                answers.append(FetchedOffset(topic, partition,
                                             error_code=ErrorCode.unstable_offset_commit))
            elif offset is None:
                answers.append(FetchedOffset(topic, partition))
            else:
                answers.append(FetchedOffset(topic, partition, offset.offset, offset.leader_epoch,
                                             offset.metadata))
        return OffsetFetchResult(group, ErrorCode.none, tuple(answers))

    def delete(self, request: OffsetDelete, subscribed_topics: frozenset[str]
               ) -> tuple[OffsetDeleteResult, list[CoordinatorRecord]]:
        """Kafka's ``deleteOffsets`` after validation: a partition of a topic in
        ``subscribed_topics`` (the group's ``isSubscribedToTopic``) is answered
        GROUP_SUBSCRIBED_TO_TOPIC and kept; any other is answered NONE and gets a tombstone when
        it has a committed or pending offset. A consumer group whose subscriptions are not known
        counts as subscribed to every topic (pass the request's topics then)."""
        group = request.group_id
        answers: list[PartitionError] = []
        doomed: list[tuple[str, int]] = []
        for topic, partition in request.partitions:
            if topic in subscribed_topics:
                answers.append(PartitionError(topic, partition,
                                              ErrorCode.group_subscribed_to_topic))
                continue
            answers.append(PartitionError(topic, partition, ErrorCode.none))
            if self.has_committed_offset(group, topic, partition) or \
                    self.has_pending_offset(group, topic, partition):
                doomed.append((topic, partition))
        return OffsetDeleteResult(ErrorCode.none, tuple(answers)), self._tombstones(group, doomed)

    def delete_group(self, group_id: str) -> list[CoordinatorRecord]:
        """Kafka's ``deleteAllOffsets`` (DeleteGroups): a tombstone for every committed offset
        of the group, and one for every pending transactional offset of a partition without a
        committed one."""
        doomed = {(topic, partition): None
                  for topic, partition, _ in self._offsets.of_group(group_id)}
        for producer_id in sorted(self._open_transactions.get(group_id, ())):
            for topic, partition, _ in self._pending[producer_id].of_group(group_id):
                doomed.setdefault((topic, partition))
        return self._tombstones(group_id, list(doomed))

    def expire(self, group_id: str,
               condition: OffsetExpirationCondition | None) -> list[CoordinatorRecord]:
        """Kafka's ``cleanupExpiredOffsets``: tombstones for the group's committed offsets that
        ``condition`` expires now (None: none expires), skipping topics the group subscribes to
        and partitions with a pending transactional offset. Afterwards ``has_offsets`` False
        means every offset expired and no transaction is open: the coordinator then deletes
        an Empty group."""
        if condition is None:
            return []
        now = self._clock.milliseconds()
        retention = self._config.offsets_retention_ms
        doomed = [(topic, partition)
                  for topic, partition, offset in self._offsets.of_group(group_id)
                  if not condition.is_subscribed(topic)
                  and condition.is_expired(offset, now, retention)
                  and not self.has_pending_offset(group_id, topic, partition)]
        return self._tombstones(group_id, doomed)

    def delete_partitions(self, partitions: Iterable[tuple[str, int]]
                          ) -> list[CoordinatorRecord]:
        """Kafka's ``onPartitionsDeleted``: tombstones for every committed or pending offset of
        these (deleted) topic partitions, in every group."""
        gone = set(partitions)
        doomed: dict[OffsetCommitKey, None] = {}
        for store in (self._offsets, *self._pending.values()):
            for group, topics in store.by_group.items():
                for topic, by_partition in topics.items():
                    for partition in by_partition:
                        if (topic, partition) in gone:
                            doomed.setdefault(OffsetCommitKey(group, topic, partition))
        records = []
        for key in doomed:
            records.append(offset_commit_record(key, None))
            self.replay(key, None)
        return records

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """The marker of ``producer_id``'s transaction was written: its pending offsets become
        committed (``committed``) or are dropped. Same as ``replay_end_transaction``."""
        self.replay_end_transaction(producer_id, committed)

    def _tombstones(self, group: str, doomed: list[tuple[str, int]]) -> list[CoordinatorRecord]:
        records = []
        for topic, partition in doomed:
            key = OffsetCommitKey(group, topic, partition)
            records.append(offset_commit_record(key, None))
            self.replay(key, None)
        return records

    # ---- state ---------------------------------------------------------------------------------

    def offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        """The committed offset, or None."""
        return self._offsets.get(group_id, topic, partition)

    def pending_offset(self, producer_id: int, group_id: str, topic: str,
                       partition: int) -> OffsetAndMetadata | None:
        """``producer_id``'s pending transactional offset, or None."""
        pending = self._pending.get(producer_id)
        return None if pending is None else pending.get(group_id, topic, partition)

    def has_committed_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return self._offsets.get(group_id, topic, partition) is not None

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """True while an open transaction holds an offset of this partition for the group."""
        return any(self._pending[producer_id].get(group_id, topic, partition) is not None
                   for producer_id in self._open_transactions.get(group_id, ()))

    def has_pending_transactions(self, group_id: str) -> bool:
        """True while a transaction that committed offsets of the group has no marker yet."""
        return group_id in self._open_transactions

    def has_offsets(self, group_id: str) -> bool:
        """True when the group has a committed offset or an open transaction."""
        return group_id in self._offsets.by_group or group_id in self._open_transactions

    def group_ids(self) -> frozenset[str]:
        """Every group with a committed offset or an open transaction (at load, the coordinator
        makes a standalone group of each one it has no metadata for, as Kafka's replay does)."""
        return frozenset(self._offsets.by_group) | frozenset(self._open_transactions)

    # ---- replay --------------------------------------------------------------------------------

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None,
               producer_id: int | None = None) -> None:
        """Apply one offset commit record, in log order (Kafka's ``replay``): a value commits the
        offset, or holds it pending for ``producer_id`` when the record is transactional; a
        tombstone (None) deletes the committed offset and the partition's pending offsets."""
        group, topic, partition = key.group, key.topic, key.partition
        self._sequence += 1
        if value is not None:
            offset = OffsetAndMetadata.from_record(value, self._sequence)
            if producer_id is None:
                self._offsets.put(group, topic, partition, offset)
            else:
                self._pending.setdefault(producer_id, _Offsets()).put(group, topic, partition,
                                                                      offset)
                self._open_transactions.setdefault(group, set()).add(producer_id)
                self._transaction_groups.setdefault(producer_id, set()).add(group)
            return
        self._offsets.remove(group, topic, partition)
        for open_producer in self._open_transactions.get(group, ()):
            self._pending[open_producer].remove(group, topic, partition)

    def replay_end_transaction(self, producer_id: int, committed: bool) -> None:
        """Apply a COMMIT (``committed``) or ABORT marker of ``producer_id`` (Kafka's
        ``replayEndTransactionMarker``): its pending offsets move to the committed ones, each
        only when more recent than the partition's committed offset, or are dropped. A marker
        of a producer without pending offsets changes nothing."""
        pending = self._pending.pop(producer_id, None)
        if pending is None:
            return
        for group in self._transaction_groups.pop(producer_id):
            producers = self._open_transactions[group]
            producers.discard(producer_id)
            if not producers:
                del self._open_transactions[group]
        if not committed:
            return
        for group, topics in pending.by_group.items():
            for topic, partitions in topics.items():
                for partition, offset in partitions.items():
                    existing = self._offsets.get(group, topic, partition)
                    if existing is None or offset.sequence > existing.sequence:
                        self._offsets.put(group, topic, partition, offset)


__all__ = ["OffsetAndMetadata", "OffsetExpirationCondition", "OffsetManager",
           "expiration_condition"]
