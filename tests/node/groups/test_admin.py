"""ListGroups and DescribeGroups, ported from Kafka's GroupMetadataManagerTest (testListGroups,
testDescribeGroupStable, testDescribeGroupRebalancing, testDescribeGroupsGroupIdNotFound)."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from node.groups.messages import DescribedMember, GroupDescription, GroupListing
from tests.node.groups.harness import GROUP, Harness, join_request

REQUEST = join_request(rebalance_timeout_ms=10000, session_timeout_ms=5000)


def test_list_groups_names_every_group_with_its_state(groups: Harness) -> None:
    groups.join_and_sync_leader(REQUEST)
    other = next(f"g{i}" for i in range(1000)
                 if groups.coordinator.partition_for(f"g{i}") != groups.partition)
    groups.load(groups.coordinator.partition_for(other))
    groups.join(join_request(group_id=other, require_known_member_id=False))
    listed = sorted(groups.coordinator.list_groups().result(0), key=lambda g: g.group_id)
    assert listed == sorted([GroupListing(GROUP, "consumer", "Stable"),
                             GroupListing(other, "consumer", "PreparingRebalance")],
                            key=lambda g: g.group_id)


def test_list_groups_filters_by_state_without_regard_to_case(groups: Harness) -> None:
    groups.join_and_sync_leader(REQUEST)
    coordinator = groups.coordinator
    assert coordinator.list_groups(frozenset({"stable"})).result(0) == [
        GroupListing(GROUP, "consumer", "Stable")]
    assert coordinator.list_groups(frozenset({"Empty", "Dead"})).result(0) == []
    assert len(coordinator.list_groups(frozenset()).result(0)) == 1


def test_describe_a_stable_group_gives_members_with_metadata(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST, assignment=b"given")
    [described] = groups.coordinator.describe_groups([GROUP]).result(0)
    assert described == GroupDescription(
        GROUP, ErrorCode.none, "Stable", "consumer", "range", (DescribedMember(
            joined.member_id, None, "client", "/127.0.0.1", b"\x00\x01", b"given"),))


def test_describe_a_rebalancing_group_gives_no_protocol_nor_metadata(groups: Harness) -> None:
    joined = groups.join_and_sync_leader(REQUEST)
    groups.join(dataclasses.replace(REQUEST, require_known_member_id=False))
    [described] = groups.coordinator.describe_groups([GROUP]).result(0)
    assert (described.state, described.protocol) == ("PreparingRebalance", "")
    assert [m.metadata for m in described.members] == [b"", b""]
    assert described.members[0].member_id == joined.member_id


def test_describe_an_unknown_group_is_dead_without_error(groups: Harness) -> None:
    unknown = next(f"u{i}" for i in range(1000)
                   if groups.coordinator.partition_for(f"u{i}") == groups.partition)
    assert groups.coordinator.describe_groups([unknown]).result(0) == [
        GroupDescription(unknown, ErrorCode.none, "Dead")]
