"""The cluster's Kafka parts without Ray: the per-directory listener rule
(``cluster.kafka.listeners``), ``ClusterBrokerView`` over in-process handles (a fake coordinator
and fake nodes, a real ``LogDir``) and ``NodeProducerIds`` on real checkpoint files."""

from __future__ import annotations

import pickle
import socket
from pathlib import Path
from typing import Iterator

import pytest
from kio.schema.errors import ErrorCode

from cluster.errors import ListenerBindError, TopicExistsError, UnknownTopicError
from cluster.handles import LocalHandle
from cluster.kafka.brokers import MAX_NODE_ID, NODE_ID_SHIFT, ClusterBrokerView, NodeProducerIds
from cluster.kafka.listeners import directory_properties, serves_kafka
from cluster.kafka.node_broker import NodeBroker
from cluster.status import ClusterDescription
from node import LogDir
from node.errors import LogDirClosedError, LogDirOfflineError
from node.kafka.broker_view import BrokerEndpoint
from node.kafka.errors import TopicAlreadyExistsError, error_code_for
from node.kafka.producer_ids import ProducerIdAllocator
from node.meta_properties import CURRENT_VERSION, MetaProperties, random_uuid, \
    write_meta_properties
from storage.errors import InvalidConfigError, StorageError
from storage.records import Record


# ---- the listener rule -------------------------------------------------------------------------
def test_directory_i_listens_and_advertises_on_port_plus_i() -> None:
    properties = {"listeners": "PLAINTEXT://0.0.0.0:9092",
                  "advertised.listeners": "PLAINTEXT://broker.example:19092",
                  "num.io.threads": "2", "node.id": "7", "log.segment.bytes": "1024"}
    assert directory_properties(properties, 0) == {
        "listeners": "PLAINTEXT://0.0.0.0:9092",
        "advertised.listeners": "PLAINTEXT://broker.example:19092", "num.io.threads": "2"}
    assert directory_properties(properties, 2) == {
        "listeners": "PLAINTEXT://0.0.0.0:9094",
        "advertised.listeners": "PLAINTEXT://broker.example:19094", "num.io.threads": "2"}


def test_port_zero_stays_ephemeral_and_an_empty_advertised_listener_is_none() -> None:
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": ""}
    assert directory_properties(properties, 5) == {"listeners": "PLAINTEXT://127.0.0.1:0"}


def test_each_directory_takes_the_group_coordinators_keys() -> None:
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
                  "offsets.topic.num.partitions": "6", "group.consumer.heartbeat.interval.ms": "9"}
    assert directory_properties(properties, 1) == {
        "listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6"}
    with pytest.raises(InvalidConfigError, match="group.min.session.timeout.ms"):
        directory_properties({"listeners": "PLAINTEXT://127.0.0.1:0",
                              "group.min.session.timeout.ms": "-1"}, 0)


def test_without_listeners_no_directory_serves_kafka() -> None:
    assert not serves_kafka({"broker.id": "0"}) and not serves_kafka({"listeners": " "})
    assert directory_properties({"num.io.threads": "2"}, 0) == {}


def test_a_port_pushed_past_65535_or_a_bad_listener_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidConfigError, match="listeners.*port 65536") as err:
        directory_properties({"listeners": "PLAINTEXT://127.0.0.1:65534"}, 2)
    assert err.value.fields["key"] == "listeners"
    with pytest.raises(InvalidConfigError, match="advertised.listeners"):
        directory_properties({"listeners": "PLAINTEXT://127.0.0.1:0",
                              "advertised.listeners": "PLAINTEXT://nowhere"}, 0)
    with pytest.raises(InvalidConfigError, match="num.io.threads"):
        directory_properties({"listeners": "PLAINTEXT://127.0.0.1:0", "num.io.threads": "0"}, 0)


