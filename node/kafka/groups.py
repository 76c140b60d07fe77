"""The classic group membership APIs: JoinGroup (key 11, v0-9), SyncGroup (key 14, v0-5),
Heartbeat (key 12, v0-4) and LeaveGroup (key 13, v0-5), each version mapped onto
``node.groups.messages`` and the coordinator's answer back (Kafka's ``KafkaApis`` handlers and
the request/response classes' version rules):

* JoinGroup v0 has no rebalance timeout: the session timeout stands for it; v4+ requires a known
  member id (KIP-394: an empty one is answered MEMBER_ID_REQUIRED with an id to rejoin with);
  ``group_instance_id`` from v5, ``reason`` from v8, the leader's ``skip_assignment`` from v9;
  before v7 the response has no protocol type and a null protocol name is sent as "".
* SyncGroup v5+ must name the protocol type and name (else INCONSISTENT_GROUP_PROTOCOL, without
  asking the coordinator); ``group_instance_id`` from v3.
* LeaveGroup v0-2 name one member and answer one error (the request's, else that member's);
  v3+ name several and answer each.

Each handler runs in the server's pool: it loads the group's partition when this directory just
got it (``ServedGroups.ensure``) and returns a future of the response, which completes when the
coordinator answers (a JoinGroup parks for the rebalance).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.messages import (
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    LeavingMember,
    SyncGroup,
    SyncGroupResult,
)
from node.kafka.codec import Request, build, millis, response_class
from node.kafka.context import ServedDir
from node.kafka.pending import done, then
from node.kafka.versions import ApiKey

REQUIRE_KNOWN_MEMBER_ID_VERSION = 4
SKIP_ASSIGNMENT_VERSION = 9
JOIN_PROTOCOL_TYPE_VERSION = 7
SYNC_PROTOCOL_VERSION = 5
LEAVE_BATCH_VERSION = 3


def handle_join_group(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The JoinGroup response to ``request`` from ``client_host``, once the rebalance ends."""
    body, version = request.body, request.api_version
    served.groups.ensure(body.group_id)
    session_ms = millis(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)
    join = JoinGroup(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.client_id or "", client_host=client_host,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        reason=getattr(body, "reason", None),
        require_known_member_id=version >= REQUIRE_KNOWN_MEMBER_ID_VERSION,
        supports_skip_assignment=version >= SKIP_ASSIGNMENT_VERSION)
    cls = response_class(ApiKey.JOIN_GROUP, version)

    def answer(result: JoinGroupResult) -> Any:
        protocol_name = result.protocol_name
        if version < JOIN_PROTOCOL_TYPE_VERSION and protocol_name is None:
            protocol_name = ""
        return build(cls, {
            "throttle_time": 0, "error_code": result.error_code,
            "generation_id": result.generation_id, "protocol_type": result.protocol_type,
            "protocol_name": protocol_name, "leader": result.leader,
            "skip_assignment": result.skip_assignment, "member_id": result.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in result.members]})

    return then(served.groups.coordinator.join_group(join), answer)


def handle_sync_group(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The SyncGroup response to ``request``, once the leader's assignment is there."""
    body, version = request.body, request.api_version
    cls = response_class(ApiKey.SYNC_GROUP, version)

    def answer(result: SyncGroupResult) -> Any:
        return build(cls, {"throttle_time": 0, "error_code": result.error_code,
                           "protocol_type": result.protocol_type,
                           "protocol_name": result.protocol_name,
                           "assignment": result.assignment})

    protocol_type = getattr(body, "protocol_type", None)
    protocol_name = getattr(body, "protocol_name", None)
    if version >= SYNC_PROTOCOL_VERSION and (protocol_type is None or protocol_name is None):
        return done(answer(SyncGroupResult(ErrorCode.inconsistent_group_protocol)))
    served.groups.ensure(body.group_id)
    sync = SyncGroup(
        group_id=body.group_id, generation_id=int(body.generation_id),
        member_id=body.member_id, group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments))
    return then(served.groups.coordinator.sync_group(sync), answer)


def handle_heartbeat(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The Heartbeat response to ``request``."""
    body, version = request.body, request.api_version
    served.groups.ensure(body.group_id)
    heartbeat = Heartbeat(group_id=body.group_id, generation_id=int(body.generation_id),
                          member_id=body.member_id,
                          group_instance_id=getattr(body, "group_instance_id", None))
    cls = response_class(ApiKey.HEARTBEAT, version)
    return then(served.groups.coordinator.heartbeat(heartbeat),
                lambda code: build(cls, {"throttle_time": 0, "error_code": code}))


def handle_leave_group(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The LeaveGroup response to ``request``."""
    body, version = request.body, request.api_version
    served.groups.ensure(body.group_id)
    if version < LEAVE_BATCH_VERSION:
        members: tuple[LeavingMember, ...] = (LeavingMember(body.member_id),)
    else:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id,
                                      getattr(m, "reason", None)) for m in body.members)
    cls = response_class(ApiKey.LEAVE_GROUP, version)

    def answer(result: LeaveGroupResult) -> Any:
        if version < LEAVE_BATCH_VERSION:
            return build(cls, {"throttle_time": 0, "error_code": single_error(result)})
        return build(cls, {"throttle_time": 0, "error_code": result.error_code, "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "error_code": m.error_code} for m in result.members]})

    return then(served.groups.coordinator.leave_group(LeaveGroup(body.group_id, members)),
                answer)


def single_error(result: LeaveGroupResult) -> ErrorCode:
    """The one error of a v0-2 LeaveGroup response: the request's, else the first member's
    (Kafka's ``LeaveGroupResponse.getError``)."""
    if result.error_code != ErrorCode.none:
        return result.error_code
    return next((m.error_code for m in result.members if m.error_code != ErrorCode.none),
                ErrorCode.none)
