"""What the group coordinator is asked and answers (``node.groups.coordinator.GroupCoordinator``),
as plain values: the fields of Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups requests and
responses that the classic protocol uses, with the wire's names. Error codes are Kafka's
(``kio.schema.errors.ErrorCode``); timeouts and timestamps are milliseconds. The protocol layer
(``node.kafka``) maps every API version onto these, so the coordinator never sees a version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_GENERATION = -1
NO_LEADER_EPOCH = -1
NO_OFFSET = -1


# ---- membership -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JoinGroup:
    """A JoinGroup request. ``member_id`` is "" for a new member; ``require_known_member_id``
    is true from v4 (KIP-394: an unknown member gets MEMBER_ID_REQUIRED and a new id);
    ``rebalance_timeout_ms`` is ``session_timeout_ms`` for v0, which has none."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]      # (name, metadata), in the member's order
    reason: str | None = None
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False        # v9+


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup response. ``members`` is every member (with the chosen protocol's metadata)
    for the leader, empty for followers."""

    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroup:
    """A SyncGroup request; ``assignments`` (member id -> assignment) from the leader only.
    ``protocol_type``/``protocol_name`` are given from v5, else None."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """One member of a LeaveGroup request (v0-2 name one member by id)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """``error_code`` is the request's (v0-2 report only it); ``members`` each one's."""

    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()


# ---- offsets ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition's offset to commit. ``expire_timestamp_ms`` only from OffsetCommit v2-4
    with a retention time (written as value version 1, as Kafka does)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """An OffsetCommit request. A simple (standalone) commit has ``generation_id`` -1, an empty
    ``member_id`` and no instance id."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    """A TxnOffsetCommit request: ``commit``'s offsets, pending in the transaction of
    ``producer_id`` at ``producer_epoch`` until its marker. Before v3 ``commit`` has generation
    -1, an empty member id and no instance id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: OffsetCommit


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    partitions: tuple[PartitionError, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    """One group of an OffsetFetch request; ``partitions`` None asks for every committed
    offset of the group (v2+)."""

    group_id: str
    partitions: tuple[tuple[str, int], ...] | None
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """A committed offset as OffsetFetch answers it: offset -1 and metadata "" when none.
    UNSTABLE_OFFSET_COMMIT while a transactional commit for it is pending and
    ``require_stable``."""

    topic: str
    partition: int
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """``error_code`` is the group's (e.g. COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR)."""

    group_id: str
    error_code: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    group_id: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    """``error_code`` is the group's; each partition's is GROUP_SUBSCRIBED_TO_TOPIC while the
    group consumes its topic."""

    error_code: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


# ---- admin ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str                  # "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes             # the chosen protocol's subscription (empty unless Stable/Completing)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """DescribeGroups' answer for one group: an unknown group is state "Dead" with no members
    and error NONE, as Kafka answers."""

    group_id: str
    error_code: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol: str = ""          # the chosen assignor, Kafka's protocol_data
    members: tuple[DescribedMember, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class GroupDeletion:
    """DeleteGroups' answer for one group: NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ..."""

    group_id: str
    error_code: ErrorCode
