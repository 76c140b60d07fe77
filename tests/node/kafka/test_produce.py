"""Produce over the wire, request by request: Kafka's per-partition validation and answers
(``ProduceRequest.validateRecords``, ``ReplicaManager.appendRecords``, the producer state's
sequence and epoch errors), acks=0 silence, and the producer's bytes stored as they came."""

from __future__ import annotations

import struct
from pathlib import Path

from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.logdir import LogDir

from storage.record_builder import build_batch
from storage.record_format import Compression, Record
from tests.node.kafka.wire import WireClient

PRODUCE = 0

def batch(*values: bytes, producer_id: int = -1, epoch: int = -1, sequence: int = -1,
          compression: Compression = Compression.NONE) -> bytes:
    return build_batch([Record(key=None, value=v, timestamp=1000 + i)
                        for i, v in enumerate(values)], compression=compression,
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)

def produce(client: WireClient, records: bytes | None, *, topic: str = "t", partition: int = 0,
            version: int = 9, acks: int = -1) -> object:
    response = client.call(PRODUCE, version, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    return response.responses[0].partition_responses[0]

def test_the_producers_batch_is_stored_byte_for_byte_with_offsets_stamped(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    first, second = batch(b"a", b"b"), batch(b"c")
    with WireClient(server.address) as client:
        assert produce(client, first).base_offset == 0
        answer = produce(client, second)
    assert answer.error_code == ErrorCode.none and answer.base_offset == 2
    assert answer.log_start_offset == 0
    stored = logdir.log("t", 0).read_raw(0).data
    expected = first + struct.pack(">q", 2) + second[8:]
    assert stored == expected

def test_unknown_partition_is_unknown_topic_or_partition(logdir: LogDir,
                                                         server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        assert produce(client, batch(b"a"), partition=7).error_code == \
            ErrorCode.unknown_topic_or_partition
        assert produce(client, batch(b"a"), topic="nope").error_code == \
            ErrorCode.unknown_topic_or_partition

def test_two_batches_in_one_partition_are_invalid_record(logdir: LogDir,
                                                         server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        answer = produce(client, batch(b"a") + batch(b"b"))
        assert answer.error_code == ErrorCode.invalid_record
        assert answer.base_offset == -1
        assert produce(client, b"").error_code == ErrorCode.invalid_record
    assert logdir.log("t", 0).log_end_offset == 0

def test_a_damaged_batch_is_corrupt_message(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    damaged = bytearray(batch(b"hello"))
    damaged[-1] ^= 0xFF
    with WireClient(server.address) as client:
        assert produce(client, bytes(damaged)).error_code == ErrorCode.corrupt_message
    assert logdir.log("t", 0).log_end_offset == 0

def test_zstd_before_produce_v7_is_unsupported_compression_type(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    data = batch(b"z" * 100, compression=Compression.ZSTD)
    with WireClient(server.address) as client:
        assert produce(client, data, version=6).error_code == \
            ErrorCode.unsupported_compression_type
        assert produce(client, data, version=7).error_code == ErrorCode.none
    assert logdir.log("t", 0).log_end_offset == 1

def test_acks_other_than_minus_one_zero_or_one_is_invalid_required_acks(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        assert produce(client, batch(b"a"), acks=2).error_code == \
            ErrorCode.invalid_required_acks
    assert logdir.log("t", 0).log_end_offset == 0

def test_acks_zero_gets_no_response_and_the_next_response_is_the_next_requests(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        _, silent = client.request_bytes(PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": batch(b"quiet")}]}]})
        client.send(silent)
        answer = produce(client, batch(b"loud"))   # checks its own correlation id
    assert answer.base_offset == 1

def test_acks_zero_with_a_failed_partition_closes_the_connection(
        logdir: LogDir, server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        _, silent = client.request_bytes(PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout": 5000,
            "topic_data": [{"name": "nope", "partition_data": [
                {"index": 0, "records": batch(b"x")}]}]})
        client.send(silent)
        assert client.is_closed_by_server()

def test_a_retried_batch_is_answered_with_its_first_offset_and_not_stored_twice(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    first = batch(b"a", b"b", producer_id=77, epoch=0, sequence=0)
    with WireClient(server.address) as client:
        assert produce(client, first).base_offset == 0
        assert produce(client, batch(b"c", producer_id=77, epoch=0, sequence=2)).base_offset == 2
        retry = produce(client, first)
    assert retry.error_code == ErrorCode.none and retry.base_offset == 0
    assert logdir.log("t", 0).log_end_offset == 3

def test_a_sequence_gap_is_out_of_order_sequence_number(logdir: LogDir,
                                                        server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        produce(client, batch(b"a", producer_id=5, epoch=0, sequence=0))
        gap = produce(client, batch(b"b", producer_id=5, epoch=0, sequence=3))
        new_epoch = produce(client, batch(b"c", producer_id=5, epoch=1, sequence=4))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert new_epoch.error_code == ErrorCode.out_of_order_sequence_number
    assert logdir.log("t", 0).log_end_offset == 1

def test_an_older_epoch_is_invalid_producer_epoch(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        produce(client, batch(b"a", producer_id=5, epoch=3, sequence=0))
        stale = produce(client, batch(b"b", producer_id=5, epoch=2, sequence=1))
    assert stale.error_code == ErrorCode.invalid_producer_epoch

def test_init_producer_id_hands_out_new_ids_with_epoch_zero(logdir: LogDir,
                                                            server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answers = [client.call(22, version, {"transactional_id": None,
                                             "transaction_timeout": 60000})
                   for version in (0, 2, 4)]
    assert [a.error_code for a in answers] == [ErrorCode.none] * 3
    assert [a.producer_id for a in answers] == [0, 1, 2]
    assert {a.producer_epoch for a in answers} == {0}


def test_a_produce_that_meets_a_disk_failure_is_kafka_storage_error_and_the_broker_answers_on(
        logdir: LogDir, server: KafkaServer, tmp_path: Path) -> None:
    logdir.create_logs("t", [0, 1])
    log = logdir.log("t", 0)
    log.update_config(log.config.with_overrides({"segment.bytes": "300"}))
    with WireClient(server.address) as client:
        assert produce(client, batch(b"x" * 150)).error_code == ErrorCode.none
        (logdir.path / "t-0").rename(tmp_path / "t-0-gone")       # the disk fails under it:
        (logdir.path / "t-0").write_text("not a directory")       # the next roll cannot create
        failed = produce(client, batch(b"y" * 150))                # the roll inside this append
        assert failed.error_code == ErrorCode.kafka_storage_error
        assert produce(client, batch(b"z"), partition=1).error_code == \
            ErrorCode.kafka_storage_error                           # the directory is offline
    assert not logdir.online
    with WireClient(server.address) as other:                       # the broker answers on
        assert produce(other, batch(b"z"), partition=1).error_code == \
            ErrorCode.kafka_storage_error
