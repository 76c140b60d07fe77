"""kafka-python, aiokafka and kcat against a served log directory: each bootstraps, produces and
consumes with its own defaults (kafka-python: idempotent with acks=all; kcat: librdkafka's
read_committed)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from node.kafka.server import KafkaServer
from node.logdir import LogDir

TIMEOUT_S = 15


def test_kafka_python_idempotent_producer_and_consumer_round_trip(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", range(2))
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers,
                             request_timeout_ms=5000, max_block_ms=10000)
    try:
        assert producer.config["enable_idempotence"] and producer.config["acks"] == -1
        futures = [producer.send("t", key=b"k", value=b"v%d" % i, partition=i % 2)
                   for i in range(10)]
        metas = [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=5)
    assert sorted((m.partition, m.offset) for m in metas) == sorted(
        [(0, i) for i in range(5)] + [(1, i) for i in range(5)])
    assert all(b.producer_id >= 0 for b in logdir.log("t", 0).read_raw(0).batches())
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT_S * 1000,
                             request_timeout_ms=6000)
    try:
        partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        got = []
        for message in consumer:
            got.append((message.partition, message.offset, message.value))
            if len(got) == 10:
                break
        assert consumer.beginning_offsets(partitions) == {p: 0 for p in partitions}
        assert consumer.end_offsets(partitions) == {p: 5 for p in partitions}
    finally:
        consumer.close()
    assert sorted(got) == sorted((i % 2, i // 2, b"v%d" % i) for i in range(10))


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_aiokafka_producer_and_consumer_round_trip(logdir: LogDir, server: KafkaServer,
                                                   idempotent: bool) -> None:
    logdir.create_logs("t", [0])

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap_servers,
                                    request_timeout_ms=5000, compression_type="gzip",
                                    enable_idempotence=idempotent)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("t", b"m%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=server.bootstrap_servers,
                                    auto_offset_reset="earliest", request_timeout_ms=5000)
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition("t", 0)])
            await consumer.seek_to_beginning()
            got = []
            while len(got) < 5:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend(m.value for messages in batch.values() for m in messages)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
    assert got == [b"m%d" % i for i in range(5)]
    producer_ids = {b.producer_id for b in logdir.log("t", 0).read_raw(0).batches()}
    assert (min(producer_ids) >= 0) == idempotent


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is missing: run scripts/setup-kcat")
    return path


def test_kcat_lists_metadata_produces_and_consumes(logdir: LogDir, server: KafkaServer,
                                                   kcat: str) -> None:
    logdir.create_logs("lines", [0])
    broker = server.bootstrap_servers
    listing = subprocess.run([kcat, "-b", broker, "-L"], capture_output=True, text=True,
                             timeout=TIMEOUT_S, check=True).stdout
    assert 'topic "lines" with 1 partitions' in listing
    assert f"broker 0 at {broker}" in listing
    subprocess.run([kcat, "-b", broker, "-P", "-t", "lines", "-p", "0"], input="one\ntwo\n",
                   text=True, timeout=TIMEOUT_S, check=True)
    assert logdir.log("lines", 0).log_end_offset == 2
    out = subprocess.run([kcat, "-b", broker, "-C", "-t", "lines", "-p", "0", "-o",
                          "beginning", "-e", "-q"], capture_output=True, text=True,
                         timeout=TIMEOUT_S, check=True).stdout
    assert out.splitlines() == ["one", "two"]
