"""Where a group or a transactional id lives: its partition of ``__consumer_offsets`` or of the
transaction state log, as Kafka computes both (``GroupCoordinatorService.partitionFor``,
``TransactionStateManager.partitionFor``: ``Utils.abs(key.hashCode) % partitions``), with
Java's ``String.hashCode``. Plain functions without imports: the cluster, the brokers and the
offline tools all place keys with them."""

from __future__ import annotations

INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` over the UTF-16 code units (a character beyond U+FFFF counts
    as its two surrogates), in int32 arithmetic."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: 0 for ``Integer.MIN_VALUE``, whose ``Math.abs`` is negative."""
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    """The partition of ``group_id`` (or a transactional id) among ``partitions``."""
    return kafka_abs(java_string_hash(group_id)) % partitions
