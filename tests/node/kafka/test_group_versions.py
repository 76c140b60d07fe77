"""The group APIs' versions on the wire (Kafka's ``KafkaApis`` and request/response classes):
every served version is answered; JoinGroup v0 joins without a known member id and v4+ asks for one (MEMBER_ID_REQUIRED), SyncGroup
v5 needs the protocol type and name, LeaveGroup v0 answers one error, OffsetCommit answers an
unknown partition itself, OffsetFetch v1 puts a group error on each partition and v8 answers
several groups; a JoinGroup parked for a rebalance holds no thread of the pool; a group whose
partition of ``__consumer_offsets`` left the directory, or whose directory went offline, is
NOT_COORDINATOR."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.kafka.server import KafkaServer
from node.kafka.versions import ApiKey
from node.logdir import LogDir
from storage.record_format import Record
from tests.node.kafka.conftest import Serve, take_offline
from tests.node.kafka.wire import WireClient

GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
PROTOCOLS = [{"name": "range", "metadata": b"subscription"}]


def find(client: WireClient, group: str) -> None:
    answer = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    assert answer.error_code == ErrorCode.none


def join(client: WireClient, version: int, group: str, member_id: str = "") -> Any:
    return client.call(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout": 6000, "rebalance_timeout": 6000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": PROTOCOLS, "reason": None})


def test_join_group_v0_joins_at_once_and_v4_asks_for_a_known_member_id(
        serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    with WireClient(server.address) as client:
        find(client, "old")
        old = join(client, 0, "old")
        assert old.error_code == ErrorCode.none and old.generation_id == 1
        assert old.leader == old.member_id and old.protocol_name == "range"
        assert [m.member_id for m in old.members] == [old.member_id]
        find(client, "new")
        asked = join(client, 4, "new")
        assert asked.error_code == ErrorCode.member_id_required and asked.member_id
        assert asked.member_id.startswith("wire-test-")
        joined = join(client, 4, "new", asked.member_id)
        assert joined.error_code == ErrorCode.none and joined.member_id == asked.member_id


def test_sync_group_v5_without_the_protocol_is_inconsistent(serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    with WireClient(server.address) as client:
        find(client, "g")
        joined = join(client, 5, "g")
        joined = join(client, 5, "g", joined.member_id)
        answer = client.call(ApiKey.SYNC_GROUP, 5, {
            "group_id": "g", "generation_id": joined.generation_id,
            "member_id": joined.member_id, "group_instance_id": None, "protocol_type": None,
            "protocol_name": "range", "assignments": []})
        assert answer.error_code == ErrorCode.inconsistent_group_protocol
        synced = client.call(ApiKey.SYNC_GROUP, 5, {
            "group_id": "g", "generation_id": joined.generation_id,
            "member_id": joined.member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": joined.member_id, "assignment": b"all"}]})
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")


def test_leave_group_v0_answers_the_members_error(serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    with WireClient(server.address) as client:
        find(client, "g")
        joined = join(client, 1, "g")
        stranger = client.call(ApiKey.LEAVE_GROUP, 0, {"group_id": "g", "member_id": "nobody"})
        assert stranger.error_code == ErrorCode.unknown_member_id
        left = client.call(ApiKey.LEAVE_GROUP, 0, {"group_id": "g",
                                                   "member_id": joined.member_id})
        assert left.error_code == ErrorCode.none


def test_offset_commit_answers_an_unknown_partition_and_fetch_v1_and_v8_read_back(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        find(client, "a")
        find(client, "b")
        committed = client.call(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "a", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time": datetime.timedelta(days=1), "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 7, "committed_metadata": "m"},
                    {"partition_index": 3, "committed_offset": 1, "committed_metadata": ""}]},
                {"name": "nowhere", "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]})
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in committed.topics] == [
            ("t", [(3, ErrorCode.unknown_topic_or_partition), (0, ErrorCode.none)]),
            ("nowhere", [(0, ErrorCode.unknown_topic_or_partition)])]
        old = client.call(ApiKey.OFFSET_FETCH, 1, {"group_id": "a", "topics": [
            {"name": "t", "partition_indexes": [0]}]})
        [[partition]] = [t.partitions for t in old.topics]
        assert (partition.committed_offset, partition.metadata, partition.error_code) == (
            7, "m", ErrorCode.none)
        both = client.call(ApiKey.OFFSET_FETCH, 8, {"require_stable": False, "groups": [
            {"group_id": "a", "topics": None}, {"group_id": "b", "topics": None}]})
        assert [(g.group_id, g.error_code, [(t.name, [p.committed_offset for p in t.partitions])
                                            for t in g.topics]) for g in both.groups] == [
            ("a", ErrorCode.none, [("t", [7])]), ("b", ErrorCode.none, [])]


def test_a_group_whose_partition_left_the_directory_is_not_coordinated_here(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    with WireClient(server.address) as client:
        find(client, "g")
        partition = server.groups.partition_for("g")
        assert partition in server.groups.loaded()
        logdir.delete_logs(OFFSETS_TOPIC, [partition])
        old = client.call(ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": [
            {"name": "t", "partition_indexes": [0, 1]}]})
        # v1 has no group error: it is on each partition the answer names (Kafka names none)
        assert all((p.error_code, p.committed_offset) == (ErrorCode.not_coordinator, -1)
                   for t in old.topics for p in t.partitions)
        current = client.call(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None,
                                                       "require_stable": False})
        assert current.error_code == ErrorCode.not_coordinator
        heartbeat = client.call(ApiKey.HEARTBEAT, 4, {
            "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
        assert heartbeat.error_code == ErrorCode.not_coordinator
    assert partition not in server.groups.loaded()


def test_a_parked_join_holds_no_thread_of_the_pool(serve: Serve) -> None:
    server: KafkaServer = serve(dotted=GROUPS, num_io_threads="1")
    with WireClient(server.address) as first, WireClient(server.address) as second:
        find(first, "g")
        leader = join(first, 1, "g")
        first.call(ApiKey.SYNC_GROUP, 1, {
            "group_id": "g", "generation_id": leader.generation_id,
            "member_id": leader.member_id, "assignments": []})
        parked: list[Any] = []
        joiner = threading.Thread(target=lambda: parked.append(join(second, 1, "g")))
        joiner.start()
        with WireClient(server.address) as third:
            # the second member's join waits for the leader to rejoin; meanwhile the one thread
            # of the pool answers others
            metadata = third.call(ApiKey.METADATA, 1, {"topics": None})
            assert metadata.brokers[0].node_id == 0
            beat = first.call(ApiKey.HEARTBEAT, 1, {"group_id": "g", "generation_id": 1,
                                                    "member_id": leader.member_id})
            assert beat.error_code == ErrorCode.rebalance_in_progress
            assert not parked
            rejoined = join(first, 1, "g", leader.member_id)
        joiner.join(10)
        assert rejoined.error_code == ErrorCode.none and rejoined.generation_id == 2
        assert [p.error_code for p in parked] == [ErrorCode.none]
        assert parked[0].generation_id == 2


def test_a_directory_gone_offline_unloads_its_groups(logdir: LogDir, serve: Serve,
                                                     tmp_path: Path) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        find(client, "g")
        committed = client.call(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        assert server.groups.loaded() == frozenset(range(3))
        logdir.log("t", 0).append([Record(value=b"x", timestamp=1)])
        aside = tmp_path / "aside"
        aside.mkdir()
        take_offline(logdir, "t", 0, aside)
        fetched = client.call(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None,
                                                       "require_stable": False})
        assert fetched.error_code == ErrorCode.not_coordinator
        listed = client.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert listed.groups == ()
    assert server.groups.loaded() == frozenset()


def test_group_admin_at_their_first_versions_and_offset_delete(logdir: LogDir,
                                                               serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        find(client, "admin")
        joined = join(client, 1, "admin")
        client.call(ApiKey.SYNC_GROUP, 0, {
            "group_id": "admin", "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": b"a"}]})
        commit = {"group_id": "admin", "generation_id_or_member_epoch": joined.generation_id,
                  "member_id": joined.member_id, "retention_time": datetime.timedelta(-1),
                  "topics": [{"name": "t", "partitions": [
                      {"partition_index": 0, "committed_offset": 5,
                       "committed_metadata": ""}]}]}
        assert client.call(ApiKey.OFFSET_COMMIT, 2, commit).topics[0].partitions[0] \
            .error_code == ErrorCode.none
        listed = client.call(ApiKey.LIST_GROUPS, 0, {})
        assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("admin", "consumer")]
        only_empty = client.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Empty"]})
        assert only_empty.groups == ()
        described = client.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["admin", "nobody"]})
        first, second = described.groups
        assert (first.group_state, first.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.client_id, m.member_assignment) for m in first.members] == [
            (joined.member_id, "wire-test", b"a")]
        assert (second.error_code, second.group_state, second.members) == (
            ErrorCode.none, "Dead", ())
        subscribed = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "admin", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]},
            {"name": "nowhere", "partitions": [{"partition_index": 0}]}]})
        assert subscribed.error_code == ErrorCode.none
        # its subscription is no ConsumerProtocol one: Kafka takes it as subscribed to every topic
        assert [(t.name, [p.error_code for p in t.partitions]) for t in subscribed.topics] == [
            ("t", [ErrorCode.group_subscribed_to_topic]),
            ("nowhere", [ErrorCode.unknown_topic_or_partition])]
        busy = client.call(ApiKey.DELETE_GROUPS, 0, {"groups_names": ["admin"]})
        assert [(r.group_id, r.error_code) for r in busy.results] == [
            ("admin", ErrorCode.non_empty_group)]
        client.call(ApiKey.LEAVE_GROUP, 0, {"group_id": "admin", "member_id": joined.member_id})
        deleted = client.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["admin", "admin"]})
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("admin", ErrorCode.none)]
        assert client.call(ApiKey.LIST_GROUPS, 0, {}).groups == ()


@pytest.mark.parametrize("api,versions", [
    (ApiKey.JOIN_GROUP, range(0, 10)), (ApiKey.SYNC_GROUP, range(0, 6)),
    (ApiKey.HEARTBEAT, range(0, 5)), (ApiKey.LEAVE_GROUP, range(0, 6)),
    (ApiKey.OFFSET_COMMIT, range(2, 10)), (ApiKey.OFFSET_FETCH, range(1, 10)),
    (ApiKey.LIST_GROUPS, range(0, 6)), (ApiKey.DESCRIBE_GROUPS, range(0, 6)),
    (ApiKey.DELETE_GROUPS, range(0, 3))])
def test_every_served_version_is_answered(logdir: LogDir, serve: Serve, api: ApiKey,
                                          versions: range) -> None:
    """Each version's request decodes and its answer encodes: a member unknown to the group
    (UNKNOWN_MEMBER_ID), a join that completes, a simple commit read back, admin answers."""
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        for version in versions:
            group = f"g{api}-{version}"
            find(client, group)
            member = {"group_id": group, "generation_id": 1, "member_id": "stranger",
                      "group_instance_id": None, "protocol_type": "consumer",
                      "protocol_name": "range", "assignments": [],
                      "members": [{"member_id": "stranger", "group_instance_id": None,
                                   "reason": None}]}
            if api == ApiKey.JOIN_GROUP:
                answer = join(client, version, group)
                if answer.error_code == ErrorCode.member_id_required:
                    answer = join(client, version, group, answer.member_id)
                assert (answer.error_code, answer.generation_id) == (ErrorCode.none, 1)
            elif api in (ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT):
                answer = client.call(api, version, member)
                assert answer.error_code == ErrorCode.unknown_member_id
            elif api == ApiKey.LEAVE_GROUP:
                answer = client.call(api, version, member)
                codes = [answer.error_code, *(m.error_code for m in
                                              getattr(answer, "members", ()))]
                assert ErrorCode.unknown_member_id in codes
            elif api == ApiKey.OFFSET_COMMIT:
                answer = client.call(api, version, {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "retention_time": datetime.timedelta(-1),
                    "topics": [{"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": version,
                         "committed_leader_epoch": -1, "committed_metadata": None}]}]})
                assert answer.topics[0].partitions[0].error_code == ErrorCode.none
            elif api == ApiKey.OFFSET_FETCH:
                topics = [{"name": "t", "partition_indexes": [0]}]
                answer = client.call(api, version, {
                    "group_id": group, "topics": topics, "require_stable": False,
                    "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                "topics": topics}]})
                found = answer.groups[0].topics if version >= 8 else answer.topics
                assert [(p.committed_offset, p.error_code)
                        for t in found for p in t.partitions] == [(-1, ErrorCode.none)]
            elif api == ApiKey.LIST_GROUPS:
                answer = client.call(api, version, {"states_filter": [], "types_filter": []})
                assert answer.error_code == ErrorCode.none
            elif api == ApiKey.DESCRIBE_GROUPS:
                answer = client.call(api, version, {"groups": [group],
                                                    "include_authorized_operations": False})
                assert [(g.group_id, g.group_state) for g in answer.groups] == [(group, "Dead")]
            else:
                answer = client.call(api, version, {"groups_names": [group]})
                assert [(r.group_id, r.error_code) for r in answer.results] == [
                    (group, ErrorCode.group_id_not_found)]
