"""Every log directory of a real Strata cluster (Ray actors, real directories) is a Kafka broker:
real clients (confluent-kafka, kcat, kafka-python) bootstrap from the cluster, see one broker per
directory, produce to and fetch from the broker leading each partition, follow a partition moved
to another directory, and find the same brokers after a restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition, TopicPartitionReplica
from kafka import errors as kafka_errors

from kio.schema.errors import ErrorCode

from cluster import Cluster
from cluster.errors import ClusterNotRunningError, ListenerBindError
from storage.errors import InvalidConfigError
from storage.record_format import Record
from ops.drills.coordinators import free_port_base
from tests.cluster.conftest import FAST, module_cluster_of, wait_for
from tests.node.kafka.clients import consume, consumer, produce_all, producer
from tests.node.kafka.wire import WireClient
from node.kafka.versions import ApiKey
from storage.record_builder import build_batch

TIMEOUT_S = 20.0
EPHEMERAL = {"listeners": "PLAINTEXT://127.0.0.1:0", "auto.create.topics.enable": "true",
             "num.partitions": "3"}


@pytest.fixture(scope="module")
def brokers(ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One 3-directory cluster with ephemeral Kafka ports, shared by the module."""
    with module_cluster_of(ray_session, tmp_path_factory.mktemp("brokers"), EPHEMERAL,
                           "strata-test-brokers") as cluster:
        yield cluster


def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is missing: run scripts/setup-kcat")
    return path


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    """partition -> node id of the directory holding it, as the cluster routes it."""
    ids = cluster.description.node_ids
    return {p: ids[cluster.partition_dir(topic, p)] for p in cluster.partitions(topic)}


def endpoint_of(cluster: Cluster, log_dir: str) -> tuple[str, int]:
    _, host, port = cluster.kafka_brokers()[log_dir]
    return host, port


def test_bootstrap_servers_name_one_broker_per_directory(brokers: Cluster) -> None:
    found = brokers.kafka_brokers()
    assert list(found) == list(brokers.description.log_dirs)
    assert {d: node_id for d, (node_id, _, _) in found.items()} == brokers.description.node_ids
    servers = brokers.bootstrap_servers.split(",")
    assert servers == [f"{host}:{port}" for _, host, port in found.values()]
    assert len(set(servers)) == 3 and all(s.startswith("127.0.0.1:") for s in servers)


def test_metadata_names_every_broker_and_the_leader_of_each_partition(brokers: Cluster) -> None:
    brokers.create_topic("layout", partitions=6)
    expected = leaders(brokers, "layout")
    assert len(set(expected.values())) == 3      # placement spread them over the directories
    for server in brokers.bootstrap_servers.split(","):   # every broker answers the same
        meta = AdminClient({"bootstrap.servers": server}).list_topics(timeout=TIMEOUT_S)
        assert meta.cluster_id == brokers.description.cluster_id
        assert {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()} == {
            node_id: f"{host}:{port}" for node_id, host, port in brokers.kafka_brokers().values()}
        assert {p.id: p.leader for p in meta.topics["layout"].partitions.values()} == expected
    listing = subprocess.run([kcat(), "-b", brokers.bootstrap_servers, "-L", "-J"],
                             capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    document = json.loads(listing.stdout)
    assert sorted(b["id"] for b in document["brokers"]) == sorted(
        brokers.description.node_ids.values())
    topic = next(t for t in document["topics"] if t["topic"] == "layout")
    assert {p["partition"]: p["leader"] for p in topic["partitions"]} == expected


def test_a_request_for_another_brokers_partition_is_not_leader_or_follower(
        brokers: Cluster) -> None:
    brokers.create_topic("elsewhere", partitions=3)
    asked_dir = brokers.description.log_dirs[0]
    asked_id = brokers.description.node_ids[asked_dir]
    foreign = next(p for p, leader in leaders(brokers, "elsewhere").items()
                   if leader != asked_id)
    batch = build_batch([Record(value=b"x", timestamp=1)])
    with WireClient(endpoint_of(brokers, asked_dir)) as wire:
        produced = wire.call(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "elsewhere", "partition_data": [
                {"index": foreign, "records": batch}]}]})
        fetched = wire.call(ApiKey.FETCH, 12, {
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [{"topic": "elsewhere", "partitions": [
                {"partition": foreign, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        listed = wire.call(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "elsewhere", "partitions": [
                    {"partition_index": foreign, "timestamp": -1}]}]})
        unknown = wire.call(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "nowhere", "partition_data": [
                {"index": 0, "records": batch}]}]})
    assert produced.responses[0].partition_responses[0].error_code == \
        ErrorCode.not_leader_or_follower
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
    assert listed.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
    assert unknown.responses[0].partition_responses[0].error_code == \
        ErrorCode.unknown_topic_or_partition
    assert brokers.offsets("elsewhere", foreign)[1] == 0          # nothing stored anywhere


