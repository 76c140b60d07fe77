"""Exactly-once consume-transform-produce (KIP-98, KIP-447) with librdkafka against a real
3-directory Strata cluster: a transactional producer sends a group consumer's positions to its
transaction (AddOffsetsToTxn, TxnOffsetCommit) and commits or aborts; the transaction's marker on
``__consumer_offsets`` makes the offsets the group's or drops them. After a run that aborts one
transaction midway and restarts the consumer from the committed offsets, the output holds every
input record exactly once (read_committed) and the group's committed offsets are the input's
end; while a transaction is open, OffsetFetch with require_stable is UNSTABLE_OFFSET_COMMIT; a
TxnOffsetCommit before AddOffsetsToTxn is INVALID_TXN_STATE."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from cluster import Cluster
from node.kafka.versions import ApiKey
from tests.cluster.conftest import module_cluster_of
from tests.cluster.test_kafka_groups import OFFSETS_PARTITIONS, coordinator_of, endpoints
from tests.node.kafka.wire import WireClient

TIMEOUT_S = 30.0
PARTITIONS = 3
PER_PARTITION = 10
CONFIG = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
          "transaction.state.log.num.partitions": "3"}


@pytest.fixture(scope="module")
def cluster(ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_cluster_of(ray_session, tmp_path_factory.mktemp("eos-brokers"), CONFIG,
                           "strata-test-kafka-eos") as started:
        yield started


def _fill(cluster: Cluster, topic: str) -> list[bytes]:
    cluster.create_topic(topic, partitions=PARTITIONS)
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    values = []
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            value = f"{partition}-{i}".encode()
            p.produce(topic, value=value, partition=partition)
            values.append(value)
    assert p.flush(TIMEOUT_S) == 0
    return values


def _group_consumer(cluster: Cluster, group: str, topic: str) -> ck.Consumer:
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed", "socket.timeout.ms": 5000,
                     "session.timeout.ms": 6000, "enable.partition.eof": False})
    c.subscribe([topic])
    return c


def _poll(c: ck.Consumer, count: int, wait_s: float = TIMEOUT_S) -> list[ck.Message]:
    """Up to ``count`` records (fewer when the deadline passes first)."""
    got: list[ck.Message] = []
    deadline = time.monotonic() + wait_s
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    return got


def _transform(p: ck.Producer, c: ck.Consumer, records: list[ck.Message], topic: str,
               commit: bool) -> None:
    """One consume-transform-produce transaction over ``records``."""
    p.begin_transaction()
    for msg in records:
        p.produce(topic, value=b"out-" + msg.value(), partition=msg.partition())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(),
                                  TIMEOUT_S)
    if commit:
        p.commit_transaction(TIMEOUT_S)
    else:
        p.abort_transaction(TIMEOUT_S)


def _committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` as OffsetFetch answers them (-1: none)."""
    with WireClient(endpoints(cluster)[coordinator_of(cluster, group)]) as wire:
        answer = wire.call(ApiKey.OFFSET_FETCH, 7, {
            "group_id": group, "require_stable": True,
            "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]})
    assert answer.error_code == ErrorCode.none
    [fetched] = answer.topics
    assert all(p.error_code == ErrorCode.none for p in fetched.partitions), fetched
    return {p.partition_index: p.committed_offset for p in fetched.partitions}


def _read_committed(cluster: Cluster, topic: str, expected: int) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "enable.partition.eof": False})
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = [m.value() for m in _poll(c, expected, wait_s=10)]
        time.sleep(0.5)             # anything beyond ``expected`` shows up too
        while (msg := c.poll(0.2)) is not None:
            if msg.error() is None:
                got.append(msg.value())
        return sorted(got)
    finally:
        c.close()