# ---- the view ------------------------------------------------------------------------------------
class FakeCoordinator:
    """The coordinator's answers the view uses; counts the route calls."""

    def __init__(self, dirs: list[str]) -> None:
        self.description = ClusterDescription(
            namespace="n", log_dirs=tuple(dirs), node_names={d: f"node:{d}" for d in dirs},
            node_hosts={d: "h" for d in dirs}, workers=(), properties={},
            head_started_by_strata=False, cluster_id="c" * 22,
            node_ids={d: i for i, d in enumerate(dirs)})
        self.table: dict[str, dict[int, str]] = {}
        self.calls: list[str] = []
        self.created: list[tuple[str, int, dict[str, str]]] = []
        self.overrides: dict[str, dict[str, str]] = {}

    def describe(self) -> ClusterDescription:
        return self.description

    def routes(self) -> dict[str, dict[int, str]]:
        self.calls.append("routes")
        return {t: dict(p) for t, p in self.table.items()}

    def refresh_routes(self) -> dict[str, dict[int, str]]:
        self.calls.append("refresh_routes")
        return {t: dict(p) for t, p in self.table.items()}

    def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        if name in self.table:
            raise TopicExistsError(f"topic {name} exists", topic=name)
        self.created.append((name, partitions, config))
        self.table[name] = {p: self.description.log_dirs[p % 3] for p in range(partitions)}

    def topic_overrides(self, name: str) -> dict[str, str]:
        if name not in self.table:
            raise UnknownTopicError(f"the cluster has no topic {name}", topic=name)
        return dict(self.overrides.get(name, {}))


class FakeNode:
    def __init__(self, endpoint: tuple[int, str, int] | None) -> None:
        self.endpoint = endpoint

    def kafka_endpoint(self) -> tuple[int, str, int] | None:
        return self.endpoint


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.dirs = [str(tmp_path / f"d{i}") for i in range(3)]
        self.logdir = LogDir.open(self.dirs[0], start_tasks=False)
        self.coordinator = FakeCoordinator(self.dirs)
        self.nodes = {self.dirs[1]: FakeNode((1, "127.0.0.1", 9093)),
                      self.dirs[2]: FakeNode(None)}        # loading: not serving yet
        self.now = [100.0]
        self.coordinator_handle = LocalHandle(self.coordinator, "coordinator")
        self.view = ClusterBrokerView(
            node_id=0, cluster_id="c" * 22, log_dir=self.dirs[0], logdir=self.logdir,
            endpoint=lambda: ("127.0.0.1", 9092), coordinator=self.coordinator_handle,
            node_handle=lambda d, name, host: LocalHandle(self.nodes[d], name),
            clock=lambda: self.now[0])


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    yield s
    s.logdir.close()


def test_the_view_names_every_serving_broker_and_the_directory_leading_each_partition(
        setup: Setup) -> None:
    d0, d1, d2 = setup.dirs
    setup.logdir.create_logs("t", [0])
    setup.coordinator.table = {"t": {0: d0, 1: d1, 2: d2},
                               "__strata_transactions": {0: d1}}
    assert setup.view.brokers() == [BrokerEndpoint(0, "127.0.0.1", 9092),
                                    BrokerEndpoint(1, "127.0.0.1", 9093)]
    assert setup.view.controller_id() == 0
    assert setup.view.topics() == {"t": 3}            # internal topics are not reported
    # partition 2's directory serves no broker yet: no leader (LEADER_NOT_AVAILABLE)
    assert [setup.view.leader("t", p) for p in range(3)] == [0, 1, None]
    assert setup.view.leader("t", 3) is None and setup.view.leader("u", 0) is None


def test_the_table_is_taken_once_per_ttl_and_again_after_a_topic_change(setup: Setup) -> None:
    setup.coordinator.table = {"t": {0: setup.dirs[1]}}
    for _ in range(50):
        setup.view.topics()
        setup.view.leader("t", 0)
    assert setup.coordinator.calls == ["routes"]
    setup.now[0] += 1.5
    setup.view.topics()
    assert setup.coordinator.calls == ["routes", "routes"]
    setup.view.create_topic("new", 3, {"cleanup.policy": "compact"})
    assert setup.coordinator.created == [("new", 3, {"cleanup.policy": "compact"})]
    assert setup.view.topics() == {"t": 1, "new": 3}          # at once, not after the TTL


