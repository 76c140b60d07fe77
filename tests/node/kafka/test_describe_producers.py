"""DescribeProducers through kafka-python's admin client and over the wire: a partition's active
producers from its log's producer state (Kafka's ``UnifiedLog.activeProducers``), with Kafka's
errors for topics and partitions not served."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.kafka.versions import ApiKey
from node.logdir import LogDir
from storage.records import ControlType
from storage.record_format import Record
from tests.node.kafka.clients import produce_all, producer
from tests.node.kafka.conftest import take_offline
from tests.node.kafka.wire import WireClient


def test_kafka_python_describe_producers_reports_an_idempotent_producer(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    p = producer(server.bootstrap_servers, **{"enable.idempotence": True})
    produce_all(p, "t", [b"a", b"b", b"c"])
    p.flush(5)
    state, = logdir.log("t", 0).active_producers()
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        described = admin.describe_producers([TopicPartition("t", 0)])
    finally:
        admin.close()
    producers = described[TopicPartition("t", 0)].active_producers
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
             s.coordinator_epoch, s.current_transaction_start_offset) for s in producers] == [
        (state.producer_id, state.epoch, 2, state.last_timestamp, -1, -1)]
    assert state.producer_id >= 0 and state.last_timestamp > 0


def test_describe_producers_reports_open_transactions_and_coordinator_epochs(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    log.append([Record(value=b"x", timestamp=10)], producer_id=7, producer_epoch=1,
               base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=1,
                              coordinator_epoch=4, timestamp=20)
    log.append([Record(value=b"y", timestamp=30)] * 2, producer_id=9, producer_epoch=0,
               base_sequence=0, is_transactional=True)
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [0]}]})
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
             s.coordinator_epoch, s.current_txn_start_offset)
            for s in partition.active_producers] == [(7, 1, 0, 20, 4, -1),
                                                     (9, 0, 1, 30, -1, 2)]


def test_describe_producers_answers_kafkas_errors(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [0, 3]},
            {"name": "ghost", "partition_indexes": [0]},
            {"name": "bad name", "partition_indexes": [0, 1]}]})
    assert {(t.name, p.partition_index): p.error_code
            for t in answer.topics for p in t.partitions} == {
        ("t", 0): ErrorCode.none, ("t", 3): ErrorCode.unknown_topic_or_partition,
        ("ghost", 0): ErrorCode.unknown_topic_or_partition,
        ("bad name", 0): ErrorCode.invalid_topic_exception,
        ("bad name", 1): ErrorCode.invalid_topic_exception}
    assert answer.topics[0].partitions[0].active_producers == ()


def test_kafka_python_describe_producers_of_an_unknown_partition_raises(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition("t", 5)], broker_id=0)
    finally:
        admin.close()


def test_describe_producers_of_an_offline_directory_is_kafka_storage_error(
        logdir: LogDir, server: KafkaServer, tmp_path: Path) -> None:
    logdir.create_logs("t", [0])
    logdir.log("t", 0).append([Record(value=b"x", timestamp=1)])
    take_offline(logdir, "t", 0, tmp_path)
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [0]}]})
    assert answer.topics[0].partitions[0].error_code == ErrorCode.kafka_storage_error
