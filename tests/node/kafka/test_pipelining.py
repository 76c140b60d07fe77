"""Requests a client pipelines (sends before their answers came, as librdkafka does with up to
five produce requests in flight): served in order, answered in order, a run of them in one call
in the pool."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

import pytest
from kio.schema.errors import ErrorCode

from node.groups.coordinator import GroupCoordinator
from node.kafka.append_signal import AppendSignal
from node.kafka.apis import KafkaApis
from node.kafka.broker_view import LogDirBrokerView
from node.kafka.config import KafkaServerConfig
from node.kafka.context import ServedDir
from node.kafka.producer_ids import ProducerIdAllocator
from node.kafka.served_groups import ServedGroups
from node.kafka.server import KafkaServer
from node.logdir import LogDir
from tests.node.kafka.test_produce import PRODUCE, batch
from tests.node.kafka.wire import WireClient, encode_request

METADATA = 3


class CountingPool(ThreadPoolExecutor):
    """A real pool that counts the calls submitted to it."""

    def __init__(self) -> None:
        super().__init__(2)
        self.calls = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.calls += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def served(logdir: LogDir) -> Iterator[ServedDir]:
    config = KafkaServerConfig()
    groups = ServedGroups(logdir, GroupCoordinator(config.group_coordinator))
    yield ServedDir(logdir, LogDirBrokerView(logdir, 0, lambda: ("127.0.0.1", 9092)), config,
                    ProducerIdAllocator(logdir.path), AppendSignal(), groups)
    groups.close()


def produce_values(records: bytes, acks: int = -1) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}


def idempotent_batches(count: int) -> list[bytes]:
    return [batch(b"r%d" % i, producer_id=9, epoch=0, sequence=i) for i in range(count)]


def test_pipelined_produce_requests_are_served_in_one_pool_call_in_request_order(
        logdir: LogDir, served: ServedDir) -> None:
    logdir.create_logs("t", [0])
    frames = [encode_request(PRODUCE, 9, produce_values(data), 100 + i, "p")[4:]
              for i, data in enumerate(idempotent_batches(5))]
    frames.insert(2, encode_request(METADATA, 12, {"topics": None,
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False},
                                    102, "p")[4:])
    with CountingPool() as pool:
        apis = KafkaApis(served, pool)
        answered = asyncio.run(apis.handle_pipelined(frames))
        assert pool.calls == 1
    assert answered.error is None and len(answered.replies) == 6
    correlation_ids = [int.from_bytes(reply.data[4:8], "big") for reply in answered.replies
                       if reply.data is not None]
    assert correlation_ids == [100, 101, 102, 102, 103, 104]
    log = logdir.log("t", 0)
    assert log.log_end_offset == 5
    assert [b.base_sequence for f in [log.read_raw(0)] for b in f.batches()] == [0, 1, 2, 3, 4]


def test_pipelined_idempotent_produces_over_the_wire_are_answered_in_order(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        sent = [client.request_bytes(PRODUCE, 9, produce_values(data))
                for data in idempotent_batches(5)]
        client.send(b"".join(data for _, data in sent))
        answers = [client.read_response(PRODUCE, 9, correlation_id)   # checks the id
                   for correlation_id, _ in sent]
    partitions = [a.responses[0].partition_responses[0] for a in answers]
    assert [p.error_code for p in partitions] == [ErrorCode.none] * 5
    assert [p.base_offset for p in partitions] == [0, 1, 2, 3, 4]


def test_requests_pipelined_behind_a_failed_acks_zero_produce_are_not_served(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        _, failing = client.request_bytes(PRODUCE, 9, {**produce_values(batch(b"x"), acks=0),
                                                       "topic_data": [{"name": "nope",
                                                                       "partition_data": [
                                                           {"index": 0,
                                                            "records": batch(b"x")}]}]})
        _, behind = client.request_bytes(PRODUCE, 9, produce_values(batch(b"y")))
        client.send(failing + behind)
        assert client.is_closed_by_server()
    assert logdir.log("t", 0).log_end_offset == 0


def _produce_run(topic: str = "t", count: int = 3, transactional_id: str | None = None,
                 value: bytes = b"r") -> list[bytes]:
    values = [{**produce_values(batch(value + b"%d" % i)), "transactional_id": transactional_id,
               "topic_data": [{"name": topic, "partition_data": [
                   {"index": 0, "records": batch(value + b"%d" % i)}]}]} for i in range(count)]
    return [encode_request(PRODUCE, 9, v, 200 + i, "p")[4:] for i, v in enumerate(values)]


def _pool_calls(served: ServedDir, frames: list[bytes]) -> int:
    """The calls to the request pool that answering the run of ``frames`` made."""
    with CountingPool() as pool:
        answered = asyncio.run(KafkaApis(served, pool).handle_pipelined(frames))
        calls = pool.calls
    assert answered.error is None and len(answered.replies) == len(frames)
    return calls


def test_a_small_run_of_plain_produces_is_appended_without_the_request_pool(
        logdir: LogDir, served: ServedDir) -> None:
    logdir.create_logs("t", [0])
    assert _pool_calls(served, _produce_run(count=3)) == 0
    assert [r.value for r in logdir.log("t", 0).read(0)] == [b"r0", b"r1", b"r2"]


def test_produces_that_may_wait_on_more_than_their_writes_go_to_the_request_pool(
        logdir: LogDir, served: ServedDir) -> None:
    logdir.create_logs("t", [0])
    logdir.create_logs("synced", [0])
    logdir.update_topic_config("synced", logdir.log("synced", 0).config.with_overrides(
        {"flush.messages": "1"}))
    big = b"v" * (300 * 1024)
    for frames in (_produce_run(topic="synced"),        # an fsync in every append
                   _produce_run(topic="elsewhere"),     # not held here: the cluster is asked
                   _produce_run(topic="no/such"),       # a name no partition can have
                   _produce_run(count=1, value=big),    # more bytes than a run on the loop takes
                   _produce_run(transactional_id="tx")):   # its coordinator is asked
        assert _pool_calls(served, frames) == 1
    assert [r.value for r in logdir.log("synced", 0).read(0)] == [b"r0", b"r1", b"r2"]
    assert logdir.log("synced", 0).recovery_point == 3       # each append flushed
    assert [r.value[:2] for r in logdir.log("t", 0).read(0)] == [b"vv", b"r0", b"r1", b"r2"]
