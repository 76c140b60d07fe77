"""``KafkaAdmin``: a small blocking client of the Kafka protocol for the operator tools, the
requests ``kafka-consumer-groups`` makes through Kafka's AdminClient, sent to any Kafka broker
(Strata's or Kafka's own).

    with KafkaAdmin("127.0.0.1:9092") as admin:
        admin.list_groups()                       # every broker's groups
        admin.describe_group("billing")           # state, assignor, members
        admin.committed_offsets("billing")        # {(topic, partition): offset}
        admin.end_offsets([("orders", 0)])        # from each partition's leader

A group's requests go to its coordinator (FindCoordinator, retried while the coordinator is
loading or not yet available); ListOffsets to each partition's leader (Metadata). Each request
uses one fixed version that Kafka 2.4 and later and Strata serve: FindCoordinator v3, ListGroups
v4, DescribeGroups v5, OffsetFetch v7, OffsetCommit v8, OffsetDelete v0, DeleteGroups v2,
ListOffsets v7, Metadata v12. Requests and responses are kio's schema classes; the framing is
Kafka's (``node.kafka.framing``): an int32 size, then the request header v2 (client id) and the
body; the response header v1 for these flexible versions (v0 for OffsetDelete v0).

Each connection speaks as ``security`` says (``ops.tools.client_security.ClientSecurity``: TLS
and SASL from Kafka's client properties; plaintext by default): TLS is set up as the connection
opens, and SASL authenticates it before its first request.

A broker that cannot be reached, a connection that breaks, a TLS handshake or a SASL exchange
that fails, and an error code the caller asked to see raised are ``KafkaAdminError`` naming the
broker and the API.
"""

from __future__ import annotations

import io
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from node.kafka.codec import build
from node.kafka.errors import SaslAuthenticationError
from node.kafka.framing import SIZE, frame
from ops.tools.client_security import ClientSecurity

FIND_COORDINATOR, LIST_GROUPS, DESCRIBE_GROUPS = 10, 16, 15
OFFSET_FETCH, OFFSET_COMMIT, OFFSET_DELETE, DELETE_GROUPS = 9, 8, 47, 42
LIST_OFFSETS, METADATA = 2, 3
VERSIONS = {FIND_COORDINATOR: 3, LIST_GROUPS: 4, DESCRIBE_GROUPS: 5, OFFSET_FETCH: 7,
            OFFSET_COMMIT: 8, OFFSET_DELETE: 0, DELETE_GROUPS: 2, LIST_OFFSETS: 7, METADATA: 12}
API_NAMES = {FIND_COORDINATOR: "FindCoordinator", LIST_GROUPS: "ListGroups",
             DESCRIBE_GROUPS: "DescribeGroups", OFFSET_FETCH: "OffsetFetch",
             OFFSET_COMMIT: "OffsetCommit", OFFSET_DELETE: "OffsetDelete",
             DELETE_GROUPS: "DeleteGroups", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata"}
RETRIABLE = frozenset({ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                       ErrorCode.not_coordinator})
LATEST, EARLIEST = -1, -2          # ListOffsets' special timestamps
RETRY_S = 0.1
Address = tuple[str, int]
TopicPartition = tuple[str, int]


class KafkaAdminError(Exception):
    """A request that failed: ``broker`` ("host:port" or None), ``api`` (its name) and the
    Kafka ``error`` code's name when a broker answered one; ``closed_by_broker`` when the
    broker (every bootstrap server, for a bootstrap request) closed the connection without an
    answer, as a TLS or SASL listener does to a plaintext client."""

    def __init__(self, message: str, *, broker: str | None = None, api: str | None = None,
                 error: str | None = None, closed_by_broker: bool = False) -> None:
        super().__init__(message)
        self.broker = broker
        self.api = api
        self.error = error
        self.closed_by_broker = closed_by_broker

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (str(self), self.broker, self.api, self.error,
                                 self.closed_by_broker))


def _rebuild_error(message: str, broker: str | None, api: str | None, error: str | None,
                   closed_by_broker: bool = False) -> KafkaAdminError:
    return KafkaAdminError(message, broker=broker, api=api, error=error,
                           closed_by_broker=closed_by_broker)


