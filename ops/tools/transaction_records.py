"""Records of ``__transaction_state``: one per transactional id, decoded as Kafka's
``DumpLogSegments --transaction-log-decoder`` prints them (``TransactionLog.
formatRecordKeyAndValue`` at the commit of reference/kafka-storage.md).

Layouts (wire rules: ``ops.tools.kafka_messages``; ``?`` = nullable)::

    key   => Version int16 (only 0 is known) | transactionalId: string
    value => Version int16 (0 or 1; flexible from 1; a null value is a tombstone) |
             producerId: int64 | producerEpoch: int16 | transactionTimeoutMs: int32 |
             transactionStatus: int8 | transactionPartitions: [topic: string |
             partitionIds: [int32]]? | transactionLastUpdateTimestampMs: int64 |
             transactionStartTimestampMs: int64
             tagged fields (v1): 0 previousProducerId int64 (default -1) |
                                 1 nextProducerId int64 (default -1) |
                                 2 clientTransactionVersion int16 (default 0)

Printed (one line)::

    key: transaction_metadata::transactionalId=<id> payload: producerId:<id>,producerEpoch:<e>,
    state=<Ongoing|...>,partitions=[<topic>-<p>,...],txnLastUpdateTimestamp=<ms>,txnTimeoutMs=<ms>

``payload: <DELETE>`` for a tombstone; ``key: unknown::version=<v>`` and no payload for a key
version other than 0. The partitions of an ``Empty`` transaction are not printed; the others
print in the iteration order of the Scala ``mutable.HashSet`` Kafka collects them in
(``scala_hash_set_order``). Where Kafka's tool throws (no key, bytes that do not read, an
unknown value version, state id or ``clientTransactionVersion``, null partitions outside
``Empty``) the line is ``key: Error at offset <n>, skipping. <why>``, with Kafka's exception
message as the reason where it has one.
"""

from __future__ import annotations

from typing import Any

from node.groups.placement import java_string_hash
from ops.tools.kafka_messages import (
    Field, SkippedRecord, Struct, plain, read_record_part, record_version)

TOMBSTONE = "<DELETE>"
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "Dead", "PrepareEpochFence")        # Kafka's TransactionState ids 0..7
EMPTY = 0
CLIENT_TRANSACTION_VERSIONS = (0, 1, 2)      # TransactionVersion TV_0..TV_2
KEY_VERSIONS = (0, 0)
VALUE_VERSIONS = (0, 1)

TRANSACTION_LOG_KEY = Struct("TransactionLogKey", "0", "none", (
    Field("transactionalId", "string", "0"),
))
PARTITIONS = Struct("PartitionsSchema", "0-1", "1+", (
    Field("topic", "string"),
    Field("partitionIds", "[]int32"),
))
TRANSACTION_LOG_VALUE = Struct("TransactionLogValue", "0-1", "1+", (
    Field("producerId", "int64"),
    Field("previousProducerId", "int64", "1+", tag=0, default=-1),
    Field("nextProducerId", "int64", "1+", tag=1, default=-1),
    Field("producerEpoch", "int16"),
    Field("transactionTimeoutMs", "int32"),
    Field("transactionStatus", "int8"),
    Field("transactionPartitions", "[]struct", nullable="0+", struct=PARTITIONS),
    Field("transactionLastUpdateTimestampMs", "int64"),
    Field("transactionStartTimestampMs", "int64"),
    Field("clientTransactionVersion", "int16", "1+", tag=2, default=0),
))


