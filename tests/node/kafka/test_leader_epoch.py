"""OffsetForLeaderEpoch and the leader epoch Metadata reports: every partition has one leader, of
epoch 0, which began at the log start; the end offsets and errors are those of Kafka's
``LeaderEpochFileCache.endOffsetFor`` and ``Partition.lastOffsetForLeaderEpoch``
(``LeaderEpochFileCacheTest``), and a librdkafka consumer that validates its position with it
consumes on."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from node.kafka import apis
from node.kafka.leader_epoch import end_offset_for
from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from node.logdir import LogDir
from storage.record_format import Record
from tests.node.kafka.clients import consumer, poll_messages, produce_all, producer
from tests.node.kafka.wire import WireClient


def ask(client: WireClient, version: int, *partitions: tuple[str, int, int, int]) -> list[Any]:
    """(error, epoch, end offset) of each (topic, partition, current epoch, epoch) asked."""
    answer = client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {
        "replica_id": -1,
        "topics": [{"topic": t, "partitions": [{"partition": p, "current_leader_epoch": c,
                                                "leader_epoch": e}]}
                   for t, p, c, e in partitions]})
    return [(p.error_code, p.leader_epoch, p.end_offset)
            for t in answer.topics for p in t.partitions]


@pytest.mark.parametrize(("requested", "expected"), [
    (-1, (-1, -1)),        # undefined
    (0, (0, 42)),          # the latest epoch: the log end offset
    (1, (-1, -1)),         # later than any known epoch
    (-3, (-3, 7)),         # before the first epoch: the first epoch's start offset
])
def test_end_offset_for_follows_kafkas_epoch_cache(requested: int,
                                                   expected: tuple[int, int]) -> None:
    found = end_offset_for(requested, log_start_offset=7, log_end_offset=42)
    assert (found.leader_epoch, found.end_offset) == expected


def test_offset_for_leader_epoch_answers_the_end_offset_and_kafkas_errors(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    logdir.log("t", 0).append([Record(value=b"%d" % i, timestamp=1) for i in range(5)])
    with WireClient(server.address) as client:
        for version in range(SUPPORTED[ApiKey.OFFSET_FOR_LEADER_EPOCH].min_version,
                             SUPPORTED[ApiKey.OFFSET_FOR_LEADER_EPOCH].max_version + 1):
            assert ask(client, version, ("t", 0, -1, 0), ("t", 0, 0, 0), ("t", 0, 0, 3),
                       ("t", 0, 0, -1)) == [
                (ErrorCode.none, 0, 5), (ErrorCode.none, 0, 5), (ErrorCode.none, -1, -1),
                (ErrorCode.none, -1, -1)]
        assert ask(client, 4, ("t", 0, 1, 0), ("t", 0, -2, 0), ("t", 9, 0, 0),
                   ("ghost", 0, 5, 0)) == [
            (ErrorCode.unknown_leader_epoch, -1, -1), (ErrorCode.fenced_leader_epoch, -1, -1),
            (ErrorCode.unknown_topic_or_partition, -1, -1),
            (ErrorCode.unknown_topic_or_partition, -1, -1)]


def test_metadata_reports_the_leader_epoch(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0, 1])
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.METADATA, 12, {
            "topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
    assert [(p.partition_index, p.leader_epoch) for p in answer.topics[0].partitions] == [
        (0, 0), (1, 0)]


def test_a_librdkafka_consumer_validates_its_position_and_consumes_on(
        logdir: LogDir, server: KafkaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    handler = apis.HANDLERS[ApiKey.OFFSET_FOR_LEADER_EPOCH]

    def counted(served: Any, request: Any) -> Any:
        asked.append(request.api_version)
        return handler(served, request)

    monkeypatch.setitem(apis.HANDLERS, ApiKey.OFFSET_FOR_LEADER_EPOCH, counted)
    logdir.create_logs("t", [0])
    p = producer(server.bootstrap_servers)
    produce_all(p, "t", [b"a%d" % i for i in range(5)])
    c = consumer(server.bootstrap_servers, **{"isolation.level": "read_uncommitted"})
    try:
        c.assign([ck.TopicPartition("t", 0, 3, leader_epoch=0)])
        got = poll_messages(c, 2)
        produce_all(p, "t", [b"b%d" % i for i in range(3)])
        got += poll_messages(c, 3)
    finally:
        c.close()
    assert [m.value() for m in got] == [b"a3", b"a4", b"b0", b"b1", b"b2"]
    assert asked and set(asked) <= {2, 3, 4}


def test_list_offsets_answers_carry_the_leader_epoch(logdir: LogDir,
                                                     server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    logdir.log("t", 0).append([Record(value=b"%d" % i, timestamp=100 + i) for i in range(3)])
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": t}]}
                for t in (-2, -1, 101, 10_000)]})
    assert [(p.offset, p.leader_epoch) for t in answer.topics for p in t.partitions] == [
        (0, 0), (3, 0), (1, 0), (-1, -1)]