def test_consume_transform_produce_is_exactly_once_across_an_abort_and_a_restart(
        cluster: Cluster) -> None:
    inputs = _fill(cluster, "eos-in")
    cluster.create_topic("eos-out", partitions=PARTITIONS)
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                     "transactional.id": "eos-1", "socket.timeout.ms": 5000,
                     "message.timeout.ms": 20000, "linger.ms": 5})
    p.init_transactions(TIMEOUT_S)
    c = _group_consumer(cluster, "eos-group", "eos-in")
    first = _poll(c, 10)
    assert len(first) == 10
    _transform(p, c, first, "eos-out", commit=True)
    after_first = _committed(cluster, "eos-group", "eos-in")
    assert sum(max(o, 0) for o in after_first.values()) == 10
    aborted = _poll(c, 10)
    assert len(aborted) == 10
    _transform(p, c, aborted, "eos-out", commit=False)
    # the aborted transaction's offsets are not the group's
    assert _committed(cluster, "eos-group", "eos-in") == after_first
    c.close()

    c = _group_consumer(cluster, "eos-group", "eos-in")
    try:
        rest = _poll(c, len(inputs) - 10)
        assert len(rest) == len(inputs) - 10
        _transform(p, c, rest, "eos-out", commit=True)
        assert _poll(c, 1, wait_s=1) == []
    finally:
        c.close()
    assert _read_committed(cluster, "eos-out", len(inputs)) == sorted(
        b"out-" + v for v in inputs)
    assert _committed(cluster, "eos-group", "eos-in") == {
        p: PER_PARTITION for p in range(PARTITIONS)}


def test_offset_fetch_require_stable_is_unstable_while_the_transaction_is_open(
        cluster: Cluster) -> None:
    _fill(cluster, "eos-open-in")
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                     "transactional.id": "eos-open", "socket.timeout.ms": 5000})
    p.init_transactions(TIMEOUT_S)
    c = _group_consumer(cluster, "eos-open-group", "eos-open-in")
    try:
        records = _poll(c, 5)
        assert len(records) == 5
        p.begin_transaction()
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(),
                                      TIMEOUT_S)
        consumed = {m.partition() for m in records}
        with WireClient(endpoints(cluster)[coordinator_of(cluster, "eos-open-group")]) as wire:
            def fetch(stable: bool) -> dict[int, tuple[ErrorCode, int]]:
                answer = wire.call(ApiKey.OFFSET_FETCH, 7, {
                    "group_id": "eos-open-group", "require_stable": stable,
                    "topics": [{"name": "eos-open-in",
                                "partition_indexes": sorted(consumed)}]})
                return {q.partition_index: (q.error_code, q.committed_offset)
                        for q in answer.topics[0].partitions}
            assert {e for e, _ in fetch(True).values()} == {ErrorCode.unstable_offset_commit}
            assert fetch(False) == {q: (ErrorCode.none, -1) for q in consumed}
            p.commit_transaction(TIMEOUT_S)
            stable = fetch(True)
        assert {e for e, _ in stable.values()} == {ErrorCode.none}
        assert sum(o for _, o in stable.values()) == 5
    finally:
        c.close()


def test_txn_offset_commit_without_add_offsets_to_txn_is_invalid_txn_state(
        cluster: Cluster) -> None:
    """The group's partition of ``__consumer_offsets`` must be in the producer's transaction
    (AddOffsetsToTxn) before its offsets are committed there; once added, v0 and v3 commit."""
    cluster.create_topic("eos-wire", partitions=1)
    group = "eos-wire-group"
    with WireClient(next(iter(endpoints(cluster).values()))) as wire:
        # creates __consumer_offsets when no test before did
        assert wire.call(ApiKey.FIND_COORDINATOR, 3,
                         {"key": group, "key_type": 0}).error_code == ErrorCode.none
    with WireClient(endpoints(cluster)[coordinator_of(cluster, group)]) as wire:
        init = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "eos-wire", "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1})
        ids = {"transactional_id": "eos-wire", "producer_id": init.producer_id,
               "producer_epoch": init.producer_epoch}

        def commit(version: int, offset: int) -> ErrorCode:
            answer = wire.call(ApiKey.TXN_OFFSET_COMMIT, version, {
                **ids, "group_id": group, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": "eos-wire", "partitions": [
                    {"partition_index": 0, "committed_offset": offset,
                     "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            return answer.topics[0].partitions[0].error_code

        assert commit(3, 5) == ErrorCode.invalid_txn_state
        assert wire.call(ApiKey.ADD_OFFSETS_TO_TXN, 3,
                         {**ids, "group_id": group}).error_code == ErrorCode.none
        assert commit(0, 6) == ErrorCode.none
        assert commit(3, 7) == ErrorCode.none
        assert wire.call(ApiKey.END_TXN, 3, {**ids, "committed": True}).error_code == \
            ErrorCode.none
    with WireClient(endpoints(cluster)[coordinator_of(cluster, group)]) as wire:
        answer = wire.call(ApiKey.OFFSET_FETCH, 7, {
            "group_id": group, "require_stable": True,
            "topics": [{"name": "eos-wire", "partition_indexes": [0]}]})
    assert [(p.error_code, p.committed_offset) for p in answer.topics[0].partitions] == [
        (ErrorCode.none, 7)]
