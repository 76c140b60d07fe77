"""Topic admin over the wire and through the clients' admin APIs: CreateTopics, DeleteTopics
and DescribeConfigs with Kafka's errors."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from node.logdir import LogDir
from storage.record_format import Record
from tests.node.kafka.wire import WireClient

TIMEOUT_S = 10


def create(client: WireClient, *topics: dict, validate_only: bool = False,
           version: int = 7) -> dict[str, object]:
    answer = client.call(ApiKey.CREATE_TOPICS, version, {
        "topics": [{"num_partitions": -1, "replication_factor": -1, "assignments": [],
                    "configs": [], **t} for t in topics],
        "timeout": 5000, "validate_only": validate_only})
    return {t.name: t for t in answer.topics}


def test_confluent_admin_creates_describes_and_deletes_a_topic(logdir: LogDir,
                                                               server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    futures = admin.create_topics([NewTopic("orders", 3, 1, config={"cleanup.policy": "compact"})],
                                  operation_timeout=5)
    futures["orders"].result(TIMEOUT_S)
    assert [p for t, p in logdir.logs() if t == "orders"] == [0, 1, 2]
    assert logdir.log("orders", 0).config.cleanup_policy == "compact"
    described = admin.describe_configs([ConfigResource("topic", "orders")])
    configs = next(iter(described.values())).result(TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == 1          # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].source == 5           # DEFAULT_CONFIG
    admin.delete_topics(["orders"], operation_timeout=5)["orders"].result(TIMEOUT_S)
    assert not [t for t, _ in logdir.logs() if t == "orders"]


def test_kafka_python_admin_creates_and_deletes_topics(logdir: LogDir,
                                                       server: KafkaServer) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        admin.create_topics([KpNewTopic("events", 2, 1)])
        assert sorted(p for t, p in logdir.logs() if t == "events") == [0, 1]
        assert "events" in admin.list_topics()
        admin.delete_topics(["events"])
        assert "events" not in {t for t, _ in logdir.logs()}
    finally:
        admin.close()


def test_create_topics_answers_kafkas_errors(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("taken", [0])
    with WireClient(server.address) as client:
        answers = create(
            client, {"name": "taken"}, {"name": "bad name"}, {"name": "twice"},
            {"name": "twice"}, {"name": "zero", "num_partitions": 0},
            {"name": "rf3", "replication_factor": 3},
            {"name": "cfg", "configs": [{"name": "segment.bytes", "value": "-5"}]},
            {"name": "assigned", "assignments": [{"partition_index": 0, "broker_ids": [5]}]},
            {"name": "mixed", "num_partitions": 2,
             "assignments": [{"partition_index": 0, "broker_ids": [0]}]})
    assert {name: t.error_code for name, t in answers.items()} == {
        "taken": ErrorCode.topic_already_exists, "bad name": ErrorCode.invalid_topic_exception,
        "twice": ErrorCode.invalid_request, "zero": ErrorCode.invalid_partitions,
        "rf3": ErrorCode.invalid_replication_factor, "cfg": ErrorCode.invalid_config,
        "assigned": ErrorCode.invalid_replica_assignment, "mixed": ErrorCode.invalid_request}
    assert {t for t, _ in logdir.logs()} == {"taken"}


def test_validate_only_creates_nothing_and_assignments_name_the_partitions(
        logdir: LogDir, server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        checked = create(client, {"name": "dry", "num_partitions": 4}, validate_only=True)
        placed = create(client, {"name": "placed", "assignments": [
            {"partition_index": 1, "broker_ids": [0]}, {"partition_index": 0, "broker_ids": [0]}]})
    assert checked["dry"].error_code == ErrorCode.none and checked["dry"].num_partitions == 4
    assert logdir.get_log("dry", 0) is None
    assert placed["placed"].error_code == ErrorCode.none
    assert sorted(p for t, p in logdir.logs() if t == "placed") == [0, 1]


def test_delete_of_an_unknown_topic_is_unknown_topic_or_partition(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["ghost"],
                                                       "timeout": 5000})
    assert answer.responses[0].error_code == ErrorCode.unknown_topic_or_partition


def test_describe_configs_of_the_broker_and_of_an_unknown_topic(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 4, "resource_name": "0",
                           "configuration_keys": ["num.partitions"]},
                          {"resource_type": 2, "resource_name": "ghost",
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    broker, ghost = answer.results
    assert broker.error_code == ErrorCode.none
    assert [(c.name, c.value, c.config_source) for c in broker.configs] == [
        ("num.partitions", "1", 4)]
    assert ghost.error_code == ErrorCode.unknown_topic_or_partition


def test_describe_configs_reports_each_keys_type_as_kafka_declares_it(
        logdir: LogDir, server: KafkaServer) -> None:
    """DescribeConfigs v3+ carries each entry's ConfigDef.Type (kafka-python's admin reads it):
    retention.ms LONG, segment.bytes INT, cleanup.policy LIST, min.cleanable.dirty.ratio DOUBLE,
    preallocate BOOLEAN, message.timestamp.type STRING; the broker's listeners STRING and its
    integer and boolean settings by their kind."""
    logdir.create_logs("typed", [0])
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 2, "resource_name": "typed",
                           "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "0",
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    topic, broker = ({c.name: c.config_type for c in r.configs} for r in answer.results)
    assert {k: topic[k] for k in ("retention.ms", "segment.bytes", "cleanup.policy",
                                  "min.cleanable.dirty.ratio", "preallocate",
                                  "message.timestamp.type")} == {
        "retention.ms": 5, "segment.bytes": 3, "cleanup.policy": 7,
        "min.cleanable.dirty.ratio": 6, "preallocate": 1, "message.timestamp.type": 2}
    assert {k: broker[k] for k in ("listeners", "num.partitions", "auto.create.topics.enable",
                                   "connections.max.idle.ms")} == {
        "listeners": 2, "num.partitions": 3, "auto.create.topics.enable": 1,
        "connections.max.idle.ms": 5}
    assert 0 not in topic.values() and 0 not in broker.values()


@pytest.mark.parametrize("key", [ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
                                 ApiKey.DESCRIBE_CONFIGS, ApiKey.CREATE_PARTITIONS,
                                 ApiKey.DELETE_RECORDS])
def test_every_admin_version_answers(logdir: LogDir, server: KafkaServer, key: ApiKey) -> None:
    served = SUPPORTED[key]
    with WireClient(server.address) as client:
        for version in range(served.min_version, served.max_version + 1):
            if key == ApiKey.CREATE_TOPICS:
                answer = create(client, {"name": f"v{version}"}, version=version)
                assert answer[f"v{version}"].error_code == ErrorCode.none
            elif key == ApiKey.DELETE_TOPICS:
                logdir.create_logs(f"d{version}", [0])
                answer = client.call(key, version, {"topic_names": [f"d{version}"],
                                                    "timeout": 5000})
                assert answer.responses[0].error_code == ErrorCode.none
            elif key == ApiKey.CREATE_PARTITIONS:
                logdir.create_logs(f"p{version}", [0])
                answer = client.call(key, version, {"topics": [
                    {"name": f"p{version}", "count": 2, "assignments": None}],
                    "timeout": 5000, "validate_only": False})
                assert answer.results[0].error_code == ErrorCode.none
            elif key == ApiKey.DELETE_RECORDS:
                logdir.create_logs(f"r{version}", [0])
                answer = client.call(key, version, {"timeout": 5000, "topics": [
                    {"name": f"r{version}", "partitions": [
                        {"partition_index": 0, "offset": 0}]}]})
                assert answer.topics[0].partitions[0].error_code == ErrorCode.none
            else:
                answer = client.call(key, version, {
                    "resources": [{"resource_type": 4, "resource_name": "0",
                                   "configuration_keys": None}],
                    "include_synonyms": False, "include_documentation": False})
                assert answer.results[0].error_code == ErrorCode.none


def test_create_partitions_grows_a_topic_with_kafkas_errors(logdir: LogDir,
                                                            server: KafkaServer) -> None:
    logdir.create_logs("grow", [0])
    logdir.create_logs("big", range(3))
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.CREATE_PARTITIONS, 3, {"topics": [
            {"name": "grow", "count": 3, "assignments": None},
            {"name": "big", "count": 2, "assignments": None},
            {"name": "ghost", "count": 2, "assignments": None}],
            "timeout": 5000, "validate_only": False})
    assert [(r.name, r.error_code) for r in answer.results] == [
        ("grow", ErrorCode.none), ("big", ErrorCode.invalid_partitions),
        ("ghost", ErrorCode.unknown_topic_or_partition)]
    assert sorted(p for t, p in logdir.logs() if t == "grow") == [0, 1, 2]


def test_kafka_python_create_partitions_and_confluent_delete_records(
        logdir: LogDir, server: KafkaServer) -> None:
    from confluent_kafka import TopicPartition as CkTopicPartition
    from kafka.admin import NewPartitions
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    for i in range(5):
        log.append([Record(value=b"%d" % i, timestamp=1000)])
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        admin.create_partitions({"t": NewPartitions(2)})
    finally:
        admin.close()
    assert logdir.get_log("t", 1) is not None
    confluent_admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    deleted = confluent_admin.delete_records([CkTopicPartition("t", 0, 3)], operation_timeout=5)
    result = next(iter(deleted.values())).result(TIMEOUT_S)
    assert result.low_watermark == 3
    assert log.log_start_offset == 3


def test_delete_records_answers_kafkas_errors(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    logdir.set_topic_config("compacted", logdir.default_config.with_overrides(
        {"cleanup.policy": "compact"}))
    logdir.create_logs("compacted", [0])
    logdir.log("t", 0).append([Record(value=b"a", timestamp=1), Record(value=b"b", timestamp=2)])
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DELETE_RECORDS, 2, {"timeout": 5000, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "offset": 5}]},
            {"name": "compacted", "partitions": [{"partition_index": 0, "offset": 0}]},
            {"name": "ghost", "partitions": [{"partition_index": 0, "offset": 0}]}]})
        everything = client.call(ApiKey.DELETE_RECORDS, 0, {"timeout": 5000, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "offset": -1}]}]})
    assert [t.partitions[0].error_code for t in answer.topics] == [
        ErrorCode.offset_out_of_range, ErrorCode.policy_violation,
        ErrorCode.unknown_topic_or_partition]
    assert everything.topics[0].partitions[0].low_watermark == 2


def test_describe_cluster_names_this_broker_and_refuses_controller_endpoints(
        server: KafkaServer) -> None:
    host, port = server.address
    with WireClient(server.address) as client:
        brokers = client.call(ApiKey.DESCRIBE_CLUSTER, 1, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1})
        controllers = client.call(ApiKey.DESCRIBE_CLUSTER, 1, {
            "include_cluster_authorized_operations": False, "endpoint_type": 2})
        v0 = client.call(ApiKey.DESCRIBE_CLUSTER, 0, {
            "include_cluster_authorized_operations": False})
    assert brokers.error_code == ErrorCode.none and brokers.controller_id == 0
    assert [(b.broker_id, b.host, b.port) for b in brokers.brokers] == [(0, host, port)]
    assert v0.cluster_id == brokers.cluster_id
    assert [(b.broker_id, b.host, b.port) for b in v0.brokers] == [(0, host, port)]
    assert controllers.error_code == ErrorCode.unsupported_endpoint_type


def test_kafka_python_describe_cluster(server: KafkaServer) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert described["controller_id"] == 0
    assert [(b["broker_id"], b["port"]) for b in described["brokers"]] == [
        (0, server.address[1])]
