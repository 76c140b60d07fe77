"""DescribeLogDirs and AlterReplicaLogDirs through kafka-python's admin client and over the
wire: the served directory with its partitions' sizes, a move to the directory already holding
a replica is done, any other directory is LOG_DIR_NOT_FOUND, an offline directory
KAFKA_STORAGE_ERROR (Kafka's ``ReplicaManager.describeLogDirs``/``alterReplicaLogDirs``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from kafka import TopicPartitionReplica
from kafka import errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from node import LogDir
from node.errors import LogDirNotFoundError, UnknownPartitionError
from node.kafka.broker_view import LogDirBrokerView
from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from storage.record_format import Record
from tests.node.kafka.conftest import take_offline
from tests.node.kafka.wire import WireClient


def fill(logdir: LogDir) -> None:
    logdir.create_logs("t", [0, 1])
    logdir.create_logs("u", [0])
    logdir.log("t", 0).append([Record(value=b"x" * 100, timestamp=1)] * 3)


def test_kafka_python_describe_log_dirs_reports_the_directory_and_its_partitions(
        logdir: LogDir, server: KafkaServer) -> None:
    fill(logdir)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        everything, = admin.describe_log_dirs()
        asked, = admin.describe_log_dirs({"t": [1]})
    finally:
        admin.close()
    assert everything["broker"] == 0
    directory, = everything["log_dirs"]
    assert directory["error_code"] == 0 and directory["log_dir"] == str(logdir.path)
    assert directory["total_bytes"] > 0 and 0 <= directory["usable_bytes"] <= directory[
        "total_bytes"]
    sizes = {(t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"],
                                                 p["is_future_key"])
             for t in directory["topics"] for p in t["partitions"]}
    assert sizes == {("t", 0): (logdir.log("t", 0).size_in_bytes, 0, False),
                     ("t", 1): (0, 0, False), ("u", 0): (0, 0, False)}
    assert sizes[("t", 0)][0] > 300
    only, = asked["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in only["topics"]] == [("t", [1])]


def test_kafka_python_alter_replica_log_dirs_answers_kafkas_errors(
        logdir: LogDir, server: KafkaServer, tmp_path: Path) -> None:
    fill(logdir)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        answers = admin.alter_replica_log_dirs({
            TopicPartitionReplica("t", 0, 0): str(logdir.path),
            TopicPartitionReplica("t", 1, 0): str(tmp_path / "elsewhere"),
            TopicPartitionReplica("ghost", 0, 0): str(logdir.path)})
    finally:
        admin.close()
    assert answers == {TopicPartitionReplica("t", 0, 0): kafka_errors.NoError,
                       TopicPartitionReplica("t", 1, 0): kafka_errors.LogDirNotFoundError,
                       TopicPartitionReplica("ghost", 0, 0):
                           kafka_errors.UnknownTopicOrPartitionError}
    assert logdir.log("t", 0).size_in_bytes > 0 and logdir.get_log("t", 1) is not None


def test_alter_replica_log_dirs_checks_the_directory_before_the_partition(
        logdir: LogDir, server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": "relative/logs", "topics": [{"name": "ghost", "partitions": [0]}]},
            {"path": str(logdir.path), "topics": [{"name": "bad name", "partitions": [0]}]}]})
    assert {(t.topic_name, p.partition_index): p.error_code
            for t in answer.results for p in t.partitions} == {
        ("ghost", 0): ErrorCode.log_dir_not_found,
        ("bad name", 0): ErrorCode.invalid_topic_exception}


def test_an_offline_directory_is_kafka_storage_error(logdir: LogDir, server: KafkaServer,
                                                      tmp_path: Path) -> None:
    fill(logdir)
    take_offline(logdir, "t", 0, tmp_path)
    with WireClient(server.address) as client:
        described = client.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        moved = client.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": str(logdir.path), "topics": [{"name": "t", "partitions": [0]}]}]})
    result, = described.results
    assert described.error_code == ErrorCode.none
    assert (result.error_code, result.log_dir, result.topics) == (
        ErrorCode.kafka_storage_error, str(logdir.path), ())
    assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    assert moved.results[0].partitions[0].error_code == ErrorCode.kafka_storage_error


def test_every_log_dirs_version_answers(logdir: LogDir, server: KafkaServer) -> None:
    fill(logdir)
    with WireClient(server.address) as client:
        for version in range(SUPPORTED[ApiKey.DESCRIBE_LOG_DIRS].min_version,
                             SUPPORTED[ApiKey.DESCRIBE_LOG_DIRS].max_version + 1):
            answer = client.call(ApiKey.DESCRIBE_LOG_DIRS, version, {
                "topics": [{"topic": "u", "partitions": [0, 5]}]})
            result, = answer.results
            assert result.error_code == ErrorCode.none and result.log_dir == str(logdir.path)
            assert [(t.name, [p.partition_index for p in t.partitions])
                    for t in result.topics] == [("u", [0])]
        for version in range(SUPPORTED[ApiKey.ALTER_REPLICA_LOG_DIRS].min_version,
                             SUPPORTED[ApiKey.ALTER_REPLICA_LOG_DIRS].max_version + 1):
            answer = client.call(ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": [
                {"path": str(logdir.path), "topics": [{"name": "u", "partitions": [0]}]}]})
            assert answer.results[0].partitions[0].error_code == ErrorCode.none


def test_the_single_directory_view_moves_raise_typed_errors_that_pickle(
        logdir: LogDir, tmp_path: Path) -> None:
    fill(logdir)
    view = LogDirBrokerView(logdir, 0, lambda: ("127.0.0.1", 9092))
    view.alter_replica_log_dir("t", 0, str(logdir.path) + "/")     # the same directory
    with pytest.raises(LogDirNotFoundError) as elsewhere:
        view.alter_replica_log_dir("t", 0, str(tmp_path))
    with pytest.raises(UnknownPartitionError):
        view.alter_replica_log_dir("t", 7, str(logdir.path))
    again = pickle.loads(pickle.dumps(elsewhere.value))
    assert type(again) is LogDirNotFoundError and again.log_dir == str(tmp_path)
    directory, = view.log_dirs()
    assert directory.path == str(logdir.path) and directory.offline_reason is None
    assert [(r.topic, r.partition, r.is_future) for r in directory.replicas] == [
        ("t", 0, False), ("t", 1, False), ("u", 0, False)]


def test_describe_log_dirs_of_no_held_partition_lists_the_directory_without_topics(
        logdir: LogDir, server: KafkaServer) -> None:
    """Kafka's ``testDescribeLogDirsWithoutAnyPartitionTopic``; an empty list asks for none."""
    fill(logdir)
    with WireClient(server.address) as client:
        unheld = client.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {
            "topics": [{"topic": "none-topic", "partitions": [0]}]})
        none = client.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": []})
    for answer in (unheld, none):
        result, = answer.results
        assert (result.error_code, result.log_dir, result.topics) == (
            ErrorCode.none, str(logdir.path), ())
        assert result.total_bytes > 0 and result.usable_bytes >= 0