def test_a_produce_to_another_brokers_partition_names_its_leader_and_endpoint_from_v10(
        brokers: Cluster) -> None:
    """KIP-951: from Produce v10 a NOT_LEADER_OR_FOLLOWER answer carries the current leader
    (id and epoch) and that leader's endpoint, so a client goes there without asking for
    metadata again; v9 has no such fields."""
    brokers.create_topic("redirected", partitions=3)
    asked_dir = brokers.description.log_dirs[0]
    asked_id = brokers.description.node_ids[asked_dir]
    foreign, leader = next((p, leader) for p, leader in leaders(brokers, "redirected").items()
                           if leader != asked_id)
    leader_dir = next(d for d, node in brokers.description.node_ids.items() if node == leader)
    batch = build_batch([Record(value=b"x", timestamp=1)])
    request = {"transactional_id": None, "acks": 1, "timeout": 5000,
               "topic_data": [{"name": "redirected", "partition_data": [
                   {"index": foreign, "records": batch}]}]}
    with WireClient(endpoint_of(brokers, asked_dir)) as wire:
        redirected = wire.call(ApiKey.PRODUCE, 10, request)
        older = wire.call(ApiKey.PRODUCE, 9, request)
    (answer,) = redirected.responses[0].partition_responses
    assert answer.error_code == ErrorCode.not_leader_or_follower
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, 0)
    assert [(e.node_id, e.host, e.port) for e in redirected.node_endpoints] == [
        (leader, *endpoint_of(brokers, leader_dir))]
    assert older.responses[0].partition_responses[0].error_code == \
        ErrorCode.not_leader_or_follower
    assert brokers.offsets("redirected", foreign)[1] == 0


def test_confluent_kafka_produces_to_six_partitions_and_kafka_python_consumes_them(
        brokers: Cluster) -> None:
    brokers.create_topic("six", partitions=6)
    p = producer(brokers.bootstrap_servers, **{"enable.idempotence": True})
    sent = {part: [f"{part}-{i}".encode() for i in range(20)] for part in range(6)}
    for part, values in sent.items():
        assert [o for _, o in produce_all(p, "six", values, partition=part)] == list(range(20))
    consumer = KafkaConsumer(bootstrap_servers=brokers.bootstrap_servers,
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition("six", part) for part in range(6)])
        consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = {part: [] for part in range(6)}
        deadline = time.monotonic() + TIMEOUT_S
        while sum(map(len, got.values())) < 120 and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(m.value for m in messages)
    finally:
        consumer.close()
    assert got == sent


def test_kafka_and_the_python_api_read_what_the_other_wrote(brokers: Cluster) -> None:
    brokers.create_topic("both", partitions=2)
    p = producer(brokers.bootstrap_servers)
    produce_all(p, "both", [b"from-kafka-0", b"from-kafka-1"], partition=1, key=b"k")
    assert [(r.key, r.value) for r in brokers.consume("both", 1)] == [
        (b"k", b"from-kafka-0"), (b"k", b"from-kafka-1")]
    brokers.produce("both", 0, [Record(key=b"py", value=b"from-python", timestamp=1)],
                    flush=True)
    c = ck.Consumer({"bootstrap.servers": brokers.bootstrap_servers, "group.id": "unused",
                     "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        c.assign([ck.TopicPartition("both", 0, 0)])
        msg = None
        deadline = time.monotonic() + TIMEOUT_S
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value(), msg.offset()) == (b"py", b"from-python", 0)
    finally:
        c.close()


def test_topics_created_through_kafka_are_spread_over_the_directories(brokers: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap_servers})
    futures = admin.create_topics([NewTopic("admin-made", num_partitions=6,
                                            replication_factor=1,
                                            config={"cleanup.policy": "compact"})])
    futures["admin-made"].result(TIMEOUT_S)
    info = next(t for t in brokers.list_topics() if t.name == "admin-made")
    assert len(info.partitions) == 6 and len(set(info.partitions.values())) == 3
    assert info.config == {"cleanup.policy": "compact"}
    meta = admin.list_topics(timeout=TIMEOUT_S)
    assert {p.id: p.leader for p in meta.topics["admin-made"].partitions.values()} == \
        leaders(brokers, "admin-made")
    admin.delete_topics(["admin-made"])["admin-made"].result(TIMEOUT_S)
    assert "admin-made" not in {t.name for t in brokers.list_topics()}


