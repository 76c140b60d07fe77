"""Consumer groups against a real 3-directory Strata cluster, each directory a broker: the first
FindCoordinator creates ``__consumer_offsets`` spread over the directories, a group's
coordinator is the broker of the directory holding its partition (only that broker answers for
the group), and a confluent-kafka consumer group reads everything, commits, and a later member
resumes from the commit, also after the whole cluster restarted."""

from __future__ import annotations

from typing import Any, Iterator

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from cluster import Cluster
from node.groups.config import OFFSETS_TOPIC
from node.groups.placement import partition_for
from node.kafka.versions import ApiKey
from tests.cluster.conftest import FAST, module_cluster_of
from tests.node.kafka.clients import poll_messages, produce_all, producer
from tests.node.kafka.wire import WireClient

OFFSETS_PARTITIONS = 6
PROPERTIES = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
              "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
DEADLINE_S = 40.0


@pytest.fixture(scope="module")
def brokers(ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One 3-directory cluster with ephemeral Kafka ports, shared by the module."""
    with module_cluster_of(ray_session, tmp_path_factory.mktemp("group-brokers"), PROPERTIES,
                           "strata-test-groups") as cluster:
        yield cluster


def endpoints(cluster: Cluster) -> dict[int, tuple[str, int]]:
    """node id -> (host, port) of every broker."""
    return {node_id: (host, port) for node_id, host, port in cluster.kafka_brokers().values()}


def coordinator_of(cluster: Cluster, group: str) -> int:
    """The node id of the directory holding the group's partition of __consumer_offsets."""
    partition = partition_for(group, OFFSETS_PARTITIONS)
    return cluster.description.node_ids[cluster.partition_dir(OFFSETS_TOPIC, partition)]


def test_a_groups_coordinator_is_the_broker_its_find_coordinator_names(
        brokers: Cluster) -> None:
    found = endpoints(brokers)
    asked = min(found)
    with WireClient(found[asked]) as wire:
        answer = wire.call(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": 0, "coordinator_keys": [f"g{i}" for i in range(12)]})
    assert sorted(brokers.partitions(OFFSETS_TOPIC)) == list(range(OFFSETS_PARTITIONS))
    holders = {brokers.partition_dir(OFFSETS_TOPIC, p) for p in range(OFFSETS_PARTITIONS)}
    assert len(holders) == 3                     # spread over the directories
    assert [p.config.get("cleanup.policy") for p in brokers.describe_topic(OFFSETS_TOPIC)] == [
        "compact"] * OFFSETS_PARTITIONS
    named = {c.key: c.node_id for c in answer.coordinators}
    assert all(c.error_code == ErrorCode.none for c in answer.coordinators)
    assert named == {f"g{i}": coordinator_of(brokers, f"g{i}") for i in range(12)}
    assert all((c.host, c.port) == found[c.node_id] for c in answer.coordinators)
    group = next(g for g, node in named.items() if node != asked)
    for node_id, address in found.items():
        with WireClient(address) as wire:
            join = wire.call(ApiKey.JOIN_GROUP, 1, {
                "group_id": group, "session_timeout": 6000, "rebalance_timeout": 6000,
                "member_id": "", "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]})
            expected = ErrorCode.none if node_id == named[group] else ErrorCode.not_coordinator
            assert join.error_code == expected
            if expected == ErrorCode.none:
                left = wire.call(ApiKey.LEAVE_GROUP, 0, {"group_id": group,
                                                         "member_id": join.member_id})
                assert left.error_code == ErrorCode.none


def group_consumer(cluster: Cluster, group: str) -> ck.Consumer:
    return ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False,
                        "enable.partition.eof": False, "session.timeout.ms": 6000,
                        "heartbeat.interval.ms": 500, "socket.timeout.ms": 5000})


def poll(c: ck.Consumer, count: int) -> list[Any]:
    return poll_messages(c, count, DEADLINE_S)


def test_a_consumer_group_reads_every_broker_commits_and_resumes(brokers: Cluster) -> None:
    brokers.create_topic("spread", partitions=3)
    p = producer(brokers.bootstrap_servers)
    for partition in range(3):
        produce_all(p, "spread", [b"%d" % i for i in range(8)], partition=partition)
    first = group_consumer(brokers, "cluster-readers")
    try:
        first.subscribe(["spread"])
        got = poll(first, 24)
        assert sorted((m.partition(), m.offset()) for m in got) == [
            (q, o) for q in range(3) for o in range(8)]
        first.commit(asynchronous=False)
    finally:
        first.close()
    for partition in range(3):
        produce_all(p, "spread", [b"more"] * 2, partition=partition)
    second = group_consumer(brokers, "cluster-readers")
    try:
        second.subscribe(["spread"])
        resumed = poll(second, 6)
        assert sorted((m.partition(), m.offset()) for m in resumed) == [
            (q, o) for q in range(3) for o in (8, 9)]
    finally:
        second.close()
    coordinator = coordinator_of(brokers, "cluster-readers")
    with WireClient(endpoints(brokers)[coordinator]) as wire:
        fetched = wire.call(ApiKey.OFFSET_FETCH, 7, {"group_id": "cluster-readers",
                                                     "topics": None, "require_stable": False})
    assert fetched.error_code == ErrorCode.none
    assert {(t.name, q.partition_index): q.committed_offset
            for t in fetched.topics for q in t.partitions} == {
        ("spread", q): 8 for q in range(3)}


def test_a_groups_offsets_follow_its_partition_moved_to_another_directory(
        brokers: Cluster) -> None:
    """KIP-113: the broker that gets the partition loads its groups from the moved log; the one
    that lost it answers NOT_COORDINATOR, and FindCoordinator names the new one."""
    brokers.create_topic("followed", partitions=1)
    found = endpoints(brokers)
    group = "mover"
    with WireClient(found[min(found)]) as wire:
        wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    before = coordinator_of(brokers, group)
    with WireClient(found[before]) as wire:
        committed = wire.call(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "followed", "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                 "committed_metadata": "here"}]}]})
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    partition = partition_for(group, OFFSETS_PARTITIONS)
    target = next(d for d, node_id in brokers.description.node_ids.items() if node_id != before)
    brokers.move_partition(OFFSETS_TOPIC, partition, target)
    after = coordinator_of(brokers, group)
    assert after == brokers.description.node_ids[target]
    fetch = {"group_id": group, "topics": None, "require_stable": False}
    with WireClient(found[before]) as wire:
        assert wire.call(ApiKey.OFFSET_FETCH, 7, fetch).error_code == ErrorCode.not_coordinator
        named = wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        assert (named.error_code, named.node_id) == (ErrorCode.none, after)
    with WireClient(found[after]) as wire:
        fetched = wire.call(ApiKey.OFFSET_FETCH, 7, fetch)
    assert fetched.error_code == ErrorCode.none
    assert [(t.name, q.partition_index, q.committed_offset, q.metadata)
            for t in fetched.topics for q in t.partitions] == [("followed", 0, 42, "here")]


@pytest.mark.slow
def test_committed_offsets_survive_a_restart_of_the_cluster(
        ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The whole cluster stopped and started again over the same directories: the group's
    coordinator loads its partition of ``__consumer_offsets`` again, and a member resumes from
    the offsets committed before the stop (the brokers' ports are new: ephemeral)."""
    root = tmp_path_factory.mktemp("group-restart")
    dirs = [str(root / f"d{i}") for i in range(3)]
    start = dict(log_dirs=dirs, cleaners=1, config={**FAST, **PROPERTIES},
                 namespace="strata-test-groups-restart", address=ray_session)
    cluster = Cluster.start(**start)
    try:
        cluster.create_topic("kept", partitions=3)
        p = producer(cluster.bootstrap_servers)
        for partition in range(3):
            produce_all(p, "kept", [b"%d" % i for i in range(5)], partition=partition)
        before = group_consumer(cluster, "restarted")
        try:
            before.subscribe(["kept"])
            assert len(poll(before, 15)) == 15
            before.commit(asynchronous=False)
        finally:
            before.close()
    finally:
        cluster.stop()
    cluster = Cluster.start(**start)
    try:
        p = producer(cluster.bootstrap_servers)
        for partition in range(3):
            produce_all(p, "kept", [b"after"], partition=partition)
        after = group_consumer(cluster, "restarted")
        try:
            after.subscribe(["kept"])
            resumed = poll(after, 3)
            assert sorted((m.partition(), m.offset()) for m in resumed) == [
                (q, 5) for q in range(3)]
        finally:
            after.close()
    finally:
        cluster.stop()
