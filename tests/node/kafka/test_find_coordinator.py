"""FindCoordinator: a group's coordinator is the broker leading its partition of
``__consumer_offsets``, which the first request creates (``offsets.topic.num.partitions``
partitions, compacted, ``offsets.topic.segment.bytes``) and this directory loads; in the single
key form (v0-3) and the batched one (v4). A transactional id stays COORDINATOR_NOT_AVAILABLE and
an unknown key type is INVALID_REQUEST. Metadata reports the topic internal, and no client but
the admin produces to it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from node.groups.config import OFFSETS_TOPIC
from node.kafka.server import KafkaServer
from node.kafka.versions import ApiKey
from node.logdir import LogDir
from storage.record_builder import build_batch
from storage.record_format import Record
from tests.node.kafka.conftest import Serve
from tests.node.kafka.wire import WireClient

GROUPS = {"offsets.topic.num.partitions": "5", "offsets.topic.segment.bytes": "1048576"}


def offsets_partitions(logdir: LogDir) -> list[int]:
    return sorted(p for t, p in logdir.logs() if t == OFFSETS_TOPIC)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_group_coordinator_is_this_broker_once_the_offsets_topic_is_created(
        logdir: LogDir, serve: Serve, version: int) -> None:
    server = serve(dotted=GROUPS)
    assert offsets_partitions(logdir) == []
    values = {"key": "g1"} if version == 0 else {"key": "g1", "key_type": 0}
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.FIND_COORDINATOR, version, values)
    host, port = server.advertised_address()
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (
        ErrorCode.none, 0, host, port)
    assert offsets_partitions(logdir) == [0, 1, 2, 3, 4]
    config = logdir.config_for(OFFSETS_TOPIC)
    assert config.cleanup_policy == "compact" and config.segment_bytes == 1048576
    assert server.groups.loaded() == frozenset(range(5))


def test_the_batched_form_answers_every_key_and_refuses_an_unknown_key_type(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    with WireClient(server.address) as client:
        groups = client.call(ApiKey.FIND_COORDINATOR, 4,
                             {"key_type": 0, "coordinator_keys": ["a", "b"]})
        txns = client.call(ApiKey.FIND_COORDINATOR, 4,
                           {"key_type": 1, "coordinator_keys": ["tx"]})
        odd = client.call(ApiKey.FIND_COORDINATOR, 4,
                          {"key_type": 7, "coordinator_keys": ["x"]})
    port = server.advertised_address()[1]
    assert [(c.key, c.error_code, c.node_id, c.port) for c in groups.coordinators] == [
        ("a", ErrorCode.none, 0, port), ("b", ErrorCode.none, 0, port)]
    assert [c.error_code for c in txns.coordinators] == [ErrorCode.coordinator_not_available]
    assert [c.error_code for c in odd.coordinators] == [ErrorCode.invalid_request]
    assert offsets_partitions(logdir) == [0, 1, 2, 3, 4]


def test_a_transactional_id_does_not_create_the_offsets_topic(logdir: LogDir,
                                                               server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    assert answer.error_code == ErrorCode.coordinator_not_available
    assert offsets_partitions(logdir) == []


def test_no_coordinator_while_the_offsets_topic_cannot_be_created(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    (logdir.path / f"{OFFSETS_TOPIC}-0").write_text("a file where the partition goes")
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
    assert answer.error_code == ErrorCode.coordinator_not_available
    assert answer.node_id == -1 and OFFSETS_TOPIC in answer.error_message


def test_metadata_reports_the_offsets_topic_internal(logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("plain", [0])
    with WireClient(server.address) as client:
        client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
        answer = client.call(ApiKey.METADATA, 12, {"topics": None,
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    internal = {t.name: t.is_internal for t in answer.topics}
    assert internal == {OFFSETS_TOPIC: True, "plain": False}


@pytest.mark.parametrize("client_id,expected", [
    ("a-client", ErrorCode.invalid_topic_exception), ("__admin_client", ErrorCode.none)])
def test_only_the_admin_client_produces_to_the_offsets_topic(
        logdir: LogDir, serve: Serve, client_id: str, expected: ErrorCode) -> None:
    server = serve(dotted=GROUPS)
    batch = build_batch([Record(key=b"k", value=b"v", timestamp=1)])
    with WireClient(server.address, client_id=client_id) as client:
        client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
        answer = client.call(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
                {"name": OFFSETS_TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    [partition] = answer.responses[0].partition_responses
    assert partition.error_code == expected
    assert logdir.log(OFFSETS_TOPIC, 0).log_end_offset == (expected == ErrorCode.none)


def test_metadata_auto_creation_makes_the_offsets_topic_as_the_coordinator_needs_it(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted={**GROUPS, "auto.create.topics.enable": "true",
                           "num.partitions": "1"})
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.METADATA, 12, {
            "topics": [{"name": OFFSETS_TOPIC, "topic_id": None}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    [topic] = answer.topics
    assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (
        ErrorCode.none, True, 5)
    assert offsets_partitions(logdir) == [0, 1, 2, 3, 4]
    assert logdir.config_for(OFFSETS_TOPIC).cleanup_policy == "compact"
    assert server.groups.loaded() == frozenset(range(5))
