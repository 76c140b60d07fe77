"""Every advertised version of every served API answers a well-formed request (kio decodes the
response at that version), so a client that picks any version in our ranges is understood."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from node.logdir import LogDir
from storage.record_builder import build_batch
from storage.record_format import Record
from tests.node.kafka.wire import WireClient


def versions(key: ApiKey) -> list[int]:
    served = SUPPORTED[key]
    return list(range(served.min_version, served.max_version + 1))


@pytest.fixture
def client(logdir: LogDir, server: KafkaServer):
    logdir.create_logs("t", [0])
    logdir.log("t", 0).append([Record(value=b"v", timestamp=1000)])
    with WireClient(server.address) as c:
        yield c


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
def test_every_produce_version(client: WireClient, version: int) -> None:
    answer = client.call(ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [
            {"index": 0, "records": build_batch([Record(value=b"x", timestamp=1)])}]}]})
    part = answer.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 1)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_every_fetch_version(client: WireClient, version: int) -> None:
    answer = client.call(ApiKey.FETCH, version, {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
        "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    part = answer.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.high_watermark == 1
    assert len(part.records) > 0 and part.aborted_transactions == ()


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_every_list_offsets_version(client: WireClient, version: int) -> None:
    answer = client.call(ApiKey.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    part = answer.topics[0].partitions[0]
    assert (part.error_code, part.offset) == (ErrorCode.none, 1)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_every_metadata_version(client: WireClient, version: int) -> None:
    answer = client.call(ApiKey.METADATA, version, {
        "topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}],
        "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    topic = answer.topics[0]
    assert topic.name == "t" and topic.error_code == ErrorCode.none
    assert [p.leader_id for p in topic.partitions] == [0]


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
def test_every_init_producer_id_version(client: WireClient, version: int) -> None:
    answer = client.call(ApiKey.INIT_PRODUCER_ID, version, {
        "transactional_id": None, "transaction_timeout": 60000})
    assert answer.error_code == ErrorCode.none and answer.producer_id >= 0