def test_metadata_auto_creates_over_the_directories_and_answers_a_topic_created_meanwhile(
        brokers: Cluster) -> None:
    asked = endpoint_of(brokers, brokers.description.log_dirs[0])
    request = {"allow_auto_topic_creation": True, "include_cluster_authorized_operations": False,
               "include_topic_authorized_operations": False}
    with WireClient(asked) as wire:
        made = wire.call(ApiKey.METADATA, 9, {**request, "topics": [{"name": "auto-made"}]})
        assert made.topics[0].error_code == ErrorCode.none
        assert len(made.topics[0].partitions) == 3
        info = next(t for t in brokers.list_topics() if t.name == "auto-made")
        assert len(set(info.partitions.values())) == 3       # num.partitions, spread
        brokers.create_topic("raced", partitions=2)          # the broker's table is a second old
        raced = wire.call(ApiKey.METADATA, 9, {**request, "topics": [{"name": "raced"}]})
    assert raced.topics[0].error_code == ErrorCode.none
    assert {p.partition_index: p.leader_id for p in raced.topics[0].partitions} == \
        leaders(brokers, "raced")


def test_a_moved_partition_is_followed_without_loss_or_duplicates(brokers: Cluster) -> None:
    brokers.create_topic("moving", partitions=1)
    source = brokers.partition_dir("moving", 0)
    target = next(d for d in brokers.description.log_dirs if d != source)
    p = producer(brokers.bootstrap_servers, **{"enable.idempotence": True, "linger.ms": 2,
                                               "message.timeout.ms": 60000, "retries": 1000000})
    errors: list[Any] = []
    delivered: list[int] = []
    stop = threading.Event()

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(int(msg.value()))

    def produce() -> None:
        i = 0
        while not stop.is_set():
            p.produce("moving", value=str(i).encode(), partition=0, on_delivery=report)
            p.poll(0)
            i += 1
            time.sleep(0.002)
        assert p.flush(60) == 0

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        wait_for(lambda: len(delivered) > 200, TIMEOUT_S, what="deliveries before the move")
        brokers.move_partition("moving", 0, target)
        count = len(delivered)
        wait_for(lambda: len(delivered) > count + 200, TIMEOUT_S,
                 what="deliveries after the move")
    finally:
        stop.set()
        worker.join()
    assert not errors
    assert brokers.partition_dir("moving", 0) == target
    stored = [int(r.value) for r in brokers.consume("moving", 0)]
    assert stored == list(range(len(stored))) and sorted(delivered) == stored
    target_id = brokers.description.node_ids[target]
    meta = AdminClient({"bootstrap.servers": brokers.bootstrap_servers}).list_topics(
        "moving", timeout=TIMEOUT_S)
    assert meta.topics["moving"].partitions[0].leader == target_id
    c = ck.Consumer({"bootstrap.servers": brokers.bootstrap_servers, "group.id": "unused",
                     "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        c.assign([ck.TopicPartition("moving", 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(stored) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(int(msg.value()))
        assert got == stored
    finally:
        c.close()


def test_a_restart_keeps_node_ids_leaders_and_fixed_ports(ray_session: str,
                                                          tmp_path: Path) -> None:
    base = free_port_base(3)
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    config = {**FAST, "listeners": f"PLAINTEXT://127.0.0.1:{base}"}
    expected_servers = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    first = Cluster.start(log_dirs=dirs, cleaners=1, config=config,
                          namespace="strata-test-brokers-restart", address=ray_session)
    try:
        assert first.bootstrap_servers == expected_servers
        first.create_topic("kept", partitions=3)
        before = leaders(first, "kept")
        produce_all(producer(expected_servers), "kept", [b"before"], partition=2)
        node_ids = dict(first.description.node_ids)
    finally:
        first.stop()
    second = Cluster.start(log_dirs=dirs, cleaners=1, config=config,
                           namespace="strata-test-brokers-restart", address=ray_session)
    try:
        assert second.description.node_ids == node_ids
        assert second.bootstrap_servers == expected_servers
        meta = AdminClient({"bootstrap.servers": expected_servers}).list_topics(
            timeout=TIMEOUT_S)
        assert {b.id for b in meta.brokers.values()} == set(node_ids.values())
        assert {p.id: p.leader for p in meta.topics["kept"].partitions.values()} == before
        assert produce_all(producer(expected_servers), "kept", [b"after"], partition=2) == \
            [(2, 1)]
    finally:
        second.stop()


def test_a_listener_port_taken_undoes_the_start_naming_directory_and_listener(
        ray_session: str, tmp_path: Path) -> None:
    log_dir = str(tmp_path / "d0")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenerBindError, match=f"127.0.0.1:{port}") as err:
            Cluster.start(log_dirs=[log_dir], cleaners=1,
                          config={**FAST, "listeners": f"PLAINTEXT://127.0.0.1:{port}"},
                          namespace="strata-test-brokers-taken", address=ray_session)
    assert err.value.fields["directory"] == log_dir
    assert err.value.fields["key"] == "listeners"
    with pytest.raises(ClusterNotRunningError):
        Cluster.connect(namespace="strata-test-brokers-taken")


def test_a_malformed_listener_is_refused_before_any_actor_starts(ray_session: str,
                                                                 tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="listeners") as err:
        Cluster.start(log_dirs=[str(tmp_path / "d0")], cleaners=1,
                      config={**FAST, "listeners": "PLAINTEXT://127.0.0.1"},
                      namespace="strata-test-brokers-malformed", address=ray_session)
    assert err.value.fields["key"] == "listeners"
    assert not (tmp_path / "d0").exists()


def test_a_restarted_node_actor_serves_again_and_every_broker_names_its_new_port(
        brokers: Cluster) -> None:
    """Last in the module: it kills a node actor of the shared cluster (Ray restarts it)."""
    log_dir = brokers.description.log_dirs[2]
    node_id = brokers.description.node_ids[log_dir]
    brokers.create_topic("after-restart", partitions=3)
    led = next(p for p, leader in leaders(brokers, "after-restart").items()
               if leader == node_id)
    pid = brokers.node(log_dir).call("info")["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: brokers.node(log_dir).call("info")["pid"] != pid
             and log_dir in brokers.kafka_brokers(), timeout=60, what="the node serving again")
    _, host, port = brokers.kafka_brokers()[log_dir]
    asked = endpoint_of(brokers, brokers.description.log_dirs[0])

    def named() -> bool:
        meta = AdminClient({"bootstrap.servers": f"{asked[0]}:{asked[1]}"}).list_topics(
            timeout=TIMEOUT_S)
        return f"{meta.brokers[node_id].host}:{meta.brokers[node_id].port}" == f"{host}:{port}"
    wait_for(named, timeout=TIMEOUT_S, what="the other brokers naming the new port")
    assert produce_all(producer(brokers.bootstrap_servers), "after-restart", [b"back"],
                       partition=led) == [(led, 0)]


def test_a_cluster_without_listeners_serves_no_kafka(start_cluster: Any) -> None:
    plain = start_cluster(dirs=1)
    assert plain.kafka_brokers() == {} and plain.bootstrap_servers == ""


def test_describe_log_dirs_names_each_brokers_directory_and_its_partitions(
        brokers: Cluster) -> None:
    """kafka-python's describe_log_dirs asks every broker: each reports its own directory with
    the partitions the cluster routes there."""
    brokers.create_topic("dirs", partitions=3)
    brokers.produce("dirs", 0, [Record(value=b"x" * 100, timestamp=1)] * 5, flush=True)
    admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap_servers,
                             request_timeout_ms=10_000)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    ids = brokers.description.node_ids
    reported = {}
    for answer in answers:
        directory, = answer["log_dirs"]
        assert ids[directory["log_dir"]] == answer["broker"] and directory["error_code"] == 0
        reported[directory["log_dir"]] = {
            p["partition_index"]: p["partition_size"]
            for t in directory["topics"] if t["name"] == "dirs" for p in t["partitions"]}
    assert {d: sorted(parts) for d, parts in reported.items() if parts} == {
        d: sorted(p for p in range(3) if brokers.partition_dir("dirs", p) == d)
        for d in {brokers.partition_dir("dirs", p) for p in range(3)}}
    assert reported[brokers.partition_dir("dirs", 0)][0] > 500


