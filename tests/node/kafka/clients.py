"""Helpers for driving real Kafka clients against a test server, each bounded in time."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck

DEADLINE_S = 15.0


def producer(bootstrap: str, **config: Any) -> ck.Producer:
    """A librdkafka producer with short timeouts (a failure shows in seconds)."""
    settings = {"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                "socket.timeout.ms": 5000, "linger.ms": 5}
    settings.update(config)
    return ck.Producer(settings)


def produce_all(p: ck.Producer, topic: str, values: list[bytes], partition: int = 0,
                **kwargs: Any) -> list[tuple[int, int]]:
    """Produce ``values`` and wait for every delivery; (partition, offset) of each, in order.
    A delivery error fails with the error."""
    reports: dict[int, Any] = {}

    def on_delivery(index: int) -> Any:
        def report(err: Any, msg: Any) -> None:
            reports[index] = err if err is not None else (msg.partition(), msg.offset())
        return report

    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=partition, on_delivery=on_delivery(i), **kwargs)
    assert p.flush(DEADLINE_S) == 0
    errors = [r for r in reports.values() if isinstance(r, ck.KafkaError)]
    assert not errors, errors
    return [reports[i] for i in range(len(values))]


def consumer(bootstrap: str, **config: Any) -> ck.Consumer:
    """A librdkafka consumer (its default isolation, read_committed) without commits."""
    settings = {"bootstrap.servers": bootstrap, "group.id": "unused",
                "enable.auto.commit": False, "socket.timeout.ms": 5000,
                "enable.partition.eof": False}
    settings.update(config)
    return ck.Consumer(settings)


def consume(c: ck.Consumer, topic: str, count: int, partition: int = 0,
            offset: int = 0) -> list[Any]:
    """``count`` messages of ``topic``-``partition`` from ``offset`` (fails after the
    deadline or on an error)."""
    c.assign([ck.TopicPartition(topic, partition, offset)])
    return poll_messages(c, count)


def poll_messages(c: ck.Consumer, count: int, deadline_s: float = DEADLINE_S) -> list[Any]:
    """The next ``count`` messages of what ``c`` is assigned (fails after ``deadline_s`` or on
    an error)."""
    got: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    assert len(got) == count, f"consumed {len(got)} of {count}"
    return got


def kafka_python_round_trip(bootstrap: str, topic: str, values: list[bytes],
                            **settings: Any) -> tuple[list[int], list[bytes]]:
    """kafka-python produces ``values`` to partition 0 of ``topic``, then reads them back from
    the start with its own connection settings ``settings`` (``security_protocol``, ...): the
    offsets acknowledged and the values read."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000, max_block_ms=10000,
                      **settings)
    try:
        offsets = [p.send(topic, value=v, partition=0).get(timeout=DEADLINE_S).offset
                   for v in values]
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=int(DEADLINE_S * 1000),
                      request_timeout_ms=6000, **settings)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        got: list[bytes] = []
        for message in c:
            got.append(message.value)
            if len(got) == len(values):
                break
    finally:
        c.close()
    return offsets, got


def aiokafka_round_trip(bootstrap: str, topic: str, values: list[bytes],
                        **settings: Any) -> list[bytes]:
    """aiokafka produces ``values`` to partition 0 of ``topic`` and reads them back from the
    start, with ``settings`` on both clients; the values read (within the deadline)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000, **settings)
        await p.start()
        try:
            for value in values:
                await p.send_and_wait(topic, value, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=5000, **settings)
        await c.start()
        try:
            c.assign([AioTopicPartition(topic, 0)])
            await c.seek_to_beginning()
            got: list[bytes] = []
            while len(got) < len(values):
                batch = await c.getmany(timeout_ms=1000)
                got.extend(m.value for messages in batch.values() for m in messages)
            return got
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), DEADLINE_S))
