"""What ListGroups and DescribeGroups show of classic groups (Kafka's
``ClassicGroup.asListedGroup`` and ``GroupMetadataManager.describeGroups``)."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from node.groups.classic_group import ClassicGroup, GroupState
from node.groups.messages import GroupDescription, GroupListing


def list_groups(groups: Mapping[str, ClassicGroup],
                states: frozenset[str] | None) -> list[GroupListing]:
    """Every group, or those in ``states`` (names compared without regard to case; an empty
    or None filter keeps all)."""
    wanted = None if not states else {s.strip().lower() for s in states}
    return [GroupListing(g.group_id, g.protocol_type or "", str(g.state))
            for g in groups.values()
            if wanted is None or str(g.state).lower() in wanted]


def describe_group(groups: Mapping[str, ClassicGroup], group_id: str) -> GroupDescription:
    """A Stable group with its protocol and each member's metadata for it; any other without
    either; an unknown group as Dead with no error, as Kafka answers."""
    group = groups.get(group_id)
    if group is None:
        return GroupDescription(group_id, ErrorCode.none)
    stable = group.is_in(GroupState.STABLE)
    return GroupDescription(
        group_id, ErrorCode.none, state=str(group.state),
        protocol_type=group.protocol_type or "",
        protocol=(group.protocol_name or "") if stable else "",
        members=tuple(m.describe(group.protocol_name if stable else None)
                      for m in group.members))