class _ClosedByBroker(ConnectionError):
    """The broker closed the connection before its answer was whole."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as DescribeGroups reports it; ``coordinator`` is the broker that answered
    (node id, host, port)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[Member, ...]
    coordinator: tuple[int, str, int]


def parse_bootstrap(servers: str) -> list[Address]:
    """``host:port[,host:port...]`` as addresses; ``ValueError`` naming the bad entry."""
    addresses = []
    for entry in (part.strip() for part in servers.split(",")):
        if not entry:
            continue
        host, colon, port = entry.rpartition(":")
        if not colon or not port.isdigit() or not host:
            raise ValueError(f"bootstrap server {entry!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError(f"no bootstrap server in {servers!r}")
    return addresses


class _Connection:
    """One blocking connection to one broker, one request at a time."""

    def __init__(self, address: Address, client_id: str, timeout_s: float,
                 security: ClientSecurity) -> None:
        self.name = f"{address[0]}:{address[1]}"
        self._client_id = client_id
        self._correlation = 0
        try:
            self._sock = socket.create_connection(address, timeout=timeout_s)
        except OSError as err:
            raise KafkaAdminError(f"cannot reach the broker {self.name}: {err}",
                                  broker=self.name) from None
        try:
            if security.tls is not None:
                self._sock = security.tls.wrap_socket(self._sock, server_hostname=address[0])
            security.authenticate(self.request, self.name)
        except SaslAuthenticationError as err:
            self._sock.close()
            raise KafkaAdminError(str(err), broker=self.name, api="SaslAuthenticate") from None
        except OSError as err:     # a refused certificate (ssl.SSLError), a timeout, a close
            self._sock.close()
            raise KafkaAdminError(f"TLS with the broker {self.name} failed: "
                                  f"{getattr(err, 'reason', None) or err}",
                                  broker=self.name) from None
        except BaseException:
            self._sock.close()
            raise

    def call(self, api_key: int, values: Mapping[str, Any]) -> Any:
        return self.request(api_key, VERSIONS[api_key], values)

    def request(self, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
        """One request of ``api_key`` at ``version``; its decoded answer."""
        request_cls = load_request_schema(api_key, version)
        response_cls = load_response_schema(api_key, version)
        self._correlation += 1
        header_cls = request_cls.__header_schema__
        out = io.BytesIO()
        entity_writer(header_cls)(out, header_cls(
            request_api_key=api_key, request_api_version=version,
            correlation_id=self._correlation, client_id=self._client_id))
        entity_writer(request_cls)(out, build(request_cls, values))
        api = API_NAMES.get(api_key, f"API {api_key}")
        try:
            self._sock.sendall(frame(out.getvalue()))
            size = SIZE.unpack(self._read(SIZE.size))[0]
            data = self._read(size)
        except OSError as err:
            raise KafkaAdminError(f"{api} to {self.name} failed: {err}", broker=self.name,
                                  api=api, closed_by_broker=isinstance(err, _ClosedByBroker)
                                  ) from None
        header, used = entity_reader(response_cls.__header_schema__)(data, 0)
        if header.correlation_id != self._correlation:
            raise KafkaAdminError(f"{api} to {self.name}: answer to request "
                                  f"{header.correlation_id}, not {self._correlation}",
                                  broker=self.name, api=api)
        body, _ = entity_reader(response_cls)(data, used)
        return body

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise _ClosedByBroker("the broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._sock.close()


class KafkaAdmin:
    """The admin requests of the group tools against the cluster of ``bootstrap_servers``
    (``host:port,...``). Not thread-safe; ``close`` (or ``with``) closes its connections."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "strata-admin",
                 timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security or ClientSecurity()
        self._connections: dict[Address, _Connection] = {}

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # ---- the cluster ---------------------------------------------------------------------------

    def brokers(self) -> dict[int, Address]:
        """Every broker of the cluster by node id (Metadata of no topic)."""
        body = self._bootstrap_call(METADATA, {"topics": (), "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
        return {b.node_id: (b.host, b.port) for b in body.brokers}

    def leaders(self, topics: Iterable[str]) -> dict[TopicPartition, int]:
        """The leader's node id of every partition of ``topics``; ``KafkaAdminError`` naming a
        topic the cluster does not know."""
        names = sorted(set(topics))
        body = self._bootstrap_call(METADATA, {"topics": [{"name": t, "topic_id": None}
                                                          for t in names],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
        leaders = {}
        for topic in body.topics:
            if topic.error_code != ErrorCode.none:
                raise KafkaAdminError(f"topic {topic.name}: {topic.error_code.name}",
                                      api="Metadata", error=topic.error_code.name)
            for partition in topic.partitions:
                leaders[(topic.name, partition.partition_index)] = partition.leader_id
        return leaders

    def topic_partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of ``topics``, sorted."""
        return sorted(self.leaders(topics))

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timestamp: int = LATEST) -> dict[TopicPartition, int]:
        """Each partition's offset for ``timestamp`` (LATEST: the log end; EARLIEST: the log
        start; else the first offset at or after that time, or the log end when none is), asked
        of its leader."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        leaders = self.leaders(t for t, _ in wanted)
        brokers = self.brokers()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in wanted:
            if tp not in leaders:
                raise KafkaAdminError(f"{tp[0]}-{tp[1]}: no such partition", api="ListOffsets",
                                      error=ErrorCode.unknown_topic_or_partition.name)
            by_leader[leaders[tp]].append(tp)
        found: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for topic, partition in tps:
                topics[topic].append({"partition_index": partition, "current_leader_epoch": -1,
                                      "timestamp": timestamp})
            body = self._call(brokers[leader], LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
            for topic in body.topics:
                for p in topic.partitions:
                    self._check(p.error_code, "ListOffsets", brokers[leader],
                                f"{topic.name}-{p.partition_index}")
                    found[(topic.name, p.partition_index)] = p.offset
        missing = [tp for tp in wanted if found.get(tp, -1) < 0 and timestamp >= 0]
        if missing:    # no record at or after the time: the log end, as kafka-consumer-groups
            found.update(self.end_offsets(missing))
        return found

    # ---- groups ------------------------------------------------------------------------------

    def coordinator(self, group_id: str) -> tuple[int, Address]:
        """The node id and address of ``group_id``'s coordinator, asked until one answers or
        the timeout passes."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            body = self._bootstrap_call(FIND_COORDINATOR, {"key": group_id, "key_type": 0})
            if body.error_code == ErrorCode.none:
                return body.node_id, (body.host, body.port)
            if body.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaAdminError(
                    f"no coordinator for group {group_id!r}: {body.error_code.name}"
                    f"{': ' + body.error_message if body.error_message else ''}",
                    api="FindCoordinator", error=body.error_code.name)
            time.sleep(RETRY_S)

    def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """The groups of every broker (each broker lists those it coordinates), sorted by id;
        ``states`` filters (ListGroups v4's filter)."""
        listings = []
        for node_id, address in sorted(self.brokers().items()):
            body = self._call(address, LIST_GROUPS, {"states_filter": tuple(states)})
            self._check(body.error_code, "ListGroups", address, f"broker {node_id}")
            listings.extend(GroupListing(g.group_id, g.protocol_type, g.group_state)
                            for g in body.groups)
        return sorted(listings, key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group as its coordinator knows it; an unknown group is state "Dead"."""
        def ask(address: Address) -> Any:
            return self._call(address, DESCRIBE_GROUPS, {
                "groups": (group_id,), "include_authorized_operations": False}).groups[0]

        node_id, address, group = self._group_call(group_id, ask)
        self._check(group.error_code, "DescribeGroups", address, f"group {group_id!r}")
        members = tuple(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                               bytes(m.member_assignment)) for m in group.members)
        return GroupDescription(group_id, group.group_state, group.protocol_type,
                                group.protocol_data, members, (node_id, *address))

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch of every partition)."""
        def ask(address: Address) -> Any:
            return self._call(address, OFFSET_FETCH, {"group_id": group_id, "topics": None,
                                                      "require_stable": False})

        _, address, body = self._group_call(group_id, ask)
        self._check(body.error_code, "OffsetFetch", address, f"group {group_id!r}")
        offsets = {}
        for topic in body.topics:
            for p in topic.partitions:
                self._check(p.error_code, "OffsetFetch", address,
                            f"group {group_id!r} {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    offsets[(topic.name, p.partition_index)] = p.committed_offset
        return offsets

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group_id`` as a client outside the group does (generation
        -1, no member id): Kafka accepts that only while the group has no members."""
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            topics[topic].append({"partition_index": partition, "committed_offset": offset,
                                  "committed_leader_epoch": -1, "committed_metadata": ""})

        def ask(address: Address) -> Any:
            return self._call(address, OFFSET_COMMIT, {
                "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})

        _, address, body = self._group_call(group_id, ask)
        for topic in body.topics:
            for p in topic.partitions:
                self._check(p.error_code, "OffsetCommit", address,
                            f"group {group_id!r} {topic.name}-{p.partition_index}")

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """Each group's DeleteGroups answer (NONE when deleted, NON_EMPTY_GROUP, ...)."""
        results = {}
        for group_id in group_ids:
            def ask(address: Address, group_id: str = group_id) -> Any:
                return self._call(address, DELETE_GROUPS, {"groups_names": (group_id,)})

            _, _, body = self._group_call(group_id, ask)
            for result in body.results:
                results[result.group_id] = result.error_code
        return results

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: the group's error and each partition's."""
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for topic, partition in sorted(set(partitions)):
            topics[topic].append({"partition_index": partition})

        def ask(address: Address) -> Any:
            return self._call(address, OFFSET_DELETE, {
                "group_id": group_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})

        _, _, body = self._group_call(group_id, ask)
        return body.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in body.topics for p in t.partitions}

    # ---- plumbing ----------------------------------------------------------------------------

    def _group_call(self, group_id: str, ask: Any) -> tuple[int, Address, Any]:
        """``ask(coordinator address)`` again with a new coordinator while the answer is
        NOT_COORDINATOR or the coordinator is loading, until the timeout."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            node_id, address = self.coordinator(group_id)
            body = ask(address)
            code = _first_error(body)
            if code not in RETRIABLE or time.monotonic() > deadline:
                return node_id, address, body
            time.sleep(RETRY_S)

    def _bootstrap_call(self, api_key: int, values: Mapping[str, Any]) -> Any:
        errors = []
        for address in self._bootstrap:
            try:
                return self._call(address, api_key, values)
            except KafkaAdminError as err:
                errors.append(err)
        raise KafkaAdminError("no bootstrap server answered: " + "; ".join(map(str, errors)),
                              api=API_NAMES[api_key],
                              closed_by_broker=all(e.closed_by_broker for e in errors))

    def _call(self, address: Address, api_key: int, values: Mapping[str, Any]) -> Any:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = _Connection(
                address, self._client_id, self._timeout_s, self._security)
        try:
            return connection.call(api_key, values)
        except KafkaAdminError:
            connection.close()
            del self._connections[address]
            raise

    @staticmethod
    def _check(code: ErrorCode, api: str, address: Address, what: str) -> None:
        if code != ErrorCode.none:
            raise KafkaAdminError(f"{api} of {what} at {address[0]}:{address[1]}: {code.name}",
                                  broker=f"{address[0]}:{address[1]}", api=api, error=code.name)


def _first_error(body: Any) -> ErrorCode:
    """The error code a group request's answer carries first (its own, or its first group's or
    partition's): what decides whether to ask another coordinator."""
    code = getattr(body, "error_code", ErrorCode.none)
    if code != ErrorCode.none:
        return code
    for name in ("groups", "results"):
        for item in getattr(body, name, ()) or ():
            if item.error_code != ErrorCode.none:
                return item.error_code
    for topic in getattr(body, "topics", ()) or ():
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                return p.error_code
    return ErrorCode.none
