"""The APIs this server answers and the versions of each it advertises in ApiVersions.

Only what is implemented is advertised (clients switch code paths on by the keys they see), and
never a version below kio's floor (kio holds Kafka 4.x's schemas: Produce from v3, Fetch from v4,
ListOffsets from v1). Fetch stops at v12: v13+ names topics by id. ListOffsets stops at v7 (the
max-timestamp query); Produce goes to v11, whose only change is a new error code we never send.
DescribeLogDirs stops at v4: kafka-python takes v5 for a Kafka 4.3 broker and would switch on what
such a broker offers. OffsetForLeaderEpoch starts at v2 (kio's floor, what librdkafka sends). The classic group APIs
are served whole; OffsetCommit starts at v2 and OffsetFetch at v1 (kio's floors, Kafka's since
v0 kept offsets in ZooKeeper) and stop at v9 (v10 names topics by id); OffsetCommit v9 is v8 for
a classic group.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ApiKey(IntEnum):
    """Kafka's API keys (``ApiKeys``) of the APIs served here."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    DESCRIBE_CLUSTER = 60
    INIT_PRODUCER_ID = 22
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_PRODUCERS = 61
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    OFFSET_FOR_LEADER_EPOCH = 23
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    FIND_COORDINATOR = 10
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    TXN_OFFSET_COMMIT = 28


@dataclass(frozen=True, slots=True)
class VersionRange:
    """The versions of one API served: ``min_version`` to ``max_version``, both included."""

    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


SUPPORTED: dict[int, VersionRange] = {
    ApiKey.PRODUCE: VersionRange(3, 11),
    ApiKey.FETCH: VersionRange(4, 12),
    ApiKey.LIST_OFFSETS: VersionRange(1, 7),
    ApiKey.METADATA: VersionRange(0, 12),
    ApiKey.API_VERSIONS: VersionRange(0, 4),
    ApiKey.INIT_PRODUCER_ID: VersionRange(0, 4),
    ApiKey.CREATE_TOPICS: VersionRange(2, 7),
    ApiKey.DELETE_TOPICS: VersionRange(1, 5),
    ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
    ApiKey.DELETE_RECORDS: VersionRange(0, 2),
    ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
    ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
    ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: VersionRange(1, 2),
    ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 3),     # v4+: KIP-890's broker verification
    ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 3),
    ApiKey.END_TXN: VersionRange(0, 3),                   # v5+: transaction version 2
    ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 3),         # v4+: transaction version 2
    ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),
    ApiKey.LIST_TRANSACTIONS: VersionRange(0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
    ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
    ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),
    ApiKey.FIND_COORDINATOR: VersionRange(0, 4),
    ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
    ApiKey.OFFSET_FETCH: VersionRange(1, 9),
    ApiKey.JOIN_GROUP: VersionRange(0, 9),
    ApiKey.HEARTBEAT: VersionRange(0, 4),
    ApiKey.LEAVE_GROUP: VersionRange(0, 5),
    ApiKey.SYNC_GROUP: VersionRange(0, 5),
    ApiKey.DESCRIBE_GROUPS: VersionRange(0, 5),
    ApiKey.LIST_GROUPS: VersionRange(0, 5),
    ApiKey.DELETE_GROUPS: VersionRange(0, 2),
    ApiKey.OFFSET_DELETE: VersionRange(0, 0),
}
