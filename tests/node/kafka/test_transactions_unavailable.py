"""A directory served without a cluster has no transaction coordinator: the transaction APIs
answer COORDINATOR_NOT_AVAILABLE (the client waits, writing nothing), and a produce of
transactional data is refused with INVALID_TXN_STATE (no coordinator added the partition to any
transaction). Also the helpers of the transaction APIs (the group's offsets partition)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from node import LogDir
from node.kafka.server import KafkaServer
from node.kafka.txn_apis import offsets_partition
from node.kafka.versions import ApiKey
from storage.record_builder import build_batch
from storage.record_format import Record
from tests.node.kafka.wire import WireClient


@pytest.mark.parametrize("version", [1, 3])
def test_a_transactional_id_has_no_coordinator_here(server: KafkaServer, version: int) -> None:
    with WireClient(server.address) as client:
        found = client.call(ApiKey.FIND_COORDINATOR, version, {"key": "tx", "key_type": 1})
    assert found.error_code == ErrorCode.coordinator_not_available
    assert found.node_id == -1 and "no transaction coordinator" in found.error_message


@pytest.mark.parametrize("version", [0, 4])
def test_init_producer_id_with_a_transactional_id_is_coordinator_not_available(
        server: KafkaServer, version: int) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1})
        empty = client.call(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": "", "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1})
    assert answer.error_code == ErrorCode.coordinator_not_available
    assert answer.producer_id == -1
    assert empty.error_code == ErrorCode.invalid_request


def test_the_transaction_apis_are_coordinator_not_available(server: KafkaServer,
                                                            logdir: LogDir) -> None:
    logdir.create_logs("t", range(2))
    ids = {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 0}
    with WireClient(server.address) as client:
        added = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 5,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]},
                                    {"name": "missing", "partitions": [0]}]})
        only_known = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 0, {
            "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 5,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "t", "partitions": [1]}]})
        offsets = client.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**ids, "group_id": "g"})
        ended = client.call(ApiKey.END_TXN, 3, {**ids, "committed": True})
        described = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})
        listed = client.call(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [],
                                                           "producer_id_filters": []})
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in added.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("t", 0): ErrorCode.operation_not_attempted,
                     ("t", 1): ErrorCode.operation_not_attempted,
                     ("missing", 0): ErrorCode.unknown_topic_or_partition}
    [[known]] = [t.results_by_partition for t in only_known.results_by_topic_v3_and_below]
    assert known.partition_error_code == ErrorCode.coordinator_not_available
    assert offsets.error_code == ErrorCode.coordinator_not_available
    assert ended.error_code == ErrorCode.coordinator_not_available
    assert [s.error_code for s in described.transaction_states] == [
        ErrorCode.coordinator_not_available]
    assert listed.error_code == ErrorCode.coordinator_not_available


def test_a_produce_of_transactional_data_is_invalid_txn_state(server: KafkaServer,
                                                              logdir: LogDir) -> None:
    """No coordinator added the partition to a transaction: Kafka's broker verification
    (KIP-890) refuses the batch; a plain idempotent batch is appended as before."""
    logdir.create_logs("t", [0])
    txn = build_batch([Record(value=b"x", timestamp=1)], producer_id=7, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    plain = build_batch([Record(value=b"y", timestamp=1)], producer_id=8, producer_epoch=0,
                        base_sequence=0)
    with WireClient(server.address) as client:
        answers = [client.call(ApiKey.PRODUCE, 9, {
            "transactional_id": tid, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
            for tid, batch in (("tx", txn), (None, txn), (None, plain))]
    codes = [a.responses[0].partition_responses[0].error_code for a in answers]
    assert codes == [ErrorCode.invalid_txn_state, ErrorCode.invalid_txn_state, ErrorCode.none]
    assert logdir.log("t", 0).log_end_offset == 1


def test_a_groups_offsets_partition_is_javas_hash_of_its_id() -> None:
    """Kafka's GroupCoordinator.partitionFor: Utils.abs(groupId.hashCode) % partitions
    ("my-group".hashCode() is -1906497762 in Java; "polygenelubricants" hashes to
    Integer.MIN_VALUE, whose Utils.abs is 0)."""
    assert offsets_partition("my-group", 50) == 1906497762 % 50
    assert offsets_partition("polygenelubricants", 50) == 0
    assert offsets_partition("", 50) == 0


def test_txn_offset_commit_every_version_is_coordinator_not_available(
        server: KafkaServer, logdir: LogDir) -> None:
    """TxnOffsetCommit v0-3 decode and are answered: the group's partition of
    ``__consumer_offsets`` is in no transaction here (no coordinator to add it), and a
    partition the directory does not have is UNKNOWN_TOPIC_OR_PARTITION."""
    logdir.create_logs("t", range(1))
    with WireClient(server.address) as client:
        found = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert found.error_code == ErrorCode.none
        for version in range(4):
            answer = client.call(ApiKey.TXN_OFFSET_COMMIT, version, {
                "transactional_id": "tx", "group_id": "g", "producer_id": 5,
                "producer_epoch": 0, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [
                    {"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": 1,
                         "committed_leader_epoch": -1, "committed_metadata": None}]},
                    {"name": "missing", "partitions": [
                        {"partition_index": 0, "committed_offset": 1,
                         "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in answer.topics] == [
                ("t", [(0, ErrorCode.coordinator_not_available)]),
                ("missing", [(0, ErrorCode.unknown_topic_or_partition)])], version
