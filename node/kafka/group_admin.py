"""The group admin APIs: ListGroups (key 16, v0-5), DescribeGroups (key 15, v0-5) and
DeleteGroups (key 42, v0-2), answered from this broker's coordinator (Kafka's ``KafkaApis``
handlers: an admin client asks every broker for ListGroups and each group's coordinator for the
others).

ListGroups lists the groups of every ``__consumer_offsets`` partition loaded here; v4+ filters
by state (an empty filter is every state), v5+ by type: every group here is "classic", so a type
filter without it lists none. DescribeGroups answers an unknown group as "Dead" with no members;
v3+ carries the authorized operations, INT32 min when not asked for (nor computed: there are no
ACLs). DeleteGroups deletes only empty groups (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.messages import GroupDeletion, GroupDescription, GroupListing
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.pending import done, then
from node.kafka.versions import ApiKey

CLASSIC = "classic"
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def handle_list_groups(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The ListGroups response to ``request``."""
    body, version = request.body, request.api_version
    cls = response_class(ApiKey.LIST_GROUPS, version)
    states = frozenset(getattr(body, "states_filter", ())) or None
    types = {t.lower() for t in getattr(body, "types_filter", ())}

    def answer(groups: list[GroupListing]) -> Any:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type,
             "group_state": g.state, "group_type": CLASSIC} for g in groups]})

    if types and CLASSIC not in types:
        return done(answer([]))
    served.groups.sync()
    return then(served.groups.coordinator.list_groups(states), answer)


def handle_describe_groups(served: ServedDir, request: Request, client_host: str
                           ) -> Future[Any]:
    """The DescribeGroups response to ``request``."""
    body, version = request.body, request.api_version
    group_ids = list(dict.fromkeys(body.groups))
    for group_id in group_ids:
        served.groups.ensure(group_id)
    cls = response_class(ApiKey.DESCRIBE_GROUPS, version)

    def answer(groups: list[GroupDescription]) -> Any:
        return build(cls, {"throttle_time": 0, "groups": [
            {"error_code": g.error_code, "group_id": g.group_id, "group_state": g.state,
             "protocol_type": g.protocol_type, "protocol_data": g.protocol,
             "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "members": [
                 {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                  "client_id": m.client_id, "client_host": m.client_host,
                  "member_metadata": m.metadata, "member_assignment": m.assignment}
                 for m in g.members]} for g in groups]})

    return then(served.groups.coordinator.describe_groups(group_ids), answer)


def handle_delete_groups(served: ServedDir, request: Request, client_host: str) -> Future[Any]:
    """The DeleteGroups response to ``request``, once the deletions are durable."""
    body, version = request.body, request.api_version
    group_ids = list(dict.fromkeys(body.groups_names))
    for group_id in group_ids:
        served.groups.ensure(group_id)
    cls = response_class(ApiKey.DELETE_GROUPS, version)

    def answer(results: list[GroupDeletion]) -> Any:
        return build(cls, {"throttle_time": 0, "results": [
            {"group_id": r.group_id, "error_code": r.error_code} for r in results]})

    return then(served.groups.coordinator.delete_groups(group_ids), answer)
