"""Kafka's transactional producers against a real Strata cluster (Ray actors, three directories,
each a broker), on the cluster's one transaction coordinator: confluent-kafka (librdkafka) commits
and aborts, runs transactions in a row, is fenced by a second producer of its transactional id
and by the coordinator after its timeout; kafka-python's transactional producer commits; a
produce to a partition not added to the transaction is INVALID_TXN_STATE; a transaction
survives a kill of the coordinator actor."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from cluster import Cluster
from cluster.naming import TRANSACTION_STATE_TOPIC
from cluster.transactions.txn_state import partition_for
from node.kafka.versions import ApiKey
from storage.record_builder import build_batch
from storage.record_format import Record
from tests.cluster.conftest import module_cluster_of
from tests.cluster.test_cluster_faults import coordinator_pid
from tests.node.kafka.clients import consumer
from node.kafka.txn_apis import offsets_partition
from tests.node.kafka.wire import WireClient

TIMEOUT_S = 30.0
CONFIG = {"listeners": "PLAINTEXT://127.0.0.1:0", "auto.create.topics.enable": "true",
          "num.partitions": "3", "transaction.state.log.num.partitions": "5",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def cluster(ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_cluster_of(ray_session, tmp_path_factory.mktemp("txn-brokers"), CONFIG,
                           "strata-test-kafka-txns") as started:
        yield started


def txn_producer(cluster: Cluster, transactional_id: str, **config: Any) -> ck.Producer:
    settings = {"bootstrap.servers": cluster.bootstrap_servers,
                "transactional.id": transactional_id, "socket.timeout.ms": 5000,
                "message.timeout.ms": 20000, "linger.ms": 5}
    settings.update(config)
    return ck.Producer(settings)


def values_of(cluster: Cluster, topic: str, partitions: int, isolation: str,
              expected: int, wait_s: float = 5.0) -> list[bytes]:
    """Every value of ``topic`` a librdkafka consumer with ``isolation`` reads (waiting up to
    ``wait_s`` for ``expected`` of them; it reads whatever is there then)."""
    c = consumer(cluster.bootstrap_servers, **{"isolation.level": isolation})
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(got) < expected:
            msg = c.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            got.append(msg.value())
        time.sleep(0.5)           # anything beyond ``expected`` shows up too
        while (msg := c.poll(0.2)) is not None:
            if msg.error() is None:
                got.append(msg.value())
        return sorted(got)
    finally:
        c.close()


def produce_in_txn(p: ck.Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % 3)
    p.flush(TIMEOUT_S)


def test_a_committed_transaction_is_read_by_read_committed_consumers(cluster: Cluster) -> None:
    cluster.create_topic("txn-commit", partitions=3)
    p = txn_producer(cluster, "commit-1")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    produce_in_txn(p, "txn-commit", [b"a", b"b", b"c", b"d"])
    p.commit_transaction(TIMEOUT_S)
    assert values_of(cluster, "txn-commit", 3, "read_committed", 4) == [b"a", b"b", b"c", b"d"]
    [txn] = [t for t in cluster.list_transactions() if t.transactional_id == "commit-1"]
    assert txn.state.value == "CompleteCommit"


def test_an_aborted_transaction_is_read_only_by_read_uncommitted(cluster: Cluster) -> None:
    cluster.create_topic("txn-abort", partitions=3)
    p = txn_producer(cluster, "abort-1")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    produce_in_txn(p, "txn-abort", [b"x", b"y", b"z"])
    p.abort_transaction(TIMEOUT_S)
    assert values_of(cluster, "txn-abort", 3, "read_committed", 0, wait_s=2) == []
    assert values_of(cluster, "txn-abort", 3, "read_uncommitted", 3) == [b"x", b"y", b"z"]


def test_transactions_in_a_row_on_one_producer(cluster: Cluster) -> None:
    cluster.create_topic("txn-row", partitions=3)
    p = txn_producer(cluster, "row-1")
    p.init_transactions(TIMEOUT_S)
    for round_, commit in ((b"1", True), (b"2", False), (b"3", True)):
        p.begin_transaction()
        produce_in_txn(p, "txn-row", [round_ + b"-a", round_ + b"-b"])
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.abort_transaction(TIMEOUT_S)
    assert values_of(cluster, "txn-row", 3, "read_committed", 4) == [
        b"1-a", b"1-b", b"3-a", b"3-b"]


def test_a_second_producer_of_the_transactional_id_fences_the_first(cluster: Cluster) -> None:
    cluster.create_topic("txn-fence", partitions=3)
    first = txn_producer(cluster, "fence-1")
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    produce_in_txn(first, "txn-fence", [b"zombie"])
    second = txn_producer(cluster, "fence-1")
    second.init_transactions(TIMEOUT_S)         # aborts first's transaction, bumps the epoch
    second.begin_transaction()
    produce_in_txn(second, "txn-fence", [b"winner"])
    second.commit_transaction(TIMEOUT_S)
    with pytest.raises(ck.KafkaException) as caught:
        first.commit_transaction(TIMEOUT_S)
    error = caught.value.args[0]
    assert error.fatal() and error.code() in (ck.KafkaError._FENCED,
                                              ck.KafkaError.PRODUCER_FENCED)
    assert values_of(cluster, "txn-fence", 3, "read_committed", 1) == [b"winner"]


def test_a_transaction_past_its_timeout_is_aborted_and_its_commit_fails(
        cluster: Cluster) -> None:
    cluster.create_topic("txn-timeout", partitions=3)
    p = txn_producer(cluster, "timeout-1", **{"transaction.timeout.ms": 1500,
                                                "socket.timeout.ms": 1500,
                                                "message.timeout.ms": 1500})
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    produce_in_txn(p, "txn-timeout", [b"late"])
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        [txn] = [t for t in cluster.list_transactions() if t.transactional_id == "timeout-1"]
        if txn.state.value == "CompleteAbort":
            break
        time.sleep(0.1)
    assert txn.state.value == "CompleteAbort"
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(TIMEOUT_S)
    assert values_of(cluster, "txn-timeout", 3, "read_committed", 0, wait_s=2) == []


def test_kafka_pythons_transactional_producer_commits(cluster: Cluster) -> None:
    from kafka import KafkaProducer

    cluster.create_topic("txn-kafka-python", partitions=3)
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                      transactional_id="kafka-python-1", request_timeout_ms=20000)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send("txn-kafka-python", value=b"kp-%d" % i, partition=i)
        p.commit_transaction()
        p.begin_transaction()
        p.send("txn-kafka-python", value=b"kp-aborted", partition=0)
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert values_of(cluster, "txn-kafka-python", 3, "read_committed", 3) == [
        b"kp-0", b"kp-1", b"kp-2"]


def test_transactional_data_to_a_partition_not_added_is_invalid_txn_state(
        cluster: Cluster) -> None:
    cluster.create_topic("txn-unadded", partitions=1)
    log_dir = cluster.partition_dir("txn-unadded", 0)
    node_id, host, port = cluster.kafka_brokers()[log_dir]
    with WireClient((host, port)) as wire:
        init = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "unadded-1", "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == ErrorCode.none
        batch = build_batch([Record(value=b"x", timestamp=1)],
                            producer_id=int(init.producer_id),
                            producer_epoch=int(init.producer_epoch), base_sequence=0,
                            is_transactional=True)
        produced = wire.call(ApiKey.PRODUCE, 9, {
            "transactional_id": "unadded-1", "acks": -1, "timeout": 5000,
            "topic_data": [{"name": "txn-unadded", "partition_data": [
                {"index": 0, "records": batch}]}]})
    [answer] = produced.responses[0].partition_responses
    assert answer.error_code == ErrorCode.invalid_txn_state
    assert cluster.offsets("txn-unadded", 0)[1] == 0


def test_find_coordinator_names_the_leader_of_the_ids_state_log_partition(
        cluster: Cluster) -> None:
    """As Kafka: the broker leading partition ``partitionFor(id)`` of the state log, whichever
    broker is asked, in the single-key and the batched form."""
    ids = cluster.description.node_ids
    expected = {tid: ids[cluster.partition_dir(TRANSACTION_STATE_TOPIC, partition_for(tid, 5))]
                for tid in ("fc-a", "fc-b", "fc-c", "fc-d")}
    for _, host, port in cluster.kafka_brokers().values():
        with WireClient((host, port)) as wire:
            single = {tid: wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
                      for tid in expected}
            batched = wire.call(ApiKey.FIND_COORDINATOR, 4,
                                {"key_type": 1, "coordinator_keys": list(expected)})
        assert {t: (a.error_code, a.node_id) for t, a in single.items()} == {
            t: (ErrorCode.none, n) for t, n in expected.items()}
        assert {c.key: c.node_id for c in batched.coordinators} == expected
        brokers = {n: (h, p) for n, h, p in cluster.kafka_brokers().values()}
        assert all((a.host, a.port) == brokers[a.node_id] for a in single.values())


def test_describe_and_list_transactions_report_the_coordinators_state(
        cluster: Cluster) -> None:
    cluster.create_topic("txn-described", partitions=3)
    p = txn_producer(cluster, "described-1")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    produce_in_txn(p, "txn-described", [b"a", b"b"])
    _, host, port = next(iter(cluster.kafka_brokers().values()))
    with WireClient((host, port)) as wire:
        described = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                              {"transactional_ids": ["described-1", "nobody"]})
        listed = wire.call(ApiKey.LIST_TRANSACTIONS, 1, {
            "state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
            "duration_filter": -1})
    ongoing, unknown = described.transaction_states
    assert (ongoing.error_code, ongoing.transaction_state) == (ErrorCode.none, "Ongoing")
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [
        ("txn-described", [0, 1])]
    assert ongoing.producer_epoch == 0 and ongoing.producer_id >= 0
    assert unknown.error_code == ErrorCode.transactional_id_not_found
    assert listed.unknown_state_filters == ("Bogus",)
    assert ("described-1", ongoing.producer_id) in {
        (t.transactional_id, t.producer_id) for t in listed.transaction_states}
    assert all(t.transaction_state == "Ongoing" for t in listed.transaction_states)
    p.commit_transaction(TIMEOUT_S)


def test_aiokafkas_transactional_producer_commits_and_aborts(cluster: Cluster) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    cluster.create_topic("txn-aiokafka", partitions=3)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             transactional_id="aiokafka-1", request_timeout_ms=20000)
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send_and_wait("txn-aiokafka", b"ak-%d" % i, partition=i)
            await p.begin_transaction()
            await p.send_and_wait("txn-aiokafka", b"ak-aborted", partition=1)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT_S * 2))
    assert values_of(cluster, "txn-aiokafka", 3, "read_committed", 3) == [
        b"ak-0", b"ak-1", b"ak-2"]
    assert values_of(cluster, "txn-aiokafka", 3, "read_uncommitted", 4) == [
        b"ak-0", b"ak-1", b"ak-2", b"ak-aborted"]


@pytest.mark.slow     # a coordinator killed and restarted by Ray
def test_a_kafka_transaction_survives_a_kill_of_the_coordinator(start_cluster: Any) -> None:
    """kill -9 of the coordinator actor between the produce and the commit: the brokers answer
    COORDINATOR_NOT_AVAILABLE meanwhile, librdkafka retries, and the restarted coordinator,
    which loaded the transaction from the state log, commits it."""
    c = start_cluster(dirs=2, cleaners=1, config=CONFIG)
    c.create_topic("txn-kill", partitions=3)
    p = txn_producer(c, "kill-1")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    produce_in_txn(p, "txn-kill", [b"a", b"b", b"c"])
    os.kill(coordinator_pid(c), signal.SIGKILL)
    p.commit_transaction(90)
    assert values_of(c, "txn-kill", 3, "read_committed", 3) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("version", [0, 3])
def test_add_offsets_to_txn_adds_the_groups_offsets_partition(cluster: Cluster,
                                                              version: int) -> None:
    """AddOffsetsToTxn puts ``__consumer_offsets``-``partitionFor(group)`` in the transaction;
    EndTxn then ends it (that partition's marker is skipped while the topic does not exist)."""
    tid = f"offsets-{version}"
    _, host, port = next(iter(cluster.kafka_brokers().values()))
    with WireClient((host, port)) as wire:
        init = wire.call(ApiKey.INIT_PRODUCER_ID, min(version, 4), {
            "transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1})
        ids = {"transactional_id": tid, "producer_id": init.producer_id,
               "producer_epoch": init.producer_epoch}
        added = wire.call(ApiKey.ADD_OFFSETS_TO_TXN, version, {**ids, "group_id": "my-group"})
        fenced = wire.call(ApiKey.ADD_OFFSETS_TO_TXN, version, {
            **ids, "producer_epoch": init.producer_epoch + 1, "group_id": "my-group"})
        described = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
        ended = wire.call(ApiKey.END_TXN, version, {**ids, "committed": True})
    assert added.error_code == ErrorCode.none
    # KIP-588: a client before AddOffsetsToTxn v2 knows only INVALID_PRODUCER_EPOCH
    assert fenced.error_code == (ErrorCode.producer_fenced if version >= 2
                                 else ErrorCode.invalid_producer_epoch)
    [state] = described.transaction_states
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [
        ("__consumer_offsets", [offsets_partition("my-group", 50)])]
    assert ended.error_code == ErrorCode.none
    [txn] = [t for t in cluster.list_transactions() if t.transactional_id == tid]
    assert txn.state.value == "CompleteCommit"
