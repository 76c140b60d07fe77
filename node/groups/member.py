"""``ClassicGroupMember``: one member of a classic group (Kafka's ``ClassicGroupMember``): who it
is, the protocols it offers (name, metadata) in its order of preference, its timeouts, its
assignment, and the JoinGroup/SyncGroup answers it is waiting for."""

from __future__ import annotations

from concurrent.futures import Future

from node.groups.messages import DescribedMember, JoinGroupResult, SyncGroupResult

EMPTY_ASSIGNMENT = b""

Protocols = tuple[tuple[str, bytes], ...]


class ClassicGroupMember:
    """Owned by its ``ClassicGroup``; not thread-safe (the partition's lock guards it)."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, supported_protocols: Protocols,
                 assignment: bytes = EMPTY_ASSIGNMENT) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join: Future[JoinGroupResult] | None = None
        self.awaiting_sync: Future[SyncGroupResult] | None = None
        # a member added by a JoinGroup whose join phase has not completed yet: its heartbeat
        # expiry removes it even while it awaits the join (Kafka's isNew)
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        """The member's metadata for ``protocol_name``; ``ValueError`` if it does not offer it."""
        for name, metadata in self.supported_protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def has_satisfied_heartbeat(self) -> bool:
        """A member awaiting a join or sync answer needs no heartbeat, unless it is new."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: Protocols) -> bool:
        return tuple(protocols) == tuple(self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        """The first of the member's protocols among ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def describe(self, protocol_name: str | None) -> DescribedMember:
        """DescribeGroups' view: the chosen protocol's metadata when ``protocol_name`` is given."""
        return DescribedMember(
            member_id=self.member_id, group_instance_id=self.group_instance_id,
            client_id=self.client_id, client_host=self.client_host,
            metadata=self.metadata(protocol_name) if protocol_name is not None else b"",
            assignment=self.assignment)

    def __repr__(self) -> str:
        return (f"ClassicGroupMember({self.member_id!r}, instance={self.group_instance_id!r}, "
                f"protocols={[name for name, _ in self.supported_protocols]})")