def test_alter_replica_log_dirs_moves_a_partition_to_another_brokers_directory(
        brokers: Cluster) -> None:
    """AlterReplicaLogDirs sent to the broker holding a partition, naming another directory of
    the cluster, moves it there (KIP-113 through Cluster.move_partition): Metadata then names
    the new broker as leader and every record is read back from it; a path that is no directory
    of the cluster is LOG_DIR_NOT_FOUND."""
    brokers.create_topic("relocate", partitions=1)
    sent = [f"r{i}".encode() for i in range(50)]
    produce_all(producer(brokers.bootstrap_servers), "relocate", sent)
    source = brokers.partition_dir("relocate", 0)
    target = next(d for d in brokers.description.log_dirs if d != source)
    ids = brokers.description.node_ids
    admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap_servers,
                             request_timeout_ms=10_000)
    try:
        answers = admin.alter_replica_log_dirs({
            TopicPartitionReplica("relocate", 0, ids[source]): target})
        nowhere = admin.alter_replica_log_dirs({
            TopicPartitionReplica("relocate", 0, ids[source]): "/no/such/strata/dir"})
    finally:
        admin.close()
    assert answers == {TopicPartitionReplica("relocate", 0, ids[source]): kafka_errors.NoError}
    assert nowhere == {TopicPartitionReplica("relocate", 0, ids[source]):
                       kafka_errors.LogDirNotFoundError}
    wait_for(lambda: _leader_of(brokers, "relocate", 0) == ids[target], timeout=60,
             what="the new leader in Metadata")
    c = consumer(brokers.bootstrap_servers)
    try:
        assert [m.value() for m in consume(c, "relocate", len(sent))] == sent
    finally:
        c.close()