def decode(key: bytes | None, value: bytes | None,
           offset: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``({"type": "0", "data": key fields}, {"version": "<v>", "data": value fields} or None for
    a tombstone)``. Raises ``SkippedRecord`` (its text is ``unknown::version=<v>`` for a key
    version other than 0)."""
    if key is None:
        raise SkippedRecord(f"Error at offset {offset}, skipping. The record has no key.")
    key_version = record_version(key, "key", offset)
    if not KEY_VERSIONS[0] <= key_version <= KEY_VERSIONS[1]:
        raise SkippedRecord(f"unknown::version={key_version}")
    key_data = read_record_part(TRANSACTION_LOG_KEY, key, key_version, "key", offset)
    decoded_key = {"type": str(key_version), "data": key_data}
    if value is None:
        return decoded_key, None
    version = record_version(value, "value", offset)
    if not VALUE_VERSIONS[0] <= version <= VALUE_VERSIONS[1]:
        raise SkippedRecord(f"Error at offset {offset}, skipping. Unknown version {version} from "
                            f"the transaction log message value")
    value_data = read_record_part(TRANSACTION_LOG_VALUE, value, version, "value", offset)
    return decoded_key, {"version": str(version), "data": value_data}



def _payload_text(txn: dict[str, Any], offset: int) -> str:
    """Kafka's text of a TransactionMetadata rebuilt from a value. Raises ``SkippedRecord``
    where Kafka's ``readTxnRecordValue`` throws."""
    status = txn["transactionStatus"]
    if not 0 <= status < len(STATES):
        raise SkippedRecord(f"Error at offset {offset}, skipping. Unknown transaction state id "
                            f"{status} from the transaction status message")
    level = txn.get("clientTransactionVersion", 0)
    if level not in CLIENT_TRANSACTION_VERSIONS:
        raise SkippedRecord(f"Error at offset {offset}, skipping. No feature:transaction.version "
                            f"with feature level {level}")
    partitions: list[tuple[str, int]] = []
    if status != EMPTY:
        groups = txn["transactionPartitions"]
        if groups is None:
            raise SkippedRecord(f"Error at offset {offset}, skipping. transactionPartitions is "
                                f"null in state {STATES[status]}")
        partitions = scala_hash_set_order([(g["topic"], g["partitionIds"]) for g in groups])
    listed = ",".join(f"{topic}-{partition}" for topic, partition in partitions)
    return (f"producerId:{txn['producerId']},producerEpoch:{txn['producerEpoch']},"
            f"state={STATES[status]},partitions=[{listed}],"
            f"txnLastUpdateTimestamp={txn['transactionLastUpdateTimestampMs']},"
            f"txnTimeoutMs={txn['transactionTimeoutMs']}")


def format_record(key: bytes | None, value: bytes | None,
                  offset: int) -> tuple[str | None, str | None]:
    """The ``key:`` and ``payload:`` texts Kafka prints for one record (None: not printed)."""
    try:
        decoded_key, decoded_value = decode(key, value, offset)
        payload = (TOMBSTONE if decoded_value is None
                   else _payload_text(decoded_value["data"], offset))
    except SkippedRecord as skipped:
        return skipped.text, None
    return f"transaction_metadata::transactionalId={decoded_key['data']['transactionalId']}", \
        payload


def record_json(key: bytes | None, value: bytes | None, offset: int) -> dict[str, Any]:
    """``{"key": {...}, "payload": {...}}`` with the fields as Kafka's JSON converters name them
    (payload null for a tombstone), or ``{"decodeError": <the line printed instead>}`` when the
    bytes do not read. A state id or feature level Kafka rejects still decodes here."""
    try:
        decoded_key, decoded_value = decode(key, value, offset)
    except SkippedRecord as skipped:
        return {"decodeError": skipped.text}
    return {"key": plain(decoded_key), "payload": plain(decoded_value)}


# ---- Scala's mutable.HashSet iteration order ---------------------------------------------------
HASH_SET_INITIAL_CAPACITY = 16
HASH_SET_LOAD_FACTOR = 0.75
SMALL_SET_MAX = 4          # Scala's immutable Set1..Set4; larger sets are immutable.HashSet


def _java_int(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's ``TopicPartition.hashCode()``."""
    return _java_int(31 * (31 + partition) + java_string_hash(topic))


def _improve(h: int) -> int:
    return _java_int(h ^ ((h & 0xFFFFFFFF) >> 16))


def _table_size_for(capacity: int) -> int:
    highest = 1 << (max(capacity - 1, 4).bit_length() - 1)
    return min(highest * 2, 1 << 30)


def scala_hash_set_order(groups: list[tuple[str, list[int]]]) -> list[tuple[str, int]]:
    """The order in which Scala 2.13's ``mutable.HashSet`` lists the topic-partitions added as
    ``set ++= partitionIds.map(TopicPartition(topic, _)).toSet`` for each group in turn.

    The set walks its table bucket by bucket; a bucket is the low bits of the improved hash
    (``h ^ (h >>> 16)``) and keeps its nodes sorted by that hash (ties in insertion order), so
    the order depends only on the final table length. ``++=`` first grows the table to fit the
    added set alone; a set of at most 4 is then added one by one (each add doubles a table
    about to pass 3/4 full), a larger one without further growth."""
    length = HASH_SET_INITIAL_CAPACITY
    threshold = int(length * HASH_SET_LOAD_FACTOR)
    entries: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, ids in groups:
        added = list(dict.fromkeys(ids))
        hinted = _table_size_for(int((len(added) + 1) / HASH_SET_LOAD_FACTOR))
        if hinted > length:
            length, threshold = hinted, int(hinted * HASH_SET_LOAD_FACTOR)
        for partition in added:
            if len(added) <= SMALL_SET_MAX and len(entries) + 1 >= threshold:
                length *= 2
                threshold = int(length * HASH_SET_LOAD_FACTOR)
            if (topic, partition) not in entries:
                entries[(topic, partition)] = (_improve(topic_partition_hash(topic, partition)),
                                               len(entries))
    return sorted(entries, key=lambda tp: (entries[tp][0] & (length - 1), entries[tp]))


__all__ = ["TRANSACTION_LOG_KEY", "TRANSACTION_LOG_VALUE", "decode", "format_record",
           "java_string_hash", "record_json", "scala_hash_set_order", "topic_partition_hash"]