def test_a_partition_routed_here_but_not_held_is_asked_again_and_led_by_its_new_broker(
        setup: Setup) -> None:
    d0, d1, _ = setup.dirs
    setup.coordinator.table = {"t": {0: d0}}
    assert setup.view.topics() == {"t": 1}
    setup.coordinator.table = {"t": {0: d1}}               # moved to d1, the table is fresh
    assert setup.view.leader("t", 0) == 1
    assert setup.coordinator.calls == ["routes", "refresh_routes"]
    setup.coordinator.table = {"t": {0: d0}}               # routed here, still not held
    setup.now[0] += 1.5
    assert setup.view.leader("t", 0) is None               # no broker claims what none holds
    assert setup.coordinator.calls == ["routes", "refresh_routes", "routes", "refresh_routes"]
    assert setup.view.leader("t", 0) is None               # asked again at most every 0.2 s
    assert len(setup.coordinator.calls) == 4


def test_a_partition_created_since_the_table_was_taken_is_found_at_once(setup: Setup) -> None:
    assert setup.view.topics() == {}
    setup.coordinator.table = {"fresh": {0: setup.dirs[1]}}     # created by another client
    assert setup.view.leader("fresh", 0) == 1
    assert setup.view.topics() == {"fresh": 1}


def test_creating_a_topic_another_client_created_meanwhile_is_topic_already_exists(
        setup: Setup) -> None:
    assert setup.view.topics() == {}
    setup.coordinator.table = {"raced": {0: setup.dirs[1]}}
    with pytest.raises(TopicAlreadyExistsError, match="raced"):
        setup.view.create_topic("raced", 1)
    assert error_code_for(TopicAlreadyExistsError("x")) == ErrorCode.topic_already_exists
    assert setup.view.topics() == {"raced": 1}


def test_a_failed_refresh_answers_from_the_last_table(setup: Setup) -> None:
    setup.coordinator.table = {"t": {0: setup.dirs[1]}}
    assert setup.view.topics() == {"t": 1}
    setup.coordinator_handle.dead = True
    setup.now[0] += 5
    assert setup.view.topics() == {"t": 1} and setup.view.leader("t", 0) == 1


def test_topic_config_reports_overrides_over_the_cluster_defaults(setup: Setup) -> None:
    setup.coordinator.table = {"t": {0: setup.dirs[1]}}
    setup.coordinator.overrides = {"t": {"cleanup.policy": "compact"}}
    config = setup.view.topic_config("t")
    assert config["cleanup.policy"] == ("compact", True)
    assert config["segment.bytes"][1] is False


# ---- producer ids --------------------------------------------------------------------------------
def test_two_brokers_never_hand_out_the_same_producer_id(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = NodeProducerIds(tmp_path / "a", 1)
    second = NodeProducerIds(tmp_path / "b", 2)
    ids_a = [first.allocate() for _ in range(5)]
    ids_b = [second.allocate() for _ in range(5)]
    assert not set(ids_a) & set(ids_b)
    assert ids_a[0] == 1 << NODE_ID_SHIFT and ids_b[0] == 2 << NODE_ID_SHIFT
    again = NodeProducerIds(tmp_path / "a", 1)           # a restart: the next durable block
    assert again.allocate() > max(ids_a)
    assert ProducerIdAllocator(tmp_path / "a").allocate() not in ids_a


def test_a_node_id_too_large_for_producer_ids_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="node.id"):
        NodeProducerIds(tmp_path, MAX_NODE_ID + 1)



def test_a_listener_bind_error_pickles_with_its_fields() -> None:
    err = ListenerBindError("cannot listen", directory="/d0", key="listeners",
                            value="PLAINTEXT://127.0.0.1:9092")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ListenerBindError and back.fields == err.fields
    assert str(back) == "cannot listen"


