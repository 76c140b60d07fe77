"""Transactions on a real local Ray cluster: the coordinator actor's API, markers through the node
actors, read_committed through ``Cluster.consume``, the timeout abort of the periodic loop, and a
kill -9 of the coordinator between the appends and the commit."""

from __future__ import annotations

import os
import signal

import pytest

from cluster import Cluster
from cluster.transactions.txn_state import ProducerFencedError, TxnState
from cluster.transactions.txn_store import STATE_TOPIC
from storage.records import Record
from tests.cluster.conftest import wait_for
from tests.cluster.test_cluster_faults import coordinator_pid

FAST_TXN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}


def rows(prefix: bytes, n: int) -> list[Record]:
    return [Record(key=b"%s%d" % (prefix, i), value=b"%s%d" % (prefix, i), timestamp=1000 + i)
            for i in range(n)]


def committed(c: Cluster, topic: str, partition: int) -> list[bytes]:
    return [r.value for r in c.consume(topic, partition, isolation="read_committed")]


def stable(c: Cluster, topic: str, partition: int) -> bool:
    return c.last_stable_offset(topic, partition) == c.offsets(topic, partition)[1]


def test_a_transaction_is_invisible_until_its_commit_then_visible_whole(start_cluster) -> None:
    c = start_cluster(dirs=2, cleaners=1)
    c.create_topic("t", partitions=2)
    assert STATE_TOPIC not in {t.name for t in c.list_topics()}   # created at the first use
    txn = c.begin_transaction("load-1")
    txn.produce("t", 0, rows(b"a", 5))
    other = txn.new_producer()
    other.produce("t", 1, rows(b"b", 3))
    c.produce("t", 1, rows(b"plain", 2))            # a non-transactional producer meanwhile
    assert committed(c, "t", 0) == [] and committed(c, "t", 1) == []
    assert c.last_stable_offset("t", 1) == 0
    outcome = txn.commit()
    assert outcome.committed and len(outcome.committed_producers) == 2
    assert committed(c, "t", 0) == [b"a%d" % i for i in range(5)]
    assert committed(c, "t", 1) == [b"b0", b"b1", b"b2", b"plain0", b"plain1"]
    assert stable(c, "t", 0) and stable(c, "t", 1)
    # the markers are in the log but no consumer sees them as records
    assert len(list(c.consume("t", 0))) == 5 and c.offsets("t", 0)[1] == 6
    assert c.describe_transaction("load-1").state == TxnState.COMPLETE_COMMIT


def test_an_aborted_transaction_never_becomes_visible(start_cluster) -> None:
    c = start_cluster(dirs=1, cleaners=1)
    c.create_topic("t", partitions=1)
    with pytest.raises(RuntimeError):
        with c.begin_transaction("job") as txn:
            txn.produce("t", 0, rows(b"x", 4))
            raise RuntimeError("the job failed")
    assert committed(c, "t", 0) == [] and stable(c, "t", 0)
    assert c.describe_transaction("job").state == TxnState.COMPLETE_ABORT


def test_the_coordinator_loop_aborts_a_transaction_past_its_timeout(start_cluster) -> None:
    """A client that dies holding a transaction: the LSO returns to the log end."""
    c = start_cluster(dirs=1, cleaners=1, config=FAST_TXN)
    c.create_topic("t", partitions=1)
    txn = c.begin_transaction("abandoned", timeout_ms=500)
    txn.produce("t", 0, rows(b"x", 3))
    assert not stable(c, "t", 0)
    wait_for(lambda: stable(c, "t", 0), timeout=30, what="the timeout abort")
    assert committed(c, "t", 0) == []
    with pytest.raises(ProducerFencedError, match="fenced"):
        txn.commit()


@pytest.mark.slow     # a coordinator killed and restarted by Ray
def test_transactions_survive_a_kill_of_the_coordinator(start_cluster) -> None:
    """kill -9 of the coordinator between the appends and the commit: the restarted coordinator
    loads the members from __strata_transactions and the commit reaches every partition."""
    c = start_cluster(dirs=2, cleaners=1, config=FAST_TXN)
    c.create_topic("t", partitions=2)
    txn = c.begin_transaction("job", timeout_ms=600_000)
    txn.produce("t", 0, rows(b"a", 2))
    txn.new_producer().produce("t", 1, rows(b"b", 2))
    os.kill(coordinator_pid(c), signal.SIGKILL)
    wait_for(lambda: Cluster.connect(namespace=c.namespace), timeout=60,
             what="the coordinator back")
    assert txn.commit().committed
    assert committed(c, "t", 0) == [b"a0", b"a1"] and committed(c, "t", 1) == [b"b0", b"b1"]
    assert stable(c, "t", 0) and stable(c, "t", 1)


def test_an_offline_directory_costs_only_the_transactional_ids_mapped_to_it(
        start_cluster, immutable) -> None:
    """``__strata_transactions`` has Kafka's 50 partitions over the directories: when one
    directory goes offline (its disk refuses a write), the ids whose state partition lives there
    fail and every other id keeps committing, on every other directory."""
    from cluster.transactions.txn_state import partition_for
    from pathlib import Path

    from storage.errors import LogDirOfflineError

    c = start_cluster(dirs=3, cleaners=1)
    c.create_topic("t", partitions=3)
    c.begin_transaction("probe").abort()
    state = {t.name: t for t in c.list_topics(include_internal=True)}[STATE_TOPIC]
    assert sorted(state.partitions) == list(range(50))
    assert len(set(state.partitions.values())) == 3
    victim = state.partitions[partition_for("probe", 50)]
    segment = next((Path(victim) / f"{STATE_TOPIC}-{partition_for('probe', 50)}").glob("*.log"))
    immutable(segment)
    with pytest.raises(LogDirOfflineError):
        c.begin_transaction("probe")
    routes = {t.name: t for t in c.list_topics()}["t"].partitions
    healthy = [p for p, d in routes.items() if d != victim]
    ids = [f"job-{i}" for i in range(40)]
    doomed = [i for i in ids if state.partitions[partition_for(i, 50)] == victim]
    spared = [i for i in ids if state.partitions[partition_for(i, 50)] != victim]
    with pytest.raises(LogDirOfflineError):
        c.begin_transaction(doomed[0])
    for tid in spared[:4]:
        with c.begin_transaction(tid) as txn:
            for p in healthy:
                txn.produce("t", p, rows(tid.encode(), 1))
        assert c.describe_transaction(tid).state == TxnState.COMPLETE_COMMIT
    for p in healthy:
        assert committed(c, "t", p) == [f"{t}0".encode() for t in spared[:4]]