def _leader_of(cluster: Cluster, topic: str, partition: int) -> int | None:
    """The leader Metadata names (asked of the first broker)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(partition)
    return None if found is None else found.leader


def test_incremental_alter_configs_through_any_broker_changes_the_clusters_topic(
        brokers: Cluster) -> None:
    """confluent-kafka's incremental_alter_configs goes through the coordinator: the cluster's
    topic has the override (every directory holding it, durably), and a later AlterConfigs
    replaces the whole override set."""
    brokers.create_topic("tuned", partitions=3, config={"segment.bytes": "1048576"})
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "tuned", incremental_configs=[
        ConfigEntry("retention.ms", "3600000",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)
    info, = [t for t in brokers.list_topics() if t.name == "tuned"]
    assert info.config == {"segment.bytes": "1048576", "retention.ms": "3600000"}
    replace = ConfigResource(ConfigResource.Type.TOPIC, "tuned",
                             set_config={"cleanup.policy": "compact"})
    for future in admin.alter_configs([replace]).values():
        future.result(TIMEOUT_S)
    info, = [t for t in brokers.list_topics() if t.name == "tuned"]
    assert info.config == {"cleanup.policy": "compact"}


def test_node_actors_run_at_the_hosts_normal_priority(brokers: Cluster) -> None:
    """Ray starts its workers at niceness 15; a node actor is a broker whose requests hop
    between threads, so the heads the project starts run them at 0 (``head_system_config``):
    at 15 a produce round trip took 20-100 ms beside a busy client instead of 1 ms."""
    for log_dir in brokers.description.log_dirs:
        pid = brokers.node(log_dir).call("info")["pid"]
        assert os.getpriority(os.PRIO_PROCESS, pid) == 0