# ---- the node's broker ---------------------------------------------------------------------------
def test_a_node_broker_serves_with_its_directorys_identity_and_stops_on_close(
        setup: Setup) -> None:
    broker = NodeBroker(setup.dirs[0], {"listeners": "PLAINTEXT://0.0.0.0:0"},
                        setup.coordinator_handle,
                        lambda d, name, host: LocalHandle(setup.nodes[d], name))
    with pytest.raises(StorageError, match="no node.id"):
        broker.serve(setup.logdir)                # the start has not written the identity yet
    write_meta_properties(setup.logdir.path, MetaProperties(CURRENT_VERSION, "c" * 22, 4,
                                                            random_uuid()))
    host, port = broker.serve(setup.logdir)
    assert host == socket.getfqdn() and port > 0      # every interface: the host's name
    assert broker.serve(setup.logdir) == (host, port)
    assert broker.endpoint() == (4, host, port)
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    broker.close()
    assert broker.endpoint() is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    with pytest.raises(LogDirClosedError):
        broker.serve(setup.logdir)


def test_a_broker_whose_directory_went_offline_is_named_by_no_other_broker(
        setup: Setup, tmp_path: Path) -> None:
    """Kafka halts a broker whose last log directory fails: the others stop naming it, and its
    partitions have no leader. Its listener stays up for the operator's tools."""
    write_meta_properties(setup.logdir.path, MetaProperties(CURRENT_VERSION, "c" * 22, 0,
                                                            random_uuid()))
    broker = NodeBroker(setup.dirs[0], {"listeners": "PLAINTEXT://127.0.0.1:0"},
                        setup.coordinator_handle,
                        lambda d, name, host: LocalHandle(setup.nodes[d], name))
    host, port = broker.serve(setup.logdir)
    setup.logdir.create_logs("t", [0])
    log = setup.logdir.log("t", 0)
    log.append([Record(b"k", b"v", 1_700_000_000_000)])
    setup.coordinator.table = {"t": {0: setup.dirs[0]}}
    other = LogDir.open(setup.dirs[1], start_tasks=False)
    nodes = {setup.dirs[0]: BrokerNode(broker), setup.dirs[2]: setup.nodes[setup.dirs[2]]}
    view = ClusterBrokerView(
        node_id=1, cluster_id="c" * 22, log_dir=setup.dirs[1], logdir=other,
        endpoint=lambda: ("127.0.0.1", 9093), coordinator=setup.coordinator_handle,
        node_handle=lambda d, name, h: LocalHandle(nodes[d], name), clock=lambda: setup.now[0])
    try:
        assert view.leader("t", 0) == 0
        assert BrokerEndpoint(0, host, port) in view.brokers()
        # the disk fails under the partition: its next roll meets an OSError
        (setup.logdir.path / "t-0").rename(tmp_path / "t-0-gone")
        (setup.logdir.path / "t-0").write_text("not a directory")
        with pytest.raises(LogDirOfflineError):
            log.roll()
        assert broker.endpoint() is None
        setup.now[0] += 1.5                              # the other broker's table expires
        assert view.leader("t", 0) is None               # LEADER_NOT_AVAILABLE
        assert [b.node_id for b in view.brokers()] == [1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        broker.close()
        other.close()


class BrokerNode:
    """A node actor's ``kafka_endpoint``, answered by its real ``NodeBroker``."""

    def __init__(self, broker: NodeBroker) -> None:
        self.broker = broker

    def kafka_endpoint(self) -> tuple[int, str, int] | None:
        return self.broker.endpoint()


def test_a_node_broker_without_listeners_never_serves(setup: Setup) -> None:
    broker = NodeBroker(setup.dirs[0], {}, setup.coordinator_handle,
                        lambda d, name, host: LocalHandle(setup.nodes[d], name))
    assert not broker.configured and broker.serve(setup.logdir) is None
    assert broker.endpoint() is None
